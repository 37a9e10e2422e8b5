/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, fused cuda variant: the state and helpers that the set-up
 * (fused.c), the GEMM operators (fused_gemm.c) and the all-reduce
 * (fused_ar.c) share. Ranks are threads of one process, on one GPU or on
 * GPUs with peer access between every pair (enabled at creation), so every
 * rank's state is reachable through peer[] and its device pointers are
 * usable from every rank's device; every cross-rank dependency is a CUDA
 * event recorded before a host barrier (td__f_sync) and waited for after it
 * (fused.c's file comment says why that cannot deadlock). Private to
 * src/ops/cuda. */
#ifndef TD_OPS_CUDA_FUSED_H
#define TD_OPS_CUDA_FUSED_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/ops_internal.h"
#include "tile/cuda/gemm.h"

enum { TD__CTL_FIN = 0, TD__CTL_GDONE = 1, TD__CTL_RDONE = 2, TD__CTL_WORDS = 8, TD__MAXR = 8 };

/* TD_OPS_FUSED_PROFILE's stamps of one call: entering the call (before the
 * operand-check exchange), after it, the one launch's launcher returned (its
 * rank 0 only), this rank's GEMM enqueued (the one launch's rank 0 after its
 * event; the others stamp it at once), after the middle exchange, and the
 * return. Printed as medians at destroy (td__f_prof_report), with the one
 * launch's GPU times (TD__PROF_GPU_*, CUDA events on rank 0's stream). */
enum { TD__PROF_ENTER, TD__PROF_AGREED, TD__PROF_LAUNCHED, TD__PROF_ENQUEUED, TD__PROF_MIDDLE, TD__PROF_DONE,
       TD__PROF_N };
/* The one launch's GPU times per call (ms, rank 0): from an event recorded as
 * the call starts (the stream is idle then, so it marks the call's start on
 * the GPU within the event's own latency) to one recorded just before the
 * launch, and from that one to one just after it (the launch's GPU time). */
enum { TD__PROF_GPU_TO_LAUNCH, TD__PROF_GPU_KERNEL, TD__PROF_GPU_N };
enum { TD__PROF_CALLS = 4096 };

/* Element type codes of td__fused_reduce (fused_reduce.cu). */
enum { TD__FR_F16 = 0, TD__FR_BF16 = 1, TD__FR_F32 = 2 };

typedef struct td__tp_fused td__tp_fused;
struct td__tp_fused {
  int dev, n, r, sms, timeout_ms, one_shot;
  int multi;      /* 1: some rank uses another GPU than this one (peer access enabled at creation) */
  int ag_direct;  /* ag: the GEMMs read each peer's A in place (no gather copy), one launch per rank */
  int ag_batched; /* ag direct: all of them as one cuBLAS batched launch (equal parts) */
  int ag_one_blas; /* ag batched, one shared GPU (TD_OPS_FUSED_AG=batched-one): rank 0's one cuBLAS batched launch
                    * of n x n GEMMs, C_p[rows of q] = A_q * B_p, for every rank p; the others wait for its end
                    * on the host (td__f_end_wait) */
  void **ptrs;    /* ag batched: device table of 3 x n pointers (B, A, C per part); ag_one_blas: 3 x n x n */
  const void *ptab[3 * TD__MAXR * TD__MAXR]; /* ag_one_blas: the table last uploaded (a call whose table is the same skips it) */
  int ptab_count; /* ag_one_blas: pointers in ptab (0: nothing uploaded yet) */
  int ag_blocks;  /* ag (copy): GEMMs per call: 1 (all rows), 3 (own, after, before) or n (one per source) */
  int ag_gather;  /* ag direct: one launch of our tile reading every rank's A in place (GATHER hook) */
  int ag_one;     /* ag gather: rank 0's one launch for every rank (GATHER | NSPLIT: each rank's B and C a
                   * column source); the others wait for its end on the host (td__f_end_wait) */
  int ag_share;   /* ag gather: each rank's launch on its share of the SMs (td__f_share), its last wave split
                   * (TD_OPS_FUSED_AG=gather-share): the ranks' launches run at once and fill the GPU together */
  void *amaps;    /* ag gather: device table of n tensor maps (td__gemm_cuda_run_gather uploads them); ag_one:
                   * 2n (A, then B) */
  int rs_push;    /* rs / ar two-shot: row blocks pushed to their owners' receive slots as they are computed */
  int kgather;    /* gemm_rs / gemm_ar, one GPU: rank 0's one launch over every rank's A and B (KGATHER) stores
                   * each row at its owner's C (rs) or at every rank's (ar) */
  void *kmaps;    /* kgather: device table of 3n tensor maps (A, B, C of each rank; rank 0's is used) */
  td_gemm_map_cache *map_cache; /* amaps' or kmaps' host shadow (TD_OPS_FUSED_MAP_CACHE=1, the default): a call
                                 * whose operands are the previous call's skips the maps' encodes and upload;
                                 * NULL = every call encodes and uploads */
  double *prof;   /* TD_OPS_FUSED_PROFILE=1: TD__PROF_N host times (s) per call, up to TD__PROF_CALLS calls */
  int prof_calls;
  float *prof_gpu; /* TD_OPS_FUSED_PROFILE=1: TD__PROF_GPU_N GPU times (ms) per call; 0 = not measured */
  cudaEvent_t prof_ev[3]; /* TD_OPS_FUSED_PROFILE=1, rank 0: call start, before and after the one launch */
  int bcast_hint; /* gemm_ar kgather: TD_OPS_FUSED_BCAST_HINT (1 = evict_first), read at creation */
  int bcast_defer; /* gemm_ar kgather: TD_OPS_FUSED_BCAST_HALF: 0 wait, 1 defer (the half-staged tile's second
                    * half stored during the next tile's main loop), 2 pace (the default: every copy paced
                    * over it); td_gemm_hooks.bcast_defer */
  int bcast_pace_kb; /* gemm_ar kgather, paced: TD_OPS_FUSED_BCAST_PACE, k-blocks between two copies */
  int map_fence;   /* ag gather: TD_OPS_FUSED_MAP_FENCE (0 tile, 1 start), read at creation */
  int tail_split;  /* kgather, ag_one, ag_share: TD_OPS_FUSED_TAIL: 0 none, 1 split (the last wave), 2 split2
                    * (or the last two waves'); every rank; the launching rank gets split_ws */
  void *split_ws; /* kgather and ag_one: rank 0's; ag_share: every rank's: the split-tail workspace (counters
                   * zeroed once) */
  long long split_ws_bytes;
  int ar_all_push; /* gemm_ar: every row block pushed to every peer as computed; each rank reduces all rows */
  int ar_blocks;   /* gemm_ar all-push: row blocks of the partial GEMM (<= TD__MAXR) */
  int pdev[TD__MAXR]; /* every rank's device */
  int poisoned;   /* set (atomically) by a rank whose call failed: later results are void */
  uint64_t end_word; /* one launch for every rank, rank 0's: (call << 8) | td_status of the last call whose launch
                      * it saw end (one word, so a peer reads both with one load; td_status values are < 256) */
  td__tp_fused *peer[TD__MAXR]; /* every rank's state (one process) */
  size_t esz;
  cudaStream_t s, ce;
  cudaStream_t cep[TD__MAXR - 1]; /* ag across GPUs: a copy stream per source (j = 1..n-1), so the pulls from
                                   * different peers run at once on their own links and copy engines */
  cudaEvent_t ce_done;
  cudaEvent_t ev_put[TD__MAXR];   /* ag: recorded on ce after run i of the peers' rows was copied in */
  cudaEvent_t ev_gdone, ev_rdone; /* rs/ar pull: after the partial GEMM; after the reduction */
  cudaEvent_t ev_push;            /* rs/ar push: recorded on ce after this rank's last push */
  void *buf;      /* ag: gather buffer [M,K]; rs/ar: partial [M,N] */
  void *red;      /* gemm_ar two-shot: reduced rows [M,N] */
  void *recv;     /* rs/ar push: n receive slots [rows[0], N]; slot p = rank p's partial of this rank's rows.
                   * ar all-push: n - 1 slots [M, N], one per peer (td__f_slot) */
  uint64_t *ctl;  /* TD__CTL_WORDS progress words (fin, gemm done, reduce done), for diagnostics */
  void *pbuf[TD__MAXR], *pred[TD__MAXR], *precv[TD__MAXR];
  uint64_t *pctl[TD__MAXR];
  int64_t row0[TD__MAXR], rows[TD__MAXR];
  int64_t nb;
  td_gemm_config cfg; /* the GEMM tile configuration of this shape (td__f_pick_config) */
  uint64_t epoch;
  /* this call's operands, published before the opening barrier (td__tp_fused_publish), read by peers after it: all-reduce src and dst; ag_gemm A (ar_src) */
  const void *ar_src;
  void *ar_dst;
  const void *ar_b; /* kgather: B, read by rank 0's launch in place (and C in ar_dst, written by it) */
  int64_t ar_off[TD__MAXR + 1]; /* two-shot: part p is [ar_off[p], ar_off[p+1]) */
};

/* ag gather-share: rank r's share of f->sms (sms / n, one more for the first sms % n ranks; at least 1). */
int td__f_share(const td__tp_fused *f, int r);

int td__fused_reduce(void *dst, const void *const *src, int nsrc, long long elems, int dt, int sms, void *stream);
td_status td__f_cu(cudaError_t e, const char *what);
void td__f_keep(td_status *first, td_status st);
td_status td__f_sync(td_tp_op *op, td__tp_fused *f);
td_status td__f_finish(td_tp_op *op, td__tp_fused *f);
/** One launch for every rank, rank 0: publishes that call e's launch ended with status `st` (its td__f_finish),
 * or that rank 0 left call e with `st` after its stream was waited for (a failed middle exchange). */
void td__f_end_publish(td__tp_fused *f, uint64_t e, td_status st);
/** One launch for every rank, the other ranks: waits on the host, under the deadline, until rank 0 published
 * call e's end (td__f_end_publish), and returns its status (an error of its own naming rank 0's); a timeout
 * poisons the operator. Only rank 0 polls the GPU, so 7 threads do not contend for the driver with it. */
td_status td__f_end_wait(td_tp_op *op, td__tp_fused *f, uint64_t e);
/** A host barrier in the middle of a call (work of this call already
 * enqueued): td__f_sync, and when it fails, waits for this rank's streams
 * (td__f_finish, under the deadline; the failed barrier poisoned the waits)
 * before returning the barrier's error, so the caller never gets its buffers
 * back while GPU work may still read or write them. */
td_status td__f_sync_mid(td_tp_op *op, td__tp_fused *f);
/** td__f_sync_mid that also exchanges one value: all[p] = rank p's `mine`
 * (all holds f->n values; with one rank all[0] = mine). */
td_status td__f_gather_mid(td_tp_op *op, td__tp_fused *f, int64_t mine, int64_t *all);
td_status td__f_setv(cudaStream_t s, uint64_t *addr, uint64_t v);
/* TD_OPS_FUSED_PROFILE: this call's stamp `what` (TD__PROF_*); no-op when off. */
void td__f_stamp(td__tp_fused *f, int what);
/* TD_OPS_FUSED_PROFILE, rank 0: records prof_ev[i] on the compute stream; no-op when off or on other ranks. */
void td__f_prof_event(td__tp_fused *f, int i);
/* TD_OPS_FUSED_PROFILE, rank 0 of a one-launch call once its stream is done: stores the call's GPU times. */
void td__f_prof_gpu(td__tp_fused *f);
int td__f_dt(td_dtype dt);
/* ar all-push: the receive slot of rank p's partial at rank q (p != q). */
static inline int td__f_slot(int p, int q) { return p < q ? p : p - 1; }
/* src/tile/cuda/gemm_cublas.c (in the GEMM library, so reached through a weak
 * reference): count GEMMs of p's shape in one cublasGemmBatchedEx launch;
 * ptrs (device) = count B, then count A, then count C pointers. */
td_status td__gemm_cublas_batched(const td_gemm_problem *p, const void *const *ptrs, int count, void *stream);
/* fused_gemm.c: one call of ag_gemm (epoch e); of gemm_rs or gemm_ar. */
td_status td__f_ag(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e);
td_status td__f_rs_ar(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e);
/* fused_ar.c: one all-reduce call (epoch e). */
td_status td__f_all_reduce(td_tp_op *op, td__tp_fused *f, void *dst, const void *src, uint64_t e);

#endif
