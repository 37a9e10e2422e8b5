/* SPDX-License-Identifier: Apache-2.0
 * Helpers shared by the GEMM tile tests: random 16-bit host matrices, the
 * float64 CPU reference, device buffers poisoned with NaN, and the relative
 * error check (METHOD: ||out - ref|| / ||ref||, NaN never passes, every
 * element must have been written). Header-only; each test is one process. */
#ifndef TD_TESTS_GPU_GEMM_TEST_UTIL_H
#define TD_TESTS_GPU_GEMM_TEST_UTIL_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/types.h"
#include "tile/cuda/gemm.h"

static uint64_t gt_rng = 88172645463325252ull;
static double gt_uniform(void) { /* xorshift64: [-1, 1) */
  gt_rng ^= gt_rng << 13;
  gt_rng ^= gt_rng >> 7;
  gt_rng ^= gt_rng << 17;
  return (double)(gt_rng >> 11) / 4503599627370496.0 - 1.0;
}

static uint16_t gt_from_f(td_dtype dt, float v) {
  return dt == TD_BF16 ? td_f32_to_bf16(v) : td_f32_to_f16(v);
}
static double gt_to_d(td_dtype dt, uint16_t v) {
  return dt == TD_BF16 ? td_bf16_to_f32(v) : td_f16_to_f32(v);
}

/* count random 16-bit values. */
static uint16_t *gt_random(td_dtype dt, size_t count) {
  uint16_t *p = malloc(count * 2 + 2);
  for (size_t i = 0; i < count; i++)
    p[i] = gt_from_f(dt, (float)gt_uniform());
  return p;
}

/* ref[M,N] (float64) = A[M,K] * B, B as [N,K] or [K,N]. */
static double *gt_reference(td_dtype dt, const uint16_t *a, const uint16_t *b, int m, int n, int k,
                            int b_layout) {
  double *ref = calloc((size_t)m * n + 1, sizeof(double));
  double *arow = malloc(sizeof(double) * (size_t)k);
  double *bt = malloc(sizeof(double) * (size_t)n * k + 8); /* B as [N,K] in float64 */
  for (int j = 0; j < n; j++)
    for (int x = 0; x < k; x++)
      bt[(size_t)j * k + x] = gt_to_d(dt, b_layout == TD_GEMM_B_NK ? b[(size_t)j * k + x]
                                                               : b[(size_t)x * n + j]);
  for (int i = 0; i < m; i++) {
    for (int x = 0; x < k; x++)
      arow[x] = gt_to_d(dt, a[(size_t)i * k + x]);
    for (int j = 0; j < n; j++) {
      double s = 0;
      const double *br = bt + (size_t)j * k;
      for (int x = 0; x < k; x++)
        s += arow[x] * br[x];
      ref[(size_t)i * n + j] = s;
    }
  }
  free(arow);
  free(bt);
  return ref;
}

static void *gt_device_copy(const void *host, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 2) != cudaSuccess)
    return NULL;
  if (host)
    cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
  else
    cudaMemset(d, 0xff, bytes); /* 0xffff is NaN in bf16 and fp16 */
  return d;
}

/* Relative error of out (16-bit, `count` values) against ref; NaN counted apart. */
static double gt_rel_error(td_dtype dt, const uint16_t *out, const double *ref, size_t count,
                           size_t *nans) {
  double d2 = 0, r2 = 0;
  *nans = 0;
  for (size_t i = 0; i < count; i++) {
    double v = gt_to_d(dt, out[i]);
    if (isnan(v)) {
      (*nans)++;
      continue;
    }
    d2 += (v - ref[i]) * (v - ref[i]);
    r2 += ref[i] * ref[i];
  }
  return sqrt(d2 / (r2 > 0 ? r2 : 1));
}

/* bf16 keeps 8 significant bits, fp16 11: output rounding dominates. */
static double gt_tolerance(td_dtype dt) { return dt == TD_BF16 ? 1e-2 : 2e-3; }

/* Compute capability major of device 0, 0 when there is no GPU. */
static int gt_gpu_major(void) {
  int count = 0, major = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  return major;
}

#endif
