#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one call (seventeenth session; steps in PROBE_STEPS): ag_gemm's
# batched-one (rank 0's one cuBLAS batched launch of ranks x ranks GEMMs)
# tested and measured against AUTO on the issue's 15 shapes, alternating; and
# TD_OPS_FUSED_PROFILE=1 runs whose rank 0 line gives the one launch's GPU
# time from CUDA events beside the host phases (llama3.1-8b M = 1024 under
# AUTO, batched-one and named tiles; the large shapes under AUTO's tile and
# the other clustered one). Each step is skipped once the call's budget
# (PROBE_BUDGET s) would be passed; the logs are re-archived after every step.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/probe-ag4.sh
# The confirmation call the seventeenth session left (its last build, every one-launch test and operator):
#   PROBE_STEPS="ag_one kgather bo_auto ag_new1 ar_new1 ag_new2 rs_new1" scripts/probe-ag4.sh
set -uo pipefail
OUT=${OUT:-out/probe4}
TGZ=probe4.tgz
. "$(dirname "$0")/probe-lib.sh"
BIG="--models llama3.1-70b,gpt3-175b,qwen2-72b --m 4096,8192"
S8="--models llama3.1-8b --m 1024"
for s in ${PROBE_STEPS:-bo_test ag_auto1 ag_bo1 ag_bo2 ag_auto2 p8_auto p8_bo p8_128 p8_128x256 pbig_auto pbig_128x256c2}; do
  case $s in
    bo_test) TD_GPU_TEST_FILTER='test_fused_ag_batched_one' TD_GPU_TEST_VERBOSE=1 step $s 150 "$BIN/ops_gpu_test" ;;
    ag_one) TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 step $s 150 "$BIN/ops_gpu_test" ;;
    kgather) TD_GPU_TEST_FILTER='test_fused_kgather' TD_GPU_TEST_VERBOSE=1 step $s 330 "$BIN/ops_gpu_test" ;;
    bo_auto) TD_GPU_TEST_FILTER='test_fused_ag_batched_one,test_fused_auto,test_fused_user_stream,test_fused_refused' \
      TD_GPU_TEST_VERBOSE=1 step $s 150 "$BIN/ops_gpu_test" ;;
    direct) TD_GPU_TEST_FILTER='test_fused_direct' TD_GPU_TEST_VERBOSE=1 step $s 240 "$BIN/ops_gpu_test" ;;
    # this build's AUTO against the previous build's (.gpubin/tdist-old)
    ag_new*) bench $s ag_gemm ${BENCH_TO:-150} $ALL ;;
    ag_old*) TDIST=$BIN/tdist-old bench $s ag_gemm 150 $ALL ;;
    ag_auto*) bench $s ag_gemm 150 $ALL ;;
    ag_bo*) TD_OPS_FUSED_AG=batched-one bench $s ag_gemm 150 $ALL ;;
    # an experiment build (.gpubin/tdist-exp: the one launch's end seen on rank 0's event) beside this one
    p8_new*) ITERS=50 bench $s ag_gemm 60 $S8 ;;
    p8_exp*) ITERS=50 TDIST=$BIN/tdist-exp bench $s ag_gemm 60 $S8 ;;
    ag_exp*) TDIST=$BIN/tdist-exp bench $s ag_gemm 150 $ALL ;;
    # this build beside the build before its last change (.gpubin/tdist-prev)
    p8_prev*) ITERS=50 TDIST=$BIN/tdist-prev bench $s ag_gemm 60 $S8 ;;
    ag_prev*) TDIST=$BIN/tdist-prev bench $s ag_gemm 150 $ALL ;;
    rs_new*) bench $s gemm_rs ${BENCH_TO:-150} $ALL ;;
    ar_new*) bench $s gemm_ar ${BENCH_TO:-150} $ALL ;;
    rs_prev*) TDIST=$BIN/tdist-prev bench $s gemm_rs 150 $ALL ;;
    ar_prev*) TDIST=$BIN/tdist-prev bench $s gemm_ar 150 $ALL ;;
    ops) TD_GPU_TEST_FILTER='test_fused_ag_one,test_fused_kgather,test_fused_user_stream,test_fused_refused' \
      TD_GPU_TEST_VERBOSE=1 step $s 300 "$BIN/ops_gpu_test" ;;
    p8_auto) ITERS=50 TD_OPS_FUSED_PROFILE=1 bench $s ag_gemm 60 $S8 ;;
    p8_bo) ITERS=50 TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_AG=batched-one bench $s ag_gemm 60 $S8 ;;
    p8_128) ITERS=50 TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x128 bench $s ag_gemm 60 $S8 ;;
    p8_128x256) ITERS=50 TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x256 bench $s ag_gemm 60 $S8 ;;
    pbig_auto) TD_OPS_FUSED_PROFILE=1 bench $s ag_gemm 120 $BIG ;;
    pbig_128x256c2) TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=128x256c2 bench $s ag_gemm 120 $BIG ;;
    pbig_256x128c2) TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_AG=gather-one TD_OPS_FUSED_TILE=256x128c2 bench $s ag_gemm 120 $BIG ;;
    *) echo "unknown step $s" >> "$S" ;;
  esac
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader >> "$S"
cat "$S"
