#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, second call of hooks6 (binaries from scripts/hooks6-prep.sh;
# carry .gpubin-hooks6 and .debs): the hooks test after the wait path lost
# its A prefetch, and gemm_bench with the hook split (wait / raise / both at
# system and GPU scope) on the three shapes plus the measurement variants of
# the hook paths at M = 128 (--hook-variants; gemm_bench_xv.cu).
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/hooks6-gpu2.sh
# Kept as the command behind docs/perf.md's hooks6 figures (rev 7ffc652): its
# --hook-variants 0,1,2,4,7 existed in that build only; gemm_bench from rev
# abf58a0 on refuses them (the hooks6 paths are variants 16, 32, 64 there;
# scripts/hooks7-gpu.sh measures the current set).
set -uo pipefail
OUT=${OUT:-out/hooks6b}
BIN=${TD_GPU_BIN:-.gpubin-hooks6}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
export CUDA_VISIBLE_DEVICES=0
echo "rev $(cat "$BIN/REVISION" | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 "$BIN/gemm_hooks_test" > "$OUT/gemm_hooks_test.log" 2>&1; echo "gemm_hooks_test rc=$?"
grep -E "^\[  (FAILED|PASSED)|ERROR|rror" "$OUT/gemm_hooks_test.log" | head
timeout 60 "$BIN/gemm_bench" --hooks --iters 100 \
  --shapes 8192x3584x8192,1024x3584x8192,128x3584x8192 --configs 128x256x4,128x224x5,64x64x8 \
  --hook-modes wait,raise,wait_gpu,raise_gpu,both_gpu --hook-variants 0,1,2,4,7 \
  --json "$OUT/gemm_hooks.json" > "$OUT/gemm_bench.log" 2>&1; echo "gemm_bench rc=$?"
grep -E "^\||hooks |final|cublas  " "$OUT/gemm_bench.log" | grep -v "not run" | cut -c1-150
