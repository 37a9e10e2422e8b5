/* SPDX-License-Identifier: Apache-2.0
 * GEMM tile, portable reference (tiles layer, cpu backend):
 *   c = alpha * op(a) * op(b)          (or c += ... with TD_GEMM_ACCUMULATE)
 * op(a) is M x K (a stored K x M with TD_GEMM_TRANS_A), op(b) is K x N (b
 * stored N x K with TD_GEMM_TRANS_B), c is M x N. Operands in f32, f16 or
 * bf16 are read as f32; each output element accumulates in f32 over k in
 * increasing order, is scaled by alpha, added to the old c when
 * accumulating, passed through GELU with TD_GEMM_GELU (the reference
 * tanh form of ewise.c), and rounded once into c's dtype. It is the yardstick the
 * OpenBLAS override (gemm_blas.c) is tested against, so it favours plainness
 * over speed. */
#include "tile/cpu/elem.h"

static float td__op_elem(const td_tile_mat *m, int trans, int64_t i, int64_t j) {
  return trans ? td__ld_f32(td__elem(m, j, i), m->dtype, 0) : td__ld_f32(td__elem(m, i, j), m->dtype, 0);
}

td_status td__tile_cpu_gemm_ref(td_tile_ctx *ctx, const td_tile_args *args) {
  (void)ctx;
  const td_tile_mat *a = &args->a, *b = &args->b, *c = &args->c;
  int ta = (args->op & TD_GEMM_TRANS_A) != 0, tb = (args->op & TD_GEMM_TRANS_B) != 0;
  int acc = (args->op & TD_GEMM_ACCUMULATE) != 0, gelu = (args->op & TD_GEMM_GELU) != 0;
  int64_t m = c->rows, n = c->cols, k = ta ? a->rows : a->cols;
  for (int64_t i = 0; i < m; i++) {
    char *cr = td__elem(c, i, 0);
    for (int64_t j = 0; j < n; j++) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; p++)
        s += td__op_elem(a, ta, i, p) * td__op_elem(b, tb, p, j);
      s *= args->alpha;
      if (acc)
        s += td__ld_f32(cr, c->dtype, j);
      if (gelu)
        s = td__gelu_tanh(s);
      td__st_f32(cr, c->dtype, j, s);
    }
  }
  return TD_OK;
}
