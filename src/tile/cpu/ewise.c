/* SPDX-License-Identifier: Apache-2.0
 * Element-wise tile (tiles layer, cpu backend): c = f(a) or f(a, b) over a
 * rows x cols view, computed in f32:
 *   add    c = a + b
 *   mul    c = a * b
 *   gelu   c = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))  -- the tanh
 *          approximation (as in GPT-2 and PyTorch's approximate="tanh"),
 *          chosen because every backend can compute it the same way; it is
 *          within ~1e-3 of the erf form
 *   silu   c = a / (1 + exp(-a))
 *   scale  c = alpha * a
 *   copy   c = a (converts between f32, f16 and bf16)
 * c may alias a or b exactly (in place): each element is read before it is
 * written. This is the reference; ewise_fast.c overrides gelu and copy. */
#include <math.h>

#include "tile/cpu/elem.h"

float td__gelu_tanh(float x) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

static float td__silu(float x) { return x / (1.0f + expf(-x)); }

td_status td__tile_cpu_ewise(td_tile_ctx *ctx, const td_tile_args *args) {
  (void)ctx;
  const td_tile_mat *a = &args->a, *b = &args->b, *c = &args->c;
  td_ewise_op op = (td_ewise_op)args->op;
  for (int64_t i = 0; i < c->rows; i++) {
    const char *ar = td__elem(a, i, 0);
    const char *br = (op == TD_EW_ADD || op == TD_EW_MUL) ? td__elem(b, i, 0) : NULL;
    char *cr = td__elem(c, i, 0);
    for (int64_t j = 0; j < c->cols; j++) {
      float x = td__ld_f32(ar, a->dtype, j), y;
      switch (op) {
      case TD_EW_ADD: y = x + td__ld_f32(br, b->dtype, j); break;
      case TD_EW_MUL: y = x * td__ld_f32(br, b->dtype, j); break;
      case TD_EW_GELU: y = td__gelu_tanh(x); break;
      case TD_EW_SILU: y = td__silu(x); break;
      case TD_EW_SCALE: y = args->alpha * x; break;
      default: y = x; break;
      }
      td__st_f32(cr, c->dtype, j, y);
    }
  }
  return TD_OK;
}
