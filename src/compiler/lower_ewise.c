/* SPDX-License-Identifier: Apache-2.0
 * Lowering pattern: element-wise ops (add, mul, gelu, silu, scale) and
 * rmsnorm as row tiles on compute workers. Each tile depends only on the
 * producer tiles (or chunk signals) of the rows it reads, and tiles follow
 * the first operand's visit order, so an element-wise op between two GEMMs
 * streams behind the first one instead of waiting for all of it. A
 * replicated operand next to a sharded one is read at the rank's offset. */
#include <stdio.h>

#include "compiler/compiler.h"
#include "core/error.h"

/* Where rank r's output element (0,0) sits in operand u's local buffer. */
static void td__operand_offset(const td__lower *L, td_value v, td_value u, int r, int64_t *dr, int64_t *dc) {
  td_layout lo = L->p->vals[v].layout, lu = L->p->vals[u].layout;
  int64_t r0, rows, c0, cols;
  td__local_extent(L, v, r, &r0, &rows, &c0, &cols);
  *dr = *dc = 0;
  if (lo.kind == TD_LAYOUT_SHARD && lu.kind == TD_LAYOUT_REPLICATED) {
    *dr = r0;
    *dc = c0;
  }
}

td_status td__lower_ewise(td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  td_value a = V->in[0], b = V->in[1];
  if (V->op == TD_OP_GELU && td__fused_gelu(L, a) == v)
    return L->st; /* computed by the matmul's GEMM epilogue (lower_matmul.c) */
  int whole_a = td__whole(L, a), whole_b = b >= 0 ? (V->op == TD_OP_RMSNORM || td__whole(L, b)) : 0;
  char lab[40];
  td__val_label(L->p, v, lab, sizeof lab);
  td__need need = {0};
  int64_t order[2 * 1024];
  for (int r = 0; r < L->n && L->st == TD_OK; r++) {
    int64_t r0, rows, c0, cols, ar, ac, br = 0, bc = 0;
    td__local_extent(L, v, r, &r0, &rows, &c0, &cols);
    if (!rows || !cols)
      continue;
    td__operand_offset(L, v, a, r, &ar, &ac);
    if (b >= 0 && V->op != TD_OP_RMSNORM)
      td__operand_offset(L, v, b, r, &br, &bc);
    /* Follow an operand's visit order only when its local rows are the output's. */
    td_layout lv = V->layout, la = L->p->vals[a].layout;
    int same_a = la.kind == lv.kind && la.dim == lv.dim;
    int same_b = b >= 0 && V->op != TD_OP_RMSNORM && L->p->vals[b].layout.kind == lv.kind &&
                 L->p->vals[b].layout.dim == lv.dim;
    uint32_t nb = 0;
    if (L->o.overlap && same_a)
      nb = td__visit_order(L, a, r, order, 1024);
    if (L->o.overlap && !nb && same_b)
      nb = td__visit_order(L, b, r, order, 1024);
    if (!nb) {
      order[0] = 0;
      order[1] = rows;
      nb = 1;
    }
    for (uint32_t bi = 0; bi < nb; bi++) {
      int64_t b0 = order[2 * bi], bn = order[2 * bi + 1];
      for (int64_t i = b0; i < b0 + bn; i += L->tile_rows) {
        int64_t m = b0 + bn - i < L->tile_rows ? b0 + bn - i : L->tile_rows;
        td__need_clear(&need);
        td__need_rows(L, &need, a, r, i + ar, m, whole_a);
        td_task t = {.kind = TD_TASK_EWISE, .worker = TD_WORKER_COMPUTE, .alpha = 1.0f};
        t.a = td__view(L->buf[a], TD_PEER_SELF, i + ar, ac, m, cols);
        t.b.buf = -1;
        t.c = td__view(L->buf[v], TD_PEER_SELF, i, 0, m, cols);
        switch (V->op) {
        case TD_OP_ADD: t.op = TD_EW_ADD; break;
        case TD_OP_MUL: t.op = TD_EW_MUL; break;
        case TD_OP_GELU: t.op = TD_EW_GELU; break;
        case TD_OP_SILU: t.op = TD_EW_SILU; break;
        case TD_OP_SCALE: t.op = TD_EW_SCALE; t.alpha = V->alpha; break;
        case TD_OP_RMSNORM: t.kind = TD_TASK_RMSNORM; t.alpha = V->alpha; break;
        default:
          td__need_free(&need);
          return td__error(TD_ERR_INTERNAL, "lower_ewise: unexpected op %s", td_op_name(V->op));
        }
        if (V->op == TD_OP_RMSNORM) {
          td__need_rows(L, &need, b, r, 0, 1, 1);
          t.b = td__view(L->buf[b], TD_PEER_SELF, 0, 0, 1, cols);
        } else if (b >= 0) {
          td__need_rows(L, &need, b, r, i + br, m, whole_b);
          t.b = td__view(L->buf[b], TD_PEER_SELF, i + br, bc, m, cols);
        }
        td__label(&t, "%.4s %.8s r%lld", td_op_name(V->op), lab, (long long)i);
        uint32_t idx = td__emit(L, r, &t, &need, NULL, 0);
        td__ready_task(L, v, r, i, m, idx);
      }
      td__ready_order(L, v, r, b0, bn);
    }
  }
  td__need_free(&need);
  return L->st;
}
