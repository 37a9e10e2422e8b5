#!/bin/sh
# Sourced ON THE GPU MACHINE (device tool) by the GPU scripts: unpacks the
# carried .debs (cJSON, cmocka; absent from that image), and points the build
# at NCCL inside PyTorch's nvidia/nccl wheel. Keeps NVLink multicast off.
if [ -d .debs ] && ! [ -f /usr/include/cjson/cJSON.h ]; then
  for f in .debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
TD_NCCL_HOME=$(python3 -c 'import nvidia.nccl, os; print(nvidia.nccl.__path__[0])' 2>/dev/null)
export TD_NCCL_HOME
[ -n "$TD_NCCL_HOME" ] && export LD_LIBRARY_PATH="$TD_NCCL_HOME/lib:${LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# ranks sharing a GPU run several streams each: give them hardware queues of their own
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
export CUDA_HOME=/usr/local/cuda
