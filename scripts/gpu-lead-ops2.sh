#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one H200: the fused operators on 8 ranks sharing the GPU
# after a change to their host side (ag_gemm over the whole shape set, gemm_rs
# and all_reduce spot checks, AUTO vs the baseline), plus the fused AUTO test.
# Binaries in $TD_GPU_BIN (tdist, ops_gpu_test); logs tarred into $OUT.
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gpu-lead-ops2.sh
set -uo pipefail
OUT=${OUT:-out/lead-ops2}
BIN=${TD_GPU_BIN:-.gpubin-lead}
W=/tmp/lead-ops2; mkdir -p "$W" "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache TD_TIMEOUT_MS=20000 TD_CUDA_DEVICE=0 TD_GIT_REV=$(cat "$BIN/REVISION")
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
b() { local name=$1; shift; timeout 150 "$BIN/tdist" bench "$@" --backend cuda --ranks 8 --iters 10 --warmup 3 \
  --variants none --json "$W/$name.json" > "$W/$name.log" 2>&1; echo "$name rc=$? ($(( $(date +%s) - t0 )) s)"
  grep -E "^\| " "$W/$name.log" | grep -E "baseline |auto" | cut -c1-100; }
b ag_gemm_all ag_gemm --models all --m 1024,4096,8192
b gemm_rs gemm_rs --models llama3.1-8b,llama3.1-70b --m 1024,8192
b all_reduce all_reduce --sizes 8K,64K,512K,4M,64M
timeout 60 env TD_GPU_TEST_FILTER=test_fused_auto "$BIN/ops_gpu_test" > "$W/ops_gpu_test.log" 2>&1
echo "ops_gpu_test test_fused_auto rc=$?"; grep -E "^\[ *(OK|FAILED|PASSED) *\]" "$W/ops_gpu_test.log"
tar czf "$OUT/lead-ops2.tgz" -C /tmp lead-ops2
echo "== $(( $(date +%s) - t0 )) s, rev $TD_GIT_REV"
