/* SPDX-License-Identifier: Apache-2.0
 * Element-wise reduction of n source vectors into one (collectives layer).
 *
 * The order is fixed: rank 0's value, then combined with rank 1's, ... up to
 * rank n-1, so every rank that reduces the same element gets the same bits,
 * and a single-rank reference in the same order matches exactly. f16 and
 * bf16 accumulate in f32 and round once at the end. Integer sums and
 * products wrap (two's complement) instead of being undefined.
 *
 * Work goes in blocks of TD__RED_BLOCK elements through a small accumulator
 * that stays in L1, so each source is streamed once and dst is written once;
 * dst may be one of the sources. The inner loops are plain so the compiler
 * vectorises them. */
#include <string.h>

#include "coll/coll_internal.h"

enum { TD__RED_BLOCK = 1024 };

/* One combining loop per element type, made from one template: floats
 * combine with the plain operators; integer sums and products go through the
 * unsigned type so that they wrap (two's complement) instead of being
 * undefined. Max and min are the same for all. */
#define TD__RED_FN(name, T, ADD, MUL)                                                  \
  static void name(T *restrict acc, const T *restrict x, size_t n, td_red_op op) {     \
    switch (op) {                                                                      \
    case TD_SUM:                                                                       \
      for (size_t i = 0; i < n; i++)                                                   \
        acc[i] = ADD(acc[i], x[i]);                                                    \
      break;                                                                           \
    case TD_PROD:                                                                      \
      for (size_t i = 0; i < n; i++)                                                   \
        acc[i] = MUL(acc[i], x[i]);                                                    \
      break;                                                                           \
    case TD_MAX:                                                                       \
      for (size_t i = 0; i < n; i++)                                                   \
        acc[i] = x[i] > acc[i] ? x[i] : acc[i];                                        \
      break;                                                                           \
    default:                                                                           \
      for (size_t i = 0; i < n; i++)                                                   \
        acc[i] = x[i] < acc[i] ? x[i] : acc[i];                                        \
      break;                                                                           \
    }                                                                                  \
  }
#define TD__ADD(a, b) ((a) + (b))
#define TD__MUL(a, b) ((a) * (b))
#define TD__ADD32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define TD__MUL32(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define TD__ADD64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define TD__MUL64(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
TD__RED_FN(td__red_f32, float, TD__ADD, TD__MUL)
TD__RED_FN(td__red_f64, double, TD__ADD, TD__MUL)
TD__RED_FN(td__red_i32, int32_t, TD__ADD32, TD__MUL32)
TD__RED_FN(td__red_i64, int64_t, TD__ADD64, TD__MUL64)

/* 16-bit floats: widen each source block to f32, combine in f32, round once. */
static void td__reduce_half(uint16_t *dst, const void *const *srcs, int n, size_t count,
                            td_dtype dtype, td_red_op op) {
  float acc[TD__RED_BLOCK], tmp[TD__RED_BLOCK];
  const int bf = dtype == TD_BF16;
  for (size_t b = 0; b < count; b += TD__RED_BLOCK) {
    size_t m = count - b < TD__RED_BLOCK ? count - b : TD__RED_BLOCK;
    for (int r = 0; r < n; r++) {
      const uint16_t *x = (const uint16_t *)srcs[r] + b;
      float *t = r == 0 ? acc : tmp;
      for (size_t i = 0; i < m; i++)
        t[i] = bf ? td_bf16_to_f32(x[i]) : td_f16_to_f32(x[i]);
      if (r > 0)
        td__red_f32(acc, tmp, m, op);
    }
    for (size_t i = 0; i < m; i++)
      dst[b + i] = bf ? td_f32_to_bf16(acc[i]) : td_f32_to_f16(acc[i]);
  }
}

void td__coll_reduce(void *dst, const void *const *srcs, int n, size_t count, td_dtype dtype,
                     td_red_op op) {
  if (dtype == TD_F16 || dtype == TD_BF16) {
    td__reduce_half(dst, srcs, n, count, dtype, op);
    return;
  }
  const size_t es = td_dtype_size(dtype);
  union {
    float f32[TD__RED_BLOCK];
    double f64[TD__RED_BLOCK];
    int32_t i32[TD__RED_BLOCK];
    int64_t i64[TD__RED_BLOCK];
  } acc;
  for (size_t b = 0; b < count; b += TD__RED_BLOCK) {
    size_t m = count - b < TD__RED_BLOCK ? count - b : TD__RED_BLOCK;
    memcpy(&acc, (const char *)srcs[0] + b * es, m * es);
    for (int r = 1; r < n; r++) {
      const void *x = (const char *)srcs[r] + b * es;
      switch (dtype) {
      case TD_F32:
        td__red_f32(acc.f32, x, m, op);
        break;
      case TD_F64:
        td__red_f64(acc.f64, x, m, op);
        break;
      case TD_I32:
        td__red_i32(acc.i32, x, m, op);
        break;
      default: /* TD_I64; other dtypes are refused before we get here */
        td__red_i64(acc.i64, x, m, op);
        break;
      }
    }
    memcpy((char *)dst + b * es, &acc, m * es);
  }
}
