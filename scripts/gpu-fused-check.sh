#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine: the fused operator variant's test and a short bench, from
# prebuilt binaries (scripts/gpu-final-prep.sh; carry .gpubin and .debs):
#   . scripts/gpu-env.sh && scripts/gpu-fused-check.sh
set -uo pipefail
OUT=${OUT:-out/gpu-fused}
BIN=${TD_GPU_BIN:-.gpubin}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TDRUN=$BIN/tdrun TD_BIN_DIR=$BIN TD_TEST_DIR=$BIN
export TD_SOURCE_DIR=$PWD TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== test_fused"
TD_GPU_TEST_FILTER='test_fused*' timeout 120 "$BIN/ops_gpu_test" > "$OUT/test_fused.log" 2>&1
echo "rc=$?"; tail -25 "$OUT/test_fused.log"
for op in ${TD_OPS:-ag_gemm gemm_rs gemm_ar}; do
  echo "== bench $op"
  timeout 90 "$BIN/tdist" bench $op --backend cuda --ranks ${TD_RANKS:-8} --iters ${TD_ITERS:-20} --variants ${TD_VARIANTS:-fused} \
    --models ${TD_MODELS:-llama3.1-8b,llama3.1-70b} --m ${TD_M:-4096} --json "$OUT/bench_$op.json" > "$OUT/bench_$op.log" 2>&1
  echo "rc=$?"; grep -E "^\||rror" "$OUT/bench_$op.log" | grep -v -- "---" | cut -c1-170 | head -30
done
