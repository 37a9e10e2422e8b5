#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one call: where the one ag_gemm launch's time goes at small M.
# Kernel durations (ncu, gpu__time_duration, clocks left alone) of the bench's
# tdist side and its GEMM alone at llama3.1-8b M = 1024; the plain tile and
# cuBLAS at the whole shape and 8 streams of the per-rank shape (events); and
# the bench itself at 50 iterations. Binaries from .gpubin (carry it, .debs):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/probe-ag1.sh
set -uo pipefail
OUT=${OUT:-out/probe}
BIN=${TD_GPU_BIN:-.gpubin}
mkdir -p "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-120000} TD_CUDA_DEVICE=0 TD_SYMM_HEAP_SIZE=2G
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
B="$BIN/tdist bench ag_gemm --backend cuda --ranks 8 --variants none"
if [ "${PROBE_NCU:-1}" = 1 ]; then
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    $B --models ${PROBE_MODELS:-llama3.1-8b} --m 1024 --iters 3 --warmup 1 >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  echo "ncu rc=$?" | tee -a "$OUT/gpu.txt"
fi
timeout 90 "$BIN/gemm_bench" --shapes 1024x14336x4096,1024x29568x8192 --layout kn --configs 128x128x6,256x128x4,128x256x4 \
  --iters 50 >"$OUT/gemm_whole.log" 2>&1; echo "gemm_whole rc=$?" >> "$OUT/gpu.txt"
timeout 90 "$BIN/gemm_bench" --shapes 1024x1792x4096,1024x3696x8192 --layout kn --configs 128x128x6,256x128x4 --streams 8 \
  --iters 50 >"$OUT/gemm_streams.log" 2>&1; echo "gemm_streams rc=$?" >> "$OUT/gpu.txt"
for i in 1 2; do
  ${BIN_TDIST:-$BIN/tdist} bench ag_gemm --backend cuda --ranks 8 --variants none --models llama3.1-8b,qwen2-72b --m 1024 \
    --iters 50 --warmup 5 --json "$OUT/ag$i.json" >"$OUT/ag$i.log" 2>&1; echo "ag$i rc=$?" >> "$OUT/gpu.txt"
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader >> "$OUT/gpu.txt"
