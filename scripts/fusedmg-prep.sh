#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Dev box: builds tdist and ops_gpu_test (Release, sm_90a) from the committed
# HEAD (an export in /tmp, so nobody's uncommitted work enters the binaries)
# and copies them into .gpubin-fusedmg/ (git-ignored through
# .git/info/exclude) for scripts/fusedmg-gpu.sh on the GPU machine.
set -e
cd "$(dirname "$0")/.."
SRC=${TD_FUSEDMG_SRC:-/tmp/fusedmg-src} B=${TD_FUSEDMG_BUILD:-/tmp/fusedmg-build}
grep -qx '/.gpubin-\*/' .git/info/exclude 2>/dev/null || echo '/.gpubin-*/' >> .git/info/exclude
rm -rf "$SRC" && mkdir -p "$SRC" && git archive HEAD | tar -x -C "$SRC"
cmake -S "$SRC" -B "$B" -DTD_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j 2 --target tdist_cli ops_gpu_test
D=.gpubin-fusedmg
rm -rf "$D" && mkdir -p "$D"
cp "$B/bin/tdist" "$B/tests/ops_gpu_test" "$D/"
git rev-parse --short HEAD > "$D/REVISION"
du -sh "$D"
