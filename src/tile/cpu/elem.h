/* SPDX-License-Identifier: Apache-2.0
 * Internal: element access for the CPU tiles (tiles layer, cpu backend):
 * load any float dtype as f32 and store f32 into it with one rounding. */
#ifndef TD_TILE_CPU_ELEM_H
#define TD_TILE_CPU_ELEM_H

#include <string.h>

#include "tile/tile.h"

/* Address of element (i, j) of a view. */
static inline char *td__elem(const td_tile_mat *m, int64_t i, int64_t j) {
  return (char *)m->ptr + (size_t)(i * m->ld + j) * td_dtype_size(m->dtype);
}

/* bf16 <-> f32 inline, bit for bit td_bf16_to_f32 / td_f32_to_bf16 (types.c:
 * round to nearest even, NaN kept quiet), so that row loops vectorise. */
static inline float td__bf16_to_f32_inl(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t td__bf16_from_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t q = (u >> 16) | 0x40u;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

/* Loads element k of a contiguous run of f32/f16/bf16 values as f32. */
static inline float td__ld_f32(const void *p, td_dtype d, int64_t k) {
  if (d == TD_F32)
    return ((const float *)p)[k];
  uint16_t h = ((const uint16_t *)p)[k];
  return d == TD_BF16 ? td__bf16_to_f32_inl(h) : td_f16_to_f32(h);
}

/* Stores f32 v as element k of a contiguous run of f32/f16/bf16 values. */
static inline void td__st_f32(void *p, td_dtype d, int64_t k, float v) {
  if (d == TD_F32)
    ((float *)p)[k] = v;
  else
    ((uint16_t *)p)[k] = d == TD_BF16 ? td__bf16_from_f32(v) : td_f32_to_f16(v);
}

/* Row loops of gelu.c (vectorised; see there). */
/** c[i * ld + j] = gelu(c[i * ld + j]) for a rows x cols f32 view, in place. */
void td__gelu_f32_rows(float *c, int64_t rows, int64_t cols, int64_t ld);
/** dst[j] = (gelu ? gelu(src[j]) : src[j]) rounded once into dt, j < n. */
void td__gelu_f32_to(const float *src, int64_t n, void *dst, td_dtype dt, int gelu);
/** dst[j] = a[j] + b[j], j < n (dst may be a or b). */
void td__add_f32_row(const float *a, const float *b, int64_t n, float *dst);
/** dst[j] = src[j] as f32 for a run of n values of dtype dt (f32/f16/bf16). */
void td__row_to_f32(const void *src, td_dtype dt, int64_t n, float *dst);
/** The reference GELU, tanh form through libm (ewise.c, gemm_ref.c). */
float td__gelu_tanh(float x);

#endif
