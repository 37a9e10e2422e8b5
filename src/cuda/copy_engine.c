/* SPDX-License-Identifier: Apache-2.0
 * The copy-engine path of the CUDA local transport (primitives layer,
 * transports): host-issued peer copies with stream-ordered signals, so bulk
 * data moves on the DMA engines while every SM stays on compute (how
 * Triton-distributed runs its intra-node AllGather).
 *
 * A put is cudaMemcpyAsync (cudaMemcpyPeerAsync across devices) followed on
 * the same stream by cuStreamWriteValue64, whose default flags put a memory
 * barrier before the write: a kernel or stream that observes the signal sees
 * the data. Waits are cuStreamWaitValue64. The two driver functions come from
 * cudaGetDriverEntryPointByVersion, so tdist needs no link against libcuda. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <pthread.h>

#include "core/error.h"
#include "cuda/cuda_internal.h"

static PFN_cuStreamWriteValue64_v11070 td__write_value64;
static PFN_cuStreamWaitValue64_v11070 td__wait_value64;
static pthread_once_t td__ce_once = PTHREAD_ONCE_INIT;

static void td__ce_resolve(void) {
  enum cudaDriverEntryPointQueryResult q;
  void *p = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &p, 12000, cudaEnableDefault, &q) ==
          cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__write_value64 = (PFN_cuStreamWriteValue64_v11070)p;
  p = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &p, 12000, cudaEnableDefault, &q) ==
          cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__wait_value64 = (PFN_cuStreamWaitValue64_v11070)p;
}

static td_status td__ce_driver(const char *who) {
  pthread_once(&td__ce_once, td__ce_resolve);
  if (td__write_value64 == NULL || td__wait_value64 == NULL)
    return td__error(TD_ERR_UNSUPPORTED,
                     "%s: the CUDA driver does not provide cuStreamWriteValue64/"
                     "cuStreamWaitValue64 (stream memory operations)",
                     who);
  return TD_OK;
}

static td_status td__ce_check_rank(const td_cuda_local *cl, const char *who, const char *what,
                                   int r) {
  if (cl == NULL)
    return td__error(TD_ERR_INVALID_ARG, "%s: cl is NULL", who);
  if (r < 0 || r >= cl->n)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s %d; allowed 0..%d", who, what, r, cl->n - 1);
  return TD_OK;
}

static td_status td__ce_check_range(const td_cuda_local *cl, const char *who, const char *what,
                                    size_t off, size_t bytes) {
  if (off < 4096 || off > cl->heap_size || bytes > cl->heap_size - off)
    return td__error(TD_ERR_INVALID_ARG,
                     "%s: %s [%zu, %zu + %zu) is outside the allocatable heap [4096, %zu)", who,
                     what, off, off, bytes, cl->heap_size);
  return TD_OK;
}

td_status td_cuda_ce_putmem_signal(td_cuda_local *cl, int rank, size_t dest_off, const void *src,
                                   size_t bytes, size_t sig_off, uint64_t value, td_sigop op,
                                   int pe, struct CUstream_st *stream) {
  static const char who[] = "td_cuda_ce_putmem_signal";
  TD_CHECK(td__ce_check_rank(cl, who, "rank", rank));
  TD_CHECK(td__ce_check_rank(cl, who, "pe", pe));
  TD_CHECK(td__ce_check_range(cl, who, "destination", dest_off, bytes));
  if (bytes > 0 && src == NULL)
    return td__error(TD_ERR_INVALID_ARG, "%s: src is NULL with %zu bytes", who, bytes);
  const int signal = sig_off != SIZE_MAX;
  if (signal) {
    TD_CHECK(td__ce_check_range(cl, who, "signal", sig_off, 8));
    if (sig_off % 8 != 0)
      return td__error(TD_ERR_INVALID_ARG, "%s: signal offset %zu is not 8-byte aligned", who,
                       sig_off);
    if (op != TD_SIGNAL_SET)
      return td__error(TD_ERR_UNSUPPORTED,
                       "%s: the copy engine can only set a signal (TD_SIGNAL_SET), not add: "
                       "use increasing epoch values",
                       who);
    TD_CHECK(td__ce_driver(who));
  }
  cudaStream_t s = stream ? stream : cl->rank[rank].ce_stream;
  const int src_dev = cl->rank[rank].device, dst_dev = cl->rank[pe].device;
  char *dst = (char *)cl->rank[pe].heap + dest_off;
  cudaSetDevice(src_dev);
  if (bytes > 0) {
    cudaError_t e = src_dev == dst_dev
                        ? cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)
                        : cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, s);
    if (e != cudaSuccess)
      return td__cuda_error(e, "cudaMemcpyAsync (copy-engine put)");
  }
  if (signal) {
    CUdeviceptr addr = (CUdeviceptr)((char *)cl->rank[pe].heap + sig_off);
    CUresult r = td__write_value64((CUstream)s, addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS)
      return td__error(TD_ERR_CUDA, "%s: cuStreamWriteValue64 failed with CUresult %d", who,
                       (int)r);
  }
  return TD_OK;
}

td_status td_cuda_ce_wait(td_cuda_local *cl, int rank, size_t sig_off, td_cmp cmp, uint64_t value,
                          struct CUstream_st *stream) {
  static const char who[] = "td_cuda_ce_wait";
  TD_CHECK(td__ce_check_rank(cl, who, "rank", rank));
  TD_CHECK(td__ce_check_range(cl, who, "signal", sig_off, 8));
  if (sig_off % 8 != 0)
    return td__error(TD_ERR_INVALID_ARG, "%s: signal offset %zu is not 8-byte aligned", who,
                     sig_off);
  unsigned int flags;
  if (cmp == TD_CMP_EQ)
    flags = CU_STREAM_WAIT_VALUE_EQ;
  else if (cmp == TD_CMP_GE)
    flags = CU_STREAM_WAIT_VALUE_GEQ;
  else
    return td__error(TD_ERR_UNSUPPORTED,
                     "%s: comparison %s; stream waits support only eq and ge", who,
                     td_cmp_name(cmp));
  TD_CHECK(td__ce_driver(who));
  cudaStream_t s = stream ? stream : cl->rank[rank].ce_stream;
  cudaSetDevice(cl->rank[rank].device);
  CUdeviceptr addr = (CUdeviceptr)((char *)cl->rank[rank].heap + sig_off);
  CUresult r = td__wait_value64((CUstream)s, addr, value, flags);
  if (r != CUDA_SUCCESS)
    return td__error(TD_ERR_CUDA, "%s: cuStreamWaitValue64 failed with CUresult %d", who, (int)r);
  return TD_OK;
}
