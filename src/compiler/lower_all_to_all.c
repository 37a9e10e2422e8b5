/* SPDX-License-Identifier: Apache-2.0
 * Lowering: AllToAll (re-shard from shard(1-d) to shard(d)) and the general
 * fallback rule for collectives.
 *
 * all_to_all: every rank cuts its part into one block per destination (the
 * destination's td_chunk_range part of the other dim), each cut into
 * `chunks` row pieces, and puts each piece straight into the destination's
 * symmetric result buffer, raising its (source, chunk) signal; its own block
 * is a local copy. It has no fused GEMM pattern, so it runs as the fallback:
 * collective, then compute (td__fallback makes its producer's consumers and
 * its own consumers wait for whole values), which is always correct. */
#include <stdio.h>
#include <stdlib.h>

#include "compiler/compiler.h"
#include "core/error.h"

td_status td__lower_all_to_all(td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  td_value x = V->in[0];
  int n = L->n, chunks = L->chunks, d = V->dim;
  int64_t R, C;
  td__val_shape(L->p, v, &R, &C);
  char tag[40];
  td__val_label(L->p, v, tag, sizeof tag);
  uint32_t *sig = malloc(sizeof *sig * (size_t)n * (size_t)chunks);
  if (!sig)
    return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  for (int s = 0; s < n; s++)
    for (int j = 0; j < chunks; j++)
      sig[s * chunks + j] = n > 1 ? td__signal(L, "a2a.%.12s.s%d.c%d", tag, s, j) : UINT32_MAX;
  int whole = td__whole(L, x);
  td__need need = {0};
  for (int r = 0; r < n && L->st == TD_OK; r++) {
    for (int k = 0; k < n; k++) {
      int q = (r - k + n) % n;
      size_t qo, ql, ro, rl; /* q's part of the new sharded dim, r's of the old */
      td_chunk_range((size_t)(d == 0 ? R : C), n, q, &qo, &ql);
      td_chunk_range((size_t)(d == 0 ? C : R), n, r, &ro, &rl);
      for (int j = 0; j < chunks; j++) {
        size_t so, sl;
        td_chunk_range(d == 0 ? ql : rl, chunks, j, &so, &sl);
        int64_t rows = (int64_t)sl, cols = (int64_t)(d == 0 ? rl : ql);
        if (!rows || !cols)
          continue;
        /* source rows in x's local buffer, destination block in q's result */
        int64_t xr0 = (int64_t)(d == 0 ? qo + so : so), xc0 = d == 0 ? 0 : (int64_t)qo;
        int64_t yr0 = (int64_t)(d == 0 ? so : ro + so), yc0 = d == 0 ? (int64_t)ro : 0;
        td__need_clear(&need);
        td__need_rows(L, &need, x, r, xr0, rows, whole);
        td_task t = {.kind = TD_TASK_COPY, .worker = TD_WORKER_COMM};
        t.a = td__view(L->buf[x], TD_PEER_SELF, xr0, xc0, rows, cols);
        t.b.buf = -1;
        t.c = td__view(L->symbuf[v], q == r ? TD_PEER_SELF : q, yr0, yc0, rows, cols);
        td_raise raise = {sig[r * chunks + j], q, 1};
        td__label(&t, "a2a c%d ->%d", j, q);
        uint32_t idx = td__emit(L, r, &t, &need, q == r ? NULL : &raise, q == r ? 0 : 1);
        if (q == r)
          td__ready_task(L, v, r, yr0, rows, idx);
        else
          td__ready_signal(L, v, q, yr0, rows, sig[r * chunks + j], 1);
      }
    }
  }
  for (int q = 0; q < n; q++) {
    int64_t r0, rows, c0, cols;
    td__local_extent(L, v, q, &r0, &rows, &c0, &cols);
    td__ready_order(L, v, q, 0, rows);
  }
  td__need_free(&need);
  free(sig);
  return L->st;
}
