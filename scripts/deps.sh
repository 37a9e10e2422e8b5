#!/bin/sh
# Installs the Debian packages tdist builds against, only those missing.
# Idempotent; returns at once when everything is present.
set -e
PKGS="cmake make gcc g++ pkg-config libopenblas-dev libcmocka-dev libcjson-dev openmpi-bin libopenmpi-dev python3"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# cuobjdump (and the nvdisasm it runs) for the SASS check of the GEMM kernels (tests/gpu/sass_tma_uniform.py), where a CUDA toolkit
# builds them but ships none: NVIDIA's pip wheel, into .tools/ (git-ignored)
if command -v nvcc >/dev/null 2>&1; then
  CUDA_BIN=$(dirname "$(command -v nvcc)")
  if ! { command -v cuobjdump && command -v nvdisasm; } >/dev/null 2>&1 &&
     ! [ -x "$CUDA_BIN/cuobjdump" -a -x "$CUDA_BIN/nvdisasm" ] &&
     ! [ -x .tools/cuobjdump/nvidia/cu13/bin/cuobjdump -a -x .tools/cuobjdump/nvidia/cu13/bin/nvdisasm ]; then
    echo "deps: installing cuobjdump and nvdisasm (pip wheels nvidia-cuda-cuobjdump, -nvdisasm) into .tools/cuobjdump"
    python3 -m pip install -q --no-deps --upgrade --disable-pip-version-check --target .tools/cuobjdump \
      'nvidia-cuda-cuobjdump>=13,<14' 'nvidia-cuda-nvdisasm>=13,<14' 2>/dev/null ||
      echo "deps: could not install cuobjdump; the sass_tma_uniform test will say so" >&2
  fi
fi
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null || true
$SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
