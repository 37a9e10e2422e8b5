/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, fused cuda variant: one call of ag_gemm, gemm_rs or
 * gemm_ar (set-up, barriers and deadlines are in fused.c). The GEMMs run on
 * the rank's compute stream through td__gemm_cuda_run (cuBLAS or our Hopper
 * tiles, no hooks), data moves with cudaMemcpyAsync on its high-priority
 * copy-engine stream, and every cross-rank dependency is a CUDA event
 * recorded before a host barrier and waited for after it. Where the ranks
 * are (one shared GPU, or GPUs with peer access) picks the schedule:
 *
 *  ag_gemm  direct (ranks sharing one GPU): the peers' A already sits in this
 *           GPU's memory, so after the opening barrier the rank runs one GEMM
 *           per rank straight on that rank's published A (its own first, then
 *           r+1, r+2, ...) into C at the rows' offset: no gather copy at all,
 *           which the baseline (a collective, then a GEMM) cannot avoid.
 *           With equal parts on cuBLAS the n GEMMs are one batched launch
 *           (cublasGemmBatchedEx over a device table of pointers).
 *           copy (across GPUs): the copy-engine stream pulls the peers' rows
 *           into the gather buffer, r+1 first, an event after each run of
 *           rows; the GEMM runs on the own rows straight from A (overlapping
 *           the copies), then on each run behind its event (f->ag_blocks: one
 *           run per source across GPUs; 1 or 3 runs on a shared GPU when
 *           forced). Every wait is on the rank's own streams; a closing
 *           barrier keeps a rank's A alive until no peer reads it.
 *  gemm_rs  pull (shared GPU): every rank computes its whole partial into its
 *           buffer; after a barrier each reduces its rows of all partials.
 *           push (across GPUs, after FLUX / Triton-distributed): the partial
 *           is computed in row blocks ordered by owner, r+1, r+2, ..., r
 *           last; as each block is done the copy-engine stream pushes it into
 *           its owner's receive slot [r], so the NVLink transfers hide behind
 *           the next blocks' GEMMs. After a barrier each rank waits for every
 *           peer's last push and reduces its own block and the n-1 received
 *           slots, all in local memory.
 *  gemm_ar  the same reduction into the reduced-rows buffer, then every rank
 *           copies every rank's reduced rows into C behind a second barrier
 *           (two-shot); outputs up to 1 MiB are reduced whole by every rank
 *           from the peers' partials (one-shot). all-push (2 ranks on 2 GPUs
 *           by default): every row block of the partial goes to every peer
 *           as it is computed, and each rank reduces all rows locally.
 * Reductions sum in f32 in rank order (td__fused_reduce), push or pull. */
#include <cuda_runtime.h>
#include <string.h>

#include "core/error.h"
#include "ops/cuda/fused.h"

/* Bound in programs that link the GEMM library (fused.c says why they are
 * weak; creation refuses the GEMM operators where it is missing, and uses the
 * batched launch only where it is bound). */
#pragma weak td__gemm_cuda_run
#pragma weak td__gemm_cublas_batched
#pragma weak td__gemm_cuda_run_gather
#pragma weak td__gemm_cuda_run_gather_cols
#pragma weak td__gemm_cuda_run_kgather

/* One GEMM of A rows [row0, row0 + rows) (read from a_rows) into C. */
static td_status td__f_ag_gemm(td_tp_op *op, td__tp_fused *f, void *c, const void *a_rows, const void *b,
                               int64_t row0, int64_t rows) {
  if (rows <= 0)
    return TD_OK;
  td_gemm_problem pr = {(int)rows, (int)f->nb, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, a_rows, b,
                        (char *)c + (size_t)row0 * (size_t)f->nb * f->esz, NULL};
  return td__gemm_cuda_run(&pr, &f->cfg, 0, NULL, f->s);
}

/* direct: a GEMM per rank on its A in place, own rows first; or, with equal
 * parts on cuBLAS, all of them in one batched launch (its pointer table
 * uploaded on the compute stream: the H2D copy of a pageable array returns
 * once staged, and the previous call's launch read the table before it in
 * stream order). */
static td_status td__f_ag_direct(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b,
                                 td_status *st) {
  if (f->ag_gather) { /* one launch over every row, each tile reading its rank's A in place */
    const void *src[TD__MAXR];
    for (int p = 0; p < f->n; p++)
      src[p] = p == f->r ? a : __atomic_load_n(&f->peer[p]->ar_src, __ATOMIC_ACQUIRE);
    td_gemm_problem pr = {(int)op->d.m, (int)f->nb, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, NULL, b, c, NULL};
    td_gemm_hooks tail; /* no split workspace: no split */
    memset(&tail, 0, sizeof tail);
    tail.map_fence = f->map_fence;
    tail.map_cache = f->map_cache;
    if (!f->ag_share)
      return td__gemm_cuda_run_gather(&pr, &f->cfg, src, f->n, f->rows[0], f->amaps, &tail, 0, f->s);
    /* this rank's share of the SMs (the n launches at once fill the GPU), its last wave split */
    tail.split_ws = f->split_ws, tail.split_ws_bytes = f->split_ws_bytes, tail.split_waves = f->tail_split;
    return td__gemm_cuda_run_gather(&pr, &f->cfg, src, f->n, f->rows[0], f->amaps, &tail, td__f_share(f, f->r),
                                    f->s);
  }
  if (f->ag_batched) {
    const int n = f->n;
    const void *h[3 * TD__MAXR];
    for (int p = 0; p < n; p++) {
      h[p] = b;
      h[n + p] = p == f->r ? a : __atomic_load_n(&f->peer[p]->ar_src, __ATOMIC_ACQUIRE);
      h[2 * n + p] = (char *)c + (size_t)f->row0[p] * (size_t)f->nb * f->esz;
    }
    td__f_keep(st, td__f_cu(cudaMemcpyAsync(f->ptrs, h, 3 * (size_t)n * sizeof(void *), cudaMemcpyHostToDevice,
                                            f->s), "cudaMemcpyAsync (pointer table)"));
    if (*st != TD_OK)
      return TD_OK;
    td_gemm_problem pr = {(int)f->rows[0], (int)f->nb, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, NULL, NULL, NULL,
                          NULL};
    return td__gemm_cublas_batched(&pr, (const void *const *)f->ptrs, n, f->s);
  }
  td_status gst = td__f_ag_gemm(op, f, c, a, b, f->row0[f->r], f->rows[f->r]);
  for (int j = 1; j < f->n && gst == TD_OK; j++) {
    int q = (f->r + j) % f->n;
    const void *pa = __atomic_load_n(&f->peer[q]->ar_src, __ATOMIC_ACQUIRE);
    gst = td__f_ag_gemm(op, f, c, pa, b, f->row0[q], f->rows[q]);
  }
  return gst;
}

/* copy: pulls the peers' rows (r+1 first) in runs of contiguous rows, and a
 * GEMM per run behind its rows (or one GEMM over every row after every
 * copy). Across GPUs each source has its own copy stream (f->cep) and event,
 * so the pulls from different peers run at once over their own links instead
 * of one after the other on one copy engine; a run's GEMM waits for the
 * events of its sources. On one GPU the copies share f->ce (one event per
 * run) or, for one GEMM, the compute stream. Failures go to *st; returns the
 * GEMMs'. */
static td_status td__f_ag_copy(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b,
                               td_status *st) {
  const int64_t r = f->r, n = f->n;
  const size_t row_bytes = (size_t)op->d.k * f->esz;
  int64_t lo[TD__MAXR], hi[TD__MAXR];
  int first[TD__MAXR], last[TD__MAXR]; /* the sources j of each run */
  int runs = 0;
  /* One GEMM after every copy on one GPU: nothing of this rank runs beside
   * the copies, so they go on the compute stream itself (no event hop). */
  const cudaStream_t cs = f->ag_blocks == 1 && !f->multi ? f->s : f->ce;
  const int par = f->multi && f->cep[0] != NULL;
  if (f->ag_blocks == 1 && f->rows[r] > 0) /* one GEMM over every row: the own rows are copied too (first) */
    td__f_keep(st, td__f_cu(cudaMemcpyAsync((char *)f->buf + (size_t)f->row0[r] * row_bytes, a,
                                            (size_t)f->rows[r] * row_bytes, cudaMemcpyDeviceToDevice, cs),
                            "cudaMemcpyAsync (own A rows)"));
  for (int j = 1; j < n; j++) {
    int q = (int)((r + j) % n);
    const void *pa = __atomic_load_n(&f->peer[q]->ar_src, __ATOMIC_ACQUIRE);
    const cudaStream_t qs = par ? f->cep[j - 1] : cs;
    if (f->rows[q] > 0) /* from the peer's GPU when it is another: a copy over NVLink / PCIe (peer access) */
      td__f_keep(st, td__f_cu(cudaMemcpyAsync((char *)f->buf + (size_t)f->row0[q] * row_bytes, pa,
                                              (size_t)f->rows[q] * row_bytes, cudaMemcpyDeviceToDevice, qs),
                              "cudaMemcpyAsync (a peer's A rows)"));
    if (par) /* this source's rows are in */
      td__f_keep(st, td__f_cu(cudaEventRecord(f->ev_put[j - 1], qs), "cudaEventRecord"));
    if (j == 1 || (f->ag_blocks > 3 || q == 0))
      lo[runs] = f->row0[q], first[runs++] = j;
    hi[runs - 1] = f->row0[q] + f->rows[q], last[runs - 1] = j;
    int next = (int)((q + 1) % n);
    if (!par && cs == f->ce && (j == n - 1 || f->ag_blocks > 3 || next == 0)) /* the run ends: its rows are in */
      td__f_keep(st, td__f_cu(cudaEventRecord(f->ev_put[runs - 1], f->ce), "cudaEventRecord"));
  }
  if (cs == f->s) /* the copies are ahead of the GEMM on its own stream */
    return td__f_ag_gemm(op, f, c, f->buf, b, 0, op->d.m);
  td__f_keep(st, td__f_cu(cudaEventRecord(f->ce_done, f->ce), "cudaEventRecord"));
  td_status gst = TD_OK;
  if (f->ag_blocks == 1) {
    td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->s, f->ce_done, 0), "cudaStreamWaitEvent"));
    for (int j = 1; par && j < n; j++)
      td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->s, f->ev_put[j - 1], 0), "cudaStreamWaitEvent"));
    return td__f_ag_gemm(op, f, c, f->buf, b, 0, op->d.m);
  }
  gst = td__f_ag_gemm(op, f, c, a, b, f->row0[r], f->rows[r]);
  for (int i = 0; i < runs; i++) {
    if (par)
      for (int j = first[i]; j <= last[i]; j++)
        td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->s, f->ev_put[j - 1], 0), "cudaStreamWaitEvent"));
    else
      td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->s, f->ev_put[i], 0), "cudaStreamWaitEvent"));
    if (gst == TD_OK)
      gst = td__f_ag_gemm(op, f, c, (const char *)f->buf + (size_t)lo[i] * row_bytes, b, lo[i], hi[i] - lo[i]);
  }
  /* the compute stream joins the copy streams, so the host wait covers them */
  td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->s, f->ce_done, 0), "cudaStreamWaitEvent"));
  return gst;
}

/* Every rank's A, B and C of this call (published before the opening
 * barrier), for rank 0's one launch for every rank. */
static void td__f_operands(const td__tp_fused *f, const void *a, const void *b, void *c, const void **as,
                           const void **bs, void **cs) {
  for (int p = 0; p < f->n; p++) {
    as[p] = p == f->r ? a : __atomic_load_n(&f->peer[p]->ar_src, __ATOMIC_ACQUIRE);
    bs[p] = p == f->r ? b : __atomic_load_n(&f->peer[p]->ar_b, __ATOMIC_ACQUIRE);
    cs[p] = p == f->r ? c : __atomic_load_n(&f->peer[p]->ar_dst, __ATOMIC_ACQUIRE);
  }
}

/* The end of a call whose GEMM is rank 0's one launch for every rank (gst:
 * rank 0's enqueue status, st: its other failures). The middle exchange
 * carries rank 0's status: a launch that failed leaves every rank's C
 * unwritten, so every rank says so. Rank 0 alone then polls its stream and
 * publishes the launch's end on the host (td__f_end_publish); the others
 * wait for that (td__f_end_wait), so each returns only once the launch that
 * read its operands has ended, and only one thread polls the GPU: with the
 * 8 ranks of one H200 each polling a stream the call took ~210 us at
 * llama3.1-8b M = 1024, and with each polling rank 0's event 250-310 us
 * (docs/perf.md, "Seventeenth session"). */
static td_status td__f_one_launch_end(td_tp_op *op, td__tp_fused *f, td_status gst, td_status st, uint64_t e) {
  const int r = f->r;
  int64_t all[TD__MAXR];
  td__f_stamp(f, TD__PROF_ENQUEUED);
  td_status mid = td__f_gather_mid(op, f, gst != TD_OK ? (int64_t)gst : (int64_t)st, all);
  if (mid != TD_OK) {
    /* a peer may still have got through the exchange (rank 0's part was out before it timed out): it waits
     * for this word, which says rank 0 left (td__f_gather_mid waited for this rank's stream, so the launch
     * has ended) */
    if (r == 0)
      td__f_end_publish(f, e, mid);
    return mid;
  }
  td__f_stamp(f, TD__PROF_MIDDLE);
  /* the progress word, for diagnostics (nothing waits on it; on the other ranks it is written after the call) */
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin;
  if (r == 0) {
    fin = td__f_finish(op, f);
    td__f_end_publish(f, e, fin);
    if (fin == TD_OK)
      td__f_prof_gpu(f);
  } else {
    fin = td__f_end_wait(op, f, e);
  }
  if (r != 0 && all[0] != TD_OK && st == TD_OK)
    st = td__error((td_status)all[0], "fused: rank %d: rank 0's %s launch for every rank failed (its error says "
                   "why), so this call wrote no output", r, td_tp_kind_name(op->d.kind));
  return gst != TD_OK ? gst : st != TD_OK ? st : fin;
}

/* gather, one launch for every rank (one shared GPU): rank 0's launch of
 * our tile computes C_p = gather(A) * B_p for every rank p at once, each
 * tile reading its rows' A where they are (GATHER) and its columns' B from
 * their rank, storing into that rank's C (NSPLIT): every rank's A is read
 * once per tile row for all ranks, where n launches each read all of it.
 * Synchronisation as kgather's (td__f_kgather): the opening exchange
 * published every rank's A, B and C; the middle exchange carries rank 0's
 * enqueue status, the other ranks wait for rank 0 to see the launch end
 * (td__f_one_launch_end), and no closing barrier is needed (nobody returns
 * before the launch that reads its operands has ended). */
static td_status td__f_ag_one(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  const int n = f->n, r = f->r;
  td_status st = TD_OK, gst = TD_OK;
  if (r == 0) {
    const void *as[TD__MAXR], *bs[TD__MAXR];
    void *cs[TD__MAXR];
    td__f_operands(f, a, b, c, as, bs, cs);
    td_gemm_problem pr = {(int)op->d.m, (int)f->nb, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, NULL, NULL, NULL, NULL};
    td_gemm_hooks tail; /* the split tail over every rank's tiles, where rank 0 planned one */
    memset(&tail, 0, sizeof tail);
    tail.split_ws = f->split_ws, tail.split_ws_bytes = f->split_ws_bytes, tail.split_waves = f->tail_split;
    tail.map_fence = f->map_fence;
    tail.map_cache = f->map_cache;
    td__f_prof_event(f, 1);
    gst = td__gemm_cuda_run_gather_cols(&pr, &f->cfg, as, n, f->rows[0], bs, cs, n, f->amaps, &tail, f->s);
    td__f_stamp(f, TD__PROF_LAUNCHED);
    td__f_prof_event(f, 2);
  }
  return td__f_one_launch_end(op, f, gst, st, e);
}

/* batched-one (one shared GPU, equal parts): rank 0's one cuBLAS batched
 * launch of n x n GEMMs, GEMM p * n + q computing C_p[rows of q] = A_q * B_p
 * on every rank's operands in place: the same work as the ranks' n GEMMs of
 * M x N at once, as one launch that fills the GPU with cuBLAS's kernel, and
 * no gather copy. Synchronisation as td__f_ag_one's. The pointer table is
 * uploaded only when it differs from the last one (the previous call's
 * launch, which read it, ended before this call began). */
static td_status td__f_ag_one_blas(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b,
                                   uint64_t e) {
  const int n = f->n, r = f->r, cnt = n * n;
  td_status st = TD_OK, gst = TD_OK;
  if (r == 0) {
    const void *as[TD__MAXR], *bs[TD__MAXR];
    void *cs[TD__MAXR];
    const void *h[3 * TD__MAXR * TD__MAXR];
    td__f_operands(f, a, b, c, as, bs, cs);
    for (int p = 0; p < n; p++)
      for (int q = 0; q < n; q++) {
        h[p * n + q] = bs[p];
        h[cnt + p * n + q] = as[q];
        h[2 * cnt + p * n + q] = (char *)cs[p] + (size_t)f->row0[q] * (size_t)f->nb * f->esz;
      }
    const size_t bytes = 3 * (size_t)cnt * sizeof(void *);
    if (f->ptab_count != 3 * cnt || memcmp(f->ptab, h, bytes)) {
      f->ptab_count = 0; /* until this upload is enqueued */
      gst = td__f_cu(cudaMemcpyAsync(f->ptrs, h, bytes, cudaMemcpyHostToDevice, f->s),
                     "cudaMemcpyAsync (pointer table)");
      if (gst == TD_OK)
        memcpy(f->ptab, h, bytes), f->ptab_count = 3 * cnt;
    }
    td_gemm_problem pr = {(int)f->rows[0], (int)f->nb, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, NULL, NULL, NULL,
                          NULL};
    td__f_prof_event(f, 1);
    if (gst == TD_OK)
      gst = td__gemm_cublas_batched(&pr, (const void *const *)f->ptrs, cnt, f->s);
    if (gst != TD_OK) /* the stream may not have run the upload: the next call makes the table again */
      f->ptab_count = 0;
    td__f_stamp(f, TD__PROF_LAUNCHED);
    td__f_prof_event(f, 2);
  }
  return td__f_one_launch_end(op, f, gst, st, e);
}

td_status td__f_ag(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  if (f->ag_one)
    return td__f_ag_one(op, f, c, a, b, e);
  if (f->ag_one_blas)
    return td__f_ag_one_blas(op, f, c, a, b, e);
  td_status st = TD_OK;
  /* 1. the operand-check exchange (tp_op.c) was this call's opening
   * barrier: every rank's A of call e is published (td__tp_fused_publish)
   * and ready, and its call e-1 is over (so nobody still reads an older A) */
  /* 2. the GEMMs (and the copies they wait for); the call goes on to its
   * closing barrier even when a launch failed, so the peers are not left
   * waiting */
  td_status gst = f->ag_direct ? td__f_ag_direct(op, f, c, a, b, &st) : td__f_ag_copy(op, f, c, a, b, &st);
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  /* 3. nobody reads this rank's A any more (its caller may overwrite it) */
  td_status done = td__f_sync(op, f);
  return gst != TD_OK ? gst : st != TD_OK ? st : fin != TD_OK ? fin : done;
}

/* pull: this rank's whole partial A_r * B_r into its buffer. */
static td_status td__f_rs_gemm_whole(td_tp_op *op, td__tp_fused *f, const void *a, const void *b) {
  td_gemm_problem pr = {(int)op->d.m, (int)op->d.n, (int)(op->d.k / f->n), op->d.dtype, TD_GEMM_B_KN, a, b,
                        f->buf, NULL};
  return td__gemm_cuda_run(&pr, &f->cfg, 0, NULL, f->s);
}

/* push: the partial in row blocks by owner, r+1 first and the own block
 * last; each peer's block is pushed into the owner's receive slot [r] by the
 * copy-engine stream behind the block's event, and ev_push follows the last
 * push. Failures go to *st; returns the GEMMs'. */
static td_status td__f_rs_gemm_push(td_tp_op *op, td__tp_fused *f, const void *a, const void *b, td_status *st) {
  const int n = f->n, r = f->r;
  const int64_t kp = op->d.k / n;
  const size_t crow = (size_t)op->d.n * f->esz, arow = (size_t)kp * f->esz, slot = (size_t)f->rows[0] * crow;
  td_status gst = TD_OK;
  for (int j = 1; j <= n; j++) {
    int q = (r + j) % n;
    if (f->rows[q] <= 0)
      continue;
    char *part = (char *)f->buf + (size_t)f->row0[q] * crow;
    td_gemm_problem pr = {(int)f->rows[q], (int)op->d.n, (int)kp, op->d.dtype, TD_GEMM_B_KN,
                          (const char *)a + (size_t)f->row0[q] * arow, b, part, NULL};
    if (gst == TD_OK)
      gst = td__gemm_cuda_run(&pr, &f->cfg, 0, NULL, f->s);
    if (q == r)
      continue;
    /* the push of a failed block is still enqueued: its owner's result is
     * void anyway, and every event the peers wait for is recorded */
    td__f_keep(st, td__f_cu(cudaEventRecord(f->ev_put[j - 1], f->s), "cudaEventRecord"));
    td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->ce, f->ev_put[j - 1], 0), "cudaStreamWaitEvent"));
    td__f_keep(st, td__f_cu(cudaMemcpyAsync((char *)f->precv[q] + (size_t)r * slot, part, (size_t)f->rows[q] * crow,
                                            cudaMemcpyDeviceToDevice, f->ce),
                            "cudaMemcpyAsync (a partial block to its owner)"));
  }
  td__f_keep(st, td__f_cu(cudaEventRecord(f->ev_push, f->ce), "cudaEventRecord"));
  return gst;
}

/* ar all-push: the whole partial in f->ar_blocks row blocks; as each is
 * done the copy-engine stream pushes it into every peer's receive slot for
 * this rank (td__f_slot); ev_push follows the last push. Failures go to *st;
 * returns the GEMMs'. */
static td_status td__f_ar_gemm_all_push(td_tp_op *op, td__tp_fused *f, const void *a, const void *b,
                                        td_status *st) {
  const int n = f->n, r = f->r;
  const int64_t kp = op->d.k / n, M = op->d.m;
  const size_t crow = (size_t)op->d.n * f->esz, arow = (size_t)kp * f->esz, whole = (size_t)M * crow;
  td_status gst = TD_OK;
  for (int i = 0; i < f->ar_blocks; i++) {
    size_t off, len;
    td_chunk_range((size_t)M, f->ar_blocks, i, &off, &len);
    if (len == 0)
      continue;
    char *part = (char *)f->buf + off * crow;
    td_gemm_problem pr = {(int)len, (int)op->d.n, (int)kp, op->d.dtype, TD_GEMM_B_KN,
                          (const char *)a + off * arow, b, part, NULL};
    if (gst == TD_OK)
      gst = td__gemm_cuda_run(&pr, &f->cfg, 0, NULL, f->s);
    /* a failed block is still pushed: every event the peers wait for is recorded */
    td__f_keep(st, td__f_cu(cudaEventRecord(f->ev_put[i], f->s), "cudaEventRecord"));
    td__f_keep(st, td__f_cu(cudaStreamWaitEvent(f->ce, f->ev_put[i], 0), "cudaStreamWaitEvent"));
    for (int j = 1; j < n; j++) {
      int q = (r + j) % n;
      td__f_keep(st, td__f_cu(cudaMemcpyAsync((char *)f->precv[q] + (size_t)td__f_slot(r, q) * whole + off * crow,
                                              part, len * crow, cudaMemcpyDeviceToDevice, f->ce),
                              "cudaMemcpyAsync (a partial block to a peer)"));
    }
  }
  td__f_keep(st, td__f_cu(cudaEventRecord(f->ev_push, f->ce), "cudaEventRecord"));
  return gst;
}

/* gemm_ar all-push: the pushes, a barrier (every push enqueued), then each
 * rank waits for every rank's last push and sums all rows of its own partial
 * and the n - 1 received ones, f32 in rank order: the same bits on every
 * rank, no all-gather. */
static td_status td__f_ar_all_push(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b,
                                   uint64_t e) {
  const int n = f->n, r = f->r;
  const size_t whole = (size_t)op->d.m * (size_t)op->d.n * f->esz;
  td_status st = TD_OK;
  td_status gst = td__f_ar_gemm_all_push(op, f, a, b, &st);
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_GDONE, e));
  TD_CHECK(td__f_sync_mid(op, f)); /* every rank's pushes of call e are enqueued */
  const void *src[TD__MAXR];
  for (int p = 0; p < n; p++) {
    td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_push, 0), "cudaStreamWaitEvent"));
    src[p] = p == r ? f->buf : (const char *)f->recv + (size_t)td__f_slot(p, r) * whole;
  }
  int le = td__fused_reduce(c, src, n, (long long)(op->d.m * op->d.n), td__f_dt(op->d.dtype), f->sms, f->s);
  if (le != 0 && gst == TD_OK)
    gst = td__f_cu((cudaError_t)le, "the reduction kernel's launch");
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  return gst != TD_OK ? gst : st != TD_OK ? st : fin;
}

/* kgather (one shared GPU): rank 0's one launch computes every row of the
 * sum, C[rows_p] = sum_q A_q[rows_p] * B_q, over every rank's A and B where
 * they are (published before the opening barrier), and stores each row at
 * its owner's C (gemm_rs, PUSH) or at every rank's (gemm_ar, BCAST). Rank
 * 0 sees the launch end and tells the others on the host
 * (td__f_one_launch_end), so each rank returns only once the launch that
 * read its A and B and wrote its C has ended: no closing barrier. A failed
 * launch is reported through the middle exchange and the end word alike. */
static td_status td__f_kgather(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  const int n = f->n, r = f->r, rs = op->d.kind == TD_TP_GEMM_RS;
  td_status st = TD_OK, gst = TD_OK;
  if (r == 0) {
    const void *as[TD__MAXR], *bs[TD__MAXR];
    td_gemm_hooks out;
    memset(&out, 0, sizeof out);
    td__f_operands(f, a, b, c, as, bs, out.dst);
    if (rs) { /* td_chunk_range's split: the first M % n ranks own one row more */
      out.rows_per_peer = f->rows[0] > 0 ? f->rows[0] : 1;
      out.push_long_peers = f->rows[0] > f->rows[n - 1] ? op->d.m % n : 0;
    } else {
      out.bcast_peers = n;
      out.bcast_hint = f->bcast_hint;
      out.bcast_defer = f->bcast_defer;
      out.bcast_pace_kb = f->bcast_pace_kb;
    }
    out.split_ws = f->split_ws, out.split_ws_bytes = f->split_ws_bytes, out.split_waves = f->tail_split;
    out.map_cache = f->map_cache;
    td_gemm_problem pr = {(int)op->d.m, (int)op->d.n, (int)op->d.k, op->d.dtype, TD_GEMM_B_KN, NULL, NULL, c, NULL};
    td__f_prof_event(f, 1);
    gst = td__gemm_cuda_run_kgather(&pr, &f->cfg, as, bs, n, op->d.k / n, f->kmaps,
                                    rs ? TD_GEMM_HOOK_PUSH : TD_GEMM_HOOK_BCAST, &out, f->s);
    td__f_stamp(f, TD__PROF_LAUNCHED);
    td__f_prof_event(f, 2);
  }
  return td__f_one_launch_end(op, f, gst, st, e);
}

td_status td__f_rs_ar(td_tp_op *op, td__tp_fused *f, void *c, const void *a, const void *b, uint64_t e) {
  if (f->ar_all_push)
    return td__f_ar_all_push(op, f, c, a, b, e);
  if (f->kgather)
    return td__f_kgather(op, f, c, a, b, e);
  const int64_t M = op->d.m, N = op->d.n;
  const int r = f->r, n = f->n;
  const size_t crow = (size_t)N * f->esz;
  const int dt = td__f_dt(op->d.dtype);
  /* push only where each rank reduces its own rows (rs, ar two-shot) */
  const int push = f->rs_push && (op->d.kind == TD_TP_GEMM_RS || !f->one_shot);
  td_status st = TD_OK;
  /* the operand-check exchange (tp_op.c) was this call's opening barrier:
   * every rank finished call e-1, so no peer still reads this rank's partial
   * or writes its receive slots */
  td_status gst = push ? td__f_rs_gemm_push(op, f, a, b, &st) : td__f_rs_gemm_whole(op, f, a, b);
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_GDONE, e));
  td__f_keep(&st, td__f_cu(cudaEventRecord(f->ev_gdone, f->s), "cudaEventRecord"));
  TD_CHECK(td__f_sync_mid(op, f)); /* every partial GEMM (and push) of call e is enqueued */
  const void *src[TD__MAXR];
  int le = 0;
  if (push) {
    /* the peers' pushes into this rank's slots, and this rank's own pushes
     * (the compute stream joins its copy stream, so the host wait covers it) */
    for (int p = 0; p < n; p++)
      td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_push, 0), "cudaStreamWaitEvent"));
    const size_t slot = (size_t)f->rows[0] * crow;
    for (int p = 0; p < n; p++)
      src[p] = p == r ? (const char *)f->buf + (size_t)f->row0[r] * crow : (const char *)f->recv + (size_t)p * slot;
  } else {
    for (int p = 0; p < n; p++)
      if (p != r)
        td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, f->peer[p]->ev_gdone, 0), "cudaStreamWaitEvent"));
    for (int p = 0; p < n; p++)
      src[p] = (const char *)f->pbuf[p] + (size_t)f->row0[r] * crow;
  }
  if (op->d.kind == TD_TP_GEMM_RS || !f->one_shot) {
    void *dst = op->d.kind == TD_TP_GEMM_RS ? c : (char *)f->red + (size_t)f->row0[r] * crow;
    le = td__fused_reduce(dst, src, n, (long long)(f->rows[r] * N), dt, f->sms, f->s);
  } else { /* one-shot all-reduce: every rank sums every row */
    for (int p = 0; p < n; p++)
      src[p] = f->pbuf[p];
    le = td__fused_reduce(c, src, n, (long long)(M * N), dt, f->sms, f->s);
  }
  if (le != 0 && gst == TD_OK)
    gst = td__f_cu((cudaError_t)le, "the reduction kernel's launch");
  if (op->d.kind == TD_TP_GEMM_AR && !f->one_shot) { /* all-gather of the reduced rows */
    td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_RDONE, e));
    td__f_keep(&st, td__f_cu(cudaEventRecord(f->ev_rdone, f->s), "cudaEventRecord"));
    TD_CHECK(td__f_sync_mid(op, f)); /* every reduction of call e is enqueued */
    for (int j = 0; j < n; j++) {
      int p = (r + j) % n;
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
