#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one call (sixteenth session; steps in PROBE_STEPS): the map table's host shadow
# (td_gemm_map_cache, rev 6c3a6c9) tested (gemm_hooks_test's moving-operand
# cases, the one-launch operator tests) and measured on the issue's 15
# ag_gemm shapes, cache on against TD_OPS_FUSED_MAP_CACHE=0, alternating,
# with TD_OPS_FUSED_PROFILE=1 (host phases per rank in the logs). Each step
# is skipped once the call's budget (PROBE_BUDGET s) would be passed; the
# logs are re-archived after every step so a killed call still returns them.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/probe-ag3.sh
set -uo pipefail
OUT=${OUT:-out/probe3}
TGZ=probe3.tgz
. "$(dirname "$0")/probe-lib.sh"
for s in ${PROBE_STEPS:-hooks ag_on1 ag_off1 ag_one ag_off2 ag_on2}; do
  case $s in
    hooks) step gemm_hooks_test 170 "$BIN/gemm_hooks_test" ;;
    ag_one) TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 step ops_ag_one 120 "$BIN/ops_gpu_test" ;;
    ops) TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_kgather' TD_GPU_TEST_VERBOSE=1 \
      step ops 240 "$BIN/ops_gpu_test" ;;
    # the previous build (.gpubin/tdist-old) beside this build (call 2 also ran the reverted host wait off, step ag_poll)
    ag_old*) TDIST=$BIN/tdist-old bench $s ag_gemm 150 $ALL ;;
    ag_new*) bench $s ag_gemm 150 $ALL ;;
    rs_new*) bench $s gemm_rs 150 $ALL ;;
    rs_old*) TDIST=$BIN/tdist-old bench $s gemm_rs 150 $ALL ;;
    ar_new*) bench $s gemm_ar 150 $ALL ;;
    ar_old*) TDIST=$BIN/tdist-old bench $s gemm_ar 150 $ALL ;;
    ag_on*) TD_OPS_FUSED_PROFILE=1 bench $s ag_gemm 150 $ALL ;;
    ag_off*) TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_MAP_CACHE=0 bench $s ag_gemm 150 $ALL ;;
    rs_on*) TD_OPS_FUSED_PROFILE=1 bench $s gemm_rs 150 $ALL ;;
    rs_off*) TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_MAP_CACHE=0 bench $s gemm_rs 150 $ALL ;;
    ar_on*) TD_OPS_FUSED_PROFILE=1 bench $s gemm_ar 150 $ALL ;;
    *) echo "unknown step $s" >> "$S" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader >> "$S"
cat "$S"
