#!/bin/sh
# The main job (`make run`): the sequence-parallel MLP of examples/tp_mlp.td on
# 4 CPU ranks, overlapped vs sequential, checked against the reference.
set -e
BUILD=${1:-build}
exec "$BUILD/bin/tdist" run examples/tp_mlp.td --ranks 4 --check
