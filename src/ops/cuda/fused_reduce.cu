/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, fused cuda variant (src/ops/cuda/fused.c): the reduction
 * of gemm_rs / gemm_ar and of the fused all-reduce. dst = sum over q of
 * src[q], element-wise, in f32 and in the fixed order q = 0, 1, ..., so
 * every rank that reduces the same elements gets the same bits. When every
 * pointer is 16-byte aligned each thread moves 16 bytes per load (8 bf16/f16
 * or 4 f32 elements) and the few elements past the last whole vector are
 * summed one by one; a misaligned pointer (an all-reduce on an offset
 * buffer) makes the whole range go element by element, still correct. The
 * kernel never waits on a signal: its launch is ordered behind stream-level
 * waits (no SM held while waiting), which is what keeps ranks that share a
 * GPU free of deadlock. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define TD__FUSED_MAX_SRC 8

/* Element types, as td__fused_reduce's `dt` (0 and 1 keep the old bf16 flag's meaning). */
enum { TD__FR_F16 = 0, TD__FR_BF16 = 1, TD__FR_F32 = 2 };

typedef struct td__fused_srcs {
  const void *p[TD__FUSED_MAX_SRC];
} td__fused_srcs;

template <int DT>
__device__ __forceinline__ float td__ld(const void *p, long long i) {
  if (DT == TD__FR_F32)
    return ((const float *)p)[i];
  unsigned short h = ((const unsigned short *)p)[i];
  if (DT == TD__FR_BF16)
    return __uint_as_float((unsigned int)h << 16);
  return __half2float(__ushort_as_half(h));
}

template <int DT>
__device__ __forceinline__ void td__st(void *p, long long i, float f) {
  if (DT == TD__FR_F32)
    ((float *)p)[i] = f;
  else if (DT == TD__FR_BF16)
    ((unsigned short *)p)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(f));
  else
    ((unsigned short *)p)[i] = __half_as_ushort(__float2half_rn(f));
}

/* vecs 16-byte vectors, then elements [vecs * EPV, elems) one by one. */
template <int DT>
__global__ void td__fused_reduce_kernel(void *dst, td__fused_srcs s, int nsrc, long long vecs, long long elems) {
  constexpr int EPV = DT == TD__FR_F32 ? 4 : 8; /* elements per 16-byte vector */
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long i = tid; i < vecs; i += stride) {
    float acc[EPV];
#pragma unroll
    for (int j = 0; j < EPV; j++)
      acc[j] = 0.0f;
    for (int q = 0; q < nsrc; q++) {
      uint4 v = ((const uint4 *)s.p[q])[i];
#pragma unroll
      for (int j = 0; j < EPV; j++)
        acc[j] += td__ld<DT>(&v, j);
    }
    uint4 o;
#pragma unroll
    for (int j = 0; j < EPV; j++)
      td__st<DT>(&o, j, acc[j]);
    ((uint4 *)dst)[i] = o;
  }
  for (long long i = vecs * EPV + tid; i < elems; i += stride) {
    float acc = 0.0f;
    for (int q = 0; q < nsrc; q++)
      acc += td__ld<DT>(s.p[q], i);
    td__st<DT>(dst, i, acc);
  }
}

/* Launches dst[0, elems) = sum of src[0..nsrc)[0, elems) on `stream`; dt is
 * TD__FR_F16, TD__FR_BF16 or TD__FR_F32. Any alignment and length (16-byte
 * aligned pointers take the vector path). Returns the cudaError_t of the
 * launch (0 = success). */
extern "C" int td__fused_reduce(void *dst, const void *const *src, int nsrc, long long elems, int dt, int sms,
                                void *stream) {
  if (elems <= 0)
    return 0;
  if (nsrc < 1 || nsrc > TD__FUSED_MAX_SRC || dt < TD__FR_F16 || dt > TD__FR_F32)
    return (int)cudaErrorInvalidValue;
  td__fused_srcs s;
  uintptr_t bits = (uintptr_t)dst;
  for (int q = 0; q < TD__FUSED_MAX_SRC; q++) {
    s.p[q] = q < nsrc ? src[q] : (const void *)0;
    if (q < nsrc)
      bits |= (uintptr_t)src[q];
  }
  const long long epv = dt == TD__FR_F32 ? 4 : 8;
  long long vecs = bits % 16 == 0 ? elems / epv : 0;
  long long work = vecs + (elems - vecs * epv);
  const int threads = 256;
  long long blocks = (work + threads - 1) / threads;
  long long cap = (long long)(sms > 0 ? sms : 132) * 4;
  if (blocks > cap)
    blocks = cap;
  cudaStream_t st = (cudaStream_t)stream;
  if (dt == TD__FR_BF16)
    td__fused_reduce_kernel<TD__FR_BF16><<<(unsigned)blocks, threads, 0, st>>>(dst, s, nsrc, vecs, elems);
  else if (dt == TD__FR_F16)
    td__fused_reduce_kernel<TD__FR_F16><<<(unsigned)blocks, threads, 0, st>>>(dst, s, nsrc, vecs, elems);
  else
    td__fused_reduce_kernel<TD__FR_F32><<<(unsigned)blocks, threads, 0, st>>>(dst, s, nsrc, vecs, elems);
  return (int)cudaGetLastError();
}
