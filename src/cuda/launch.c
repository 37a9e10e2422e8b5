/* SPDX-License-Identifier: Apache-2.0
 * Launching kernels of the CUDA local transport (primitives layer,
 * transports): the co-residency check, one launch per rank on its stream, and
 * the bounded synchronisation that turns a device diagnostic or a stuck
 * stream into TD_ERR_TIMEOUT instead of a hang. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>

#include "core/error.h"
#include "cuda/cuda_internal.h"

static int td__cl_ranks_on(const td_cuda_local *cl, int device) {
  int k = 0;
  for (int r = 0; r < cl->n; r++)
    k += cl->rank[r].device == device;
  return k;
}

td_status td_cuda_local_check_coresident(const td_cuda_local *cl, const void *kernel,
                                         int ranks_per_device, unsigned int grid_blocks,
                                         unsigned int block_threads, size_t smem) {
  if (cl == NULL || kernel == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_check_coresident: %s is NULL",
                     cl ? "kernel" : "cl");
  if (grid_blocks == 0 || block_threads == 0)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_cuda_local_check_coresident: grid of %u blocks of %u threads; both must "
                     "be at least 1",
                     grid_blocks, block_threads);
  for (int r = 0; r < cl->n; r++) {
    const int dev = cl->rank[r].device;
    if (r > 0 && cl->rank[r - 1].device == dev)
      continue;
    const int sharing = ranks_per_device > 0 ? ranks_per_device : td__cl_ranks_on(cl, dev);
    int per_sm = 0, sms = 0;
    cudaSetDevice(dev);
    cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                                  (int)block_threads, smem);
    if (e != cudaSuccess)
      return td__cuda_error(e, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
      return td__cuda_error(e, "cudaDeviceGetAttribute");
    const long long limit = (long long)per_sm * sms;
    const long long want = (long long)sharing * grid_blocks;
    if (want > limit)
      return td__error(TD_ERR_INVALID_ARG,
                       "co-residency: %d ranks share device %d and each launches %u blocks of %u "
                       "threads (%lld blocks); the device holds at most %d SMs x %d blocks = "
                       "%lld of this kernel at once, so ranks waiting on each other could "
                       "deadlock: launch at most %lld blocks per rank",
                       sharing, dev, grid_blocks, block_threads, want, sms, per_sm, limit,
                       limit / sharing);
  }
  return TD_OK;
}

td_status td_cuda_local_launch(td_cuda_local *cl, const void *kernel, unsigned int grid_blocks,
                               unsigned int block_threads, size_t smem, void **const *args) {
  if (args == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_launch: args is NULL");
  TD_CHECK(td_cuda_local_check_coresident(cl, kernel, 0, grid_blocks, block_threads, smem));
  for (int r = 0; r < cl->n; r++) {
    cudaSetDevice(cl->rank[r].device);
    dim3 grid = {grid_blocks, 1, 1}, block = {block_threads, 1, 1};
    cudaError_t e = cudaLaunchKernel(kernel, grid, block, args[r], smem, cl->rank[r].stream);
    if (e != cudaSuccess) {
      td__cuda_error(e, "cudaLaunchKernel");
      td__error_prefix("td_cuda_local_launch, rank %d: ", r);
      return TD_ERR_CUDA;
    }
  }
  return TD_OK;
}

static int64_t td__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* After a failure, prefer the device's own account of it. */
static td_status td__cl_failure(td_cuda_local *cl, td_status st) {
  if (td_dev_diagnostic_status(cl->diag) == TD_ERR_TIMEOUT) {
    if (st == TD_ERR_CUDA)
      td__error_prefix("the kernel trapped, the CUDA context is lost: ");
    return TD_ERR_TIMEOUT;
  }
  return st;
}

td_status td_cuda_local_sync(td_cuda_local *cl) {
  if (cl == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_sync: cl is NULL");
  const int64_t deadline = td__mono_ns() + (int64_t)cl->timeout_ns + 1000000000;
  for (int r = 0; r < cl->n; r++) {
    cudaStream_t s[2] = {cl->rank[r].stream, cl->rank[r].ce_stream};
    for (int k = 0; k < 2; k++) {
      cudaSetDevice(cl->rank[r].device);
      for (;;) {
        cudaError_t e = cudaStreamQuery(s[k]);
        if (e == cudaSuccess)
          break;
        if (e != cudaErrorNotReady) {
          td__cuda_error(e, "cudaStreamQuery");
          td__error_prefix("rank %d's %s stream: ", r, k ? "copy-engine" : "compute");
          return td__cl_failure(cl, TD_ERR_CUDA);
        }
        if (td__mono_ns() > deadline) {
          if (td__cl_failure(cl, TD_ERR_CUDA) == TD_ERR_TIMEOUT)
            return TD_ERR_TIMEOUT;
          return td__error(TD_ERR_TIMEOUT,
                           "rank %d's %s stream did not finish within the deadline (%llu ms + "
                           "1 s): a stream-ordered wait (td_cuda_ce_wait) was never satisfied "
                           "or a kernel is stuck without a deadline",
                           r, k ? "copy-engine" : "compute",
                           (unsigned long long)(cl->timeout_ns / 1000000u));
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
      }
    }
  }
  return td__cl_failure(cl, TD_OK);
}
