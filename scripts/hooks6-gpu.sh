#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GPU machine (nvidia-h200-x4; on one GPU the jobs run in turn), one call, prebuilt binaries from
# scripts/hooks6-prep.sh (carry .gpubin-hooks6 and .debs):
#   . scripts/gpu-env.sh >/dev/null 2>&1; scripts/hooks6-gpu.sh
# Each process sees one GPU (CUDA_VISIBLE_DEVICES), so ranks of a local world
# share it as in the earlier single-GPU runs; independent jobs run side by
# side on GPUs 0-3:
#   GPU 0: exec_gemm_queue_test, whole (its time is the figure asked for);
#   GPU 1: exec_random_test, exec_copy_engine_test, exec_deadline_test
#          (stream budget, abort word, stuck flag, host deadlines);
#   GPU 2: gemm_bench --hooks on 8192/1024/128 x 3584 x 8192, with the
#          wait/raise split and the GPU-scope modes (alone on its GPU);
#   GPU 3: gemm_hooks_test, gemm_tile_test, ops_gpu_test's misaligned case.
# Logs and JSON under $OUT; a summary table last.
set -uo pipefail
OUT=${OUT:-out/hooks6}
BIN=${TD_GPU_BIN:-.gpubin-hooks6}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TD_CACHE_DIR=/tmp/tdist-cache-h6 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
echo "rev $(cat "$BIN/REVISION" | tr '\n' ' ')"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
t0=$(date +%s)
job() { # gpu name timeout cmd...
  local g=$1 name=$2 to=$3; shift 3
  local s=$(date +%s)
  CUDA_VISIBLE_DEVICES=$g timeout "$to" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-24s gpu %s rc=%-4s %4ss\n' "$name" "$g" "$rc" "$(( $(date +%s) - s ))" >> "$OUT/summary.txt"
}
: > "$OUT/summary.txt"
bench() { job "$1" gemm_bench 150 "$BIN/gemm_bench" --hooks --iters 100 \
  --shapes 8192x3584x8192,1024x3584x8192,128x3584x8192 --configs 128x256x4,128x224x5,64x64x8 \
  --hook-modes wait,raise,wait_gpu,raise_gpu,both_gpu --json "$OUT/gemm_hooks.json"; }
group_exec() {
  job "$1" exec_random_test 90 "$BIN/exec_random_test"
  job "$1" exec_copy_engine_test 40 "$BIN/exec_copy_engine_test"
  job "$1" exec_deadline_test 60 "$BIN/exec_deadline_test"; }
group_gemm() {
  job "$1" gemm_hooks_test 60 "$BIN/gemm_hooks_test"
  job "$1" ops_misaligned 60 env TD_GPU_TEST_FILTER=test_fused_misaligned_refused "$BIN/ops_gpu_test"
  job "$1" gemm_tile_test 90 "$BIN/gemm_tile_test"; }
if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
  job 0 exec_gemm_queue_test 170 "$BIN/exec_gemm_queue_test" &
  group_exec 1 &
  bench 2 &
  group_gemm 3 &
  wait
else # one GPU: in turn, the benchmark first and alone
  bench 0; group_gemm 0; job 0 exec_gemm_queue_test 130 "$BIN/exec_gemm_queue_test"; group_exec 0
fi
for f in exec_gemm_queue_test gemm_hooks_test ops_misaligned; do
  echo "--- $f"; grep -E "^\[  (FAILED|PASSED|SKIPPED)|^\[  ERROR|rror|Hopper|ranks|s\]$" "$OUT/$f.log" | cut -c1-170 | tail -28
done
echo "--- gemm_bench"; grep -E "^\||hooks |final" "$OUT/gemm_bench.log" | cut -c1-190
echo "== $(( $(date +%s) - t0 )) s"; cat "$OUT/summary.txt"
