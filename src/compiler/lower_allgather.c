/* SPDX-License-Identifier: Apache-2.0
 * Lowering pattern: AllGather (the communication half of AG -> GEMM).
 *
 * Each rank's part is cut into `chunks` sub-chunks; each sub-chunk is one
 * COPY task on a comm worker that puts it into every peer's copy of the
 * symmetric gather buffer and raises that peer's signal for (source, chunk).
 * Direct full mesh (every peer is an LSA peer on local/shm): rank r sends to
 * r-1, r-2, ... so that rank p receives from p+1 first, then p+2, ...; the
 * consumer GEMM visits its own rows first and then follows that arrival order
 * (td__ready_order), which also lines the next GEMM -> ReduceScatter stage
 * (destinations r+1, r+2, ...) up behind it. With opts.ring the chunks travel
 * a ring instead (r forwards to r-1 what it received from r+1).
 * A consumer tile waits only for the signals of the chunks covering its rows.
 * Used by all_gather and by the second half of a large all_reduce. */
#include <stdio.h>
#include <stdlib.h>

#include "compiler/compiler.h"
#include "core/error.h"

/* Sub-chunk j of source s: rows [*lr0, +*lrows) of the source's local buffer and
 * the destination block (global) [*gr0, +rows) x [*gc0, +*gcols). */
static void td__ag_piece(int n, int chunks, int dim, int64_t R, int64_t C, int s, int j, int64_t *lr0,
                         int64_t *lrows, int64_t *gr0, int64_t *gc0, int64_t *gcols) {
  size_t off, len, so, sl;
  td_chunk_range((size_t)(dim == 0 ? R : C), n, s, &off, &len);
  if (dim == 0) {
    td_chunk_range(len, chunks, j, &so, &sl);
    *gr0 = (int64_t)(off + so);
    *gc0 = 0;
    *gcols = C;
  } else {
    td_chunk_range((size_t)R, chunks, j, &so, &sl);
    if (len == 0)
      sl = 0;
    *gr0 = (int64_t)so;
    *gc0 = (int64_t)off;
    *gcols = (int64_t)len;
  }
  *lr0 = (int64_t)so;
  *lrows = (int64_t)sl;
}

td_status td__ag_core(td__lower *L, const char *tag, td_value src_rv, int32_t src_buf, int whole_src,
                      td_value dst_rv, int32_t dst_buf, int dim, int64_t R, int64_t C) {
  int n = L->n, chunks = L->chunks;
  uint32_t *sig = malloc(sizeof *sig * (size_t)n * (size_t)chunks);
  if (!sig)
    return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  for (int s = 0; s < n; s++)
    for (int j = 0; j < chunks; j++)
      sig[s * chunks + j] = n > 1 ? td__signal(L, "ag.%.12s.s%d.c%d", tag, s, j) : UINT32_MAX;
  td__need need = {0};
  for (int r = 0; r < n && L->st == TD_OK; r++) {
    int64_t lr0, lrows, gr0, gc0, gcols;
    /* Own part first: a local copy into this rank's gather buffer (unless
     * no reader takes the own rows from there). */
    int own_copy = !(dst_rv < L->p->nvals && td__ag_own_rows_unread(L, dst_rv));
    for (int j = 0; own_copy && j < chunks; j++) {
      td__ag_piece(n, chunks, dim, R, C, r, j, &lr0, &lrows, &gr0, &gc0, &gcols);
      if (!lrows || !gcols)
        continue;
      td__need_clear(&need);
      td__need_rows(L, &need, src_rv, r, lr0, lrows, whole_src);
      td_task t = {.kind = TD_TASK_COPY, .worker = TD_WORKER_COMM};
      t.a = td__view(src_buf, TD_PEER_SELF, lr0, 0, lrows, gcols);
      t.b.buf = -1;
      t.c = td__view(dst_buf, TD_PEER_SELF, gr0, gc0, lrows, gcols);
      td__label(&t, "ag own c%d", j);
      uint32_t idx = td__emit(L, r, &t, &need, NULL, 0);
      td__ready_task(L, dst_rv, r, gr0, lrows, idx);
    }
    /* Then the puts: step k goes to peer r-k (mesh) or forwards source r+k-1 to r-1 (ring). */
    for (int k = 1; k < n; k++) {
      int peer = L->o.ring ? (r - 1 + n) % n : (r - k + n) % n;
      int s = L->o.ring ? (r + k - 1) % n : r;
      for (int j = 0; j < chunks; j++) {
        td__ag_piece(n, chunks, dim, R, C, s, j, &lr0, &lrows, &gr0, &gc0, &gcols);
        if (!lrows || !gcols)
          continue;
        td__need_clear(&need);
        td_task t = {.kind = TD_TASK_COPY, .worker = TD_WORKER_COMM};
        t.b.buf = -1;
        if (s == r) {
          td__need_rows(L, &need, src_rv, r, lr0, lrows, whole_src);
          t.a = td__view(src_buf, TD_PEER_SELF, lr0, 0, lrows, gcols);
        } else { /* ring: forward what arrived from r+1 */
          td__need_rows(L, &need, dst_rv, r, gr0, lrows, 0);
          t.a = td__view(dst_buf, TD_PEER_SELF, gr0, gc0, lrows, gcols);
        }
        t.c = td__view(dst_buf, peer, gr0, gc0, lrows, gcols);
        td_raise raise = {sig[s * chunks + j], peer, 1};
        td__label(&t, "ag s%d c%d ->%d", s, j, peer);
        td__emit(L, r, &t, &need, &raise, 1);
      }
      if (L->o.ring) /* the forwarded piece is readable here once its signal arrived */
        for (int j = 0; j < chunks; j++) {
          int src = (r + k) % n;
          td__ag_piece(n, chunks, dim, R, C, src, j, &lr0, &lrows, &gr0, &gc0, &gcols);
          if (lrows && gcols)
            td__ready_signal(L, dst_rv, r, gr0, lrows, sig[src * chunks + j], 1);
        }
    }
    if (!L->o.ring)
      for (int k = 1; k < n; k++) {
        int src = (r + k) % n;
        for (int j = 0; j < chunks; j++) {
          td__ag_piece(n, chunks, dim, R, C, src, j, &lr0, &lrows, &gr0, &gc0, &gcols);
          if (lrows && gcols)
            td__ready_signal(L, dst_rv, r, gr0, lrows, sig[src * chunks + j], 1);
        }
      }
    /* Visit order: own rows, then sources r+1, r+2, ... (dim 0); chunk order (dim 1). */
    if (dim == 0) {
      for (int k = 0; k < n; k++)
        for (int j = 0; j < chunks; j++) {
          td__ag_piece(n, chunks, dim, R, C, (r + k) % n, j, &lr0, &lrows, &gr0, &gc0, &gcols);
          td__ready_order(L, dst_rv, r, gr0, lrows);
        }
    } else {
      for (int j = 0; j < chunks; j++) {
        size_t so, sl;
        td_chunk_range((size_t)R, chunks, j, &so, &sl);
        td__ready_order(L, dst_rv, r, (int64_t)so, (int64_t)sl);
      }
    }
  }
  td__need_free(&need);
  free(sig);
  return L->st;
}

td_status td__lower_all_gather(td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  td_value x = V->in[0];
  int64_t R, C;
  td__val_shape(L->p, v, &R, &C);
  char lab[40];
  td__val_label(L->p, v, lab, sizeof lab);
  return td__ag_core(L, lab, x, L->buf[x], td__whole(L, x), v, L->symbuf[v], V->dim, R, C);
}
