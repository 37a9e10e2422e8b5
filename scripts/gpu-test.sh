#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs every GPU test (ctest label gpu) on the GPU machine, and
# optionally the device-primitive benchmark and a compute-sanitizer pass.
# Run ON THE GPU MACHINE (device tool) from the repository root:
#   . scripts/gpu-env.sh && scripts/gpu-test.sh [tests|bench|sanitizer|all] [ctest -R regex]
# Builds only the targets of the selected tests (test name = target name).
# Logs go to $OUT (default out/gpu-test); the last lines are a summary.
# Areas with their own GPU benchmarks add a line in the `bench` part.
set -uo pipefail
OUT=${OUT:-out/gpu-test}
WHAT=${1:-tests}
REGEX=${2:-}
B=${TD_GPU_BUILD:-build-gpu}
mkdir -p "$OUT"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
export TD_CACHE_DIR=${TD_CACHE_DIR:-/tmp/tdist-cache}
status=0
t0=$(date +%s)
cmake -S . -B "$B" "${GEN[@]}" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
  >"$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
sel=(-L gpu)
[ -n "$REGEX" ] && sel+=(-R "$REGEX")
tests=$(cd "$B" && ctest -N "${sel[@]}" | sed -n 's/^ *Test *#[0-9]*: *//p' | tr '\n' ' ')
# Test name = target name, except launcher variants (NAME_tdrun_N runs NAME under tdrun).
targets=""
for t in $tests; do
  case "$t" in
    *_tdrun_[0-9]*) targets="$targets ${t%_tdrun_*} tdrun" ;;
    *) targets="$targets $t" ;;
  esac
done
case "$WHAT" in bench|all) targets="$targets gpu_put_bench exec_overhead gemm_bench" ;; esac
case "$WHAT" in sanitizer|all) targets="$targets dev_gpu_test" ;; esac
echo "== build: $targets"
if ! cmake --build "$B" -j "$(nproc)" --target $targets >"$OUT/build.log" 2>&1; then
  grep -E "error" "$OUT/build.log" | head -30
  exit 1
fi
echo "   built in $(( $(date +%s) - t0 )) s"

if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  echo "== tests ($tests)"
  (cd "$B" && ctest "${sel[@]}" --output-on-failure --timeout 500) >"$OUT/tests.log" 2>&1
  [ $? = 0 ] || status=1
  grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|FAILED|Failed" "$OUT/tests.log" | tail -30
fi

if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  echo "== bench: device primitives"
  "$B/bin/gpu_put_bench" --reps 50 --max-mib 256 2>&1 | tee "$OUT/gpu_put_bench.md" || status=1
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/gpu_put_bench.md" 2>&1
  echo "== bench: CUDA executor overhead (persistent executor vs ordinary grid, simple GEMM tile)"
  "$B/bin/exec_overhead" --shape 8192x3584x8192 --tile 256x256 --budget 10 2>&1 | tee "$OUT/exec_overhead.md" || status=1
  echo "== bench: GEMM tiles vs cuBLAS (full sweep: scripts/gemm-bench.sh)"
  "$B/bin/gemm_bench" --shapes 8192x3584x8192,1024x3584x8192,128x3584x8192 \
    --configs 128x256x4,128x224x5,64x64x8 --hooks --iters 30 2>&1 | grep -v "^    sm" | tee "$OUT/gemm_bench.md" || status=1
fi

if [ "$WHAT" = sanitizer ] || [ "$WHAT" = all ]; then
  # compute-sanitizer serialises kernels, so ranks that wait on each other
  # across kernels would deadlock: it runs the fused ring (one kernel, every
  # rank a block) and the copy-engine argument checks.
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool (dev_gpu_test: test_ring_fused)"
    TD_GPU_TEST_FILTER=test_ring_fused timeout 300 "$CS" --tool $tool --error-exitcode 9 \
      "$B/tests/dev_gpu_test" >"$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    echo "   rc=$rc: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer-$tool.log" | tr '\n' ' ')"
    [ $rc = 0 ] || status=1
  done
fi

echo "== summary ($(( $(date +%s) - t0 )) s, $(git rev-parse --short HEAD 2>/dev/null))"
grep -E "tests passed|tests failed" "$OUT/tests.log" 2>/dev/null
grep -E "\(Failed\)|\(Timeout\)|\*\*\*" "$OUT/tests.log" 2>/dev/null | head -20
exit $status
