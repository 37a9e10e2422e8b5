/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, fused cuda variant (src/ops/cuda/fused.c): the reduction
 * of gemm_rs / gemm_ar. dst = sum over q of src[q], element-wise, in f32 and
 * in the fixed order q = 0, 1, ..., so every rank that reduces the same rows
 * gets the same bits. Each thread moves 16 bytes (8 bf16/f16 elements) per
 * load: the operator's rules (N % 8 == 0, 16-byte aligned buffers) make every
 * range a whole number of 16-byte vectors. The kernel never waits on a
 * signal: its launch is ordered behind stream-level waits (no SM held while
 * waiting), which is what keeps ranks that share a GPU free of deadlock. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define TD__FUSED_MAX_SRC 8

typedef struct td__fused_srcs {
  const uint4 *p[TD__FUSED_MAX_SRC];
} td__fused_srcs;

template <int BF16>
__device__ __forceinline__ float td__to_f32(unsigned short h) {
  if (BF16)
    return __uint_as_float((unsigned int)h << 16);
  return __half2float(__ushort_as_half(h));
}

template <int BF16>
__device__ __forceinline__ unsigned short td__from_f32(float f) {
  if (BF16)
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  return __half_as_ushort(__float2half_rn(f));
}

template <int BF16>
__global__ void td__fused_reduce_kernel(uint4 *dst, td__fused_srcs s, int nsrc, long long vecs) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < vecs; i += stride) {
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
      acc[j] = 0.0f;
    for (int q = 0; q < nsrc; q++) {
      uint4 v = s.p[q][i];
      const unsigned short *h = (const unsigned short *)&v;
#pragma unroll
      for (int j = 0; j < 8; j++)
        acc[j] += td__to_f32<BF16>(h[j]);
    }
    uint4 o;
    unsigned short *oh = (unsigned short *)&o;
#pragma unroll
    for (int j = 0; j < 8; j++)
      oh[j] = td__from_f32<BF16>(acc[j]);
    dst[i] = o;
  }
}

/* Launches dst[0, elems) = sum of src[0..nsrc)[0, elems) on `stream`.
 * elems % 8 == 0 and 16-byte aligned pointers are the caller's promise.
 * Returns the cudaError_t of the launch (0 = success). */
extern "C" int td__fused_reduce(void *dst, const void *const *src, int nsrc, long long elems, int bf16,
                                int sms, void *stream) {
  if (elems <= 0)
    return 0;
  if (nsrc < 1 || nsrc > TD__FUSED_MAX_SRC)
    return (int)cudaErrorInvalidValue;
  td__fused_srcs s;
  for (int q = 0; q < TD__FUSED_MAX_SRC; q++)
    s.p[q] = q < nsrc ? (const uint4 *)src[q] : (const uint4 *)0;
  long long vecs = elems / 8;
  const int threads = 256;
  long long blocks = (vecs + threads - 1) / threads;
  long long cap = (long long)(sms > 0 ? sms : 132) * 4;
  if (blocks > cap)
    blocks = cap;
  cudaStream_t st = (cudaStream_t)stream;
  if (bf16)
    td__fused_reduce_kernel<1><<<(unsigned)blocks, threads, 0, st>>>((uint4 *)dst, s, nsrc, vecs);
  else
    td__fused_reduce_kernel<0><<<(unsigned)blocks, threads, 0, st>>>((uint4 *)dst, s, nsrc, vecs);
  return (int)cudaGetLastError();
}
