#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GEMM tiles on a GPU machine: build (nvcc), check, time against cuBLAS.
# Run ON THE GPU MACHINE from the repository root:
#   . scripts/gpu-env.sh && scripts/gemm-bench.sh [quick]
# 1. builds the GEMM tests through CMake (only those targets) and runs them;
# 2. builds bench/gemm/gemm_bench.cu with nvcc directly (sm_90a), so it needs
#    no bench/CMakeLists.txt;
# 3. runs the benchmark: every compiled configuration on every shape, B as
#    [N,K] (plus a few [K,N] shapes), hooks overhead, JSON and logs to $OUT.
# 4. runs `tdist tune gemm` on one shape with a cache under $OUT.
# `quick` skips the [K,N] sweep. Ends with the summary tables.
set -uo pipefail
OUT=${OUT:-out/gemm}
mkdir -p "$OUT"
NPROC=$(nproc)
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
CUDA=${CUDA_HOME:-/usr/local/cuda}
status=0

echo "== tests (cmake, sm_90a)"
cmake -S . -B build-gemm-gpu "${GEN[@]}" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; status=1; }
if cmake --build build-gemm-gpu -j "$NPROC" --target gemm_args_test gemm_tile_test gemm_hooks_test \
  gemm_tune_cache_test gemm_tune_cli_test tdist_cli >>"$OUT/build.log" 2>&1; then
  (cd build-gemm-gpu && ctest -R "^gemm_" --output-on-failure --timeout 90) 2>&1 | tee "$OUT/tests.log" | tail -15
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
else
  grep -E "error|Error" "$OUT/build.log" | head -20
  status=1
fi

echo "== benchmark build (nvcc)"
B=build-gemm-bench
mkdir -p $B/include/tdist
sed -e 's/@PROJECT_VERSION_MAJOR@/0/;s/@PROJECT_VERSION_MINOR@/1/;s/@PROJECT_VERSION_PATCH@/0/' \
  -e 's/@PROJECT_VERSION@/0.1.0/' include/tdist/version.h.in >$B/include/tdist/version.h
NV=("$CUDA/bin/nvcc" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc
  -Isrc/tile/cuda -I$B/include)
pids=()
for f in gemm_sm90_launch gemm_sm90_kernels_nk gemm_sm90_kernels_kn gemm_sm80; do
  "${NV[@]}" -Xptxas -v -c src/tile/cuda/$f.cu -o $B/$f.o >"$B/$f.log" 2>&1 &
  pids+=($!)
done
"${NV[@]}" -c bench/gemm/gemm_bench.cu -o $B/gemm_bench.o >$B/bench.log 2>&1 &
pids+=($!)
for c in status types; do gcc -O2 -std=c17 -D_GNU_SOURCE -Iinclude -Isrc -I$B/include -c src/core/$c.c -o $B/$c.o; done
for p in "${pids[@]}"; do wait "$p" || status=1; done
cat $B/*.log >>"$OUT/build.log"
grep -E "error" $B/*.log | head
grep -hE "spill stores" $B/*.log | sort | uniq -c | head -5
"${NV[@]}" $B/*.o -o $B/gemm_bench -lcublas -lcjson || { echo "link failed"; exit 1; }

echo "== benchmark"
timeout 240 $B/gemm_bench --hooks --json "$OUT/gemm_nk.json" 2>&1 | tee "$OUT/bench_nk.log" | grep -v "^    sm80" || status=1
if [ "${1:-}" != quick ]; then
  timeout 120 $B/gemm_bench --layout kn --shapes 8192x3584x8192,1024x3584x8192 --json "$OUT/gemm_kn.json" \
    2>&1 | tee "$OUT/bench_kn.log" | tail -6 || status=1
fi
echo "== tune"
TD_CACHE_DIR="$OUT" build-gemm-gpu/bin/tdist tune gemm --M 8192 --N 3584 --K 8192 --iters 10 \
  2>&1 | tee "$OUT/tune.log" | tail -4 || status=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/bench_nk.log" 2>&1
echo "== summary"
grep -E "^\|" "$OUT/bench_nk.log"
grep -E "hooks" "$OUT/bench_nk.log"
grep -E "FAIL|Failed|FAILED" "$OUT/tests.log" "$OUT/bench_nk.log" | head
exit $status
