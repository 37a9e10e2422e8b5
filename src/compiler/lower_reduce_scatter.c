/* SPDX-License-Identifier: Apache-2.0
 * Lowering pattern: ReduceScatter (the communication half of GEMM -> RS).
 *
 * Every rank holds a full-size partial sum. The block owned by rank q (its
 * td_chunk_range part along `dim`) is cut into `chunks` sub-chunks; rank r
 * pushes its partial sub-chunk for q into q's symmetric receive buffer (slot
 * r) as soon as the producing GEMM tiles are done (they run in destination
 * order r+1, r+2, ..., r), and raises q's signal for (r, chunk). The owner
 * reduces as the pieces arrive: q receives from q-1 first, then q-2, ..., so
 * its chain is copy(slot q-1), += slot q-2, ..., += its own partial (computed
 * last). Pushes and reductions interleave on the comm worker (push to r+k,
 * then reduce what came from r-k): each reduction only waits for a peer's
 * push that sits earlier in that peer's queue, so no order of workers can
 * deadlock. Used by reduce_scatter and by the first half of all_reduce.
 * On cpu, when lower_matmul.c held back the producing GEMM tile of the
 * owner's rows (td__rs_fold), that tile is the chain's last step: it
 * accumulates straight into the accumulator, so no add pass follows it. */
#include <stdio.h>
#include <stdlib.h>

#include "compiler/compiler.h"
#include "core/error.h"

typedef struct td__rs_geom {
  int n, chunks, dim;
  int64_t R, C, slot_rows;
} td__rs_geom;

/* Sub-chunk j of the block owned by q: rows [*r0,+*rows) x cols [*c0,+*cols) of the
 * full partial; *lr0 is its first row inside the owner's local block. */
static void td__rs_piece(const td__rs_geom *g, int q, int j, int64_t *r0, int64_t *rows, int64_t *c0,
                         int64_t *cols, int64_t *lr0) {
  size_t off, len, so, sl;
  td_chunk_range((size_t)(g->dim == 0 ? g->R : g->C), g->n, q, &off, &len);
  if (g->dim == 0) {
    td_chunk_range(len, g->chunks, j, &so, &sl);
    *r0 = (int64_t)(off + so);
    *c0 = 0;
    *cols = g->C;
  } else {
    td_chunk_range((size_t)g->R, g->chunks, j, &so, &sl);
    *r0 = (int64_t)so;
    *c0 = (int64_t)off;
    *cols = (int64_t)len;
  }
  *rows = (int64_t)sl;
  *lr0 = (int64_t)so;
}

td_status td__rs_core(td__lower *L, const char *tag, td_value src_rv, int32_t src_buf, int whole_src,
                      td_value dst_rv, int32_t dst_buf, int dim, int64_t R, int64_t C) {
  td__rs_geom g = {L->n, L->chunks, dim, R, C, dim == 0 ? (R + L->n - 1) / L->n : R};
  int n = g.n, chunks = g.chunks;
  char name[40];
  /* The pieces travel and are summed in the partial's buffer dtype (f32 when
   * the compiler keeps a 16-bit GEMM's partial sums in f32, see lower.c); if
   * that differs from the result's, the chain sums into an f32 accumulator
   * and a last element-wise copy rounds each piece into the result. */
  td_dtype pdt = td_plan_buffer(L->plan, src_buf)->dtype;
  const td_buffer_desc *dd = td_plan_buffer(L->plan, dst_buf);
  int32_t acc = dst_buf;
  if (pdt != dd->dtype) {
    snprintf(name, sizeof name, "%.20s.acc", tag);
    acc = td__buffer(L, name, TD_BUF_LOCAL, pdt, dd->rows, dd->cols);
  }
  snprintf(name, sizeof name, "%.20s.recv", tag);
  int32_t recv = n > 1 ? td__buffer(L, name, TD_BUF_SYMM, pdt, (int64_t)n * g.slot_rows,
                                    dim == 0 ? C : (C + n - 1) / n)
                       : -1;
  uint32_t *sig = malloc(sizeof *sig * (size_t)n * (size_t)chunks * 2);
  if (!sig)
    return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  uint32_t *chain = sig + (size_t)n * (size_t)chunks;
  for (int s = 0; s < n; s++)
    for (int j = 0; j < chunks; j++)
      sig[s * chunks + j] = n > 1 ? td__signal(L, "rs.%.12s.s%d.c%d", tag, s, j) : UINT32_MAX;
  td__need need = {0};
  int64_t r0, rows, c0, cols, lr0;
  for (int r = 0; r < n && L->st == TD_OK; r++) {
    for (int j = 0; j < chunks; j++)
      chain[j] = UINT32_MAX;
    /* When the partials for all peers are ready at once (one producing task,
     * or the own tile held back by td__rs_fold), every push goes first, so
     * none waits in the comm queue behind a reduction that waits for a peer
     * (pushes depend only on local tasks, so this order cannot deadlock). */
    td__need_clear(&need); /* all partials ready at once (one producing task)? */
    td__need_rows(L, &need, src_rv, r, 0, INT64_MAX / 4, 1);
    int folded = L->rs_fold[r].set && L->rs_fold[r].v == src_rv;
    int pushes_first = folded || (need.ndeps <= 1 && need.nwaits == 0);
    /* A 16-bit result: the last step adds the own partial and rounds in one
     * element-wise pass (c = a + b into the result); with one peer its slot is
     * that pass's a, so no copy into the accumulator is made at all. */
    int fuse_last = acc != dst_buf && !folded, slot_direct = fuse_last && n == 2;
    int last = pushes_first ? 1 : 2;
    for (int pass = pushes_first ? 0 : 2; pass <= last; pass++) { /* 0 pushes, 1 reductions, 2 both */
      for (int k = 1; k < n; k++) {
        int q = (r + k) % n, s = (r - k + n) % n;
        for (int j = 0; pass != 1 && j < chunks; j++) { /* push my partial of q's block */
          td__rs_piece(&g, q, j, &r0, &rows, &c0, &cols, &lr0);
          if (!rows || !cols)
            continue;
          td__need_clear(&need);
          td__need_rows(L, &need, src_rv, r, r0, rows, whole_src);
          td_task t = {.kind = TD_TASK_COPY, .worker = TD_WORKER_COMM};
          t.a = td__view(src_buf, TD_PEER_SELF, r0, c0, rows, cols);
          t.b.buf = -1;
          t.c = td__view(recv, q, (int64_t)r * g.slot_rows + lr0, 0, rows, cols);
          td_raise raise = {sig[r * chunks + j], q, 1};
          td__label(&t, "rs c%d ->%d", j, q);
          td__emit(L, r, &t, &need, &raise, 1);
        }
        for (int j = 0; pass != 0 && !slot_direct && j < chunks; j++) { /* reduce what s sent for my block */
          td__rs_piece(&g, r, j, &r0, &rows, &c0, &cols, &lr0);
          if (!rows || !cols)
            continue;
          td__need_clear(&need);
          td__need_task(&need, chain[j]);
          td__need_wait(&need, sig[s * chunks + j], 1);
          td_task t = {.kind = chain[j] == UINT32_MAX ? TD_TASK_COPY : TD_TASK_REDUCE,
                       .worker = TD_WORKER_COMM, .op = TD_SUM};
          t.a = td__view(recv, TD_PEER_SELF, (int64_t)s * g.slot_rows + lr0, 0, rows, cols);
          t.b.buf = -1;
          t.c = td__view(acc, TD_PEER_SELF, lr0, 0, rows, cols);
          td__label(&t, "rs %s c%d <-%d", chain[j] == UINT32_MAX ? "copy" : "add", j, s);
          chain[j] = td__emit(L, r, &t, &need, NULL, 0);
        }
      }
    }
    for (int j = 0; j < chunks; j++) { /* my own partial, computed last */
      td__rs_piece(&g, r, j, &r0, &rows, &c0, &cols, &lr0);
      if (!rows || !cols)
        continue;
      td__need_clear(&need);
      td__need_task(&need, chain[j]);
      const td__rs_fold *f = &L->rs_fold[r];
      if (f->set && f->v == src_rv && dim == 0 && chunks == 1 && f->task.c.rows == rows && f->task.c.cols == cols) {
        /* the own GEMM tile itself, held back by lower_matmul.c: c = acc (+)= A B */
        for (uint32_t d = 0; d < f->need.ndeps; d++)
          td__need_task(&need, f->need.deps[d]);
        for (uint32_t w = 0; w < f->need.nwaits; w++)
          td__need_wait(&need, f->need.waits[w].signal, f->need.waits[w].value);
        td_task t = f->task;
        t.c = td__view(acc, TD_PEER_SELF, lr0, 0, rows, cols);
        if (chain[j] != UINT32_MAX)
          t.op |= TD_GEMM_ACCUMULATE;
        chain[j] = td__emit(L, r, &t, &need, NULL, 0);
      } else if (fuse_last && n > 1) { /* dst = round(acc or the peer's slot + own partial) */
        td__need_rows(L, &need, src_rv, r, r0, rows, whole_src);
        int s1 = (r + 1) % n; /* slot_direct: the one peer */
        if (slot_direct)
          td__need_wait(&need, sig[s1 * chunks + j], 1);
        td_task t = {.kind = TD_TASK_EWISE, .worker = TD_WORKER_COMM, .op = TD_EW_ADD, .alpha = 1.0f};
        t.a = slot_direct ? td__view(recv, TD_PEER_SELF, (int64_t)s1 * g.slot_rows + lr0, 0, rows, cols)
                          : td__view(acc, TD_PEER_SELF, lr0, 0, rows, cols);
        t.b = td__view(src_buf, TD_PEER_SELF, r0, c0, rows, cols);
        t.c = td__view(dst_buf, TD_PEER_SELF, lr0, 0, rows, cols);
        td__label(&t, "rs add+round c%d", j);
        chain[j] = td__emit(L, r, &t, &need, NULL, 0);
      } else {
        td__need_rows(L, &need, src_rv, r, r0, rows, whole_src);
        td_task t = {.kind = chain[j] == UINT32_MAX ? TD_TASK_COPY : TD_TASK_REDUCE,
                     .worker = TD_WORKER_COMM, .op = TD_SUM};
        t.a = td__view(src_buf, TD_PEER_SELF, r0, c0, rows, cols);
        t.b.buf = -1;
        t.c = td__view(acc, TD_PEER_SELF, lr0, 0, rows, cols);
        td__label(&t, "rs %s c%d own", chain[j] == UINT32_MAX ? "copy" : "add", j);
        chain[j] = td__emit(L, r, &t, &need, NULL, 0);
      }
      if (acc != dst_buf && !(fuse_last && n > 1)) { /* round the f32 sum into the result */
        td__need_clear(&need);
        td__need_task(&need, chain[j]);
        td_task e = {.kind = TD_TASK_EWISE, .worker = TD_WORKER_COMM, .op = TD_EW_COPY, .alpha = 1.0f};
        e.a = td__view(acc, TD_PEER_SELF, lr0, 0, rows, cols);
        e.b.buf = -1;
        e.c = td__view(dst_buf, TD_PEER_SELF, lr0, 0, rows, cols);
        td__label(&e, "rs round c%d", j);
        chain[j] = td__emit(L, r, &e, &need, NULL, 0);
      }
      td__ready_task(L, dst_rv, r, lr0, rows, chain[j]);
      td__ready_order(L, dst_rv, r, lr0, rows);
    }
  }
  td__need_free(&need);
  free(sig);
  return L->st;
}

td_status td__lower_reduce_scatter(td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  td_value x = V->in[0];
  int64_t R, C;
  td__val_shape(L->p, v, &R, &C);
  char lab[40];
  td__val_label(L->p, v, lab, sizeof lab);
  return td__rs_core(L, lab, x, L->buf[x], td__whole(L, x), v, L->buf[v], V->dim, R, C);
}
