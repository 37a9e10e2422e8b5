#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds tdist and ops_gpu_test (Release, sm_90a) in build-ops7-gpu
# (or $TD_OPS7_BUILD) and copies them into .gpubin-ops7/ (git-ignored through
# .git/info/exclude) for scripts/ops7-gpu.sh on the GPU machine.
set -e
cd "$(dirname "$0")/.."
B=${TD_OPS7_BUILD:-build-ops7-gpu}
grep -qx '/.gpubin-\*/' .git/info/exclude 2>/dev/null || echo '/.gpubin-*/' >> .git/info/exclude
cmake -S . -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j 2 --target tdist_cli ops_gpu_test
D=${TD_OPS7_DEST:-.gpubin-ops7}
rm -rf "$D" && mkdir -p "$D"
cp "$B/bin/tdist" "$B/tests/ops_gpu_test" "$D/"
git rev-parse --short HEAD > "$D/REVISION"
du -sh "$D"
