/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, the fused cuda variant (TD_TP_FUSED) of ag_gemm, gemm_rs
 * and gemm_ar, in the manner of Triton-distributed: the Hopper GEMM of
 * src/tile/cuda (td__gemm_cuda_run, plain: no hooks) runs on the compute
 * stream, data moves with cudaMemcpyAsync on a second stream, and ordering
 * between ranks is by CUDA events behind host barriers. Ranks are threads of one process sharing one GPU, so the
 * symmetric buffers are plain cudaMalloc memory whose addresses the ranks
 * swap with td_all_gather at creation.
 *
 *  ag_gemm  rank r puts its A rows into every peer's gather buffer (at their
 *           global rows; r-1 first, then r-2, ...) with cudaMemcpyAsync on a
 *           high-priority stream, recording an event after each put. After a
 *           host barrier, rank p runs one plain GEMM per source rank's row
 *           block straight into C: its own rows (from A) at once, then
 *           p+1, p+2, ... each behind cudaStreamWaitEvent on that put.
 *  gemm_rs  every rank computes its full partial A_r * B_r into its own
 *           symmetric buffer and records "gemm done"; after a host barrier it
 *           waits (stream waits on the peers' events) for every rank's, then
 *           reduces its rows of all partials (16-byte vectors, f32 sums in
 *           rank order) into C.
 *  gemm_ar  the same, then either every rank reduces all rows (one-shot, for
 *           outputs up to 1 MiB) or each reduces its rows into a symmetric
 *           buffer and every rank copies all of them into C (RS + AG), again
 *           behind a host barrier and event waits.
 * Every call starts with a host barrier (each rank's previous call ended with
 * a host wait on its streams, so no buffer is overwritten while a peer still
 * reads it) and ends with a host wait under the operator's deadline. The
 * 64-bit progress words (cuStreamWriteValue64 of the epoch, never reset) are
 * only written now, for diagnostics and poisoning; nothing waits on them.
 *
 * Deadlock freedom (ranks sharing a GPU; see docs/architecture.md "fused"):
 * the first version waited in-kernel (GEMM tiles spinning on signals while
 * their persistent grid held every SM) and with cuStreamWaitValue64 on words
 * that peers wrote from work they had possibly not enqueued yet; CUDA sees
 * neither dependency, streams share a few hardware queues, and it hung on the
 * H200. Now every cross-rank dependency is a CUDA event recorded before a
 * host barrier and waited for after it: each operation waits only on work
 * enqueued before it, and no kernel waits for anything once running, so no
 * cycle can form whatever the queue mapping, copy implementation or
 * residency of the grids. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "ops/ops_internal.h"
#include "tdist/coll.h"
#include "tdist/config.h"
#include "tdist/rma.h"
#include "tile/cuda/gemm.h"

/* The GEMM library (tdist_gemm_cuda) links tdist, not the other way round:
 * programs that link it (the tdist CLI, the GPU tests) bind this reference;
 * elsewhere it stays NULL and the fused variant says so. */
#pragma weak td__gemm_cuda_run

int td__fused_reduce(void *dst, const void *const *src, int nsrc, long long elems, int bf16, int sms,
                     void *stream);

enum { TD__CTL_FIN = 0, TD__CTL_GDONE = 1, TD__CTL_RDONE = 2, TD__CTL_WORDS = 8, TD__MAXR = 8 };
enum { TD__REC_STATUS, TD__REC_PID, TD__REC_DEV, TD__REC_BUF, TD__REC_RED, TD__REC_SIG, TD__REC_CTL, TD__REC_SELF,
       TD__REC_N };

typedef struct td__tp_fused td__tp_fused;
struct td__tp_fused {
  int dev, n, r, sms, timeout_ms, one_shot;
  int poisoned;   /* set (atomically) by a rank whose call failed: later results are void */
  td__tp_fused *peer[8]; /* every rank's state (one process), to tell them of a failure */
  size_t esz;
  cudaStream_t s, ce;
  cudaEvent_t ce_done;
  cudaEvent_t ev_put[TD__MAXR]; /* ag: recorded on ce after this rank's rows reached rank p */
  cudaEvent_t ev_gdone, ev_rdone; /* rs/ar: after the partial GEMM; after the reduction */
  void *buf;      /* ag: rotated gather buffer [M,K]; rs/ar: partial [M,N] */
  void *red;      /* ar two-shot: reduced rows [M,N] */
  void *scratch;  /* ag on ranks with row0 > 0: rotated C [M,nb] */
  uint64_t *sig;  /* ag: nsig wait signals */
  uint64_t *ctl;  /* TD__CTL_WORDS progress words (fin, gemm done, reduce done) */
  uint64_t *sink; /* ag: the RAISE hook's target, read by nobody */
  uint64_t *diag_h, *diag_d; /* the GEMM's wait diagnostic: pinned, mapped */
  void *pbuf[TD__MAXR], *pred[TD__MAXR];
  uint64_t *psig[TD__MAXR], *pctl[TD__MAXR];
  int64_t row0[TD__MAXR], rows[TD__MAXR];
  int64_t gs, nsig, nb;
  uint64_t epoch;
};

static PFN_cuStreamWriteValue64_v11070 td__fw64;
static PFN_cuStreamWaitValue64_v11070 td__fwait64;
static pthread_once_t td__f_once = PTHREAD_ONCE_INIT;

static void td__f_resolve(void) {
  enum cudaDriverEntryPointQueryResult q;
  void *p = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__fw64 = (PFN_cuStreamWriteValue64_v11070)p;
  p = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__fwait64 = (PFN_cuStreamWaitValue64_v11070)p;
}

int td__tp_fused_linked(void) { return td__gemm_cuda_run != NULL; }

static td_status td__cu(cudaError_t e, const char *what) {
  return e == cudaSuccess ? TD_OK
                          : td__error(TD_ERR_CUDA, "fused: %s failed: %s (%s)", what, cudaGetErrorString(e),
                                      cudaGetErrorName(e));
}

/* Stream-ordered signal write (default flags: a memory barrier first, so a
 * reader of the value sees what the stream wrote before). */
static td_status td__setv(cudaStream_t s, uint64_t *addr, uint64_t v) {
  CUresult r = td__fw64((CUstream)s, (CUdeviceptr)(uintptr_t)addr, v, CU_STREAM_WRITE_VALUE_DEFAULT);
  return r == CUDA_SUCCESS ? TD_OK : td__error(TD_ERR_CUDA, "fused: cuStreamWriteValue64 failed (CUresult %d)", (int)r);
}

static int64_t td__gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

static void td__f_free(td__tp_fused *f) {
  if (!f)
    return;
  { /* a failed call poisoned the signals (td__f_poison), so cudaFree's device wait ends */
    cudaSetDevice(f->dev);
    cudaFree(f->buf), cudaFree(f->red), cudaFree(f->scratch), cudaFree(f->sig), cudaFree(f->ctl);
    cudaFree(f->sink), cudaFreeHost(f->diag_h);
    if (f->ce_done)
      cudaEventDestroy(f->ce_done);
    for (int p = 0; p < TD__MAXR; p++)
      if (f->ev_put[p])
        cudaEventDestroy(f->ev_put[p]);
    if (f->ev_gdone)
      cudaEventDestroy(f->ev_gdone);
    if (f->ev_rdone)
      cudaEventDestroy(f->ev_rdone);
    if (f->s)
      cudaStreamDestroy(f->s);
    if (f->ce)
      cudaStreamDestroy(f->ce);
  }
  free(f);
}

/* This rank's allocations (before the exchange). */
static td_status td__f_alloc(td_tp_op *op, td__tp_fused *f) {
  const td__tp_desc *d = &op->d;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return td__error(TD_ERR_UNSUPPORTED, "fused: rank %d: no usable CUDA device; use the cpu backend", op->rank);
  int64_t dev = -1;
  const char *env = getenv("TD_CUDA_DEVICE");
  if (env && *env)
    TD_CHECK(td_config_int("TD_CUDA_DEVICE", &dev));
  else
    dev = td_world_local_rank(td_team_world(op->team)) % count;
  if (dev < 0 || dev >= count)
    return td__error(TD_ERR_INVALID_ARG, "fused: rank %d: TD_CUDA_DEVICE=%" PRId64 " but %d devices", op->rank, dev,
                     count);
  f->dev = (int)dev;
  TD_CHECK(td__cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  int major = 0;
  TD_CHECK(td__cu(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, f->dev), "cudaDeviceGetAttribute"));
  if (major != 9)
    return td__error(TD_ERR_UNSUPPORTED, "fused: rank %d: the Hopper GEMM needs compute capability 9.x; device %d "
                     "is %d.x", op->rank, f->dev, major);
  TD_CHECK(td__cu(cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, f->dev), "cudaDeviceGetAttribute"));
  int lo = 0, hi = 0;
  TD_CHECK(td__cu(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange"));
  TD_CHECK(td__cu(cudaStreamCreateWithPriority(&f->s, cudaStreamNonBlocking, lo), "cudaStreamCreateWithPriority"));
  TD_CHECK(td__cu(cudaStreamCreateWithPriority(&f->ce, cudaStreamNonBlocking, hi), "cudaStreamCreateWithPriority"));
  TD_CHECK(td__cu(cudaEventCreateWithFlags(&f->ce_done, cudaEventDisableTiming), "cudaEventCreate"));
  for (int p = 0; p < f->n; p++)
    TD_CHECK(td__cu(cudaEventCreateWithFlags(&f->ev_put[p], cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__cu(cudaEventCreateWithFlags(&f->ev_gdone, cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__cu(cudaEventCreateWithFlags(&f->ev_rdone, cudaEventDisableTiming), "cudaEventCreate"));
  const size_t m = (size_t)d->m;
  if (d->kind == TD_TP_AG_GEMM) {
    /* the gather buffer in global row order; this rank's own rows stay in A */
    TD_CHECK(td__cu(cudaMalloc(&f->buf, m * (size_t)d->k * f->esz), "cudaMalloc (gather buffer)"));
  } else {
    TD_CHECK(td__cu(cudaMalloc(&f->buf, m * (size_t)d->n * f->esz), "cudaMalloc (partial)"));
    if (d->kind == TD_TP_GEMM_AR && !f->one_shot)
      TD_CHECK(td__cu(cudaMalloc(&f->red, m * (size_t)d->n * f->esz), "cudaMalloc (reduced rows)"));
  }
  TD_CHECK(td__cu(cudaMalloc((void **)&f->ctl, TD__CTL_WORDS * 8), "cudaMalloc (progress words)"));
  TD_CHECK(td__cu(cudaMemsetAsync(f->ctl, 0, TD__CTL_WORDS * 8, f->s), "cudaMemsetAsync"));
  return td__cu(cudaStreamSynchronize(f->s), "cudaStreamSynchronize");
}

td_status td__tp_fused_create(td_tp_op *op) {
  const td__tp_desc *d = &op->d;
  if (!td__tp_fused_linked())
    return td__error(TD_ERR_UNSUPPORTED, "the fused variant needs the Hopper GEMM library: link tdist_gemm_cuda "
                     "into the program (the tdist CLI does)");
  pthread_once(&td__f_once, td__f_resolve);
  if (!td__fw64)
    return td__error(TD_ERR_UNSUPPORTED, "fused: the CUDA driver lacks cuStreamWriteValue64");
  td__tp_fused *f = calloc(1, sizeof *f);
  if (!f)
    return td__error(TD_ERR_NO_MEMORY, "fused: out of memory");
  f->n = op->nranks, f->r = op->rank, f->esz = td_dtype_size(d->dtype);
  f->timeout_ms = op->opts.timeout_ms ? op->opts.timeout_ms : td_world_timeout_ms(td_team_world(op->team));
  f->one_shot = (size_t)d->m * (size_t)d->n * f->esz <= ((size_t)1 << 20);
  /* Row split of M (td_chunk_range, as the operands). The signal granule is
   * the gcd of every boundary, so each signal's rows come from one rank. */
  int64_t g = d->m;
  for (int p = 0; p < f->n; p++) {
    size_t off, len;
    td_chunk_range((size_t)d->m, f->n, p, &off, &len);
    f->row0[p] = (int64_t)off, f->rows[p] = (int64_t)len;
    g = td__gcd(g, (int64_t)off);
  }
  f->gs = g, f->nsig = d->m / g;
  size_t off, len;
  td_chunk_range((size_t)d->n, f->n, 0, &off, &len); /* part 0 is the widest */
  f->nb = (int64_t)len;
  td_status mine = td__f_alloc(op, f);
  char msg[256] = "";
  if (mine != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  int64_t rec[TD__REC_N] = {mine, (int64_t)getpid(), f->dev, (int64_t)(uintptr_t)f->buf,
                            (int64_t)(uintptr_t)f->red, (int64_t)(uintptr_t)f->sig, (int64_t)(uintptr_t)f->ctl,
                            (int64_t)(uintptr_t)f};
  int64_t all[TD__MAXR * TD__REC_N];
  td_status st = td_all_gather(op->team, all, rec, TD__REC_N, TD_I64);
  for (int p = 0; st == TD_OK && p < f->n; p++) {
    const int64_t *q = all + p * TD__REC_N;
    if (q[TD__REC_STATUS] != TD_OK)
      st = p == f->r ? td__error(mine, "%s", msg)
                     : td__error((td_status)q[TD__REC_STATUS], "fused: rank %d could not set up (see its error)", p);
    else if (q[TD__REC_PID] != all[TD__REC_PID])
      st = td__error(TD_ERR_UNSUPPORTED, "fused: ranks 0 and %d are different processes; the fused variant needs "
                     "the ranks of one process (a local world)", p);
    else if (q[TD__REC_DEV] != all[TD__REC_DEV])
      st = td__error(TD_ERR_UNSUPPORTED, "fused: rank 0 uses GPU %d and rank %d GPU %d; the fused variant needs "
                     "ranks sharing one GPU", (int)all[TD__REC_DEV], p, (int)q[TD__REC_DEV]);
    else {
      f->pbuf[p] = (void *)(uintptr_t)q[TD__REC_BUF];
      f->pred[p] = (void *)(uintptr_t)q[TD__REC_RED];
      f->psig[p] = (uint64_t *)(uintptr_t)q[TD__REC_SIG];
      f->pctl[p] = (uint64_t *)(uintptr_t)q[TD__REC_CTL];
      f->peer[p] = (td__tp_fused *)(uintptr_t)q[TD__REC_SELF];
    }
  }
  if (st != TD_OK) {
    td__f_free(f);
    return st;
  }
  op->fused = f;
  op->compute_workers = f->sms, op->comm_workers = 0, op->chunks = 1;
  return TD_OK;
}

/* After a failed call: sets every rank's progress words and this rank's
 * signals to a value no epoch reaches, so no stream stays blocked on a
 * stream wait (cudaFree, which waits for the whole device, would hang on
 * it) and waiting tiles end. Peers still in that call may then finish it on
 * incomplete data, so every rank is also told on the host: its next call
 * check answers TD_ERR_PEER_FAILED instead of a result. */
static void td__f_poison(td__tp_fused *f) {
  for (int p = 0; p < f->n; p++)
    __atomic_store_n(&f->peer[p]->poisoned, 1, __ATOMIC_SEQ_CST);
  uint64_t big[TD__CTL_WORDS];
  for (int i = 0; i < TD__CTL_WORDS; i++)
    big[i] = (uint64_t)1 << 62;
  for (int p = 0; p < f->n; p++)
    cudaMemcpy(f->pctl[p], big, sizeof big, cudaMemcpyHostToDevice);
  for (int64_t i = 0; f->sig && i < f->nsig; i += TD__CTL_WORDS)
    cudaMemcpy(f->sig + i, big, (size_t)(f->nsig - i < TD__CTL_WORDS ? f->nsig - i : TD__CTL_WORDS) * 8,
               cudaMemcpyHostToDevice);
}

/* Waits for the compute stream (which joined the copy-engine stream) under
 * the deadline; past it, or after a tile's wait timed out, poisons. */
static td_status td__f_finish(td_tp_op *op, td__tp_fused *f) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    cudaError_t q = cudaStreamQuery(f->s);
    if (q == cudaSuccess)
      break;
    if (q != cudaErrorNotReady)
      return td__cu(q, "the call's GPU work");
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t0.tv_nsec) * 1e-6;
    if (ms > f->timeout_ms) {
      td__f_poison(f);
      return td__error(TD_ERR_TIMEOUT, "fused: rank %d: call %" PRIu64 " did not finish within %d ms (a peer "
                       "never made this call, or its GPU work failed)", op->rank, f->epoch, f->timeout_ms);
    }
    sched_yield();
  }
  if (f->diag_h && f->diag_h[TD_GEMM_DIAG_FLAG]) {
    volatile uint64_t *dg = f->diag_h;
    td__f_poison(f);
    return td__error(TD_ERR_TIMEOUT, "fused: rank %d: a GEMM tile waited past %d ms on gather signal %" PRIu64
                     " (rows from %" PRIu64 "): expected >= %" PRIu64 ", observed %" PRIu64, op->rank,
                     f->timeout_ms, dg[TD_GEMM_DIAG_SIGNAL], dg[TD_GEMM_DIAG_ROW], dg[TD_GEMM_DIAG_EXPECTED],
                     dg[TD_GEMM_DIAG_OBSERVED]);
  }
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's call %" PRIu64 " or earlier failed (timeout); "
                     "this call's result is void", op->rank, f->epoch);
  return TD_OK;
}

/* Keeps the first failure of a call: the call goes on to its barriers even
 * after one (a rank leaving early would leave its peers at a barrier until
 * the deadline), and reports the first failure at the end. */
static void td__keep(td_status *first, td_status st) {
  if (*first == TD_OK && st != TD_OK)
    *first = st;
}

/* Host barrier between the ranks' enqueues. Every cross-rank dependency of a
 * call is an event recorded by a rank before this barrier and waited for
 * (cudaStreamWaitEvent) by a peer after it: CUDA sees every dependency, and
 * each waits only on work enqueued earlier, so no ordering of the hardware
 * queues (streams share them) and no set of resident kernels can close a
 * cycle. A failed barrier (deadline) poisons the operator. */
static td_status td__f_sync(td_tp_op *op, td__tp_fused *f) {
  if (f->n < 2)
    return TD_OK;
  td_status st = td_team_sync(op->team);
  if (st != TD_OK)
    td__f_poison(f);
  return st;
}

static td_status td__f_ag(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  const int64_t K = op->d.k, r = f->r;
  const size_t row_bytes = (size_t)K * f->esz, crow = (size_t)f->nb * f->esz;
  td_status st = TD_OK;
  /* 1. every rank finished call e-1 (calls end with a host wait on both
   * streams), so every gather buffer is free */
  TD_CHECK(td__f_sync(op, f));
  /* 2. producer: the copy engine puts this rank's A rows into every peer's
   * gather buffer (at their global rows), r-1 first, then r-2, ..., each put
   * followed by its event; the stream-ordered FIN word stays for diagnostics. */
  for (int j = 1; j < f->n; j++) {
    int p = (int)((r - j + f->n) % f->n);
    if (f->rows[r] > 0)
      td__keep(&st, td__cu(cudaMemcpyAsync((char *)f->pbuf[p] + (size_t)f->row0[r] * row_bytes, a,
                                           (size_t)f->rows[r] * row_bytes, cudaMemcpyDeviceToDevice, f->ce),
                           "cudaMemcpyAsync (A rows to a peer)"));
    td__keep(&st, td__cu(cudaEventRecord(f->ev_put[p], f->ce), "cudaEventRecord"));
  }
  td__keep(&st, td__cu(cudaEventRecord(f->ce_done, f->ce), "cudaEventRecord"));
  /* 3. every put of call e is enqueued (and its event recorded) everywhere */
  TD_CHECK(td__f_sync(op, f));
  /* 4. consumer: one plain GEMM per source rank's row block, own rows (from A)
   * first, then r+1, r+2, ... in the order their puts were issued; each block
   * starts once its put's event completed, so the GEMM overlaps the later puts
   * and no kernel ever waits on a signal while holding its SMs. */
  td_gemm_config cfg = {TD_GEMM_SM90, 128, 128, 64, 6, 1, 8, 1};
  td_status gst = TD_OK;
  for (int j = 0; j < f->n; j++) {
    int q = (int)((r + j) % f->n);
    if (j > 0)
      td__keep(&st, td__cu(cudaStreamWaitEvent(f->s, f->peer[q]->ev_put[r], 0), "cudaStreamWaitEvent"));
    if (f->rows[q] == 0 || gst != TD_OK)
      continue;
    const void *src = j == 0 ? a : (const char *)f->buf + (size_t)f->row0[q] * row_bytes;
    td_gemm_problem pr = {(int)f->rows[q], (int)f->nb, (int)K, op->d.dtype, TD_GEMM_B_KN, src, b,
                          (char *)c + (size_t)f->row0[q] * crow, NULL};
    gst = td__gemm_cuda_run(&pr, &cfg, 0, NULL, f->s);
  }
  /* finish the call even when a launch failed, so the peers are not left waiting */
  td__keep(&st, td__cu(cudaStreamWaitEvent(f->s, f->ce_done, 0), "cudaStreamWaitEvent"));
  td__keep(&st, td__setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  return gst != TD_OK ? gst : st != TD_OK ? st : fin;
}

static td_status td__f_rs_ar(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  const int64_t M = op->d.m, N = op->d.n, r = f->r;
  const size_t crow = (size_t)N * f->esz;
  const int bf16 = op->d.dtype == TD_BF16;
  td_status st = TD_OK;
  /* every rank finished call e-1, so no peer still reads this rank's partial */
  TD_CHECK(td__f_sync(op, f));
  td_gemm_config cfg = bf16 ? (td_gemm_config){TD_GEMM_SM90, 128, 256, 64, 4, 1, 8, 1}
                            : (td_gemm_config){TD_GEMM_SM90, 128, 128, 64, 6, 1, 8, 1};
  td_gemm_problem pr = {(int)M, (int)N, (int)(op->d.k / f->n), op->d.dtype, TD_GEMM_B_KN, a, b, f->buf, NULL};
  td_status gst = td__gemm_cuda_run(&pr, &cfg, 0, NULL, f->s);
  td__keep(&st, td__setv(f->s, f->ctl + TD__CTL_GDONE, e));
  td__keep(&st, td__cu(cudaEventRecord(f->ev_gdone, f->s), "cudaEventRecord"));
  TD_CHECK(td__f_sync(op, f)); /* every partial GEMM of call e is enqueued */
  for (int p = 0; p < f->n; p++)
    if (p != r)
      td__keep(&st, td__cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_gdone, 0), "cudaStreamWaitEvent"));
  const void *src[TD__MAXR];
  int le = 0;
  if (op->d.kind == TD_TP_GEMM_RS || !f->one_shot) {
    for (int p = 0; p < f->n; p++)
      src[p] = (const char *)f->pbuf[p] + (size_t)f->row0[r] * crow;
    void *dst = op->d.kind == TD_TP_GEMM_RS ? c : (char *)f->red + (size_t)f->row0[r] * crow;
    le = td__fused_reduce(dst, src, f->n, (long long)(f->rows[r] * N), bf16, f->sms, f->s);
  } else { /* one-shot all-reduce: every rank sums every row */
    for (int p = 0; p < f->n; p++)
      src[p] = f->pbuf[p];
    le = td__fused_reduce(c, src, f->n, (long long)(M * N), bf16, f->sms, f->s);
  }
  if (le != 0 && gst == TD_OK)
    gst = td__cu((cudaError_t)le, "the reduction kernel's launch");
  if (op->d.kind == TD_TP_GEMM_AR && !f->one_shot) { /* all-gather of the reduced rows */
    td__keep(&st, td__setv(f->s, f->ctl + TD__CTL_RDONE, e));
    td__keep(&st, td__cu(cudaEventRecord(f->ev_rdone, f->s), "cudaEventRecord"));
    TD_CHECK(td__f_sync(op, f)); /* every reduction of call e is enqueued */
    for (int j = 0; j < f->n; j++) {
      int p = (int)((r + j) % f->n);
      if (p != r)
        td__keep(&st, td__cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_rdone, 0), "cudaStreamWaitEvent"));
      if (f->rows[p] > 0)
        td__keep(&st, td__cu(cudaMemcpyAsync((char *)c + (size_t)f->row0[p] * crow,
                                             (const char *)f->pred[p] + (size_t)f->row0[p] * crow,
                                             (size_t)f->rows[p] * crow, cudaMemcpyDeviceToDevice, f->s),
                             "cudaMemcpyAsync (reduced rows)"));
    }
  }
  td__keep(&st, td__setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  return gst != TD_OK ? gst : st != TD_OK ? st : fin;
}

td_status td__tp_fused_run(td_tp_op *op, void *c, const void *a, const void *b) {
  td__tp_fused *f = op->fused;
  if (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 16 != 0)
    return td__error(TD_ERR_INVALID_ARG, "%s (fused): rank %d: A %p, B %p and C %p must be 16-byte aligned (as "
                     "cudaMalloc returns)", td_tp_kind_name(op->d.kind), op->rank, a, b, c);
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's earlier call failed (timeout); the operator "
                     "can only be destroyed", op->rank);
  TD_CHECK(td__cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  uint64_t e = ++f->epoch;
  return op->d.kind == TD_TP_AG_GEMM ? td__f_ag(op, f, c, a, b, e) : td__f_rs_ar(op, f, c, a, b, e);
}

td_status td__tp_fused_destroy(td_tp_op *op) {
  td__tp_fused *f = op->fused;
  /* every rank's last call has finished (calls are blocking) once all are here */
  int64_t mine = 0, all[TD__MAXR];
  td_status st = td_all_gather(op->team, all, &mine, 1, TD_I64);
  td__f_free(f);
  op->fused = NULL;
  return st;
}
