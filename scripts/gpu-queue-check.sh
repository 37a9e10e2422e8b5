#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine: a short check of the CUDA executor's kernel queue and of the
# executor tests it could break, from binaries in .gpubin-execgemm (built by
# scripts/execgemm-prep.sh plus exec_random_test / exec_copy_engine_test):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/gpu-queue-check.sh
set -uo pipefail
OUT=${OUT:-out/queue}
BIN=${TD_GPU_BIN:-.gpubin-execgemm}
mkdir -p "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache-q TD_TIMEOUT_MS=10000 LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
echo "rev $(cat $BIN/REVISION)"
t() { local name=$1 to=$2; shift 2; local s=$(date +%s); timeout "$to" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "== $name rc=$rc ($(( $(date +%s) - s )) s)"; grep -E "^\[  (FAILED|PASSED)|^\[  ERROR|rror|overlapped|sequential|speedup|result" "$OUT/$name.log" | cut -c1-180 | head -12; }
t queue_test 60 "$BIN/exec_gemm_queue_test"
t main_queue 40 "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda --check --iters 20
t large_queue 60 "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda --dims M=4096,H=4096,F=14336 --check --iters 10
t exec_random_test 60 "$BIN/exec_random_test"
t exec_copy_engine_test 40 "$BIN/exec_copy_engine_test"
