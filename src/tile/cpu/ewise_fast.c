/* SPDX-License-Identifier: Apache-2.0
 * Element-wise tile, fast override (tiles layer, cpu backend): the CPU
 * table's EWISE entry. GELU, COPY (dtype conversion) and f32 + f32 ADD (the
 * last step of a reduce-scatter: sum and round into the result) run as
 * whole-row vectorised loops (gelu.c) instead of one libm tanhf and one
 * out-of-line conversion per element; every other op, and any case this
 * file does not speed up, goes to the reference (ewise.c). Same contract as the reference,
 * c may alias a exactly; tests/exec/test_tiles_fast.c compares the two.
 *
 * GELU rows pass through an f32 staging row in the worker's scratch unless
 * both sides are f32 (then it runs in place or row to row). */
#include <string.h>

#include "core/error.h"
#include "tile/cpu/elem.h"

td_status td__tile_cpu_ewise_fast(td_tile_ctx *ctx, const td_tile_args *args) {
  const td_tile_mat *a = &args->a, *c = &args->c;
  td_ewise_op op = (td_ewise_op)args->op;
  if (c->rows == 0 || c->cols == 0)
    return TD_OK;
  if (op == TD_EW_ADD && a->dtype == TD_F32 && args->b.dtype == TD_F32) { /* f32 + f32, one rounding */
    const td_tile_mat *b = &args->b;
    TD_CHECK(td__tile_scratch(ctx, (size_t)c->cols * sizeof(float)));
    float *row = ctx->scratch;
    for (int64_t i = 0; i < c->rows; i++) {
      td__add_f32_row((const float *)td__elem(a, i, 0), (const float *)td__elem(b, i, 0), c->cols, row);
      td__gelu_f32_to(row, c->cols, td__elem(c, i, 0), c->dtype, 0);
    }
    return TD_OK;
  }
  if (op != TD_EW_GELU && op != TD_EW_COPY)
    return td__tile_cpu_ewise(ctx, args);
  int gelu = op == TD_EW_GELU;
  if (a->dtype == TD_F32 && c->dtype == TD_F32) {
    if (!gelu)
      return td__tile_cpu_copy(ctx, args);
    for (int64_t i = 0; i < c->rows; i++) {
      float *cr = (float *)td__elem(c, i, 0);
      const float *ar = (const float *)td__elem(a, i, 0);
      if (cr != ar)
        memmove(cr, ar, (size_t)c->cols * sizeof(float));
      td__gelu_f32_rows(cr, 1, c->cols, c->cols);
    }
    return TD_OK;
  }
  if (a->dtype == TD_F32) { /* f32 source: no staging needed */
    for (int64_t i = 0; i < c->rows; i++)
      td__gelu_f32_to((const float *)td__elem(a, i, 0), c->cols, td__elem(c, i, 0), c->dtype, gelu);
    return TD_OK;
  }
  TD_CHECK(td__tile_scratch(ctx, (size_t)c->cols * sizeof(float)));
  float *row = ctx->scratch;
  for (int64_t i = 0; i < c->rows; i++) {
    td__row_to_f32(td__elem(a, i, 0), a->dtype, c->cols, row);
    td__gelu_f32_to(row, c->cols, td__elem(c, i, 0), c->dtype, gelu);
  }
  return TD_OK;
}
