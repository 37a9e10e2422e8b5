#!/bin/sh
# The main job (`make run`): the sequence-parallel MLP of examples/tp_mlp.td
# (Llama-2-7B MLP dims scaled by 1/4 for a CPU) on 4 CPU ranks, overlapped
# vs sequential, both checked against the f64 reference. Extra arguments go
# to `tdist run` (e.g. --iters 20, --json out.json, --trace trace.json).
set -e
BUILD=${1:-build}
[ $# -gt 0 ] && shift
exec "$BUILD/bin/tdist" run examples/tp_mlp.td --ranks 4 --check --iters 10 "$@"
