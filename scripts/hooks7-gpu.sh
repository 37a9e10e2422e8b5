#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine (nvidia-h200), one call, binaries from scripts/hooks7-prep.sh
# (carry .gpubin-hooks7 and .debs):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/hooks7-gpu.sh
# The GEMM hooks' GPU tests, then at M = 128 (64x64 s8) the phase stamps of
# one block's life (plain, shipped hooks, hooks6 hooks) and the hook variants
# timed in alternating pairs, then `gemm_bench --hooks` on the three shapes
# with cuBLAS beside. Logs and JSON under $OUT; a summary last.
set -uo pipefail
OUT=${OUT:-out/hooks7}
BIN=${TD_GPU_BIN:-.gpubin-hooks7}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=0
echo "rev $(cat "$BIN/REVISION" | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
s=$(date +%s)
timeout 60 "$BIN/gemm_hooks_test" > "$OUT/gemm_hooks_test.log" 2>&1; echo "gemm_hooks_test rc=$? $(( $(date +%s) - s )) s"
grep -E "^\[  (FAILED|PASSED)|ERROR|rror" "$OUT/gemm_hooks_test.log" | head
s=$(date +%s)
timeout 120 "$BIN/gemm_tile_test" > "$OUT/gemm_tile_test.log" 2>&1; echo "gemm_tile_test rc=$? $(( $(date +%s) - s )) s"
grep -E "^\[  (FAILED|PASSED)|ERROR|rror" "$OUT/gemm_tile_test.log" | head
# The measurement variants one by one, each under its own short timeout, so a
# variant that hangs (one of them did in the second call, 2026-11-29; which
# one is not known) costs its 25 s and not the others' results; then the
# phase stamps alone.
if [ "${HOOKS7_STAMPS:-1}" = 1 ]; then
  for v in ${HOOKS7_VARIANTS:-0 16 32 48 64 112 128}; do
    s=$(date +%s)
    timeout 25 "$BIN/gemm_bench" --shapes 128x3584x8192 --configs 64x64x8 --iters 100 --hook-variants "$v" \
      > "$OUT/gemm_xv$v.log" 2>&1; echo "gemm_bench variant $v rc=$? $(( $(date +%s) - s )) s"
    grep -E "_xv$v " "$OUT/gemm_xv$v.log" >> "$OUT/gemm_stamps.log"
  done
  s=$(date +%s)
  timeout 40 "$BIN/gemm_bench" --shapes 128x3584x8192 --configs 64x64x8 --iters 100 --stamps 30 \
    >> "$OUT/gemm_stamps.log" 2>&1; echo "gemm_bench stamps rc=$? $(( $(date +%s) - s )) s"
fi
s=$(date +%s)
timeout 120 "$BIN/gemm_bench" --hooks --iters 100 \
  --shapes 8192x3584x8192,1024x3584x8192,128x3584x8192 --configs 128x256x4,128x224x5,64x64x8 \
  --hook-modes wait,raise,both_gpu --json "$OUT/gemm_hooks.json" > "$OUT/gemm_bench.log" 2>&1
echo "gemm_bench rc=$? $(( $(date +%s) - s )) s"
[ -f "$OUT/gemm_stamps.log" ] && grep -E "hooks |stamps|^      " "$OUT/gemm_stamps.log" | grep -v "not run" | cut -c1-160
grep -E "^\||hooks |final|cublas  " "$OUT/gemm_bench.log" | grep -v "not run" | cut -c1-160
