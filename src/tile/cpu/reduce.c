/* SPDX-License-Identifier: Apache-2.0
 * Reduce chunk tile (tiles layer, cpu backend): c = c <op> a element-wise,
 * op one of sum, max, min, prod, for every dtype but u8. This is the step of
 * a reduce-scatter or all-reduce that folds one peer's chunk into a partial
 * result; either side may be a peer's copy. 16-bit floats compute in f32
 * and round once; integers wrap as unsigned arithmetic does (no UB). */
#include "tile/cpu/elem.h"

static float td__red_f32(td_red_op op, float x, float y) {
  switch (op) {
  case TD_SUM: return x + y;
  case TD_MAX: return y > x ? y : x;
  case TD_MIN: return y < x ? y : x;
  default: return x * y;
  }
}

static double td__red_f64(td_red_op op, double x, double y) {
  switch (op) {
  case TD_SUM: return x + y;
  case TD_MAX: return y > x ? y : x;
  case TD_MIN: return y < x ? y : x;
  default: return x * y;
  }
}

static int64_t td__red_i64(td_red_op op, int64_t x, int64_t y) {
  switch (op) {
  case TD_SUM: return (int64_t)((uint64_t)x + (uint64_t)y);
  case TD_MAX: return y > x ? y : x;
  case TD_MIN: return y < x ? y : x;
  default: return (int64_t)((uint64_t)x * (uint64_t)y);
  }
}

/* f32 += f32, one row: the common case of a reduce-scatter's chain, written
 * so that it vectorises (same additions, same results as the loop below);
 * only for views that do not overlap. */
static void td__sum_f32_row(float *restrict c, const float *restrict a, int64_t n) {
  for (int64_t j = 0; j < n; j++)
    c[j] += a[j];
}

td_status td__tile_cpu_reduce(td_tile_ctx *ctx, const td_tile_args *args) {
  (void)ctx;
  const td_tile_mat *a = &args->a, *c = &args->c;
  td_red_op op = (td_red_op)args->op;
  const char *a0 = td__elem(a, 0, 0), *a1 = c->rows ? td__elem(a, c->rows - 1, c->cols) : a0;
  const char *c0 = td__elem(c, 0, 0), *c1 = c->rows ? td__elem(c, c->rows - 1, c->cols) : c0;
  if (op == TD_SUM && c->dtype == TD_F32 && a->dtype == TD_F32 && (a1 <= c0 || c1 <= a0)) {
    for (int64_t i = 0; i < c->rows; i++)
      td__sum_f32_row((float *)td__elem(c, i, 0), (const float *)td__elem(a, i, 0), c->cols);
    return TD_OK;
  }
  for (int64_t i = 0; i < c->rows; i++) {
    char *cr = td__elem(c, i, 0);
    const char *ar = td__elem(a, i, 0);
    for (int64_t j = 0; j < c->cols; j++) {
      switch (c->dtype) {
      case TD_F64:
        ((double *)cr)[j] = td__red_f64(op, ((double *)cr)[j], ((const double *)ar)[j]);
        break;
      case TD_I32:
        ((int32_t *)cr)[j] = (int32_t)(uint32_t)td__red_i64(op, ((int32_t *)cr)[j], ((const int32_t *)ar)[j]);
        break;
      case TD_I64:
        ((int64_t *)cr)[j] = td__red_i64(op, ((int64_t *)cr)[j], ((const int64_t *)ar)[j]);
        break;
      default: /* f32, f16, bf16 */
        td__st_f32(cr, c->dtype, j, td__red_f32(op, td__ld_f32(cr, c->dtype, j), td__ld_f32(ar, a->dtype, j)));
        break;
      }
    }
  }
  return TD_OK;
}
