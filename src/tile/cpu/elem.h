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

/* Loads element k of a contiguous run of f32/f16/bf16 values as f32. */
static inline float td__ld_f32(const void *p, td_dtype d, int64_t k) {
  if (d == TD_F32)
    return ((const float *)p)[k];
  uint16_t h = ((const uint16_t *)p)[k];
  return d == TD_BF16 ? td_bf16_to_f32(h) : td_f16_to_f32(h);
}

/* Stores f32 v as element k of a contiguous run of f32/f16/bf16 values. */
static inline void td__st_f32(void *p, td_dtype d, int64_t k, float v) {
  if (d == TD_F32)
    ((float *)p)[k] = v;
  else
    ((uint16_t *)p)[k] = d == TD_BF16 ? td_f32_to_bf16(v) : td_f32_to_f16(v);
}

#endif
