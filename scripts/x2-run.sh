#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine of several GPUs (device tool, kind nvidia-h200-x2 or larger), ONE
# call under 10 minutes: the fused operators' GPU tests across GPUs
# (scripts/fusedmg-gpu.sh tests with TD_GPU_TEST_FILTER, default the
# multi-GPU and user-stream cases), the fused benches with one rank per GPU,
# then scripts/gpu-multi.sh MODE with what is left of the time. Carry
# .gpubin-mg, .gpubin-fusedmg (scripts/gpu-multi-prep.sh,
# scripts/fusedmg-prep.sh) and .debs:
#   scripts/x2-run.sh [smoke|full|none] [fusedmg steps, default tests,multi]
set -uo pipefail
t0=$(date +%s)
. scripts/gpu-env.sh >/dev/null 2>&1
MODE=${1:-smoke} FSTEPS=${2:-tests,multi}
export TD_GPU_TEST_FILTER=${TD_GPU_TEST_FILTER:-test_fused_gpus*,test_fused_user_stream}
if [ "$FSTEPS" != none ]; then
  TD_TEST_TIMEOUT=${TD_TEST_TIMEOUT:-150} OUT=$OUT/fmg scripts/fusedmg-gpu.sh "$FSTEPS"
fi
left=$(( ${TD_X2_TOTAL:-575} - ($(date +%s) - t0) ))
echo "== $(( $(date +%s) - t0 )) s used; gpu-multi.sh $MODE with ${left} s"
[ "$MODE" = none ] || [ "$left" -lt 60 ] || TD_MG_BUDGET=$left OUT=$OUT/mg scripts/gpu-multi.sh "$MODE"
