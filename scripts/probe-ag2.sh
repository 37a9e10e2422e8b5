#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one call: the map table's host shadow (td_gemm_map_cache)
# checked (gemm_hooks_test, the one-launch operator tests) and measured: the
# bench at M = 1024 with TD_OPS_FUSED_PROFILE=1 (host phases per rank), with
# the cache off, and the previous build (.gpubin/tdist-old) beside it.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/probe-ag2.sh
set -uo pipefail
OUT=${OUT:-out/probe2}
BIN=${TD_GPU_BIN:-.gpubin}
mkdir -p "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000} TD_CUDA_DEVICE=0 TD_SYMM_HEAP_SIZE=2G
export TD_TDRUN=$BIN/tdrun TD_BIN_DIR=$BIN TD_TEST_DIR=$BIN TD_SOURCE_DIR=$PWD
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader > "$S"
step() { local name=$1 to=$2; shift 2; local t=$(date +%s); timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( $(date +%s) - t ))s" >> "$S"; }
bench() { local name=$1 bin=$2; shift 2
  step "$name" 60 "$bin" bench ag_gemm --backend cuda --ranks 8 --variants none --iters ${ITERS:-30} --warmup 5 \
    --json "$OUT/$name.json" "$@"; }
M="--models llama3.1-8b,qwen2-72b --m 1024"
[ "${SKIP_BENCH:-0}" = 1 ] || {
  TD_OPS_FUSED_PROFILE=1 bench ag_new "$BIN/tdist" $M
  TD_OPS_FUSED_PROFILE=1 TD_OPS_FUSED_MAP_CACHE=0 bench ag_nocache "$BIN/tdist" $M
  [ -x "$BIN/tdist-old" ] && bench ag_old "$BIN/tdist-old" $M
  TD_OPS_FUSED_PROFILE=1 bench ag_new2 "$BIN/tdist" $M
  TD_OPS_FUSED_PROFILE=1 step rs_new 60 "$BIN/tdist" bench gemm_rs --backend cuda --ranks 8 --variants none --iters 30 \
    --warmup 5 --models llama3.1-8b --m 1024 --json "$OUT/rs_new.json"
}
[ "${SKIP_NCU:-0}" = 1 ] || { # our kernels' durations: AUTO's tile, and 128x128 in the one launch
  for t in auto 128x128; do
    if [ $t = auto ]; then unset TD_OPS_FUSED_TILE; else export TD_OPS_FUSED_TILE=$t TD_OPS_FUSED_AG=gather-one; fi
    TD_TIMEOUT_MS=120000 step ncu_$t 90 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:td__gemm \
      "$BIN/tdist" bench ag_gemm --backend cuda --ranks 8 --variants none --iters 3 --warmup 1 $M
  done
  unset TD_OPS_FUSED_TILE TD_OPS_FUSED_AG
}
[ "${SKIP_TESTS:-0}" = 1 ] || {
  step gemm_hooks_test 170 "$BIN/gemm_hooks_test"
  TD_GPU_TEST_FILTER='test_fused_ag_one' TD_GPU_TEST_VERBOSE=1 step ops_ag_one 220 "$BIN/ops_gpu_test"
}
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader >> "$S"
