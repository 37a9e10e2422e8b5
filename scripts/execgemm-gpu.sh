#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine: the CUDA executor's kernel queue (Hopper GEMM tasks) from
# prebuilt binaries (scripts/execgemm-prep.sh; carry .gpubin-execgemm, .debs):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/execgemm-gpu.sh
# 1. exec_gemm_queue_test (random graphs on the queue, compiled MLPs vs the
#    f64 reference, every GEMM of a fitting shape on the Hopper GEMM);
# 2. the main job, tp_mlp.td on 4 ranks sharing the GPU, default dims and
#    M=4096,H=4096,F=14336, with the kernel queue and without it
#    (TD_CUDA_GEMM_QUEUE=0: the persistent kernel's simple tiles, the previous path);
# 3. one tuned shape through the tuning cache, then the large run again.
set -uo pipefail
OUT=${OUT:-out/execgemm}
BIN=${TD_GPU_BIN:-.gpubin-execgemm}
mkdir -p "$OUT"
export TD_CACHE_DIR=/tmp/tdist-cache-execgemm
# A hang turns into a deadline error within 10 s (20 s for local dependencies).
export TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-10000}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
echo "rev $(cat $BIN/REVISION 2>/dev/null)"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
S="$OUT/summary.txt"; : > "$S"
step() { echo "== $*" | tee -a "$S"; }
step exec_gemm_queue_test
timeout ${TD_TEST_TIMEOUT:-120} "$BIN/exec_gemm_queue_test" > "$OUT/queue_test.log" 2>&1; echo "rc=$?" | tee -a "$S"
grep -E "^\[|rank 0:|overlapped|sequential|skipped|rror" "$OUT/queue_test.log" | grep -v "RUN\|^\[       OK" | cut -c1-200 | tail -30 | tee -a "$S"
run() { # label, env, args...
  local label=$1 envs=$2; shift 2
  step "$label"
  env $envs timeout ${TD_RUN_TIMEOUT:-80} "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda "$@" > "$OUT/run_$label.log" 2>&1
  echo "rc=$?" | tee -a "$S"; grep -vE "^\s*$" "$OUT/run_$label.log" | tail -8 | cut -c1-160 | tee -a "$S"
}
run main_queue "" --check --iters 20
run main_noqueue "TD_CUDA_GEMM_QUEUE=0" --check --iters 20
run large_queue "" --dims M=4096,H=4096,F=14336 --check --iters 20
run large_noqueue "TD_CUDA_GEMM_QUEUE=0" --dims M=4096,H=4096,F=14336 --iters 3 --rounds 1
step explain_large
"$BIN/tdist" explain examples/tp_mlp.td --ranks 4 --backend cuda --dims M=4096,H=4096,F=14336 > "$OUT/explain_large.txt" 2>&1
grep -E "^choices|^gemm" "$OUT/explain_large.txt" | tee -a "$S"
step tune_1024x3584x4096_kn
timeout 60 "$BIN/tdist" tune gemm --M 1024 --N 3584 --K 4096 --layout kn --iters 10 > "$OUT/tune.log" 2>&1; echo "rc=$?" | tee -a "$S"
tail -3 "$OUT/tune.log" | tee -a "$S"
timeout 60 "$BIN/tdist" tune gemm --M 1024 --N 4096 --K 3584 --layout kn --iters 10 >> "$OUT/tune.log" 2>&1; tail -2 "$OUT/tune.log" | tee -a "$S"
"$BIN/tdist" explain examples/tp_mlp.td --ranks 4 --backend cuda --dims M=4096,H=4096,F=14336 2>&1 | grep -E "^gemm" | tee -a "$S"
run large_queue_tuned "" --dims M=4096,H=4096,F=14336 --iters 20
echo; echo "==== summary"; cat "$S"
