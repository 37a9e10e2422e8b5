#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine: ag_gemm over every model after the baseline's fix (a barrier
# before reading peers' A), and the GEMM tile test (cuBLAS engine), from the
# binaries of scripts/gpu-verify.sh's folder.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gpu-verify-ag.sh
set -uo pipefail
OUT=${OUT:-out/verify-ag}
BIN=${TD_GPU_BIN:-.gpubin-verify}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=20000 TD_GIT_REV=$(cat "$BIN/REVISION")
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
brief() { grep -E "^\| " "$1" | grep -v -E -- "---|^\| case" | awk -F'|' '{printf "%s|%s|%s|%s|%s\n", $2, $3, $4, $5, $8}' | sed 's/  */ /g'; }
timeout 45 "$BIN/gemm_tile_test" > "$OUT/gemm_tile_test.log" 2>&1; echo "== gemm_tile_test rc=$?"
grep -E "^\[  (FAILED|PASSED|  OK) |rror|rel " "$OUT/gemm_tile_test.log" | head
B=(--backend cuda --ranks 8 --iters 20 --warmup 5 --variants none --models all)
for e in cublas tiles; do
  timeout 60 env TD_OPS_FUSED_TILE=$e "$BIN/tdist" bench ag_gemm "${B[@]}" --json "$OUT/ag_$e.json" > "$OUT/ag_$e.log" 2>&1
  echo "== ag_gemm engine $e rc=$?"; brief "$OUT/ag_$e.log"
done
