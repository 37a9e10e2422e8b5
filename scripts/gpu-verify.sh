#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine (device tool): one short call that checks and measures what
# changed since the last integration run, from binaries prebuilt on the dev box
# (scripts/gpu-final-prep.sh with TD_FINAL_BIN=.gpubin-verify; carry that and .debs):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gpu-verify.sh
# 1. GEMM tiles: gemm_tile_test (incl. the cuBLAS engine) and gemm_hooks_test;
# 2. ops_gpu_test's fused tests (both GEMM engines);
# 3. `tdist bench ag_gemm` over every model, the fused GEMMs on cuBLAS (the
#    default) and on our tiles (TD_OPS_FUSED_TILE=tiles), same binaries;
#    gemm_rs / gemm_ar on the cases the last run did not reach;
# 4. gemm_bench: tiles vs cuBLAS and the hooks' overhead on four shapes.
set -uo pipefail
OUT=${OUT:-out/verify}
BIN=${TD_GPU_BIN:-.gpubin-verify}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000}
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
t0=$(date +%s)
brief() { grep -E "^\| " "$1" | grep -v -E -- "---|^\| case" | awk -F'|' '{printf "%s|%s|%s|%s|%s\n", $2, $3, $4, $5, $8}' | sed 's/  */ /g'; }
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local s=$(date +%s)
  timeout "$to" "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - s )) s)"
}
step gemm_tile_test 45 "$BIN/gemm_tile_test"; grep -E "^\[  (FAILED|PASSED|  OK) " "$OUT/gemm_tile_test.log" | head
step gemm_hooks_test 30 "$BIN/gemm_hooks_test"; grep -E "^\[  (FAILED|PASSED) " "$OUT/gemm_hooks_test.log" | head -3
step test_fused 90 env TD_GPU_TEST_FILTER='test_fused*' "$BIN/ops_gpu_test"
grep -E "^\[  (FAILED|PASSED|  OK) |rror" "$OUT/test_fused.log" | head -12
B=(--backend cuda --ranks 8 --iters ${TD_ITERS:-10} --warmup 3 --variants none)
step ag_cublas 90 "$BIN/tdist" bench ag_gemm "${B[@]}" --models all --json "$OUT/ag_cublas.json"; brief "$OUT/ag_cublas.log"
if [ -n "${TD_VERIFY_TILES:-}" ]; then
  step ag_tiles 100 env TD_OPS_FUSED_TILE=tiles "$BIN/tdist" bench ag_gemm "${B[@]}" --models all --json "$OUT/ag_tiles.json"
  brief "$OUT/ag_tiles.log"
fi
step gemm_hooks_bench 60 "$BIN/gemm_bench" --hooks --iters 100 \
  --shapes ${TD_GEMM_SHAPES:-8192x3584x8192,1024x3584x8192,128x3584x8192} \
  --configs 128x256x4,128x224x5,64x64x8 --json "$OUT/gemm_hooks.json"
grep -E "^\||hooks, " "$OUT/gemm_hooks_bench.log" | cut -c1-170
for op in gemm_rs gemm_ar; do
  step ${op}_rest 40 "$BIN/tdist" bench $op "${B[@]}" --models ${TD_REST_MODELS:-gpt3-175b,check} --json "$OUT/${op}_rest.json"
  brief "$OUT/${op}_rest.log"
done
echo "== total $(( $(date +%s) - t0 )) s, rev $TD_GIT_REV"
