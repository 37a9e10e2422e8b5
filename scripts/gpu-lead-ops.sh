#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine, one H200: ag_gemm on 8 ranks sharing the GPU over the whole
# shape set (AUTO vs the baseline), then the whole ops_gpu_test with each
# test's start time, from prebuilt binaries in $TD_GPU_BIN (tdist,
# ops_gpu_test). Logs tarred into $OUT/lead-ops.tgz (few files come back).
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gpu-lead-ops.sh
set -uo pipefail
OUT=${OUT:-out/lead-ops}
BIN=${TD_GPU_BIN:-.gpubin-lead}
W=/tmp/lead-ops; mkdir -p "$W" "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache TD_TIMEOUT_MS=20000 TD_CUDA_DEVICE=0 TD_GIT_REV=$(cat "$BIN/REVISION")
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
timeout 150 "$BIN/tdist" bench ag_gemm --backend cuda --ranks 8 --iters 10 --warmup 3 --variants none \
  --models all --m 1024,4096,8192 --json "$W/ag_gemm_all.json" > "$W/ag_gemm_all.log" 2>&1
echo "ag_gemm rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "^\| " "$W/ag_gemm_all.log" | grep -E "baseline |auto" | cut -c1-100
timeout ${TD_TEST_TIMEOUT:-240} stdbuf -oL "$BIN/ops_gpu_test" 2>&1 | while IFS= read -r l; do echo "$(( $(date +%s) - t0 ))s $l"; done > "$W/ops_gpu_test.log"
grep -E "RUN|OK|FAIL|SKIP|PASSED|ERROR" "$W/ops_gpu_test.log" | head -40
tar czf "$OUT/lead-ops.tgz" -C /tmp lead-ops
echo "== $(( $(date +%s) - t0 )) s, rev $TD_GIT_REV"
