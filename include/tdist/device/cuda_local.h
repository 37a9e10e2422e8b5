/* SPDX-License-Identifier: Apache-2.0
 * The CUDA `local` transport and the copy-engine path (primitives layer,
 * transports; host side). Present only in builds with CUDA (TD_HAVE_CUDA):
 * include this header only in code built with CUDA.
 *
 * One process drives N ranks on one or more GPUs. Each rank has a device
 * symmetric heap (cudaMalloc on its device; with one GPU several ranks share
 * it), a compute stream and a high-priority copy-engine stream. Ranks on
 * different devices reach each other directly where peer access is possible
 * (cudaDeviceEnablePeerAccess); otherwise they are not LSA peers of each
 * other (their contexts hold 0 for that peer) and only the copy engine
 * reaches them. Kernels get the rank's td_dev_ctx (td_cuda_local_ctx) by
 * value and use the td_dev_* API of tdist/device.h.
 *
 * Co-residency rule: kernels of different ranks that wait on each other must
 * all be resident at once, or a waiting block can occupy the SM its producer
 * needs and the GPU deadlocks. td_cuda_local_launch checks, per device, that
 * (ranks on the device) x (blocks per rank) <= (resident blocks per SM for
 * this kernel, block size and shared memory) x (SMs), and refuses with
 * TD_ERR_INVALID_ARG otherwise. It assumes nothing else occupies the device
 * meanwhile; CUDA runs kernels of different non-blocking streams together
 * when resources allow, which the check makes true. Tools that serialise
 * kernels (compute-sanitizer) break this: for them, launch one kernel whose
 * blocks play all ranks (td_cuda_local_ctx_table).
 *
 * Thread-safety: one host thread drives a td_cuda_local at a time.
 * Device-side waits use the deadline of opts.timeout_ms; when it passes a
 * kernel records the diagnostic and traps (the CUDA context is then lost for
 * the process: such tests run in their own process) or, with
 * TD_DEV_RETURN_ON_TIMEOUT in opts.flags, returns TD_ERR_TIMEOUT. */
#ifndef TDIST_DEVICE_CUDA_LOCAL_H
#define TDIST_DEVICE_CUDA_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without including the CUDA headers. */
struct CUstream_st;

typedef struct td_cuda_local td_cuda_local;

typedef struct td_cuda_local_opts {
  int nranks;          /* ranks driven by this process, 1..TD_DEV_MAX_PEERS */
  const int *devices;  /* device of each rank (nranks entries); NULL: rank r on device r % count */
  size_t heap_size;    /* device heap bytes per rank; 0: 64 MiB */
  int timeout_ms;      /* deadline of device waits; 0: TD_TIMEOUT_MS, else 60000 */
  unsigned int flags;  /* TD_DEV_RETURN_ON_TIMEOUT or 0 */
} td_cuda_local_opts;

/** Fills *opts with defaults (nranks 1, everything else "default"). */
void td_cuda_local_opts_init(td_cuda_local_opts *opts);

/** Creates the ranks: per rank a zeroed device heap, streams, peer access
 * where possible; one host-visible diagnostic record shared by all ranks.
 * Errors: TD_ERR_INVALID_ARG (nranks out of range, a device number out of
 * range, heap_size too small: each names the value and the allowed range),
 * TD_ERR_CUDA (no device or a CUDA call failed: names the call and CUDA's
 * message), TD_ERR_NO_MEMORY (device or pinned host memory). *out written only
 * on success. */
td_status td_cuda_local_create(const td_cuda_local_opts *opts, td_cuda_local **out);

/** Waits for all streams, frees everything. NULL is allowed. After a trap the
 * CUDA context is lost; destroy still releases host memory. */
void td_cuda_local_destroy(td_cuda_local *cl);

int td_cuda_local_size(const td_cuda_local *cl);
/** Device of rank r; -1 when r is out of range. */
int td_cuda_local_device(const td_cuda_local *cl, int rank);

/** Symmetric allocation: `bytes` at the same heap offset on every rank,
 * aligned to `align` (0 = 256; else a power of two up to 1 MiB), zeroed
 * (heaps are cleared at creation and offsets never reused: this is a bump
 * allocator; memory goes with td_cuda_local_destroy). Writes the offset.
 * Errors: TD_ERR_INVALID_ARG (bad align), TD_ERR_HEAP_EXHAUSTED (message
 * gives requested, free and total bytes). */
td_status td_cuda_local_alloc(td_cuda_local *cl, size_t bytes, size_t align, size_t *offset);

/** Device address of rank r's copy of heap offset `offset`; NULL when r or
 * offset is out of range. */
void *td_cuda_local_ptr(const td_cuda_local *cl, int rank, size_t offset);

/** Rank r's device context (team = all ranks of this object).
 * Errors: TD_ERR_INVALID_ARG (r out of range). */
td_status td_cuda_local_ctx(const td_cuda_local *cl, int rank, td_dev_ctx *out);

/** A device array of every rank's context (index = rank), for kernels whose
 * blocks play several ranks. Valid while cl lives. */
const td_dev_ctx *td_cuda_local_ctx_table(const td_cuda_local *cl);

/** Rank r's compute stream and copy-engine stream (high priority). */
struct CUstream_st *td_cuda_local_stream(const td_cuda_local *cl, int rank);
struct CUstream_st *td_cuda_local_ce_stream(const td_cuda_local *cl, int rank);

/** Checks the co-residency rule for `ranks_per_device` ranks per device each
 * launching `grid_blocks` blocks of `block_threads` threads and `smem` bytes
 * of dynamic shared memory of `kernel` (a __global__ function's address).
 * ranks_per_device 0 means as many as share the busiest device of cl.
 * Errors: TD_ERR_INVALID_ARG (message: ranks, blocks, the device's limit and
 * the largest grid that fits), TD_ERR_CUDA. */
td_status td_cuda_local_check_coresident(const td_cuda_local *cl, const void *kernel,
                                         int ranks_per_device, unsigned int grid_blocks,
                                         unsigned int block_threads, size_t smem);

/** Launches `kernel` once per rank on the rank's compute stream with
 * args[r] as its argument array (cudaLaunchKernel convention), after
 * checking co-residency. Returns without waiting. Errors: as
 * td_cuda_local_check_coresident, TD_ERR_CUDA (launch failed). */
td_status td_cuda_local_launch(td_cuda_local *cl, const void *kernel, unsigned int grid_blocks,
                               unsigned int block_threads, size_t smem, void **const *args);

/** Waits for every rank's streams, polling, for at most the deadline plus
 * one second (so a stuck stream-ordered wait cannot hang the host). Returns
 * TD_OK; TD_ERR_TIMEOUT with the diagnostic's message (a device wait passed
 * its deadline; after a trap the message adds that the CUDA context is lost)
 * or naming the rank whose stream never finished (a copy-engine wait that was
 * never satisfied); TD_ERR_CUDA (names the rank and CUDA's message). */
td_status td_cuda_local_sync(td_cuda_local *cl);

/** The shared diagnostic record (host address). It keeps the first timeout
 * until cleared: every td_cuda_local_sync reports it. */
const td_dev_diagnostic *td_cuda_local_diagnostic(const td_cuda_local *cl);

/** Forgets the recorded timeout (return-on-timeout contexts, after the host
 * handled it) so later waits can record again. Call with no kernel running.
 * Errors: TD_ERR_INVALID_ARG (NULL), TD_ERR_CUDA. */
td_status td_cuda_local_clear_diagnostic(td_cuda_local *cl);

/* ---- copy engine ---------------------------------------------------------
 * Host-issued, stream-ordered operations on rank `rank`'s copy-engine stream
 * (or `stream` if non-NULL). No SM runs them: cudaMemcpyAsync moves the data
 * (DMA engines), cuStreamWriteValue64 writes the signal after it with a
 * memory barrier, cuStreamWaitValue64 holds a stream until a signal holds.
 * Offsets are symmetric heap offsets (td_cuda_local_alloc). */

/** Copies `bytes` from rank `rank`'s local device memory `src` (any device
 * address) to pe's heap at `dest_off`, then, if sig_off != SIZE_MAX, sets
 * pe's signal at `sig_off` to `value` (release: the data is visible first).
 * Only TD_SIGNAL_SET exists on the copy engine: use epoch values.
 * Errors: TD_ERR_INVALID_ARG (rank/pe out of range, range outside the heap,
 * sig_off not 8-byte aligned), TD_ERR_UNSUPPORTED (op ADD), TD_ERR_CUDA. */
td_status td_cuda_ce_putmem_signal(td_cuda_local *cl, int rank, size_t dest_off, const void *src,
                                   size_t bytes, size_t sig_off, uint64_t value, td_sigop op,
                                   int pe, struct CUstream_st *stream);

/** Makes the stream wait until rank `rank`'s own signal at sig_off compares to
 * value: TD_CMP_EQ, or TD_CMP_GE (wrap-around compare, as the driver does).
 * Errors: TD_ERR_INVALID_ARG, TD_ERR_UNSUPPORTED (other comparisons),
 * TD_ERR_CUDA. The stream wait itself has no deadline; td_cuda_local_sync
 * bounds it. */
td_status td_cuda_ce_wait(td_cuda_local *cl, int rank, size_t sig_off, td_cmp cmp, uint64_t value,
                          struct CUstream_st *stream);

#ifdef __cplusplus
}
#endif
#endif
