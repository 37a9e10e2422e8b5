#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# CUDA executor on a GPU machine: build only its targets, run its tests (CPU
# side: JIT cache, NVRTC codegen; GPU: random graphs on 1-8 ranks sharing the
# GPU, deadline diagnostic, co-residency refusal) and the overhead benchmark.
# Run ON THE GPU MACHINE from the repository root:
#   . scripts/gpu-env.sh && scripts/exec-cuda-gpu.sh [tests|bench|all] [bench budget seconds]
# TESTS=<ctest regex> narrows the test run.
# Logs go to $OUT (default out/exec-cuda); ends with a summary.
set -uo pipefail
OUT=${OUT:-out/exec-cuda}
WHAT=${1:-all}
BUDGET=${2:-20}
mkdir -p "$OUT"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache}
B=build-exec-gpu
status=0
cmake -S . -B $B "${GEN[@]}" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
  >"$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
T="exec_deadline_test exec_copy_engine_test exec_random_test test_jit_cache test_jit_compile test_cuda_codegen exec_overhead"
if ! cmake --build $B -j "$(nproc)" --target $T >"$OUT/build.log" 2>&1; then
  grep -E "error" "$OUT/build.log" | head -20
  exit 1
fi
if [ "$WHAT" != bench ]; then
  echo "== tests"
  # The H200 supports 64-bit stream memory operations: copy-engine tasks must use the queue there.
  export TD_EXPECT_COPY_ENGINE=${TD_EXPECT_COPY_ENGINE:-1}
  ALL='^(exec_deadline_test|exec_copy_engine_test|exec_random_test|test_jit_cache|test_jit_compile|test_cuda_codegen)$'
  (cd $B && ctest -R "${TESTS:-$ALL}" \
    --output-on-failure --timeout 400) 2>&1 | tee "$OUT/tests.log" | tail -25
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  $B/tests/exec_copy_engine_test 2>&1 | grep -m1 "copy-engine queue" | tee -a "$OUT/tests.log"
fi
if [ "$WHAT" != tests ]; then
  echo "== benchmark (simple GEMM tile, bf16)"
  for tile in 256x256 128x128; do
    $B/bin/exec_overhead --shape 8192x3584x8192 --tile $tile --budget "$BUDGET" --min-runs 5 2>&1 |
      tee -a "$OUT/bench.log" || status=1
  done
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/bench.log" 2>&1
fi
echo "== summary"
grep -E "tests passed|Failed|FAILED|copy-engine queue" "$OUT/tests.log" 2>/dev/null | head -10
grep -E "^\| exec-overhead" "$OUT/bench.log" 2>/dev/null
git rev-parse --short HEAD 2>/dev/null
exit $status
