/* SPDX-License-Identifier: Apache-2.0
 * Lowering pattern: matmul into GEMM core tiles. Two orderings make the
 * overlap patterns work from the GEMM side:
 *  - AllGather -> GEMM: when the left operand comes from an all_gather, row
 *    blocks follow the gather's visit order (the rank's own rows first, then
 *    the order in which peers' chunks arrive), and each tile waits only on
 *    the signal of the chunk holding its rows.
 *  - GEMM -> ReduceScatter / AllReduce: when the result feeds one, row blocks
 *    are produced by destination rank starting at rank+1 (own rows last), so
 *    partial sums leave for their owners while later tiles still compute.
 * Tiles are tile_rows x tile_cols of the rank's local output; K is whole
 * (the contraction is local, or split across ranks for a partial result).
 * On cpu a gelu that is the matmul's only reader runs as the tiles'
 * epilogue (td__fused_gelu). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "core/error.h"
#include "exec/gemm_queue_cfg.h"
#ifdef TD_HAVE_CUDA_EXEC
#include "exec/cuda/gemm_target.h"
#endif

/* The collective that consumes v as its only use, when it is a fused RS/AR. */
static td_value td__rs_consumer(const td__lower *L, td_value v) {
  td_value found = -1;
  int uses = 0;
  for (td_value u = v + 1; u < L->p->nvals; u++) {
    const td__val *U = &L->p->vals[u];
    if (U->in[0] == v || U->in[1] == v) {
      uses++;
      if ((U->op == TD_OP_REDUCE_SCATTER || U->op == TD_OP_ALL_REDUCE) && U->in[0] == v)
        found = u;
    }
  }
  if (uses != 1 || found < 0 || td__fallback(L, found) || !L->o.overlap)
    return -1;
  return found;
}

/* cpu: matmul -> gelu with the matmul read by nothing else becomes GEMM tiles
 * with the GELU epilogue (TD_GEMM_GELU) writing the gelu value's buffer: one
 * pass over the tile while it is in cache instead of a store, a reload and a
 * second store, and one task per tile instead of two. Both plans get it (the
 * sequential baseline keeps the same tiles). Not for outputs (the matmul's
 * own values must then exist) nor on cuda (its tiles have no epilogue). */
td_value td__fused_gelu(const td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  if (L->o.backend_cuda || V->op != TD_OP_MATMUL || V->is_output || V->layout.kind == TD_LAYOUT_PARTIAL)
    return -1;
  td_value found = -1;
  for (td_value u = v + 1; u < L->p->nvals; u++) {
    const td__val *U = &L->p->vals[u];
    if (U->in[0] != v && U->in[1] != v)
      continue;
    if (found >= 0 || U->op != TD_OP_GELU || U->is_output || U->dtype != V->dtype ||
        U->layout.kind != V->layout.kind || U->layout.dim != V->layout.dim)
      return -1;
    found = u;
  }
  return found;
}

/* Merges neighbours in the list that are contiguous in rows into one block of
 * at most `cap` rows, except blocks inside rows [keep0, keep1) (the rank's
 * own rows: first for AG -> GEMM, last for GEMM -> RS), which stay tiles of
 * their own so the overlap remains. Fewer, larger GEMM tiles pay off on cpu,
 * where every OpenBLAS call packs its whole B operand again (docs/perf.md);
 * the perf model raises tile_rows above a chunk only when communication is
 * negligible next to the GEMMs (model.c). */
static uint32_t td__merge_blocks(int64_t *b, uint32_t n, int64_t keep0, int64_t keep1, int64_t cap) {
  uint32_t out = 0;
  int prev_kept = 1;
  for (uint32_t i = 0; i < n; i++) {
    int64_t r0 = b[2 * i], rows = b[2 * i + 1];
    int kept = r0 < keep1 && r0 + rows > keep0;
    if (out > 0 && !prev_kept && !kept && b[2 * (out - 1)] + b[2 * (out - 1) + 1] == r0 &&
        b[2 * (out - 1) + 1] + rows <= cap) {
      b[2 * (out - 1) + 1] += rows;
      continue;
    }
    b[2 * out] = r0;
    b[2 * out + 1] = rows;
    out++;
    prev_kept = kept;
  }
  return out;
}

/* cpu, GEMM -> ReduceScatter along rows cut by destination (td__split_pays), one
 * chunk per rank, whole-width tiles:
 * the tile of the rank's own rows is held back for rs_core, which runs it last
 * in the owner's chain with c = the accumulator and ACCUMULATE (td__rs_fold).
 * On cpu that removes a pass over the owner's block after its last GEMM. */
static int td__rs_fold_ok(const td__lower *L, td_value v) {
  td_value rs = td__rs_consumer(L, v);
  return rs >= 0 && !L->o.backend_cuda && L->n > 1 && L->chunks == 1 && L->tile_cols == 0 && !L->gq.on &&
         L->p->vals[rs].op == TD_OP_REDUCE_SCATTER && L->p->vals[rs].dim == 0;
}

/* cpu: whether cutting matmul v's rows at the chunks of a collective hides
 * more than it costs. Each extra OpenBLAS call packs its whole B operand
 * again (read and written once at the memory bandwidth), while a row block
 * can hide at most the move of one part (alpha + bytes / beta) and the wait
 * for it. On the main job one extra call per GEMM cost 3-8% of a launch
 * while a part moved in under 1% (docs/perf.md, 2026-11-29): there the
 * compiler keeps one tile per GEMM, as the sequential plan does. */
static int td__split_pays(const td__lower *L, td_value v, double part_bytes) {
  if (L->o.backend_cuda || L->gq.on)
    return 1;
  const td_buffer_desc *bd = td_plan_buffer(L->plan, L->buf[L->p->vals[v].in[1]]);
  double repack_s = 2.0 * (double)bd->rows * (double)bd->cols * 4.0 / L->model.mem_bytes_s;
  double hidden_s = L->model.alpha_s + part_bytes / L->model.beta_bytes_s;
  return hidden_s >= repack_s;
}

/* Row blocks of the output on `rank`, in production order, as (row0, rows) pairs. */
static uint32_t td__blocks(td__lower *L, td_value v, int rank, int64_t rows, int64_t **out) {
  const td__val *V = &L->p->vals[v];
  uint32_t cap = (uint32_t)L->n * (uint32_t)L->chunks + 16, n = 0;
  int64_t *b = malloc(sizeof *b * 2 * cap);
  if (!b)
    return 0;
  td_value rs = td__rs_consumer(L, v);
  int64_t M = rows;
  if (rs >= 0 && (L->p->vals[rs].op == TD_OP_ALL_REDUCE || L->p->vals[rs].dim == 0)) {
    int by_owner = 1; /* reduce_scatter, or all_reduce as reduce_scatter + all_gather */
    if (L->p->vals[rs].op == TD_OP_ALL_REDUCE) {
      int64_t R, C;
      td__val_shape(L->p, v, &R, &C);
      by_owner = (int64_t)td_dtype_size(V->dtype) * R * C > L->one_shot_bytes;
    }
    int parts = by_owner ? L->n : 1;
    int64_t R, C;
    td__val_shape(L->p, v, &R, &C);
    double part = (double)M / parts * (double)C * (double)td_dtype_size(td_plan_buffer(L->plan, L->buf[v])->dtype);
    if (!td__split_pays(L, v, part))
      parts = 0; /* one tile: the collective starts after it, as in the sequential plan */
    for (int k = 1; k <= parts; k++) {
      int q = by_owner ? (rank + k) % L->n : 0;
      size_t off, len;
      td_chunk_range((size_t)M, parts, q, &off, &len);
      for (int j = 0; j < L->chunks; j++) {
        size_t so, sl;
        td_chunk_range(len, L->chunks, j, &so, &sl);
        if (sl) {
          b[2 * n] = (int64_t)(off + so);
          b[2 * n + 1] = (int64_t)sl;
          n++;
        }
      }
    }
    size_t oo = 0, ol = 0;
    if (by_owner)
      td_chunk_range((size_t)M, L->n, rank, &oo, &ol);
    n = td__merge_blocks(b, n, (int64_t)oo, (int64_t)(oo + ol), L->tile_rows);
  } else if (!(V->flags & TD_MATMUL_TRANSPOSE_A) && L->o.overlap) {
    n = td__visit_order(L, V->in[0], rank, b, cap);
    const td__val *A = &L->p->vals[V->in[0]];
    int64_t AR, AC;
    td__val_shape(L->p, V->in[0], &AR, &AC);
    if (n > 0 && !td__split_pays(L, v, (double)AR / L->n * (double)AC * (double)td_dtype_size(A->dtype)))
      n = 0; /* one tile after the whole operand, as in the sequential plan */
    size_t oo = 0, ol = 0;
    if (A->op == TD_OP_ALL_GATHER && A->dim == 0)
      td_chunk_range((size_t)M, L->n, rank, &oo, &ol);
    else if (n > 0)
      oo = (size_t)b[0], ol = (size_t)b[1];
    if (n > 0)
      n = td__merge_blocks(b, n, (int64_t)oo, (int64_t)(oo + ol), L->tile_rows);
  }
  if (n == 0) {
    b[0] = 0;
    b[1] = M;
    n = 1;
  }
  *out = b;
  return n;
}

/* On the cpu backend a 16-bit GEMM tile converts all of its B operand to f32
 * each time it runs, so B is converted once per launch instead: a few
 * element-wise copies into an f32 local buffer, which the tiles then read.
 * They run on the compute workers: they are computation, and counting them
 * as communication would inflate the hidden share. Only for B that
 * is an input or weight (ready at launch) and used by more than one tile. */
static int32_t td__f32_weight(td__lower *L, td_value b) {
  const td__val *B = &L->p->vals[b];
  if (L->o.backend_cuda || td_plan_buffer(L->plan, L->buf[b])->dtype == TD_F32 ||
      (B->op != TD_OP_INPUT && B->op != TD_OP_WEIGHT))
    return -1; /* already f32 (prepacked weights included), or not ready at launch */
  if (L->f32buf[b] >= 0)
    return L->f32buf[b];
  const td_buffer_desc *d = td_plan_buffer(L->plan, L->buf[b]);
  char name[40];
  snprintf(name, sizeof name, "%.26s.f32", d->name);
  int32_t fb = td__buffer(L, name, TD_BUF_LOCAL, TD_F32, d->rows, d->cols);
  if (fb < 0)
    return -1;
  for (int r = 0; r < L->n; r++) {
    int64_t r0, rows, c0, cols;
    td__local_extent(L, b, r, &r0, &rows, &c0, &cols);
    for (int piece = 0; piece < 2 && cols > 0; piece++) {
      size_t po, pl;
      td_chunk_range((size_t)rows, 2, piece, &po, &pl);
      if (!pl)
        continue;
      td_task t = {.kind = TD_TASK_EWISE, .worker = TD_WORKER_COMPUTE, .op = TD_EW_COPY, .alpha = 1.0f};
      t.a = td__view(L->buf[b], TD_PEER_SELF, (int64_t)po, 0, (int64_t)pl, cols);
      t.b.buf = -1;
      t.c = td__view(fb, TD_PEER_SELF, (int64_t)po, 0, (int64_t)pl, cols);
      td__label(&t, "f32 %.12s r%lld", B->name, (long long)po);
      uint32_t idx = td__emit(L, r, &t, NULL, NULL, 0);
      td__ready_task(L, L->p->nvals + b, r, (int64_t)po, (int64_t)pl, idx);
    }
  }
  L->f32buf[b] = fb;
  return fb;
}

/* cuda kernel queue (L->gq.on): marks a whole-row-block GEMM task for the
 * queue and, when its views fit the Hopper GEMM's layout rules (16-bit
 * operands of one dtype, A not transposed, dense full-width rows, K and N
 * multiples of 8), packs the tile configuration from the tuning cache or the
 * default rule into its op. Others run on the executor's sub-tile grid. */
static void td__queue_gemm(td__lower *L, td_task *t) {
  t->op |= TD_GEMM_QUEUE;
#ifdef TD_HAVE_CUDA_EXEC
  const td_buffer_desc *a = td_plan_buffer(L->plan, t->a.buf), *b = td_plan_buffer(L->plan, t->b.buf),
                       *c = td_plan_buffer(L->plan, t->c.buf);
  const int64_t m = t->c.rows, n = t->c.cols, k = (t->op & TD_GEMM_TRANS_A) ? t->a.rows : t->a.cols;
  const int fits = a && b && c && !(t->op & TD_GEMM_TRANS_A) && a->dtype == c->dtype && b->dtype == c->dtype &&
                   (c->dtype == TD_BF16 || c->dtype == TD_F16) && k % 8 == 0 && n % 8 == 0 && t->a.col0 == 0 &&
                   t->a.cols == a->cols && t->b.col0 == 0 && t->b.cols == b->cols && t->c.col0 == 0 &&
                   t->c.cols == c->cols && m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX;
  td__cuda_gemm_target tg = {.queue = 1, .sm = 90};
  snprintf(tg.gpu, sizeof tg.gpu, "%s", L->gq.gpu);
  td__gemm_qcfg q;
  const int from = fits ? td__cuda_gemm_target_config(&tg, c->dtype, (t->op & TD_GEMM_TRANS_B) != 0, (int)m,
                                                      (int)n, (int)k, &q)
                        : -1;
  const uint32_t packed = from >= 0 ? td__gemm_qcfg_pack(&q) : 0;
  if (!packed) {
    L->gq.plain++;
    return;
  }
  t->op |= packed;
  if (from == 1)
    L->gq.cached++;
  else
    L->gq.rule++;
  if (!L->gq.first[0]) {
    char cfg[40];
    td__gemm_qcfg_format(&q, cfg, sizeof cfg);
    snprintf(L->gq.first, sizeof L->gq.first, "%s", cfg);
  }
#else
  (void)L;
#endif
}

/* cpu: a 16-bit A gathered along rows is converted once into an f32 local
 * buffer, piece by piece in the gather's visit order, by compute tasks: the
 * rank's own rows straight from its shard (so their conversion runs while
 * the peers' chunks are still in flight: the local chunk overlaps even when
 * the GEMM is one tile), the others once their chunk has arrived; the GEMM
 * tiles then read f32 rows and convert nothing. The sequential plan's
 * conversion waits for the whole gather, like any consumer. Returns the
 * buffer (readiness in slot nvals + a) or -1. */
static int32_t td__f32_gathered(td__lower *L, td_value a) {
  const td__val *A = &L->p->vals[a];
  if (L->o.backend_cuda || A->op != TD_OP_ALL_GATHER || A->dim != 0 || A->dtype == TD_F32)
    return -1;
  if (L->f32buf[a] >= 0)
    return L->f32buf[a];
  const td_buffer_desc *d = td_plan_buffer(L->plan, L->buf[a]);
  const int64_t drows = d->rows, dcols = d->cols; /* d moves when a buffer is added */
  char name[40];
  snprintf(name, sizeof name, "%.26s.f32", d->name);
  int32_t fb = td__buffer(L, name, TD_BUF_LOCAL, TD_F32, drows, dcols);
  if (fb < 0)
    return -1;
  td_value x = A->in[0];
  int whole = td__whole(L, a);
  td__need need = {0};
  int64_t *order = malloc(sizeof *order * 2 * ((size_t)L->n * (size_t)L->chunks + 1));
  if (!order) {
    L->st = td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
    return -1;
  }
  for (int r = 0; r < L->n && L->st == TD_OK; r++) {
    uint32_t nb = whole ? 0 : td__visit_order(L, a, r, order, (uint32_t)L->n * (uint32_t)L->chunks + 1);
    if (nb == 0) {
      order[0] = 0, order[1] = drows;
      nb = 1;
    }
    size_t own_off, own_len;
    td_chunk_range((size_t)drows, L->n, r, &own_off, &own_len);
    for (uint32_t bi = 0; bi < nb; bi++) {
      int64_t r0 = order[2 * bi], rows = order[2 * bi + 1];
      if (rows <= 0)
        continue;
      int own = !whole && r0 >= (int64_t)own_off && r0 + rows <= (int64_t)(own_off + own_len);
      td__need_clear(&need);
      td_task t = {.kind = TD_TASK_EWISE, .worker = TD_WORKER_COMPUTE, .op = TD_EW_COPY, .alpha = 1.0f};
      if (own) {
        td__need_rows(L, &need, x, r, r0 - (int64_t)own_off, rows, td__whole(L, x));
        t.a = td__view(L->buf[x], TD_PEER_SELF, r0 - (int64_t)own_off, 0, rows, dcols);
      } else {
        td__need_rows(L, &need, a, r, r0, rows, whole);
        t.a = td__view(L->buf[a], TD_PEER_SELF, r0, 0, rows, dcols);
      }
      t.b.buf = -1;
      t.c = td__view(fb, TD_PEER_SELF, r0, 0, rows, dcols);
      char lab[40];
      td__val_label(L->p, a, lab, sizeof lab);
      td__label(&t, "f32 %.10s r%lld", lab, (long long)r0);
      uint32_t idx = td__emit(L, r, &t, &need, NULL, 0);
      td__ready_task(L, L->p->nvals + a, r, r0, rows, idx);
      td__ready_order(L, L->p->nvals + a, r, r0, rows);
    }
  }
  free(order);
  td__need_free(&need);
  L->f32buf[a] = fb;
  return fb;
}

int td__ag_own_rows_unread(const td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  if (L->o.backend_cuda || !L->o.overlap || V->op != TD_OP_ALL_GATHER || V->dim != 0 || V->dtype == TD_F32 ||
      V->is_output || td__whole(L, v))
    return 0;
  int readers = 0;
  for (td_value u = v + 1; u < L->p->nvals; u++) {
    const td__val *U = &L->p->vals[u];
    if (U->in[1] == v || (U->in[0] == v && (U->op != TD_OP_MATMUL || (U->flags & TD_MATMUL_TRANSPOSE_A))))
      return 0;
    readers += U->in[0] == v;
  }
  return readers > 0;
}

td_status td__lower_matmul(td__lower *L, td_value v) {
  const td_program *p = L->p;
  const td__val *V = &p->vals[v];
  td_value a = V->in[0], b = V->in[1];
  const td__val *A = &p->vals[a], *B = &p->vals[b];
  int ta = (V->flags & TD_MATMUL_TRANSPOSE_A) != 0, tb = (V->flags & TD_MATMUL_TRANSPOSE_B) != 0;
  td_layout la = A->layout, lb = B->layout;
  if (la.kind == TD_LAYOUT_SHARD && ta)
    la.dim = 1 - la.dim;
  if (lb.kind == TD_LAYOUT_SHARD && tb)
    lb.dim = 1 - lb.dim;
  int64_t ar, ac;
  td__val_shape(p, a, &ar, &ac);
  int64_t K = ta ? ar : ac;
  int k_by_a = la.kind == TD_LAYOUT_SHARD && la.dim == 1;
  int k_by_b = !k_by_a && lb.kind == TD_LAYOUT_SHARD && lb.dim == 0;
  if ((k_by_a || k_by_b) && K < L->n) {
    char where[160];
    return td__error(TD_ERR_SHAPE, "%smatmul: the contraction dim (%lld) is split over %d ranks; each "
                     "rank needs at least one element of it (use fewer ranks or a larger dim)",
                     td__val_where(p, v, where, sizeof where), (long long)K, L->n);
  }
  int whole_a = ta || td__whole(L, a);
  /* More than one tile on some rank: stage a 16-bit weight in f32 (see td__f32_weight). */
  int32_t bbuf = L->buf[b];
  td_value b_rv = b;
  int64_t o_r0, o_rows, o_c0, o_cols;
  td__local_extent(L, v, 0, &o_r0, &o_rows, &o_c0, &o_cols); /* rank 0 holds the largest part */
  if (o_rows > L->tile_rows || (L->tile_cols > 0 && o_cols > L->tile_cols)) {
    int32_t fb = td__f32_weight(L, b);
    if (fb >= 0) {
      bbuf = fb;
      b_rv = p->nvals + b;
    }
  }
  /* AG -> GEMM: tiles of the rank's own rows read its shard directly, so the
   * first tiles start at once instead of after the local copy into the
   * gather buffer. */
  td_value own_src = -1;
  int32_t abuf = L->buf[a];
  td_value a_rv = a;
  int32_t fa = ta ? -1 : td__f32_gathered(L, a);
  if (fa >= 0) { /* own rows included: read the f32 staging */
    abuf = fa;
    a_rv = p->nvals + a;
  } else if (A->op == TD_OP_ALL_GATHER && A->dim == 0 && !ta && L->o.overlap) {
    own_src = A->in[0];
  }
  td_value gelu = td__fused_gelu(L, v);
  int fold = td__rs_fold_ok(L, v);
  int32_t cbuf = gelu >= 0 ? L->buf[gelu] : L->buf[v];
  td__need need = {0};
  char lab[40];
  td__val_label(p, gelu >= 0 ? gelu : v, lab, sizeof lab);
  for (int r = 0; r < L->n && L->st == TD_OK; r++) {
    int64_t orow0, orows, ocol0, ocols;
    td__local_extent(L, v, r, &orow0, &orows, &ocol0, &ocols);
    size_t own_off = 0, own_len = 0;
    if (own_src >= 0)
      td_chunk_range((size_t)ar, L->n, r, &own_off, &own_len);
    if (orows == 0 || ocols == 0)
      continue;
    size_t k0 = 0, kl = (size_t)K;
    if (k_by_a || k_by_b)
      td_chunk_range((size_t)K, L->n, r, &k0, &kl);
    /* An operand sharded along K holds exactly this rank's K range; a replicated one is sliced. */
    int b_local_k = lb.kind == TD_LAYOUT_SHARD && lb.dim == 0;
    int64_t aK0 = k_by_a ? 0 : (int64_t)k0, bK0 = b_local_k ? 0 : (int64_t)k0;
    int64_t tc = L->tile_cols > 0 && L->tile_cols < ocols ? L->tile_cols : ocols;
    int64_t *blocks;
    uint32_t nb = td__blocks(L, v, r, orows, &blocks);
    if (!nb) {
      td__need_free(&need);
      return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
    }
    for (uint32_t bi = 0; bi < nb; bi++) {
      int64_t br0 = blocks[2 * bi], brows = blocks[2 * bi + 1];
      for (int64_t i = br0; i < br0 + brows; i += L->tile_rows) {
        int64_t m = br0 + brows - i < L->tile_rows ? br0 + brows - i : L->tile_rows;
        for (int64_t j = 0; j < ocols; j += tc) {
          int64_t nn = ocols - j < tc ? ocols - j : tc;
          int own = own_src >= 0 && i >= (int64_t)own_off && i + m <= (int64_t)(own_off + own_len);
          td__need_clear(&need);
          if (own)
            td__need_rows(L, &need, own_src, r, i - (int64_t)own_off, m, td__whole(L, own_src));
          else
            td__need_rows(L, &need, a_rv, r, i, m, fa >= 0 ? 0 : whole_a);
          td__need_rows(L, &need, b_rv, r, 0, INT64_MAX / 4, 1);
          td_task t = {.kind = TD_TASK_GEMM, .worker = TD_WORKER_COMPUTE, .alpha = 1.0f};
          t.op = (ta ? TD_GEMM_TRANS_A : 0) | (tb ? TD_GEMM_TRANS_B : 0) | (gelu >= 0 ? TD_GEMM_GELU : 0);
          t.a = ta ? td__view(L->buf[a], TD_PEER_SELF, aK0, i, (int64_t)kl, m)
                   : own ? td__view(L->buf[own_src], TD_PEER_SELF, i - (int64_t)own_off, aK0, m, (int64_t)kl)
                         : td__view(abuf, TD_PEER_SELF, i, aK0, m, (int64_t)kl);
          t.b = tb ? td__view(bbuf, TD_PEER_SELF, j, bK0, nn, (int64_t)kl)
                   : td__view(bbuf, TD_PEER_SELF, bK0, j, (int64_t)kl, nn);
          t.c = td__view(cbuf, TD_PEER_SELF, i, j, m, nn);
          if (L->gq.on)
            td__queue_gemm(L, &t);
          td__label(&t, "%s %.8s r%lld c%lld", gelu >= 0 ? "mm+gelu" : "mm", lab, (long long)i, (long long)j);
          size_t fo, fl;
          td_chunk_range((size_t)orows, L->n, r, &fo, &fl);
          if (fold && i == (int64_t)fo && m == (int64_t)fl && j == 0 && nn == ocols) { /* for rs_core */
            td__rs_fold *f = &L->rs_fold[r];
            f->set = 1, f->v = v, f->task = t;
            td__need_clear(&f->need);
            for (uint32_t d = 0; d < need.ndeps; d++)
              td__need_task(&f->need, need.deps[d]);
            for (uint32_t w = 0; w < need.nwaits; w++)
              td__need_wait(&f->need, need.waits[w].signal, need.waits[w].value);
            continue;
          }
          uint32_t idx = td__emit(L, r, &t, &need, NULL, 0);
          td__ready_task(L, gelu >= 0 ? gelu : v, r, i, m, idx);
        }
      }
      td__ready_order(L, gelu >= 0 ? gelu : v, r, br0, brows);
    }
    free(blocks);
  }
  td__need_free(&need);
  return L->st;
}
