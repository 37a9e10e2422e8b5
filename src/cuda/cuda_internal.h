/* SPDX-License-Identifier: Apache-2.0
 * Internal to src/cuda: the layout of a td_cuda_local (CUDA local transport)
 * shared by local.c, launch.c and copy_engine.c, and the CUDA error helper.
 * Not installed. */
#ifndef TD_CUDA_INTERNAL_H
#define TD_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "tdist/device.h"
#include "tdist/device/cuda_local.h"

typedef struct td__cl_rank {
  int device;
  void *heap;               /* device heap, heap_size bytes */
  cudaStream_t stream;      /* compute: kernels */
  cudaStream_t ce_stream;   /* copy engine: high priority */
} td__cl_rank;

struct td_cuda_local {
  int n;
  size_t heap_size;
  size_t next;              /* bump allocator: first free offset */
  uint64_t timeout_ns;
  unsigned int flags;
  td_dev_diagnostic *diag;  /* pinned, mapped: host address */
  td_dev_diagnostic *diag_dev; /* its device address */
  td_dev_ctx *ctx_dev;      /* device copy of ctx[] */
  td__cl_rank rank[TD_DEV_MAX_PEERS];
  unsigned char lsa[TD_DEV_MAX_PEERS][TD_DEV_MAX_PEERS]; /* lsa[i][j]: i can load/store j's heap */
  td_dev_ctx ctx[TD_DEV_MAX_PEERS];
};

/** Sets the message "<call> failed: <CUDA message> (<name>)" and returns TD_ERR_CUDA. */
td_status td__cuda_error(cudaError_t e, const char *call);
td_status td__cl_build_ctx_table(td_cuda_local *cl);

#endif
