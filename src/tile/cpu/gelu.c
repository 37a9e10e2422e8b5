/* SPDX-License-Identifier: Apache-2.0
 * GELU, 16-bit row conversions and f32 row sums for the fast CPU tiles
 * (tiles layer, cpu backend): the loops that the GEMM epilogue (gemm_blas.c)
 * and the fast element-wise override (ewise_fast.c) run over whole rows.
 *
 * GELU uses the same tanh form as the reference (ewise.c):
 *   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
 * rewritten with 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), so one exp and one
 * division per element and no libm call: the loop vectorises. exp is
 * 2^n * p(r) with n = round(t / ln 2), r = t - n ln 2 in two parts (|r| <=
 * ln2/2) and p the degree-6 Taylor polynomial (truncation < 1.3e-7
 * relative); t is clamped to [-87, 87] so 2^n stays a normal float, a huge
 * x gives x, and x < -10 gives -0 (the true value is below 1e-36 there).
 * NaN propagates through x. The
 * result is within a few f32 ulps of the libm form plus 1e-7 |x|, far below
 * the bf16 rounding that follows it (tests/exec/test_tiles_fast.c).
 *
 * The row loops are compiled for AVX-512 and AVX2 as well as the baseline
 * (GCC/Clang target clones, chosen once at load by the CPU's features): the
 * library is built for a generic x86-64, and this is where the width pays. */
#include <stdint.h>
#include <string.h>

#include "tile/cpu/elem.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define TD__VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TD__VEC_CLONES
#endif

static inline float td__gelu_fast(float x) {
  const float k2 = -2.0f * 0.7978845608028654f; /* -2 sqrt(2/pi) */
  float t = k2 * (x + 0.044715f * x * x * x);  /* -2u */
  t = t < -87.0f ? -87.0f : t > 87.0f ? 87.0f : t;
  /* exp(t) = 2^n p(r): n by the round-to-nearest magic constant 1.5 * 2^23 */
  const float magic = 12582912.0f;
  float nf = t * 1.44269504088896341f + magic;
  uint32_t nb;
  memcpy(&nb, &nf, 4);
  nf -= magic;
  float r = t - nf * 0.693145751953125f; /* ln2 high part (exact product) */
  r -= nf * 1.428606765330187e-06f;      /* ln2 low part */
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t sb = (nb - 0x4b400000u + 127u) << 23; /* 2^n as float bits */
  float s;
  memcpy(&s, &sb, 4);
  float y = x / (1.0f + p * s);
  return x < -10.0f ? -0.0f : y; /* |gelu(x)| < 1e-36 there, and x / e^87 would not be */
}

TD__VEC_CLONES
void td__gelu_f32_rows(float *c, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t i = 0; i < rows; i++) {
    float *row = c + i * ld;
    for (int64_t j = 0; j < cols; j++)
      row[j] = td__gelu_fast(row[j]);
  }
}

TD__VEC_CLONES
void td__gelu_f32_to(const float *src, int64_t n, void *dst, td_dtype dt, int gelu) {
  if (dt == TD_F32) {
    float *d = dst;
    for (int64_t j = 0; j < n; j++)
      d[j] = gelu ? td__gelu_fast(src[j]) : src[j];
    return;
  }
  uint16_t *d = dst;
  if (dt == TD_BF16) {
    for (int64_t j = 0; j < n; j++)
      d[j] = td__bf16_from_f32(gelu ? td__gelu_fast(src[j]) : src[j]);
    return;
  }
  for (int64_t j = 0; j < n; j++)
    d[j] = td_f32_to_f16(gelu ? td__gelu_fast(src[j]) : src[j]);
}

TD__VEC_CLONES
void td__row_to_f32(const void *src, td_dtype dt, int64_t n, float *dst) {
  if (dt == TD_F32) {
    memcpy(dst, src, (size_t)n * sizeof(float));
    return;
  }
  const uint16_t *s = src;
  if (dt == TD_BF16) {
    for (int64_t j = 0; j < n; j++)
      dst[j] = td__bf16_to_f32_inl(s[j]);
    return;
  }
  for (int64_t j = 0; j < n; j++)
    dst[j] = td_f16_to_f32(s[j]);
}

TD__VEC_CLONES
void td__add_f32_row(const float *a, const float *b, int64_t n, float *dst) {
  for (int64_t j = 0; j < n; j++)
    dst[j] = a[j] + b[j];
}
