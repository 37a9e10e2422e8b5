/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, the fused cuda variant (TD_TP_FUSED) of ag_gemm, gemm_rs
 * and gemm_ar (the all-reduce is in fused_ar.c), in the manner of
 * Triton-distributed: the Hopper GEMM of src/tile/cuda (td__gemm_cuda_run,
 * plain: no hooks) runs on the compute stream, data moves with
 * cudaMemcpyAsync on a second stream, and ordering between ranks is by CUDA
 * events behind host barriers. Ranks are threads of one process sharing one
 * GPU, so the symmetric buffers are plain cudaMalloc memory whose addresses
 * the ranks swap with td_all_gather at creation.
 *
 *  ag_gemm  pull: after a host barrier (every rank's A of this call is
 *           published and ready), rank r copies the peers' A rows straight
 *           from their buffers into its own gather buffer with
 *           cudaMemcpyAsync on a high-priority stream (r+1 first, then r+2,
 *           ...), recording an event after each run of contiguous rows, and
 *           runs the GEMM straight into C in f->ag_blocks launches: 3 for
 *           larger parts -- its own rows from A at once (overlapping the
 *           copies), then rows r+1..n-1, then rows 0..r-1, each behind its
 *           run's event -- or 1 over every row after every copy for small
 *           parts (TD_OPS_FUSED_AG_GEMMS forces 1, 3 or one per rank). Every
 *           wait is on this rank's own streams; a closing barrier keeps a
 *           rank's A alive until no peer reads it. (Pushing rows into the
 *           peers' buffers instead made every GEMM wait for every peer's copy
 *           stream: 0.86-0.92x of the baseline at rev 3885ddd.)
 *  gemm_rs  every rank computes its full partial A_r * B_r into its own
 *           symmetric buffer and records "gemm done"; after a host barrier it
 *           waits (stream waits on the peers' events) for every rank's, then
 *           reduces its rows of all partials (16-byte vectors, f32 sums in
 *           rank order) into C.
 *  gemm_ar  the same, then either every rank reduces all rows (one-shot, for
 *           outputs up to 1 MiB) or each reduces its rows into a symmetric
 *           buffer and every rank copies all of them into C (RS + AG), again
 *           behind a host barrier and event waits.
 * The GEMM's tile configuration is chosen once per operator
 * (td__f_pick_config): TD_OPS_FUSED_TILE, else the tuning cache's entry for
 * this GPU and shape, else the compiled configuration that the shape's tile
 * count and the tiles' measured efficiency favour.
 * Every call starts with a host barrier (each rank's previous call ended with
 * a host wait on its streams, so no buffer is overwritten while a peer still
 * reads it) and ends with a host wait under the operator's deadline. The
 * 64-bit progress words (cuStreamWriteValue64 of the epoch, never reset) are
 * only written, for diagnostics and poisoning; nothing waits on them.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "exec/cuda/device_stuck.h"
#include "ops/cuda/fused.h"
#include "tdist/coll.h"
#include "tdist/config.h"
#include "tdist/rma.h"

/* The GEMM library (tdist_gemm_cuda) links tdist, not the other way round:
 * programs that link it (the tdist CLI, the GPU tests) bind these references;
 * elsewhere they stay NULL and the fused GEMM operators say so. The tuning
 * cache's reader lives in another object of that library, which a program
 * may leave out: it is optional. */
#pragma weak td__gemm_cuda_run
#pragma weak td__gemm_cuda_configs
#pragma weak td__gemm_tune_lookup

enum { TD__REC_STATUS, TD__REC_PID, TD__REC_DEV, TD__REC_BUF, TD__REC_RED, TD__REC_CTL, TD__REC_SELF, TD__REC_N };

static PFN_cuStreamWriteValue64_v11070 td__fw64;
static pthread_once_t td__f_once = PTHREAD_ONCE_INIT;

static void td__f_resolve(void) {
  enum cudaDriverEntryPointQueryResult q;
  void *p = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__fw64 = (PFN_cuStreamWriteValue64_v11070)p;
}

int td__tp_fused_linked(void) { return td__gemm_cuda_run != NULL && td__gemm_cuda_configs != NULL; }

td_status td__f_cu(cudaError_t e, const char *what) {
  return e == cudaSuccess ? TD_OK
                          : td__error(TD_ERR_CUDA, "fused: %s failed: %s (%s)", what, cudaGetErrorString(e),
                                      cudaGetErrorName(e));
}

int td__f_dt(td_dtype dt) { return dt == TD_BF16 ? TD__FR_BF16 : dt == TD_F16 ? TD__FR_F16 : TD__FR_F32; }

/* Stream-ordered progress word (default flags: a memory barrier first). */
td_status td__f_setv(cudaStream_t s, uint64_t *addr, uint64_t v) {
  CUresult r = td__fw64((CUstream)s, (CUdeviceptr)(uintptr_t)addr, v, CU_STREAM_WRITE_VALUE_DEFAULT);
  return r == CUDA_SUCCESS ? TD_OK : td__error(TD_ERR_CUDA, "fused: cuStreamWriteValue64 failed (CUresult %d)", (int)r);
}

/* The device a rank uses: TD_CUDA_DEVICE, else its local rank modulo the
 * device count (as the executor). */
static td_status td__f_device(td_team *team, int rank, int *out) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return td__error(TD_ERR_UNSUPPORTED, "fused: rank %d: no usable CUDA device; use the cpu backend", rank);
  int64_t dev = -1;
  const char *env = getenv("TD_CUDA_DEVICE");
  if (env && *env)
    TD_CHECK(td_config_int("TD_CUDA_DEVICE", &dev));
  else
    dev = td_world_local_rank(td_team_world(team)) % count;
  if (dev < 0 || dev >= count)
    return td__error(TD_ERR_INVALID_ARG, "fused: rank %d: TD_CUDA_DEVICE=%" PRId64 " but %d devices", rank, dev,
                     count);
  *out = (int)dev;
  return TD_OK;
}

void td__tp_fused_probe_rank(const td__tp_desc *d, td_team *team, td__tp_fused_probe *out) {
  td__tp_fused_probe pr = {0, (int64_t)getpid(), -1};
  int dev = -1, major = 0;
  if ((d->kind == TD_TP_ALL_REDUCE || td__tp_fused_linked()) &&
      td__f_device(team, td_team_rank(team), &dev) == TD_OK) {
    pr.dev = dev;
    pr.ok = d->kind == TD_TP_ALL_REDUCE ||
            (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9);
  }
  *out = pr;
}

static void td__f_free(td__tp_fused *f) {
  if (!f)
    return;
  if (td__cuda_device_stuck(f->dev)) { /* cudaFree would wait for the device's blocked work forever */
    free(f);
    return;
  }
  cudaSetDevice(f->dev);
  cudaFree(f->buf), cudaFree(f->red), cudaFree(f->ctl);
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
  free(f);
}

/* Relative throughput of one tile shape on the H200 (docs/perf.md, "GEMM
 * tiles"): wider tiles reuse A more. Clusters of 2 (B shared by multicast)
 * gained nothing measurable with 8 ranks sharing the GPU and lose half a
 * cluster on launches of one tile row (ag_gemm's own rows at M = 1024), so
 * they only win a tie they are listed first in. */
static double td__f_tile_eff(const td_gemm_config *c) {
  return c->bn >= 256 ? 1.0 : c->bn >= 192 ? 0.96 : c->bn >= 128 ? 0.90 : 0.75;
}

/* The GEMM configuration of an M x N x K problem that `ranks` ranks run at
 * once on this GPU: TD_OPS_FUSED_TILE (BMxBN or BMxBNcC, a compiled one),
 * else the tuning cache's entry, else the compiled configuration with the
 * least work per SM: the waves of every rank's tiles together (ranks share
 * the GPU), each weighted by its tile's size over its efficiency. */
static td_status td__f_pick_config(td_tp_op *op, td__tp_fused *f, int m, int n, int k, td_gemm_config *out) {
  td_gemm_config all[64];
  int cnt = td__gemm_cuda_configs(TD_GEMM_SM90, op->d.dtype, TD_GEMM_B_KN, all, 64);
  if (cnt > 64)
    cnt = 64;
  if (cnt < 1)
    return td__error(TD_ERR_UNSUPPORTED, "fused: no Hopper GEMM kernel compiled for %s with B as [K,N]",
                     td_dtype_name(op->d.dtype));
  const char *want = NULL;
  TD_CHECK(td_config_str("TD_OPS_FUSED_TILE", &want));
  if (want && !strcmp(want, "cublas")) {
    *out = (td_gemm_config){TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
    return TD_OK;
  }
  const int tiles_only = want && !strcmp(want, "tiles");
  if (want && *want && !tiles_only) {
    int bm = 0, bn = 0, cl = 1;
    char extra = 0;
    int got = sscanf(want, "%dx%dc%d%c", &bm, &bn, &cl, &extra);
    if (got != 2 && got != 3)
      return td__error(TD_ERR_INVALID_ARG, "fused: TD_OPS_FUSED_TILE=%s: use BMxBN or BMxBNcC (e.g. 128x256c2), "
                       "cublas, or tiles (our tiles, chosen by shape)", want);
    for (int i = 0; i < cnt; i++)
      if (all[i].bm == bm && all[i].bn == bn && all[i].cluster == cl) {
        *out = all[i];
        return TD_OK;
      }
    return td__error(TD_ERR_UNSUPPORTED, "fused: TD_OPS_FUSED_TILE=%s: no such %s kernel for B [K,N] is compiled "
                     "(tdist tune gemm lists them)", want, td_dtype_name(op->d.dtype));
  }
  struct cudaDeviceProp prop;
  td_gemm_config tuned;
  if (td__gemm_tune_lookup && cudaGetDeviceProperties(&prop, f->dev) == cudaSuccess &&
      td__gemm_tune_lookup(prop.name, op->d.dtype, TD_GEMM_B_KN, m, n, k, &tuned) == TD_OK) {
    if (tuned.arch == TD_GEMM_CUBLAS) {
      *out = tuned;
      return TD_OK;
    }
    for (int i = 0; i < cnt; i++)
      if (!memcmp(&all[i], &tuned, sizeof tuned)) {
        *out = tuned;
        return TD_OK;
      }
  }
  /* No tuned entry: these launches wait for nothing inside the kernel, so the
   * engine is free. With B as [K,N] cuBLAS measured 0-7% faster than our
   * tiles on the operators' shapes (H200, docs/perf.md "Fused operators as
   * AUTO"), so it is the default; TD_OPS_FUSED_TILE or `tdist tune gemm`
   * (which times both) choose otherwise; TD_OPS_FUSED_TILE=tiles keeps to our
   * tiles, picked by the rule below. */
  if (!tiles_only) {
    *out = (td_gemm_config){TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
    return TD_OK;
  }
  int best = 0;
  double best_cost = -1;
  for (int i = 0; i < cnt; i++) {
    if (all[i].split_k != 1)
      continue;
    double tiles = (double)((m + all[i].bm - 1) / all[i].bm) * (double)((n + all[i].bn - 1) / all[i].bn);
    double waves = (double)(int64_t)((tiles * f->n + f->sms - 1) / f->sms);
    double cost = waves * all[i].bm * all[i].bn / td__f_tile_eff(&all[i]);
    if (best_cost < 0 || cost < best_cost)
      best_cost = cost, best = i;
  }
  *out = all[best];
  return TD_OK;
}

/* GEMM launches per ag_gemm call: TD_OPS_FUSED_AG_GEMMS, else by shape
 * (H200, 8 ranks, 2026-11-29): one launch over every row while a rank's part
 * is small (M / ranks < 512: the launches of the split version are too small
 * to fill their share of the GPU), else 3 (own rows overlap the copies). */
static td_status td__f_ag_blocks(const td_tp_op *op, td__tp_fused *f, int *out) {
  int64_t v = 0;
  TD_CHECK(td_config_int("TD_OPS_FUSED_AG_GEMMS", &v));
  if (v != 0 && v != 1 && v != 3 && v != 8)
    return td__error(TD_ERR_INVALID_ARG, "fused: TD_OPS_FUSED_AG_GEMMS=%" PRId64 ": use 0 (by shape), 1, 3 or 8",
                     v);
  if (v == 0)
    v = op->d.m / f->n < 512 ? 1 : 3;
  *out = v == 8 ? f->n : (int)v;
  if (*out > f->n)
    *out = f->n;
  return TD_OK;
}

/* This rank's allocations (before the exchange). */
static td_status td__f_alloc(td_tp_op *op, td__tp_fused *f) {
  const td__tp_desc *d = &op->d;
  TD_CHECK(td__f_device(op->team, op->rank, &f->dev));
  TD_CHECK(td__f_cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  int major = 0;
  TD_CHECK(td__f_cu(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, f->dev),
                    "cudaDeviceGetAttribute"));
  if (major != 9 && d->kind != TD_TP_ALL_REDUCE)
    return td__error(TD_ERR_UNSUPPORTED, "fused: rank %d: the Hopper GEMM needs compute capability 9.x; device %d "
                     "is %d.x", op->rank, f->dev, major);
  TD_CHECK(td__f_cu(cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, f->dev),
                    "cudaDeviceGetAttribute"));
  int lo = 0, hi = 0;
  TD_CHECK(td__f_cu(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange"));
  TD_CHECK(td__f_cu(cudaStreamCreateWithPriority(&f->s, cudaStreamNonBlocking, lo), "cudaStreamCreateWithPriority"));
  TD_CHECK(td__f_cu(cudaStreamCreateWithPriority(&f->ce, cudaStreamNonBlocking, hi), "cudaStreamCreateWithPriority"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ce_done, cudaEventDisableTiming), "cudaEventCreate"));
  for (int p = 0; p < f->n; p++)
    TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_put[p], cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_gdone, cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_rdone, cudaEventDisableTiming), "cudaEventCreate"));
  const size_t m = (size_t)d->m;
  if (d->kind == TD_TP_AG_GEMM) {
    TD_CHECK(td__f_ag_blocks(op, f, &f->ag_blocks));
    /* tiles for the launches' rows: all of M, or about one rank's part */
    int64_t lm = f->ag_blocks == 1 ? d->m : (d->m + f->n - 1) / f->n;
    TD_CHECK(td__f_pick_config(op, f, (int)lm, (int)f->nb, (int)d->k, &f->cfg));
    /* the gather buffer in global row order; this rank's own rows stay in A */
    TD_CHECK(td__f_cu(cudaMalloc(&f->buf, m * (size_t)d->k * f->esz), "cudaMalloc (gather buffer)"));
  } else if (d->kind != TD_TP_ALL_REDUCE) {
    TD_CHECK(td__f_pick_config(op, f, (int)d->m, (int)d->n, (int)(d->k / f->n), &f->cfg));
    TD_CHECK(td__f_cu(cudaMalloc(&f->buf, m * (size_t)d->n * f->esz), "cudaMalloc (partial)"));
    if (d->kind == TD_TP_GEMM_AR && !f->one_shot)
      TD_CHECK(td__f_cu(cudaMalloc(&f->red, m * (size_t)d->n * f->esz), "cudaMalloc (reduced rows)"));
  }
  TD_CHECK(td__f_cu(cudaMalloc((void **)&f->ctl, TD__CTL_WORDS * 8), "cudaMalloc (progress words)"));
  TD_CHECK(td__f_cu(cudaMemsetAsync(f->ctl, 0, TD__CTL_WORDS * 8, f->s), "cudaMemsetAsync"));
  return td__f_cu(cudaStreamSynchronize(f->s), "cudaStreamSynchronize");
}

/* The row split of the operands (td_chunk_range), and the all-reduce's
 * two-shot parts: whole 16-byte vectors, so each part's reduction keeps the
 * vector path. */
static void td__f_split(const td__tp_desc *d, td__tp_fused *f) {
  for (int p = 0; p < f->n; p++) {
    size_t off, len;
    td_chunk_range((size_t)d->m, f->n, p, &off, &len);
    f->row0[p] = (int64_t)off, f->rows[p] = (int64_t)len;
  }
  size_t off, len;
  td_chunk_range((size_t)d->n, f->n, 0, &off, &len); /* part 0 is the widest */
  f->nb = (int64_t)len;
  if (d->kind == TD_TP_ALL_REDUCE) {
    size_t unit = 16 / f->esz, units = (d->count + unit - 1) / unit;
    for (int p = 0; p < f->n; p++) {
      td_chunk_range(units, f->n, p, &off, &len);
      f->ar_off[p] = (int64_t)(off * unit < d->count ? off * unit : d->count);
    }
    f->ar_off[f->n] = (int64_t)d->count;
  }
}

td_status td__tp_fused_create(td_tp_op *op) {
  const td__tp_desc *d = &op->d;
  if (d->kind != TD_TP_ALL_REDUCE && !td__tp_fused_linked())
    return td__error(TD_ERR_UNSUPPORTED, "the fused variant needs the Hopper GEMM library: link tdist_gemm_cuda "
                     "into the program (the tdist CLI does)");
  pthread_once(&td__f_once, td__f_resolve);
  if (!td__fw64)
    return td__error(TD_ERR_UNSUPPORTED, "fused: the CUDA driver lacks cuStreamWriteValue64");
  td__tp_fused *f = calloc(1, sizeof *f);
  if (!f) { /* still take part in the exchange below, so peers fail with it instead of at its deadline */
    int64_t rec[TD__REC_N] = {TD_ERR_NO_MEMORY}, all[TD__MAXR * TD__REC_N];
    td_all_gather(op->team, all, rec, TD__REC_N, TD_I64);
    return td__error(TD_ERR_NO_MEMORY, "fused: rank %d: out of memory for the operator's state", op->rank);
  }
  f->n = op->nranks, f->r = op->rank, f->esz = td_dtype_size(d->dtype);
  f->timeout_ms = op->opts.timeout_ms ? op->opts.timeout_ms : td_world_timeout_ms(td_team_world(op->team));
  /* one-shot (every rank reduces everything) while the reads it multiplies by
   * the rank count stay cheaper than two-shot's extra barrier and copies */
  size_t out_bytes = d->kind == TD_TP_ALL_REDUCE ? d->count * f->esz : (size_t)d->m * (size_t)d->n * f->esz;
  f->one_shot = out_bytes <= ((size_t)1 << 20);
  td__f_split(d, f);
  td_status mine = td__f_alloc(op, f);
  char msg[256] = "";
  if (mine != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  int64_t rec[TD__REC_N] = {mine, (int64_t)getpid(), f->dev, (int64_t)(uintptr_t)f->buf,
                            (int64_t)(uintptr_t)f->red, (int64_t)(uintptr_t)f->ctl, (int64_t)(uintptr_t)f};
  int64_t all[TD__MAXR * TD__REC_N];
  td_status st = td_all_gather(op->team, all, rec, TD__REC_N, TD_I64);
  if (st == TD_OK && mine != TD_OK) /* this rank's own reason first */
    st = td__error(mine, "%s", msg);
  for (int p = 0; st == TD_OK && p < f->n; p++) {
    const int64_t *q = all + p * TD__REC_N;
    if (q[TD__REC_STATUS] != TD_OK)
      st = td__error((td_status)q[TD__REC_STATUS], "fused: rank %d could not set up (see its error)", p);
    else if (q[TD__REC_PID] != all[TD__REC_PID])
      st = td__error(TD_ERR_UNSUPPORTED, "fused: ranks 0 and %d are different processes; the fused variant needs "
                     "the ranks of one process (a local world)", p);
    else if (q[TD__REC_DEV] != all[TD__REC_DEV])
      st = td__error(TD_ERR_UNSUPPORTED, "fused: rank 0 uses GPU %d and rank %d GPU %d; the fused variant needs "
                     "ranks sharing one GPU", (int)all[TD__REC_DEV], p, (int)q[TD__REC_DEV]);
    else {
      f->pbuf[p] = (void *)(uintptr_t)q[TD__REC_BUF];
      f->pred[p] = (void *)(uintptr_t)q[TD__REC_RED];
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

/* After a failed call: sets every rank's progress words to a value no epoch
 * reaches and tells every rank on the host: peers still in that call may
 * finish it on incomplete data, so their next call check answers
 * TD_ERR_PEER_FAILED instead of a result. */
static void td__f_poison(td__tp_fused *f) {
  for (int p = 0; p < f->n; p++)
    __atomic_store_n(&f->peer[p]->poisoned, 1, __ATOMIC_SEQ_CST);
  uint64_t big[TD__CTL_WORDS];
  for (int i = 0; i < TD__CTL_WORDS; i++)
    big[i] = (uint64_t)1 << 62;
  for (int p = 0; p < f->n; p++)
    cudaMemcpy(f->pctl[p], big, sizeof big, cudaMemcpyHostToDevice);
}

/* Waits for the compute stream (which joined the copy-engine stream) under
 * the deadline; past it, poisons. */
td_status td__f_finish(td_tp_op *op, td__tp_fused *f) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    cudaError_t q = cudaStreamQuery(f->s);
    if (q == cudaSuccess)
      break;
    if (q != cudaErrorNotReady)
      return td__f_cu(q, "the call's GPU work");
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t0.tv_nsec) * 1e-6;
    if (ms > f->timeout_ms) {
      td__f_poison(f);
      return td__error(TD_ERR_TIMEOUT, "fused: rank %d: call %" PRIu64 " did not finish within %d ms (a peer "
                       "never made this call, or its GPU work failed)", op->rank, f->epoch, f->timeout_ms);
    }
    sched_yield();
  }
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's call %" PRIu64 " or earlier failed (timeout); "
                     "this call's result is void", op->rank, f->epoch);
  return TD_OK;
}

/* Keeps the first failure of a call: the call goes on to its barriers even
 * after one (a rank leaving early would leave its peers at a barrier until
 * the deadline), and reports the first failure at the end. */
void td__f_keep(td_status *first, td_status st) {
  if (*first == TD_OK && st != TD_OK)
    *first = st;
}

/* Host barrier between the ranks' enqueues. Every cross-rank dependency of a
 * call is an event recorded by a rank before this barrier and waited for
 * (cudaStreamWaitEvent) by a peer after it: CUDA sees every dependency, and
 * each waits only on work enqueued earlier, so no ordering of the hardware
 * queues (streams share them) and no set of resident kernels can close a
 * cycle. A failed barrier (deadline) poisons the operator. */
td_status td__f_sync(td_tp_op *op, td__tp_fused *f) {
  if (f->n < 2)
    return TD_OK;
  td_status st = td_team_sync(op->team);
  if (st != TD_OK)
    td__f_poison(f);
  return st;
}

/* One GEMM of the gathered rows [row0, row0 + rows) into C. */
static td_status td__f_ag_gemm(td_tp_op *op, td__tp_fused *f, void *c, const void *a_rows, const void *b,
                               int64_t row0, int64_t rows) {
  if (rows <= 0)
    return TD_OK;
  td_gemm_problem pr = {(int)rows, (int)f->nb, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, a_rows, b,
                        (char *)c + (size_t)row0 * (size_t)f->nb * f->esz, NULL};
  return td__gemm_cuda_run(&pr, &f->cfg, 0, NULL, f->s);
}

static td_status td__f_ag(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  const int64_t K = op->d.k, r = f->r, n = f->n;
  const size_t row_bytes = (size_t)K * f->esz;
  td_status st = TD_OK;
  __atomic_store_n(&f->ar_src, a, __ATOMIC_RELEASE);
  /* 1. every rank's A of call e is published and ready, and its call e-1 is
   * over (so nobody still reads an older A) */
  TD_CHECK(td__f_sync(op, f));
  /* 2. pull: the copy-engine stream copies the peers' rows straight from
   * their A into this rank's gather buffer, r+1 first, then r+2, ..., in
   * runs of contiguous rows (f->ag_blocks), an event after each run. Every
   * dependency is on this rank's own streams: no peer's progress is waited
   * for, only its A, which the barrier made ready. With one GEMM over every
   * row, the own rows are copied too (first). */
  int64_t lo[TD__MAXR], hi[TD__MAXR];
  int runs = 0;
  if (f->ag_blocks == 1 && f->rows[r] > 0)
    td__f_keep(&st, td__f_cu(cudaMemcpyAsync((char *)f->buf + (size_t)f->row0[r] * row_bytes, a,
                                             (size_t)f->rows[r] * row_bytes, cudaMemcpyDeviceToDevice, f->ce),
                             "cudaMemcpyAsync (own A rows)"));
  for (int j = 1; j < n; j++) {
    int q = (int)((r + j) % n);
    const void *pa = __atomic_load_n(&f->peer[q]->ar_src, __ATOMIC_ACQUIRE);
    if (f->rows[q] > 0)
      td__f_keep(&st, td__f_cu(cudaMemcpyAsync((char *)f->buf + (size_t)f->row0[q] * row_bytes, pa,
                                               (size_t)f->rows[q] * row_bytes, cudaMemcpyDeviceToDevice, f->ce),
                               "cudaMemcpyAsync (a peer's A rows)"));
    if (j == 1 || (f->ag_blocks > 3 || q == 0))
      lo[runs++] = f->row0[q];
    hi[runs - 1] = f->row0[q] + f->rows[q];
    int next = (int)((q + 1) % n);
    if (j == n - 1 || f->ag_blocks > 3 || next == 0) /* the run ends: its rows are in */
      td__f_keep(&st, td__f_cu(cudaEventRecord(f->ev_put[runs - 1], f->ce), "cudaEventRecord"));
  }
  td__f_keep(&st, td__f_cu(cudaEventRecord(f->ce_done, f->ce), "cudaEventRecord"));
  /* 3. the GEMM into C: one launch over every row once all are in, or the
   * own rows from A at once (overlapping the copies) and then each run as
   * its event completes */
  td_status gst = TD_OK;
  if (f->ag_blocks == 1) {
    td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->ce_done, 0), "cudaStreamWaitEvent"));
    gst = td__f_ag_gemm(op, f, c, f->buf, b, 0, op->d.m);
  } else {
    gst = td__f_ag_gemm(op, f, c, a, b, f->row0[r], f->rows[r]);
    for (int i = 0; i < runs; i++) {
      td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->ev_put[i], 0), "cudaStreamWaitEvent"));
      if (gst == TD_OK)
        gst = td__f_ag_gemm(op, f, c, (const char *)f->buf + (size_t)lo[i] * row_bytes, b, lo[i], hi[i] - lo[i]);
    }
  }
  /* finish the call even when a launch failed, so the peers are not left waiting */
  td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->ce_done, 0), "cudaStreamWaitEvent"));
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  /* 4. nobody reads this rank's A any more (its caller may overwrite it) */
  td_status done = td__f_sync(op, f);
  return gst != TD_OK ? gst : st != TD_OK ? st : fin != TD_OK ? fin : done;
}

static td_status td__f_rs_ar(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  const int64_t M = op->d.m, N = op->d.n, r = f->r;
  const size_t crow = (size_t)N * f->esz;
  const int dt = td__f_dt(op->d.dtype);
  td_status st = TD_OK;
  /* every rank finished call e-1, so no peer still reads this rank's partial */
  TD_CHECK(td__f_sync(op, f));
  td_gemm_problem pr = {(int)M, (int)N, (int)(op->d.k / f->n), op->d.dtype, TD_GEMM_B_KN, a, b, f->buf, NULL};
  td_status gst = td__gemm_cuda_run(&pr, &f->cfg, 0, NULL, f->s);
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_GDONE, e));
  td__f_keep(&st, td__f_cu(cudaEventRecord(f->ev_gdone, f->s), "cudaEventRecord"));
  TD_CHECK(td__f_sync_mid(op, f)); /* every partial GEMM of call e is enqueued */
  for (int p = 0; p < f->n; p++)
    if (p != r)
      td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_gdone, 0), "cudaStreamWaitEvent"));
  const void *src[TD__MAXR];
  int le = 0;
  if (op->d.kind == TD_TP_GEMM_RS || !f->one_shot) {
    for (int p = 0; p < f->n; p++)
      src[p] = (const char *)f->pbuf[p] + (size_t)f->row0[r] * crow;
    void *dst = op->d.kind == TD_TP_GEMM_RS ? c : (char *)f->red + (size_t)f->row0[r] * crow;
    le = td__fused_reduce(dst, src, f->n, (long long)(f->rows[r] * N), dt, f->sms, f->s);
  } else { /* one-shot all-reduce: every rank sums every row */
    for (int p = 0; p < f->n; p++)
      src[p] = f->pbuf[p];
    le = td__fused_reduce(c, src, f->n, (long long)(M * N), dt, f->sms, f->s);
  }
  if (le != 0 && gst == TD_OK)
    gst = td__f_cu((cudaError_t)le, "the reduction kernel's launch");
  if (op->d.kind == TD_TP_GEMM_AR && !f->one_shot) { /* all-gather of the reduced rows */
    td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_RDONE, e));
    td__f_keep(&st, td__f_cu(cudaEventRecord(f->ev_rdone, f->s), "cudaEventRecord"));
    TD_CHECK(td__f_sync_mid(op, f)); /* every reduction of call e is enqueued */
    for (int j = 0; j < f->n; j++) {
      int p = (int)((r + j) % f->n);
      if (p != r)
        td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_rdone, 0), "cudaStreamWaitEvent"));
      if (f->rows[p] > 0)
        td__f_keep(&st, td__f_cu(cudaMemcpyAsync((char *)c + (size_t)f->row0[p] * crow,
                                                 (const char *)f->pred[p] + (size_t)f->row0[p] * crow,
                                                 (size_t)f->rows[p] * crow, cudaMemcpyDeviceToDevice, f->s),
                                 "cudaMemcpyAsync (reduced rows)"));
    }
  }
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  return gst != TD_OK ? gst : st != TD_OK ? st : fin;
}

td_status td__f_sync_mid(td_tp_op *op, td__tp_fused *f) {
  td_status st = td__f_sync(op, f);
  if (st != TD_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    td__f_finish(op, f);
    return td__error(st, "%s", msg);
  }
  return TD_OK;
}

td_status td__tp_fused_run(td_tp_op *op, void *c, const void *a, const void *b) {
  td__tp_fused *f = op->fused;
  /* operand alignment is checked with the other operand checks, on every rank (tp_op.c) */
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's earlier call failed (timeout); the operator "
                     "can only be destroyed", op->rank);
  TD_CHECK(td__f_cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  uint64_t e = ++f->epoch;
  switch (op->d.kind) {
  case TD_TP_AG_GEMM: return td__f_ag(op, f, c, a, b, e);
  case TD_TP_ALL_REDUCE: return td__f_all_reduce(op, f, c, a, e);
  default: return td__f_rs_ar(op, f, c, a, b, e);
  }
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
