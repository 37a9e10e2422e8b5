/* SPDX-License-Identifier: Apache-2.0
 * The CUDA `local` transport (primitives layer, transports): one process
 * drives N ranks on one or more GPUs.
 *
 * Every rank gets a device heap laid out as
 *   [0, 4 KiB)  reserved: barrier epoch word (offset 0), diagnostic lock
 *               (offset 64, used in rank 0's heap only), barrier signal area
 *               of TD_DEV_MAX_PEERS words (offset 512, symmetric);
 *   [4 KiB, heap_size)  td_cuda_local_alloc's bump allocator.
 * Heaps are cleared once at creation, so signals start at 0 and epochs grow
 * from there without any reset. The shared diagnostic record sits in pinned,
 * mapped host memory so the host can read it even after a kernel trapped.
 * Launching with the co-residency check lives in launch.c, the copy engine
 * in copy_engine.c. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_internal.h"
#include "tdist/config.h"

enum { TD__RESERVED = 4096, TD__OFF_EPOCH = 0, TD__OFF_LOCK = 64, TD__OFF_BARRIER = 512 };

void td_cuda_local_opts_init(td_cuda_local_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->nranks = 1;
}

td_status td__cuda_error(cudaError_t e, const char *call) {
  return td__error(TD_ERR_CUDA, "%s failed: %s (%s)", call, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

/* Checks that need no device first, so they also hold on machines without one. */
static td_status td__cl_check_opts(const td_cuda_local_opts *o) {
  if (o->nranks < 1 || o->nranks > TD_DEV_MAX_PEERS)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_cuda_local_create: nranks = %d; allowed 1..%d (TD_DEV_MAX_PEERS)",
                     o->nranks, TD_DEV_MAX_PEERS);
  if (o->heap_size != 0 && o->heap_size < 2 * TD__RESERVED)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_cuda_local_create: heap_size = %zu bytes; at least %d (or 0 for 64 MiB)",
                     o->heap_size, 2 * TD__RESERVED);
  if (o->timeout_ms < 0)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_create: timeout_ms = %d is negative",
                     o->timeout_ms);
  if (o->flags & ~(unsigned)TD_DEV_RETURN_ON_TIMEOUT)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_cuda_local_create: flags 0x%x; only TD_DEV_RETURN_ON_TIMEOUT (0x%x) allowed",
                     o->flags, TD_DEV_RETURN_ON_TIMEOUT);
  return TD_OK;
}

static td_status td__cl_check_devices(const td_cuda_local_opts *o, int ndev) {
  for (int r = 0; o->devices && r < o->nranks; r++)
    if (o->devices[r] < 0 || o->devices[r] >= ndev)
      return td__error(TD_ERR_INVALID_ARG,
                       "td_cuda_local_create: rank %d on device %d; this process sees devices "
                       "0..%d",
                       r, o->devices[r], ndev - 1);
  return TD_OK;
}

/* Enables peer access between every pair of distinct devices that allows it;
 * can[i][j] says whether rank i may load/store rank j's heap. */
static td_status td__cl_peer_access(td_cuda_local *cl) {
  for (int i = 0; i < cl->n; i++)
    for (int j = 0; j < cl->n; j++) {
      int di = cl->rank[i].device, dj = cl->rank[j].device, ok = 1;
      if (di != dj) {
        cudaError_t e = cudaDeviceCanAccessPeer(&ok, di, dj);
        if (e != cudaSuccess)
          return td__cuda_error(e, "cudaDeviceCanAccessPeer");
        if (ok) {
          cudaSetDevice(di);
          e = cudaDeviceEnablePeerAccess(dj, 0);
          if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError();
          else if (e != cudaSuccess)
            return td__cuda_error(e, "cudaDeviceEnablePeerAccess");
        }
      }
      cl->lsa[i][j] = (unsigned char)ok;
    }
  return TD_OK;
}

static td_status td__cl_rank_init(td_cuda_local *cl, int r) {
  td__cl_rank *k = &cl->rank[r];
  cudaError_t e = cudaSetDevice(k->device);
  if (e != cudaSuccess)
    return td__cuda_error(e, "cudaSetDevice");
  void *heap = NULL;
  e = cudaMalloc(&heap, cl->heap_size);
  if (e == cudaErrorMemoryAllocation)
    return td__error(TD_ERR_NO_MEMORY,
                     "td_cuda_local_create: cudaMalloc of a %zu-byte heap for rank %d on device %d "
                     "failed: lower heap_size",
                     cl->heap_size, r, k->device);
  if (e != cudaSuccess)
    return td__cuda_error(e, "cudaMalloc");
  k->heap = heap;
  if ((e = cudaMemset(heap, 0, cl->heap_size)) != cudaSuccess)
    return td__cuda_error(e, "cudaMemset");
  int lo = 0, hi = 0;
  cudaDeviceGetStreamPriorityRange(&lo, &hi);
  if ((e = cudaStreamCreateWithFlags(&k->stream, cudaStreamNonBlocking)) != cudaSuccess)
    return td__cuda_error(e, "cudaStreamCreateWithFlags");
  if ((e = cudaStreamCreateWithPriority(&k->ce_stream, cudaStreamNonBlocking, hi)) != cudaSuccess)
    return td__cuda_error(e, "cudaStreamCreateWithPriority");
  return TD_OK;
}

static uint64_t td__cl_timeout_ns(const td_cuda_local_opts *o) {
  int64_t ms = o->timeout_ms;
  if (ms == 0 && td_config_int("TD_TIMEOUT_MS", &ms) != TD_OK)
    ms = 60000;
  return (uint64_t)ms * 1000000u;
}

td_status td_cuda_local_create(const td_cuda_local_opts *opts, td_cuda_local **out) {
  if (opts == NULL || out == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_create: %s is NULL",
                     opts ? "out" : "opts");
  TD_CHECK(td__cl_check_opts(opts));
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0)
    return td__error(TD_ERR_CUDA, "td_cuda_local_create: no CUDA device (%s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
  TD_CHECK(td__cl_check_devices(opts, ndev));
  td_cuda_local *cl = calloc(1, sizeof *cl);
  if (cl == NULL)
    return td__error(TD_ERR_NO_MEMORY, "td_cuda_local_create: out of host memory");
  cl->n = opts->nranks;
  cl->heap_size = opts->heap_size ? opts->heap_size : (size_t)64 << 20;
  cl->next = TD__RESERVED;
  cl->timeout_ns = td__cl_timeout_ns(opts);
  cl->flags = opts->flags;
  for (int r = 0; r < cl->n; r++)
    cl->rank[r].device = opts->devices ? opts->devices[r] : r % ndev;
  td_status st = TD_OK;
  for (int r = 0; r < cl->n && st == TD_OK; r++)
    st = td__cl_rank_init(cl, r);
  if (st == TD_OK)
    st = td__cl_peer_access(cl);
  if (st == TD_OK) {
    e = cudaHostAlloc((void **)&cl->diag, sizeof *cl->diag, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess)
      st = td__cuda_error(e, "cudaHostAlloc (diagnostic record)");
  }
  if (st == TD_OK) {
    memset(cl->diag, 0, sizeof *cl->diag);
    void *dev_diag = NULL;
    e = cudaHostGetDevicePointer(&dev_diag, cl->diag, 0);
    if (e != cudaSuccess)
      st = td__cuda_error(e, "cudaHostGetDevicePointer");
    cl->diag_dev = dev_diag;
  }
  if (st == TD_OK)
    st = td__cl_build_ctx_table(cl);
  if (st != TD_OK) {
    td_cuda_local_destroy(cl);
    return st;
  }
  *out = cl;
  return TD_OK;
}

/* Contexts of every rank, and their device copy. */
td_status td__cl_build_ctx_table(td_cuda_local *cl) {
  for (int r = 0; r < cl->n; r++) {
    td_dev_ctx *c = &cl->ctx[r];
    memset(c, 0, sizeof *c);
    c->rank = r;
    c->n_pes = cl->n;
    c->world_rank = r;
    c->flags = TD_DEV_CTX_CUDA | cl->flags;
    c->heap_size = cl->heap_size;
    c->timeout_ns = cl->timeout_ns;
    c->diag = cl->diag_dev;
    c->diag_lock = (uint32_t *)((char *)cl->rank[0].heap + TD__OFF_LOCK);
    c->barrier_sig = (uint64_t *)((char *)cl->rank[r].heap + TD__OFF_BARRIER);
    c->barrier_epoch = (uint64_t *)((char *)cl->rank[r].heap + TD__OFF_EPOCH);
    for (int p = 0; p < cl->n; p++)
      c->peer_base[p] = cl->lsa[r][p] ? (uintptr_t)cl->rank[p].heap : 0;
  }
  cudaSetDevice(cl->rank[0].device);
  cudaError_t e = cudaMalloc((void **)&cl->ctx_dev, (size_t)cl->n * sizeof(td_dev_ctx));
  if (e != cudaSuccess)
    return td__cuda_error(e, "cudaMalloc (context table)");
  e = cudaMemcpy(cl->ctx_dev, cl->ctx, (size_t)cl->n * sizeof(td_dev_ctx), cudaMemcpyHostToDevice);
  return e == cudaSuccess ? TD_OK : td__cuda_error(e, "cudaMemcpy (context table)");
}

void td_cuda_local_destroy(td_cuda_local *cl) {
  if (cl == NULL)
    return;
  for (int r = 0; r < cl->n; r++) {
    td__cl_rank *k = &cl->rank[r];
    cudaSetDevice(k->device);
    if (k->stream)
      cudaStreamSynchronize(k->stream), cudaStreamDestroy(k->stream);
    if (k->ce_stream)
      cudaStreamSynchronize(k->ce_stream), cudaStreamDestroy(k->ce_stream);
    if (k->heap)
      cudaFree(k->heap);
  }
  if (cl->ctx_dev)
    cudaFree(cl->ctx_dev);
  if (cl->diag)
    cudaFreeHost(cl->diag);
  (void)cudaGetLastError();
  free(cl);
}

int td_cuda_local_size(const td_cuda_local *cl) { return cl ? cl->n : 0; }

int td_cuda_local_device(const td_cuda_local *cl, int rank) {
  return cl && rank >= 0 && rank < cl->n ? cl->rank[rank].device : -1;
}

td_status td_cuda_local_alloc(td_cuda_local *cl, size_t bytes, size_t align, size_t *offset) {
  if (cl == NULL || offset == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_alloc: %s is NULL", cl ? "offset" : "cl");
  if (align == 0)
    align = 256;
  if ((align & (align - 1)) != 0 || align > ((size_t)1 << 20))
    return td__error(TD_ERR_INVALID_ARG,
                     "td_cuda_local_alloc: align = %zu; allowed 0 or a power of two up to 1 MiB",
                     align);
  size_t start = (cl->next + align - 1) & ~(align - 1);
  if (start > cl->heap_size || bytes > cl->heap_size - start)
    return td__error(TD_ERR_HEAP_EXHAUSTED,
                     "td_cuda_local_alloc: %zu bytes requested, %zu free of %zu per rank (raise "
                     "td_cuda_local_opts.heap_size)",
                     bytes, cl->heap_size - (cl->next < cl->heap_size ? cl->next : cl->heap_size),
                     cl->heap_size);
  cl->next = start + (bytes ? bytes : 1);
  *offset = start;
  return TD_OK;
}

void *td_cuda_local_ptr(const td_cuda_local *cl, int rank, size_t offset) {
  if (cl == NULL || rank < 0 || rank >= cl->n || offset >= cl->heap_size)
    return NULL;
  return (char *)cl->rank[rank].heap + offset;
}

td_status td_cuda_local_ctx(const td_cuda_local *cl, int rank, td_dev_ctx *out) {
  if (cl == NULL || out == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_ctx: %s is NULL", cl ? "out" : "cl");
  if (rank < 0 || rank >= cl->n)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_ctx: rank %d; allowed 0..%d", rank,
                     cl->n - 1);
  *out = cl->ctx[rank];
  return TD_OK;
}

const td_dev_ctx *td_cuda_local_ctx_table(const td_cuda_local *cl) { return cl ? cl->ctx_dev : NULL; }

struct CUstream_st *td_cuda_local_stream(const td_cuda_local *cl, int rank) {
  return cl && rank >= 0 && rank < cl->n ? cl->rank[rank].stream : NULL;
}

struct CUstream_st *td_cuda_local_ce_stream(const td_cuda_local *cl, int rank) {
  return cl && rank >= 0 && rank < cl->n ? cl->rank[rank].ce_stream : NULL;
}

const td_dev_diagnostic *td_cuda_local_diagnostic(const td_cuda_local *cl) {
  return cl ? cl->diag : NULL;
}

td_status td_cuda_local_clear_diagnostic(td_cuda_local *cl) {
  if (cl == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_cuda_local_clear_diagnostic: cl is NULL");
  cudaSetDevice(cl->rank[0].device);
  cudaError_t e = cudaMemset((char *)cl->rank[0].heap + TD__OFF_LOCK, 0, sizeof(uint32_t));
  if (e != cudaSuccess)
    return td__cuda_error(e, "cudaMemset (diagnostic lock)");
  memset(cl->diag, 0, sizeof *cl->diag);
  return TD_OK;
}
