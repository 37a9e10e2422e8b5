/* SPDX-License-Identifier: Apache-2.0
 * Kernels of the device-primitive GPU tests and their host launchers, which
 * return td_status (the cmocka tests in dev_gpu_test.c call them). Every
 * launcher creates nothing: it gets a td_cuda_local of N ranks sharing the
 * GPU, allocates on its symmetric heap, launches one kernel per rank (or one
 * kernel whose blocks play every rank, `fused`, for compute-sanitizer, which
 * serialises kernels), synchronises and reads back per-rank error counters.
 * Data patterns depend on round, rank and index, so a stale or misplaced
 * word is caught; kernels count wrong words instead of stopping. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>

/* core/error.h has no C++ linkage block of its own. */
extern "C" {
#include "core/error.h"
}
#include "gpu/dev_kernels.h"
#include "tdist/device.h"

/* ---- helpers ------------------------------------------------------------ */

__device__ __forceinline__ uint64_t gpat(uint64_t round, int rank, uint64_t k) {
  return round * 1000003ull + (uint64_t)rank * 7919ull + k * 31ull + 5ull;
}
/* This rank's copy of heap offset `off` (peer_base[rank] is always its own heap). */
__device__ __forceinline__ uint64_t *gat(const td_dev_ctx *c, size_t off) {
  return (uint64_t *)(c->peer_base[c->rank] + off);
}
/* errs: two words per rank (count of wrong words, 1 + first wrong index). */
__device__ void gbad(const td_dev_ctx *c, size_t errs_off, uint64_t where) {
  uint64_t *e = gat(c, errs_off);
  atomicAdd((unsigned long long *)&e[0], 1ull);
  atomicCAS((unsigned long long *)&e[1], 0ull, (unsigned long long)(where + 1));
}
__device__ __forceinline__ const td_dev_ctx *gctx(const td_dev_ctx *own, const td_dev_ctx *table) {
  return table ? &table[blockIdx.x] : own;
}

/* Reads every rank's error words; a nonzero count becomes TD_ERR_CHECK_FAILED. */
static td_status gcheck(td_cuda_local *cl, size_t errs_off, const char *what) {
  for (int r = 0; r < td_cuda_local_size(cl); r++) {
    uint64_t e[2];
    cudaError_t ce = cudaMemcpy(e, td_cuda_local_ptr(cl, r, errs_off), sizeof e, cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess)
      return td__error(TD_ERR_CUDA, "%s: reading errors: %s", what, cudaGetErrorString(ce));
    if (e[0] != 0)
      return td__error(TD_ERR_CHECK_FAILED, "%s: rank %d saw %llu wrong words (first at %llu)", what, r,
                       (unsigned long long)e[0], (unsigned long long)(e[1] - 1));
  }
  return TD_OK;
}

/* Launch on every rank with per-rank argument arrays built from `ctx` slot 0. */
#define GLAUNCH(cl, kernel, blocks, threads, ...)                                        \
  do {                                                                                   \
    int n_ = td_cuda_local_size(cl);                                                     \
    td_dev_ctx ctxs_[TD_DEV_MAX_PEERS];                                                  \
    const td_dev_ctx *nulltab_ = NULL;                                                   \
    void *argv_[TD_DEV_MAX_PEERS][16];                                                   \
    void **args_[TD_DEV_MAX_PEERS];                                                      \
    for (int r_ = 0; r_ < n_; r_++) {                                                    \
      TD_CHECK(td_cuda_local_ctx(cl, r_, &ctxs_[r_]));                                   \
      void *list_[] = {&ctxs_[r_], (void *)&nulltab_, __VA_ARGS__};                      \
      memcpy(argv_[r_], list_, sizeof list_);                                            \
      args_[r_] = argv_[r_];                                                             \
    }                                                                                    \
    TD_CHECK(td_cuda_local_launch(cl, (const void *)kernel, blocks, threads, 0, args_)); \
  } while (0)

/* ---- ring put in every form ------------------------------------------- */

__global__ void k_ring(td_dev_ctx own, const td_dev_ctx *table, int form, int rounds, size_t words,
                       size_t src_off, size_t buf_off, size_t sig_off, size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  const int n = c->n_pes, rank = c->rank, next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const int t = threadIdx.x, nt = blockDim.x;
  uint64_t *src = gat(c, src_off), *buf = gat(c, buf_off);
  uint64_t *sig = gat(c, sig_off) + 2 * form, *ack = sig + 1;
  const size_t bytes = words * 8;
  for (int i = 1; i <= rounds; i++) {
    /* next has consumed round i-1 (form 8: prev has read our src) */
    td_dev_signal_wait_until_block(c, ack, TD_CMP_GE, (uint64_t)(i - 1));
    for (size_t k = t; k < words; k += nt)
      src[k] = gpat(i, rank, k);
    __syncthreads();
    switch (form) {
    case 0: if (t == 0) td_dev_putmem_signal(c, buf, src, bytes, sig, i, TD_SIGNAL_SET, next); break;
    case 1: if (t < 32) td_dev_putmem_signal_warp(c, buf, src, bytes, sig, i, TD_SIGNAL_SET, next); break;
    case 2: td_dev_putmem_signal_block(c, buf, src, bytes, sig, i, TD_SIGNAL_SET, next); break;
    case 3: if (t < 32) td_dev_putmem_signal_nbi_warp(c, buf, src, bytes, sig, 1, TD_SIGNAL_ADD, next); break;
    case 4: td_dev_putmem_signal_nbi_block(c, buf, src, bytes, sig, 1, TD_SIGNAL_ADD, next); break;
    case 5:
      td_dev_putmem_block(c, buf, src, bytes, next);
      td_dev_notify_block(c, sig, i, TD_SIGNAL_SET, next);
      break;
    case 6:
      td_dev_putmem_nbi_block(c, buf, src, bytes, next);
      __syncthreads();
      if (t == 0) {
        td_dev_quiet(c);
        td_dev_signal_op(c, sig, i, TD_SIGNAL_SET, next);
      }
      break;
    case 7:
      if (t == 0) {
        td_dev_putmem_nbi(c, buf, src, bytes, next);
        td_dev_fence(c);
        td_dev_signal_op(c, sig, 1, TD_SIGNAL_ADD, next);
      }
      break;
    default: /* pull: tell next our src is ready; it gets it */
      td_dev_notify_block(c, sig, i, TD_SIGNAL_SET, next);
      break;
    }
    td_dev_signal_wait_until_block(c, sig, TD_CMP_EQ, (uint64_t)i);
    if (form == 8) {
      if (i % 2)
        td_dev_getmem_block(c, buf, src, bytes, prev);
      else if (t < 32)
        td_dev_getmem_warp(c, buf, src, bytes, prev);
      __syncthreads();
    }
    for (size_t k = t; k < words; k += nt)
      if (buf[k] != gpat(i, prev, k))
        gbad(c, errs_off, (uint64_t)i * words + k);
    __syncthreads();
    /* round i consumed: the sender of our data (prev) may go on */
    if (t == 0)
      td_dev_signal_op(c, ack, (uint64_t)i, TD_SIGNAL_SET, prev);
  }
}

td_status gdev_ring(td_cuda_local *cl, int fused, int rounds, size_t words) {
  size_t src, buf, sig, errs;
  TD_CHECK(td_cuda_local_alloc(cl, words * 8, 0, &src));
  TD_CHECK(td_cuda_local_alloc(cl, words * 8, 0, &buf));
  TD_CHECK(td_cuda_local_alloc(cl, 2 * GDEV_RING_FORMS * 8, 0, &sig));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &errs));
  for (int form = 0; form < GDEV_RING_FORMS; form++) {
    if (fused) {
      const int n = td_cuda_local_size(cl);
      td_dev_ctx c0;
      TD_CHECK(td_cuda_local_ctx(cl, 0, &c0));
      k_ring<<<n, 256, 0, td_cuda_local_stream(cl, 0)>>>(c0, td_cuda_local_ctx_table(cl), form, rounds, words, src,
                                                         buf, sig, errs);
      cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess)
        return td__error(TD_ERR_CUDA, "k_ring fused launch: %s", cudaGetErrorString(e));
    } else {
      GLAUNCH(cl, k_ring, 1, 256, &form, &rounds, &words, &src, &buf, &sig, &errs);
    }
    TD_CHECK(td_cuda_local_sync(cl));
    char what[64];
    snprintf(what, sizeof what, "ring form %d%s", form, fused ? " (fused)" : "");
    TD_CHECK(gcheck(cl, errs, what));
  }
  return TD_OK;
}

/* ---- ping-pong: pairs (2k, 2k+1) bounce a counter with putmem_signal ---- */

__global__ void k_pingpong(td_dev_ctx own, const td_dev_ctx *table, int iters, size_t data_off,
                           size_t sig_off, size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  if (threadIdx.x != 0)
    return;
  const int rank = c->rank, partner = rank ^ 1;
  if (partner >= c->n_pes)
    return;
  uint64_t *data = gat(c, data_off), *sig = gat(c, sig_off);
  for (int i = 1; i <= iters; i++) {
    const uint64_t v = gpat(i, rank, 0);
    if (rank % 2 == 0) {
      td_dev_putmem_signal(c, data, &v, 8, sig, i, TD_SIGNAL_SET, partner);
      td_dev_signal_wait_until(c, sig, TD_CMP_EQ, i);
    } else {
      td_dev_signal_wait_until(c, sig, TD_CMP_EQ, i);
    }
    if (*(volatile uint64_t *)data != gpat(i, partner, 0))
      gbad(c, errs_off, i);
    if (rank % 2 == 1)
      td_dev_putmem_signal(c, data, &v, 8, sig, i, TD_SIGNAL_SET, partner);
  }
  /* a last notify/wait pair without data */
  td_dev_notify(c, sig + 1, 1, TD_SIGNAL_ADD, partner);
  td_dev_signal_wait_until(c, sig + 1, TD_CMP_EQ, 1);
}

td_status gdev_pingpong(td_cuda_local *cl, int iters) {
  size_t data, sig, errs;
  TD_CHECK(td_cuda_local_alloc(cl, 8, 0, &data));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &sig));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &errs));
  GLAUNCH(cl, k_pingpong, 1, 32, &iters, &data, &sig, &errs);
  TD_CHECK(td_cuda_local_sync(cl));
  return gcheck(cl, errs, "ping-pong");
}

/* ---- all-to-all: warps share the peers; receivers wait on the group ---- */

__global__ void k_alltoall(td_dev_ctx own, const td_dev_ctx *table, int rounds, size_t words,
                           size_t src_off, size_t buf_off, size_t sigs_off, size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  const int n = c->n_pes, rank = c->rank, t = threadIdx.x, nt = blockDim.x;
  const int warp = t / 32, nwarps = nt / 32;
  uint64_t *src = gat(c, src_off), *buf = gat(c, buf_off), *sigs = gat(c, sigs_off);
  for (int i = 1; i <= rounds; i++) {
    for (size_t k = t; k < (size_t)n * words; k += nt)
      src[k] = gpat(i, rank, k);
    __syncthreads();
    for (int p = warp; p < n; p += nwarps)
      td_dev_putmem_signal_nbi_warp(c, buf + (size_t)rank * words, src + (size_t)p * words, words * 8,
                                    &sigs[rank], 1, TD_SIGNAL_ADD, p);
    td_dev_wait_until_all_block(c, sigs, n, TD_CMP_GE, (uint64_t)i, TD_SCOPE_SYS);
    for (size_t k = t; k < (size_t)n * words; k += nt) {
      const int s = (int)(k / words);
      if (buf[k] != gpat(i, s, (uint64_t)rank * words + k % words))
        gbad(c, errs_off, (uint64_t)i * n * words + k);
    }
    /* nobody overwrites buf before its owner checked it */
    td_dev_barrier_all_block(c);
  }
}

td_status gdev_alltoall(td_cuda_local *cl, int rounds, size_t words) {
  const int n = td_cuda_local_size(cl);
  size_t src, buf, sigs, errs;
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)n * words * 8, 0, &src));
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)n * words * 8, 0, &buf));
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)n * 8, 0, &sigs));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &errs));
  GLAUNCH(cl, k_alltoall, 1, 256, &rounds, &words, &src, &buf, &sigs, &errs);
  TD_CHECK(td_cuda_local_sync(cl));
  return gcheck(cl, errs, "all-to-all");
}

/* ---- block barrier: counts published before a barrier are seen after it ---- */

__global__ void k_barrier(td_dev_ctx own, const td_dev_ctx *table, int rounds, size_t count_off,
                          size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  uint64_t *count = gat(c, count_off);
  for (int i = 1; i <= rounds; i++) {
    if (threadIdx.x == 0)
      td_dev_st_release(count, (uint64_t)i, TD_SCOPE_SYS);
    td_dev_barrier_all_block(c);
    for (int p = threadIdx.x; p < c->n_pes; p += blockDim.x)
      if (td_dev_ld_acquire((const uint64_t *)td_dev_symm_at(c, count, p), TD_SCOPE_SYS) < (uint64_t)i)
        gbad(c, errs_off, (uint64_t)i * 64 + p);
    td_dev_barrier_all_block(c);
  }
}

td_status gdev_barrier(td_cuda_local *cl, int rounds) {
  size_t count, errs;
  TD_CHECK(td_cuda_local_alloc(cl, 8, 0, &count));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &errs));
  GLAUNCH(cl, k_barrier, 1, 64, &rounds, &count, &errs);
  TD_CHECK(td_cuda_local_sync(cl));
  return gcheck(cl, errs, "barrier");
}

/* ---- 1,000 launches on the same signals, never reset ------------------- */

__global__ void k_epoch(td_dev_ctx own, const td_dev_ctx *table, uint64_t e, size_t data_off,
                        size_t sig_off, size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  if (threadIdx.x != 0)
    return;
  const int n = c->n_pes, rank = c->rank;
  uint64_t *data = gat(c, data_off), *sig = gat(c, sig_off), *done = sig + 1;
  const uint64_t v = e * 1000ull + (uint64_t)rank;
  for (int p = 0; p < n; p++)
    td_dev_putmem_signal(c, &data[rank], &v, 8, sig, 1, TD_SIGNAL_ADD, p);
  td_dev_signal_wait_until(c, sig, TD_CMP_GE, e * (uint64_t)n);
  for (int s = 0; s < n; s++)
    if (((volatile uint64_t *)data)[s] != e * 1000ull + (uint64_t)s)
      gbad(c, errs_off, e * 64 + s);
  for (int p = 0; p < n; p++)
    td_dev_signal_op(c, done, 1, TD_SIGNAL_ADD, p);
  td_dev_signal_wait_until(c, done, TD_CMP_GE, e * (uint64_t)n);
}

td_status gdev_epochs(td_cuda_local *cl, int calls) {
  size_t data, sig, errs;
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)td_cuda_local_size(cl) * 8, 0, &data));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &sig));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &errs));
  for (uint64_t e = 1; e <= (uint64_t)calls; e++)
    GLAUNCH(cl, k_epoch, 1, 32, &e, &data, &sig, &errs);
  TD_CHECK(td_cuda_local_sync(cl));
  TD_CHECK(gcheck(cl, errs, "epochs"));
  /* the signal words hold exactly calls * n: no call lost or doubled */
  for (int r = 0; r < td_cuda_local_size(cl); r++) {
    uint64_t w[2];
    cudaMemcpy(w, td_cuda_local_ptr(cl, r, sig), sizeof w, cudaMemcpyDeviceToHost);
    const uint64_t want = (uint64_t)calls * (uint64_t)td_cuda_local_size(cl);
    if (w[0] != want || w[1] != want)
      return td__error(TD_ERR_CHECK_FAILED, "epochs: rank %d's signals are %llu and %llu, expected %llu", r,
                       (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)want);
  }
  return TD_OK;
}

/* ---- copy engine: DMA put + stream-ordered signal ---------------------- */

__global__ void k_fill(td_dev_ctx own, const td_dev_ctx *table, int rounds, size_t words, size_t src_off) {
  const td_dev_ctx *c = gctx(&own, table);
  uint64_t *src = gat(c, src_off);
  for (size_t k = threadIdx.x + (size_t)blockIdx.x * blockDim.x; k < (size_t)rounds * words;
       k += (size_t)blockDim.x * gridDim.x)
    src[k] = gpat(k / words + 1, c->rank, k % words);
}

/* Waits on the copy engine's signal from the kernel side, round by round. */
__global__ void k_ce_recv(td_dev_ctx own, const td_dev_ctx *table, int rounds, size_t words,
                          size_t buf_off, size_t sig_off, size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  const int prev = (c->rank + c->n_pes - 1) % c->n_pes;
  uint64_t *buf = gat(c, buf_off), *sig = gat(c, sig_off);
  for (int i = 1; i <= rounds; i++) {
    td_dev_signal_wait_until_block(c, sig, TD_CMP_GE, (uint64_t)i);
    const uint64_t *slot = buf + (size_t)(i - 1) * words;
    for (size_t k = threadIdx.x; k < words; k += blockDim.x)
      if (slot[k] != gpat(i, prev, k))
        gbad(c, errs_off, (uint64_t)i * words + k);
  }
}

/* Checks one round's slot after a stream-ordered wait (no device wait). */
__global__ void k_ce_check(td_dev_ctx own, const td_dev_ctx *table, int round, size_t words,
                           size_t buf_off, size_t errs_off) {
  const td_dev_ctx *c = gctx(&own, table);
  const int prev = (c->rank + c->n_pes - 1) % c->n_pes;
  const uint64_t *slot = gat(c, buf_off) + (size_t)(round - 1) * words;
  for (size_t k = threadIdx.x; k < words; k += blockDim.x)
    if (slot[k] != gpat(round, prev, k))
      gbad(c, errs_off, (uint64_t)round * words + k);
}

td_status gdev_copy_engine(td_cuda_local *cl, int rounds, size_t words) {
  const int n = td_cuda_local_size(cl);
  size_t src, buf, buf2, sig, errs;
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)rounds * words * 8, 0, &src));
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)rounds * words * 8, 0, &buf));
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)rounds * words * 8, 0, &buf2));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &sig));
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &errs));
  GLAUNCH(cl, k_fill, 8, 256, &rounds, &words, &src);
  TD_CHECK(td_cuda_local_sync(cl));
  /* (a) kernels wait on signals written by the copy engine, concurrently */
  GLAUNCH(cl, k_ce_recv, 1, 256, &rounds, &words, &buf, &sig, &errs);
  for (int i = 1; i <= rounds; i++)
    for (int r = 0; r < n; r++) {
      const void *s = (const char *)td_cuda_local_ptr(cl, r, src) + (size_t)(i - 1) * words * 8;
      TD_CHECK(td_cuda_ce_putmem_signal(cl, r, buf + (size_t)(i - 1) * words * 8, s, words * 8, sig, (uint64_t)i,
                                        TD_SIGNAL_SET, (r + 1) % n, NULL));
    }
  TD_CHECK(td_cuda_local_sync(cl));
  TD_CHECK(gcheck(cl, errs, "copy engine, kernel waits"));
  /* (b) stream-ordered waits: the compute stream waits, then a plain kernel checks */
  for (int i = 1; i <= rounds; i++) {
    for (int r = 0; r < n; r++) {
      const void *s = (const char *)td_cuda_local_ptr(cl, r, src) + (size_t)(i - 1) * words * 8;
      TD_CHECK(td_cuda_ce_putmem_signal(cl, r, buf2 + (size_t)(i - 1) * words * 8, s, words * 8, sig + 8,
                                        (uint64_t)i, TD_SIGNAL_SET, (r + 1) % n, NULL));
    }
    for (int r = 0; r < n; r++)
      TD_CHECK(td_cuda_ce_wait(cl, r, sig + 8, TD_CMP_GE, (uint64_t)i, td_cuda_local_stream(cl, r)));
    GLAUNCH(cl, k_ce_check, 1, 256, &i, &words, &buf2, &errs);
  }
  TD_CHECK(td_cuda_local_sync(cl));
  return gcheck(cl, errs, "copy engine, stream waits");
}

/* ---- deadlines ----------------------------------------------------------- */

/* Rank 0's block 1 waits for a value nobody writes; every other block of
 * every rank waits on a second word nobody writes either, with a longer
 * deadline. status[b] gets each block's result (return-on-timeout contexts). */
__global__ void k_stuck(td_dev_ctx own, const td_dev_ctx *table, size_t sig_off, size_t status_off) {
  const td_dev_ctx *c = gctx(&own, table);
  uint64_t *sig = gat(c, sig_off);
  td_status st;
  if (c->rank == 0 && blockIdx.x == 1) {
    st = td_dev_signal_wait_until_block(c, sig, TD_CMP_GE, 7);
  } else {
    /* A longer deadline, so the record is rank 0 block 1's; these leave when
     * they see it (return mode) or die with the trap. */
    td_dev_ctx patient = *c;
    patient.timeout_ns *= 20;
    st = td_dev_signal_wait_until_block(&patient, sig + 1, TD_CMP_EQ, 1);
  }
  if (threadIdx.x == 0)
    gat(c, status_off)[blockIdx.x] = (uint64_t)st;
}

td_status gdev_stuck(td_cuda_local *cl, int blocks, uint64_t *status_out) {
  size_t sig, status;
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &sig));
  TD_CHECK(td_cuda_local_alloc(cl, (size_t)blocks * 8, 0, &status));
  /* rank 0's word holds 3: "observed" must say so */
  const uint64_t three = 3;
  cudaMemcpy(td_cuda_local_ptr(cl, 0, sig), &three, 8, cudaMemcpyHostToDevice);
  GLAUNCH(cl, k_stuck, (unsigned)blocks, 64, &sig, &status);
  td_status st = td_cuda_local_sync(cl);
  if (status_out != NULL && st != TD_ERR_CUDA) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    for (int r = 0; r < td_cuda_local_size(cl); r++)
      cudaMemcpy(status_out + (size_t)r * blocks, td_cuda_local_ptr(cl, r, status), (size_t)blocks * 8,
                 cudaMemcpyDeviceToHost);
    td__error(st, "%s", msg);
  }
  return st;
}

td_status gdev_launch_kernel_for_check(td_cuda_local *cl, unsigned blocks, unsigned threads) {
  size_t sig, status;
  TD_CHECK(td_cuda_local_alloc(cl, 16, 0, &sig));
  TD_CHECK(td_cuda_local_alloc(cl, 8, 0, &status));
  GLAUNCH(cl, k_stuck, blocks, threads, &sig, &status);
  return TD_OK;
}

const void *gdev_stuck_kernel(void) { return (const void *)k_stuck; }

/* ---- one context, no td_cuda_local (the nccl transport) ----------------- */

/* Waits for `stream` at most the context's deadline + 1 s; a recorded
 * diagnostic wins over the CUDA error of a trap. */
static td_status gsync_ctx(const td_dev_ctx *ctx, cudaStream_t stream, const td_dev_diagnostic *diag) {
  for (long us = 0;; us += 50) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return td_dev_diagnostic_status(diag);
    if (e != cudaErrorNotReady || us > (long)(ctx->timeout_ns / 1000) + 1000000) {
      if (td_dev_diagnostic_status(diag) == TD_ERR_TIMEOUT)
        return TD_ERR_TIMEOUT;
      return td__error(e == cudaErrorNotReady ? TD_ERR_TIMEOUT : TD_ERR_CUDA, "rank %d's stream: %s", ctx->rank,
                       e == cudaErrorNotReady ? "did not finish within the deadline" : cudaGetErrorString(e));
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
}

static td_status gcheck_ctx(const td_dev_ctx *ctx, size_t errs_off, const char *what) {
  uint64_t e[2];
  cudaError_t ce = cudaMemcpy(e, (const void *)(ctx->peer_base[ctx->rank] + errs_off), sizeof e, cudaMemcpyDeviceToHost);
  if (ce != cudaSuccess)
    return td__error(TD_ERR_CUDA, "%s: reading errors: %s", what, cudaGetErrorString(ce));
  if (e[0] != 0)
    return td__error(TD_ERR_CHECK_FAILED, "%s: rank %d saw %llu wrong words (first at %llu)", what, ctx->rank,
                     (unsigned long long)e[0], (unsigned long long)(e[1] - 1));
  return TD_OK;
}

td_status gdev_ctx_ring_and_barrier(const td_dev_ctx *ctx, const td_dev_diagnostic *diag, const size_t off[6],
                                    int rounds, size_t words, int barriers) {
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return td__error(TD_ERR_CUDA, "cudaStreamCreateWithFlags failed");
  td_status st = TD_OK;
  for (int form = 0; form < GDEV_RING_FORMS && st == TD_OK; form++) {
    k_ring<<<1, 256, 0, s>>>(*ctx, NULL, form, rounds, words, off[0], off[1], off[2], off[3]);
    st = gsync_ctx(ctx, s, diag);
    if (st == TD_OK) {
      char what[64];
      snprintf(what, sizeof what, "ring form %d", form);
      st = gcheck_ctx(ctx, off[3], what);
    }
  }
  if (st == TD_OK) {
    k_barrier<<<1, 64, 0, s>>>(*ctx, NULL, barriers, off[4], off[5]);
    st = gsync_ctx(ctx, s, diag);
    if (st == TD_OK)
      st = gcheck_ctx(ctx, off[5], "barrier");
  }
  cudaStreamDestroy(s);
  return st;
}
