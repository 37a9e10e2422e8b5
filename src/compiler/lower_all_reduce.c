/* SPDX-License-Identifier: Apache-2.0
 * Lowering pattern: GEMM -> AllReduce.
 *
 * Large outputs: reduce-scatter into a hidden shard(0) intermediate (the
 * GEMM -> RS pattern, destination-ordered tiles), then all-gather it (the AG
 * pattern); the gather of a block starts as soon as its owner's reduction
 * chain for it ends, so both halves pipeline behind the GEMM.
 * Small outputs (up to one_shot_bytes, chosen by the perf model where the
 * alpha term dominates): one shot. Every rank pushes each finished row chunk
 * of its partial to every peer, and every rank reduces all n contributions
 * itself, in rank order 0..n-1 so the result is bitwise the same everywhere.
 * One step of latency instead of 2(n-1), for n times the traffic. */
#include <stdio.h>
#include <stdlib.h>

#include "compiler/compiler.h"
#include "core/error.h"

static td_status td__one_shot(td__lower *L, td_value v, td_value x, int64_t R, int64_t C, td_dtype dt,
                              const char *tag) {
  int n = L->n, chunks = L->chunks;
  int whole = td__whole(L, x);
  int32_t dst = L->symbuf[v];
  char name[40];
  snprintf(name, sizeof name, "%.20s.recv", tag);
  int32_t recv = n > 1 ? td__buffer(L, name, TD_BUF_SYMM, dt, (int64_t)n * R, C) : -1;
  uint32_t *sig = malloc(sizeof *sig * (size_t)n * (size_t)chunks);
  if (!sig)
    return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  for (int s = 0; s < n; s++)
    for (int j = 0; j < chunks; j++)
      sig[s * chunks + j] = n > 1 ? td__signal(L, "ar.%.12s.s%d.c%d", tag, s, j) : UINT32_MAX;
  td__need need = {0};
  for (int r = 0; r < n && L->st == TD_OK; r++) {
    for (int j = 0; j < chunks; j++) {
      size_t so, sl;
      td_chunk_range((size_t)R, chunks, j, &so, &sl);
      if (!sl)
        continue;
      int64_t r0 = (int64_t)so, rows = (int64_t)sl;
      for (int k = 1; k < n; k++) {
        int peer = (r + k) % n;
        td__need_clear(&need);
        td__need_rows(L, &need, x, r, r0, rows, whole);
        td_task t = {.kind = TD_TASK_COPY, .worker = TD_WORKER_COMM};
        t.a = td__view(L->buf[x], TD_PEER_SELF, r0, 0, rows, C);
        t.b.buf = -1;
        t.c = td__view(recv, peer, (int64_t)r * R + r0, 0, rows, C);
        td_raise raise = {sig[r * chunks + j], peer, 1};
        td__label(&t, "ar1 c%d ->%d", j, peer);
        td__emit(L, r, &t, &need, &raise, 1);
      }
      uint32_t prev = UINT32_MAX;
      for (int s = 0; s < n; s++) {
        td__need_clear(&need);
        td__need_task(&need, prev);
        td_task t = {.kind = s == 0 ? TD_TASK_COPY : TD_TASK_REDUCE, .worker = TD_WORKER_COMM, .op = TD_SUM};
        if (s == r) {
          td__need_rows(L, &need, x, r, r0, rows, whole);
          t.a = td__view(L->buf[x], TD_PEER_SELF, r0, 0, rows, C);
        } else {
          td__need_wait(&need, sig[s * chunks + j], 1);
          t.a = td__view(recv, TD_PEER_SELF, (int64_t)s * R + r0, 0, rows, C);
        }
        t.b.buf = -1;
        t.c = td__view(dst, TD_PEER_SELF, r0, 0, rows, C);
        td__label(&t, "ar1 %s c%d <-%d", s == 0 ? "copy" : "add", j, s);
        prev = td__emit(L, r, &t, &need, NULL, 0);
      }
      td__ready_task(L, v, r, r0, rows, prev);
      td__ready_order(L, v, r, r0, rows);
    }
  }
  td__need_free(&need);
  free(sig);
  return L->st;
}

td_status td__lower_all_reduce(td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  td_value x = V->in[0];
  int64_t R, C;
  td__val_shape(L->p, v, &R, &C);
  char tag[40];
  td__val_label(L->p, v, tag, sizeof tag);
  int64_t bytes = R * C * (int64_t)td_dtype_size(V->dtype);
  if (L->n == 1 || bytes <= L->one_shot_bytes)
    return td__one_shot(L, v, x, R, C, V->dtype, tag);
  /* Reduce-scatter into a hidden shard(0) buffer, then all-gather it. */
  char name[40];
  snprintf(name, sizeof name, "%.20s.rs", tag);
  int32_t mid = td__buffer(L, name, TD_BUF_LOCAL, V->dtype, (R + L->n - 1) / L->n, C);
  td_value hidden = L->p->nvals + v;
  TD_CHECK(td__rs_core(L, tag, x, L->buf[x], td__whole(L, x), hidden, mid, 0, R, C));
  return td__ag_core(L, tag, hidden, mid, !L->o.overlap, v, L->symbuf[v], 0, R, C);
}
