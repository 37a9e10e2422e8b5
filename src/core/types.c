/* SPDX-License-Identifier: Apache-2.0
 * Element types: sizes, names, the 16-bit float conversions and the chunk
 * split that every collective and the compiler share (core layer). */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "tdist/types.h"

static const struct {
  const char *name;
  size_t size;
} td__dtypes[TD_DTYPE_COUNT] = {
    [TD_F32] = {"f32", 4}, [TD_F16] = {"f16", 2}, [TD_BF16] = {"bf16", 2}, [TD_I32] = {"i32", 4},
    [TD_F64] = {"f64", 8}, [TD_I64] = {"i64", 8}, [TD_U8] = {"u8", 1},
};

size_t td_dtype_size(td_dtype dtype) {
  return (unsigned)dtype < TD_DTYPE_COUNT ? td__dtypes[dtype].size : 0;
}

const char *td_dtype_name(td_dtype dtype) {
  return (unsigned)dtype < TD_DTYPE_COUNT ? td__dtypes[dtype].name : "invalid";
}

td_status td_dtype_parse(const char *name, td_dtype *out) {
  for (int i = 0; name && i < TD_DTYPE_COUNT; i++) {
    if (strcmp(name, td__dtypes[i].name) == 0) {
      *out = (td_dtype)i;
      return TD_OK;
    }
  }
  return td__error(TD_ERR_INVALID_ARG, "unknown dtype '%s'; allowed: f32, f16, bf16, i32, f64, i64, u8",
                   name ? name : "(null)");
}

const char *td_red_op_name(td_red_op op) {
  static const char *names[TD_RED_OP_COUNT] = {"sum", "max", "min", "prod"};
  return (unsigned)op < TD_RED_OP_COUNT ? names[op] : "invalid";
}

static uint32_t td__f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float td__bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float td_bf16_to_f32(uint16_t v) { return td__bits_f32((uint32_t)v << 16); }

uint16_t td_f32_to_bf16(float v) {
  uint32_t u = td__f32_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and NaN */
    return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

float td_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) { /* zero or subnormal: value = man * 2^-24 */
    float f = (float)man * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  if (exp == 31)
    return td__bits_f32(sign | 0x7f800000u | (man << 13));
  return td__bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t td_f32_to_f16(float f) {
  uint32_t u = td__f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return sign | 0x7e00u;
  if (abs >= 0x477ff000u) /* rounds to >= 65520: infinity */
    return sign | 0x7c00u;
  if (abs < 0x38800000u) { /* below the smallest normal: subnormal or zero */
    float a = td__bits_f32(abs);
    float scaled = a * 16777216.0f; /* units of 2^-24 */
    uint32_t q = (uint32_t)nearbyintf(scaled);
    return sign | (uint16_t)q;
  }
  uint32_t mant = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | (uint16_t)((mant - 0x38000000u) >> 13);
}

void td_chunk_range(size_t count, int nparts, int part, size_t *offset, size_t *length) {
  if (nparts < 1 || part < 0 || part >= nparts) {
    *offset = 0;
    *length = 0;
    return;
  }
  size_t q = count / (size_t)nparts, r = count % (size_t)nparts, p = (size_t)part;
  *offset = p * q + (p < r ? p : r);
  *length = q + (p < r ? 1 : 0);
}
