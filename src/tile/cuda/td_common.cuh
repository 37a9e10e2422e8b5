/* SPDX-License-Identifier: Apache-2.0
 * CUDA tile layer, common part: element access by dtype for the JIT-compiled
 * tiles (embedded as text into every generated executor kernel).
 *
 * Generated kernels include no headers (NVRTC lacks the host ones), so the
 * 16-bit float conversions are written with PTX cvt instructions and the
 * storage types are plain unsigned shorts. Every tile runs on one thread block
 * of TD_THREADS threads and may be called many times by a persistent block, so
 * tiles begin and end with the block in step (__syncthreads where they use
 * shared memory). Arithmetic on f16/bf16 happens in f32; f64 and the integer
 * types are handled exactly where the task kind allows (copy, reduce). */

#define TD_DT_F32 0
#define TD_DT_F16 1
#define TD_DT_BF16 2
#define TD_DT_I32 3
#define TD_DT_F64 4
#define TD_DT_I64 5
#define TD_DT_U8 6

__device__ __forceinline__ float td_bf16_to_f32(unsigned short v) {
  return __uint_as_float(((unsigned int)v) << 16);
}
__device__ __forceinline__ unsigned short td_f32_to_bf16(float f) {
  unsigned short r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
__device__ __forceinline__ float td_f16_to_f32(unsigned short v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}
__device__ __forceinline__ unsigned short td_f32_to_f16(float f) {
  unsigned short r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}

__device__ __forceinline__ int td_dtype_bytes(int dt) {
  switch (dt) {
  case TD_DT_F16: case TD_DT_BF16: return 2;
  case TD_DT_F64: case TD_DT_I64: return 8;
  case TD_DT_U8: return 1;
  default: return 4;
  }
}

/* Address of element (i, j) of view v. */
__device__ __forceinline__ char *td_elem(const td_dev_view &v, td_dev_i64 i, td_dev_i64 j) {
  return (char *)v.ptr + (i * v.ld + j) * td_dtype_bytes(v.dtype);
}

__device__ __forceinline__ float td_load_f(const td_dev_view &v, td_dev_i64 i, td_dev_i64 j) {
  const char *p = td_elem(v, i, j);
  switch (v.dtype) {
  case TD_DT_F32: return *(const float *)p;
  case TD_DT_F16: return td_f16_to_f32(*(const unsigned short *)p);
  case TD_DT_BF16: return td_bf16_to_f32(*(const unsigned short *)p);
  case TD_DT_I32: return (float)*(const int *)p;
  case TD_DT_F64: return (float)*(const double *)p;
  case TD_DT_I64: return (float)*(const long long *)p;
  default: return (float)*(const unsigned char *)p;
  }
}

__device__ __forceinline__ void td_store_f(const td_dev_view &v, td_dev_i64 i, td_dev_i64 j, float x) {
  char *p = td_elem(v, i, j);
  switch (v.dtype) {
  case TD_DT_F32: *(float *)p = x; break;
  case TD_DT_F16: *(unsigned short *)p = td_f32_to_f16(x); break;
  case TD_DT_BF16: *(unsigned short *)p = td_f32_to_bf16(x); break;
  case TD_DT_I32: *(int *)p = (int)x; break;
  case TD_DT_F64: *(double *)p = (double)x; break;
  case TD_DT_I64: *(long long *)p = (long long)x; break;
  default: *(unsigned char *)p = (unsigned char)x; break;
  }
}

/* Double-precision access for exact f64 / integer reductions. */
__device__ __forceinline__ double td_load_d(const td_dev_view &v, td_dev_i64 i, td_dev_i64 j) {
  const char *p = td_elem(v, i, j);
  switch (v.dtype) {
  case TD_DT_F64: return *(const double *)p;
  case TD_DT_I32: return (double)*(const int *)p;
  default: return (double)td_load_f(v, i, j);
  }
}
