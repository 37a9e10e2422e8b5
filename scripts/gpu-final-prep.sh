#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds the GPU test binaries, tdist and tdrun (Release, sm_90a) and
# copies them into .gpubin/ (git-ignored through .git/info/exclude) for
# scripts/gpu-final.sh on the GPU machine.
set -e
cd "$(dirname "$0")/.."
B=${TD_FINAL_BUILD:-build-final}
EX=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$EX")"; grep -qx '/.gpubin*/' "$EX" 2>/dev/null || echo '/.gpubin*/' >> "$EX"
T="tdist_cli tdrun gemm_args_test exec_gemm_queue_test dev_gpu_test dev_gpu_deadlock dev_nccl_test exec_random_test exec_copy_engine_test exec_deadline_test gemm_tile_test gemm_hooks_test ops_gpu_test gemm_bench hook_floor"
# TD_FINAL_W3=1: a diagnostic build whose kernels take the warp-3 front by default (gemm_sm90.cuh
# TD_GEMM_EARLY_W3_DEFAULT), into build-final-w3/ and .gpubin-w3/ unless TD_FINAL_BUILD / TD_FINAL_BIN say otherwise.
# (Kernels the JIT compiles at run time keep the default front.)
if [ "${TD_FINAL_W3:-0}" = 1 ]; then
  B=${TD_FINAL_BUILD:-build-final-w3}
  cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_FLAGS=-DTD_GEMM_EARLY_W3_DEFAULT=1 >/dev/null
else
  cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$B" -j "$(nproc)" --target $T
D=${TD_FINAL_BIN:-.gpubin}
[ "${TD_FINAL_W3:-0}" = 1 ] && D=${TD_FINAL_BIN:-.gpubin-w3}
rm -rf "$D" && mkdir -p "$D"
cp "$B/bin/tdist" "$B/bin/tdrun" "$B/bin/gemm_bench" "$B/bin/hook_floor" "$D"/
for t in $T; do [ -f "$B/tests/$t" ] && cp "$B/tests/$t" "$D"/; done
git rev-parse --short HEAD > "$D"/REVISION
du -sh "$D"
