#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The tensor-parallel operators on the GPU machine (device tool): their GPU
# test, then `tdist bench` of each operator against the sequential baseline.
# Run ON THE GPU MACHINE from the repository root:
#   . scripts/gpu-env.sh && bench/ops-gpu.sh [tests|bench|all|fused] [quick|full]
# (fused: only the fused cuda variant's GPU test and benches, src/ops/cuda/)
# TD_OPS_BIN=folder with prebuilt `tdist` and `ops_gpu_test` (built on the dev
# box with -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a, Release) saves
# the build; when they do not start there, the script builds them. A file
# REVISION in that folder (git rev-parse --short HEAD) names the build's revision.
# Logs and JSON go to $OUT; the last lines are a summary.
set -uo pipefail
OUT=${OUT:-out/ops-gpu}
WHAT=${1:-all}
SIZE=${2:-quick}
mkdir -p "$OUT"
export TD_TIMEOUT_MS=${TD_TIMEOUT_MS:-15000}
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
t0=$(date +%s)
BIN=${TD_OPS_BIN:-}
# The device machine's copy of the tree has no .git: take the revision from the carried folder.
[ -z "${TD_GIT_REV:-}" ] && [ -n "$BIN" ] && [ -f "$BIN/REVISION" ] && export TD_GIT_REV=$(cat "$BIN/REVISION")
if [ -n "$BIN" ] && ! ldd "$BIN/tdist" "$BIN/ops_gpu_test" | grep -q "not found" && "$BIN/tdist" bench --help >/dev/null 2>&1; then
  echo "== prebuilt binaries from $BIN"
  TDIST=$BIN/tdist TEST=$BIN/ops_gpu_test
else
  [ -n "$BIN" ] && { echo "== prebuilt binaries do not start here:"; ldd "$BIN/tdist" | grep "not found"; }
  B=${TD_GPU_BUILD:-build-gpu}
  GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
  cmake -S . -B "$B" "${GEN[@]}" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    >"$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
  cmake --build "$B" -j "$(nproc)" --target tdist_cli ops_gpu_test >"$OUT/build.log" 2>&1 ||
    { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
  TDIST=$B/bin/tdist TEST=$B/tests/ops_gpu_test
  echo "   built in $(( $(date +%s) - t0 )) s"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
status=0
if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  echo "== ops_gpu_test"
  timeout ${TEST_TIMEOUT:-280} "$TEST" >"$OUT/ops_gpu_test.log" 2>&1
  rc=$?; [ $rc = 0 ] || status=1
  grep -E "^\[ *(OK|FAILED|PASSED|RUN) *\]|ERROR|rank .* off by" "$OUT/ops_gpu_test.log" | grep -v RUN | head -20
  echo "   rc=$rc ($(( $(date +%s) - t0 )) s)"
fi
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  if [ "$SIZE" = full ]; then
    AG="--models all --m 1024,4096,8192"; ITERS=20
  else
    AG="--models llama3.1-8b,llama3.1-70b,check --m 4096"; ITERS=10
  fi
  run() { # name, args...
    local name=$1; shift
    echo "== tdist bench $name $*"
    timeout ${BENCH_TIMEOUT:-240} "$TDIST" bench "$name" --backend cuda --json "$OUT/$name.json" "$@" >/tmp/ops-bench.md 2>&1
    local rc=$?; [ $rc = 0 ] || status=1
    cat /tmp/ops-bench.md >>"$OUT/bench.md"
    grep -E "^\|" /tmp/ops-bench.md | grep -v -- "---" | cut -c1-150
    [ $rc = 0 ] || { echo "   rc=$rc"; tail -3 /tmp/ops-bench.md; }
  }
  run ag_gemm --ranks 8 --iters $ITERS $AG
  run gemm_rs --ranks 8 --iters $ITERS --models llama3.1-8b,check --m 4096
  run gemm_ar --ranks 8 --iters $ITERS --models llama3.1-8b --m 1024
  run all_reduce --ranks 8 --iters $ITERS --sizes 8K,64K,1M,8M,64M
fi
if [ "$WHAT" = fused ]; then
  # The fused cuda variant (src/ops/cuda/, TD_TP_FUSED) alone: its GPU test,
  # then each operator with the fused side beside the baseline, auto and the
  # best executor variant (8 ranks sharing the GPU, bf16).
  echo "== ops_gpu_test (test_fused)"
  TD_GPU_TEST_FILTER='test_fused*' timeout ${TEST_TIMEOUT:-200} "$TEST" >"$OUT/ops_gpu_test_fused.log" 2>&1
  rc=$?; [ $rc = 0 ] || status=1
  grep -E "^\[ *(OK|FAILED|PASSED) *\]|ERROR|rank .* off by" "$OUT/ops_gpu_test_fused.log" | head -20
  echo "   rc=$rc ($(( $(date +%s) - t0 )) s)"
  for spec in "ag_gemm --models llama3.1-8b,check --m 4096 --variants copy_engine,fused" \
              "gemm_rs --models llama3.1-8b --m 4096 --variants fused" \
              "gemm_ar --models llama3.1-8b --m 1024 --variants fused"; do
    set -- $spec
    name=$1; shift
    echo "== tdist bench $name $*"
    timeout ${BENCH_TIMEOUT:-120} "$TDIST" bench "$name" --backend cuda --ranks 8 --iters ${ITERS:-5} \
      --json "$OUT/$name-fused.json" "$@" >/tmp/ops-bench.md 2>&1
    rc=$?; [ $rc = 0 ] || status=1
    cat /tmp/ops-bench.md >>"$OUT/bench-fused.md"
    grep -E "^\|" /tmp/ops-bench.md | grep -v -- "---" | cut -c1-200
    [ $rc = 0 ] || { echo "   rc=$rc"; tail -3 /tmp/ops-bench.md; }
  done
fi
echo "== summary ($(( $(date +%s) - t0 )) s, $(git rev-parse --short HEAD 2>/dev/null)), status $status"
exit $status
