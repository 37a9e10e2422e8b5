#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds (Release, sm_90a) the binaries scripts/hooks6-gpu.sh runs on
# the GPU machine -- the kernel queue's and the GEMM hooks' GPU tests, the
# containment tests of the CUDA executor, ops_gpu_test and gemm_bench -- and
# copies them into .gpubin-hooks6/ (git-ignored through .git/info/exclude).
set -e
cd "$(dirname "$0")/.."
B=${TD_FINAL_BUILD:-build-hooks6}
D=${TD_FINAL_BIN:-.gpubin-hooks6}
EX=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$EX")"; grep -qx '/.gpubin*/' "$EX" 2>/dev/null || echo '/.gpubin*/' >> "$EX"
T="exec_gemm_queue_test gemm_hooks_test gemm_tile_test exec_deadline_test exec_random_test exec_copy_engine_test ops_gpu_test gemm_bench"
cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j "$(nproc)" --target $T
rm -rf "$D" && mkdir -p "$D"
cp "$B/bin/gemm_bench" "$D"/
for t in $T; do [ -f "$B/tests/$t" ] && cp "$B/tests/$t" "$D"/; done
git rev-parse --short HEAD > "$D"/REVISION
git status --porcelain -- src/tile/cuda src/exec/cuda tests/gpu bench/gemm | grep -q . && echo "+local changes" >> "$D"/REVISION
du -sh "$D"
