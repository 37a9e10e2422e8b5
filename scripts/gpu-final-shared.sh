#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one H200 (ranks sharing it): the session's closing GPU run from
# prebuilt binaries (scripts/gpu-final-prep.sh with TD_FINAL_BIN=.gpubin-final):
# the GPU tests the session's changes touch, then the operators' benchmark
# on the shared GPU over the operators issue's whole shape set (AUTO against
# the baseline: peer copies + cuBLAS), ag_gemm's zero-copy batched mode at
# M = 1024 beside it, the PyTorch one-GPU side, and the main job on cuda.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gpu-final-shared.sh
set -uo pipefail
OUT=${OUT:-out/final-shared}
BIN=${TD_GPU_BIN:-.gpubin-final}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache} TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-20000}
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown) TD_CUDA_DEVICE=0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
summary=()
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local s=$(date +%s)
  timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-28s rc=%-4s %4ss' "$name" "$rc" "$(( $(date +%s) - s ))")")
  [ $rc = 0 ] || { echo "--- $name failed (rc=$rc):"; tail -8 "$OUT/$name.log"; }
}
rows() { grep -E "^\| " "$1" | grep -v -E -- "---|^\| case" | cut -c1-150; }
for t in ${TD_GPU_TESTS:-ops_gpu_test gemm_hooks_test exec_gemm_queue_test}; do
  step "$t" 150 "$BIN/$t"
  grep -E "^\[ *(FAILED|SKIPPED|PASSED) *\]" "$OUT/$t.log" | head -6
done
step main_job_cuda 90 "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda --check --iters 10 --json "$OUT/main_cuda.json"
grep -E "^\|" "$OUT/main_job_cuda.log" | head -8
B=("$BIN/tdist" bench)
step ag_gemm_all 200 "${B[@]}" ag_gemm --backend cuda --ranks 8 --iters 10 --warmup 3 --variants none \
  --models all --m 1024,4096,8192 --json "$OUT/ag_gemm_all.json"
rows "$OUT/ag_gemm_all.log"
TD_OPS_FUSED_AG=batched step ag_gemm_1024_batched 60 "${B[@]}" ag_gemm --backend cuda --ranks 8 --iters 10 --warmup 3 \
  --variants none --models all --m 1024 --json "$OUT/ag_gemm_1024_batched.json"
rows "$OUT/ag_gemm_1024_batched.log"
step gemm_rs 60 "${B[@]}" gemm_rs --backend cuda --ranks 8 --iters 10 --warmup 3 --variants none \
  --models llama3.1-8b,llama3.1-70b,check --m 1024,8192 --json "$OUT/gemm_rs.json"
rows "$OUT/gemm_rs.log"
step gemm_ar 60 "${B[@]}" gemm_ar --backend cuda --ranks 8 --iters 10 --warmup 3 --variants none \
  --models llama3.1-8b,llama3.1-70b --m 1024,8192 --json "$OUT/gemm_ar.json"
rows "$OUT/gemm_ar.log"
step all_reduce 40 "${B[@]}" all_reduce --backend cuda --ranks 8 --iters 20 --variants none \
  --sizes 8K,64K,512K,4M,64M --json "$OUT/all_reduce.json"
rows "$OUT/all_reduce.log"
step torch_ag_gemm 90 python3 bench/torch_ops.py ag_gemm --ranks 8 --models all --m 1024,4096,8192 --iters 10 \
  --json "$OUT/torch_ag_gemm.json"
tail -20 "$OUT/torch_ag_gemm.log" | cut -c1-150
echo "== summary ($(( $(date +%s) - t0 )) s, rev $TD_GIT_REV)"
printf '%s\n' "${summary[@]}"
