/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's description of cuBLAS's choice (bench layer): see gemm_bench_lt.c. */
#ifndef TD_BENCH_GEMM_BENCH_LT_H
#define TD_BENCH_GEMM_BENCH_LT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Writes one line into buf (cap bytes) describing cuBLASLt's first
 * heuristic for C[M,N] = A[M,K] * B (bf16, fp32 compute; B as [K,N] when
 * b_kn, else [N,K]), the GEMM gemm_bench times with cublasGemmEx: tile (as
 * M x N of C), stages, split-K and its reduction scheme, CTA swizzle,
 * cluster shape (of cuBLAS's column-major C^T) and the heuristic's wave
 * count. Returns 0, or -1 when cuBLASLt gave no heuristic (buf then says
 * so). Creates and destroys its own cuBLASLt handle; needs a current CUDA
 * device; thread-safe. */
int gb_lt_describe(int m, int n, int k, int b_kn, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
