#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds what scripts/execgemm-gpu.sh runs on the GPU machine (the
# CUDA executor's kernel queue: its GPU test and the main job) -- Release,
# sm_90a -- and copies it into .gpubin-execgemm/ (git-ignored by /.gpubin-*/).
set -e
cd "$(dirname "$0")/.."
B=${TD_EXECGEMM_BUILD:-build-execgemm}
T="tdist_cli exec_gemm_queue_test"
cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j 2 --target $T
rm -rf .gpubin-execgemm && mkdir -p .gpubin-execgemm
cp "$B/bin/tdist" "$B/tests/exec_gemm_queue_test" .gpubin-execgemm/
git rev-parse --short HEAD > .gpubin-execgemm/REVISION
du -sh .gpubin-execgemm
