/* SPDX-License-Identifier: Apache-2.0
 * Element types, reduction operators, and the conversions between the 16-bit
 * floating formats and float that every backend's reference uses. */
#ifndef TDIST_TYPES_H
#define TDIST_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_dtype {
  TD_F32 = 0,  /* IEEE binary32 */
  TD_F16 = 1,  /* IEEE binary16 */
  TD_BF16 = 2, /* bfloat16: the top 16 bits of a binary32 */
  TD_I32 = 3,  /* two's-complement 32-bit integer */
  TD_F64 = 4,  /* IEEE binary64 (references) */
  TD_I64 = 5,  /* two's-complement 64-bit integer */
  TD_U8 = 6,   /* raw bytes */
  TD_DTYPE_COUNT
} td_dtype;

typedef enum td_red_op {
  TD_SUM = 0,
  TD_MAX = 1,
  TD_MIN = 2,
  TD_PROD = 3,
  TD_RED_OP_COUNT
} td_red_op;

/** Size of one element in bytes; 0 for an invalid dtype. */
size_t td_dtype_size(td_dtype dtype);
/** "f32", "f16", "bf16", "i32", "f64", "i64", "u8"; "invalid" otherwise. */
const char *td_dtype_name(td_dtype dtype);
/** Parses a dtype name as printed by td_dtype_name. TD_ERR_INVALID_ARG (message
 * lists the allowed names) when unknown; *out written only on success. */
td_status td_dtype_parse(const char *name, td_dtype *out);
/** "sum", "max", "min", "prod"; "invalid" otherwise. */
const char *td_red_op_name(td_red_op op);

/** Round-to-nearest-even conversions; NaN stays NaN, overflow gives infinity. */
float td_bf16_to_f32(uint16_t v);
uint16_t td_f32_to_bf16(float v);
float td_f16_to_f32(uint16_t v);
uint16_t td_f32_to_f16(float v);

/** The documented split of `count` elements over `nparts` parts, used by every
 * collective and the compiler: part p gets `count / nparts` elements plus one
 * if p < count % nparts, parts laid out in order. Writes the part's first
 * element index and length. Invalid nparts/part give offset = length = 0. */
void td_chunk_range(size_t count, int nparts, int part, size_t *offset, size_t *length);

#ifdef __cplusplus
}
#endif
#endif
