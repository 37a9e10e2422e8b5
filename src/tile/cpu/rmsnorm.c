/* SPDX-License-Identifier: Apache-2.0
 * RMSNorm tile (tiles layer, cpu backend): for each row x of a (length n),
 *   c = x / sqrt(mean(x^2) + eps) * w,   w = b (1 x n), eps = alpha,
 * as in LLaMA-style models. The sum of squares accumulates in double so the
 * result does not depend on the row length's rounding; the output is
 * computed in f32 and rounded once into c's dtype. A row tile must cover
 * whole rows (the view's cols are the normalised length). c may alias a. */
#include <math.h>

#include "tile/cpu/elem.h"

td_status td__tile_cpu_rmsnorm(td_tile_ctx *ctx, const td_tile_args *args) {
  (void)ctx;
  const td_tile_mat *a = &args->a, *w = &args->b, *c = &args->c;
  int64_t n = c->cols;
  if (n == 0)
    return TD_OK;
  const char *wr = td__elem(w, 0, 0);
  for (int64_t i = 0; i < c->rows; i++) {
    const char *ar = td__elem(a, i, 0);
    char *cr = td__elem(c, i, 0);
    double ss = 0.0;
    for (int64_t j = 0; j < n; j++) {
      double x = td__ld_f32(ar, a->dtype, j);
      ss += x * x;
    }
    float inv = (float)(1.0 / sqrt(ss / (double)n + (double)args->alpha));
    for (int64_t j = 0; j < n; j++)
      td__st_f32(cr, c->dtype, j, td__ld_f32(ar, a->dtype, j) * inv * td__ld_f32(wr, w->dtype, j));
  }
  return TD_OK;
}
