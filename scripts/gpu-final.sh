#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One-call GPU integration run from PREBUILT binaries (saves the build on the
# device machine): every GPU test, the operators' benchmark, and the main job
# on the cuda backend. Build on the dev box first:
#   scripts/gpu-final-prep.sh        # builds Release sm_90a binaries into .gpubin/
# then, on the GPU machine (device tool, carry .gpubin and .debs):
#   . scripts/gpu-env.sh && scripts/gpu-final.sh
# Logs go to $OUT; the last lines are a summary table.
set -uo pipefail
OUT=${OUT:-out/gpu-final}
BIN=${TD_GPU_BIN:-.gpubin}
mkdir -p "$OUT"
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache}
export TD_TDRUN=$BIN/tdrun TD_BIN_DIR=$BIN TD_TEST_DIR=$BIN TD_SOURCE_DIR=$PWD
export TD_GIT_REV=$(cat "$BIN/REVISION" 2>/dev/null || echo unknown)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
summary=()
runt() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local s=$(date +%s)
  timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-26s rc=%-4s %4ss' "$name" "$rc" "$(( $(date +%s) - s ))")")
  [ $rc = 0 ] || { echo "--- $name failed (rc=$rc):"; tail -15 "$OUT/$name.log"; }
}
for t in ${TD_GPU_TESTS:-dev_gpu_test dev_gpu_deadlock exec_random_test exec_copy_engine_test exec_deadline_test gemm_tile_test gemm_hooks_test ops_gpu_test dev_nccl_test}; do
  runt "$t" "${TD_TEST_TIMEOUT:-150}" "$BIN/$t"
done
runt dev_nccl_test_tdrun_2 60 "$BIN/tdrun" -n 2 --timeout 50 "$BIN/dev_nccl_test"
# The main job on the GPU (cuda backend), checked against the reference.
runt main_job_cuda 90 "$BIN/tdist" run examples/tp_mlp.td --ranks 4 --backend cuda --check --iters 5 --json "$OUT/main_cuda.json"
grep -E "^\||PASS|FAIL" "$OUT/main_job_cuda.log" | head -12
# Operators: each variant (fused included) against the sequential baseline, 8 ranks sharing the GPU.
if [ -z "${TD_SKIP_BENCH:-}" ]; then
  for op in ag_gemm gemm_rs gemm_ar; do
    v=fused; [ $op = ag_gemm ] && v=copy_engine,fused
    runt "bench_$op" 100 "$BIN/tdist" bench $op --backend cuda --ranks 8 --iters 10 --variants $v \
      --models llama3.1-8b,check --m 4096 --json "$OUT/bench_$op.json"
    grep -E "^\|" "$OUT/bench_$op.log" | grep -v -- "---" | cut -c1-160
  done
  runt bench_all_reduce 60 "$BIN/tdist" bench all_reduce --backend cuda --ranks 8 --iters 20 \
    --sizes 8K,64K,1M,8M,64M --json "$OUT/bench_all_reduce.json"
  grep -E "^\|" "$OUT/bench_all_reduce.log" | grep -v -- "---" | cut -c1-160
fi
# GEMM tile vs cuBLAS and the hooks' overhead (satisfied waits + raises), on the issue's shapes
if [ -z "${TD_SKIP_GEMM:-}" ]; then
  runt gemm_hooks 150 "$BIN/gemm_bench" --hooks --iters 100 \
    --shapes ${TD_GEMM_SHAPES:-8192x3584x8192,8192x1280x8192,1024x3584x8192,128x3584x8192} \
    --configs ${TD_GEMM_CONFIGS:-128x256x4,128x160x6,128x224x5,64x64x8} --json "$OUT/gemm_hooks.json"
  grep -E "^\||hooks, " "$OUT/gemm_hooks.log" | cut -c1-170
fi
echo "== summary ($(( $(date +%s) - t0 )) s, rev $TD_GIT_REV)"
printf '%s\n' "${summary[@]}"
