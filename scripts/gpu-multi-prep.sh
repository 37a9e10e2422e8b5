#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds what scripts/gpu-multi.sh runs on the machine of several
# GPUs (Release, sm_90a) — tdist, tdrun, dev_nccl_test, td_link_bench and
# test_bench_nccl_side —
# into .gpubin-mg/ (git-ignored through .git/info/exclude), with the
# revision in .gpubin-mg/REVISION. Then, with the device tool (kind
# nvidia-h200-x4, carry .gpubin-mg and .debs from scripts/gpu-deps-fetch.sh):
#   . scripts/gpu-env.sh && scripts/gpu-multi.sh [full|smoke]
set -e
cd "$(dirname "$0")/.."
B=${TD_MG_BUILD:-build-mgbench}
D=${TD_MG_BIN:-.gpubin-mg}
EX=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$EX")"; grep -qx '/.gpubin*/' "$EX" 2>/dev/null || echo '/.gpubin*/' >> "$EX"
T="tdist_cli tdrun dev_nccl_test td_link_bench test_bench_nccl_side"
cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j "$(nproc)" --target $T
rm -rf "$D" && mkdir -p "$D"
cp "$B/bin/tdist" "$B/bin/tdrun" "$B/bin/td_link_bench" "$B/tests/dev_nccl_test" "$B/tests/test_bench_nccl_side" "$D"/
# the binaries link NCCL by soname (libnccl.so.2): the GPU machine's comes from PyTorch's wheel (gpu-env.sh)
git rev-parse --short HEAD > "$D"/REVISION
git diff --quiet HEAD -- src include tools bench 2>/dev/null || echo "$(cat "$D"/REVISION)+dirty" > "$D"/REVISION
du -sh "$D"
