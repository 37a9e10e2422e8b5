#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds (Release, sm_90a) what scripts/hooks7-gpu.sh runs on the GPU
# machine -- gemm_hooks_test, gemm_tile_test and gemm_bench (with the phase
# stamps and hook variants of bench/gemm/gemm_bench_xv.cu) -- and copies them
# into .gpubin-hooks7/ (git-ignored through .git/info/exclude).
set -e
cd "$(dirname "$0")/.."
B=${TD_FINAL_BUILD:-build-hooks7}
D=${TD_FINAL_BIN:-.gpubin-hooks7}
EX=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$EX")"; grep -qx '/.gpubin*/' "$EX" 2>/dev/null || echo '/.gpubin*/' >> "$EX"
T="gemm_hooks_test gemm_tile_test gemm_bench"
cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j 2 --target $T
rm -rf "$D" && mkdir -p "$D"
cp "$B/bin/gemm_bench" "$D"/
for t in $T; do [ -f "$B/tests/$t" ] && cp "$B/tests/$t" "$D"/; done
git rev-parse --short HEAD > "$D"/REVISION
git status --porcelain -- src/tile/cuda tests/gpu bench/gemm | grep -q . && echo "+local changes" >> "$D"/REVISION
du -sh "$D"
