/* SPDX-License-Identifier: Apache-2.0
 * cuBLAS as one more engine of the GEMM tile family (tiles layer, cuda
 * backend): td__gemm_cuda_run with a TD_GEMM_CUBLAS configuration lands
 * here. Launches that need no in-kernel hooks (ordered by streams and events,
 * as in the fused operators of ranks sharing a GPU) can then take whichever of
 * cuBLAS and our tiles the tuner measured faster for the shape.
 *
 * Row-major C[M,N] = A[M,K] * B is computed as column-major C^T = B^T A^T:
 * with B given [N,K] that is op(B) = T, with B given [K,N] op(B) = N. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "exec/cuda/device_stuck.h"
#include "gemm.h"

/* One handle per thread and device: a cuBLAS handle is bound to the device
 * current at its creation and is not safe to share between threads that set
 * different streams on it. */
typedef struct td__blas_tls {
  int n;
  int dev[16];
  cublasHandle_t h[16];
} td__blas_tls;

static pthread_key_t td__blas_key;
static pthread_once_t td__blas_once = PTHREAD_ONCE_INIT;

static void td__blas_free(void *p) {
  td__blas_tls *t = p;
  for (int i = 0; t && i < t->n; i++) {
    if (td__cuda_device_stuck(t->dev[i]))
      continue; /* cublasDestroy synchronises the device, whose blocked work never ends: leak the handle */
    int cur = 0;
    if (cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(t->dev[i]) == cudaSuccess) {
      cublasDestroy(t->h[i]);
      cudaSetDevice(cur);
    }
  }
  free(t);
}

static void td__blas_init(void) { pthread_key_create(&td__blas_key, td__blas_free); }

static td_status td__blas_handle(cublasHandle_t *out) {
  int dev = 0;
  cudaError_t ce = cudaGetDevice(&dev);
  if (ce != cudaSuccess)
    return td__error(TD_ERR_CUDA, "gemm (cuBLAS): cudaGetDevice failed: %s", cudaGetErrorString(ce));
  pthread_once(&td__blas_once, td__blas_init);
  td__blas_tls *t = pthread_getspecific(td__blas_key);
  if (!t) {
    t = calloc(1, sizeof *t);
    if (!t || pthread_setspecific(td__blas_key, t) != 0) {
      free(t);
      return td__error(TD_ERR_NO_MEMORY, "gemm (cuBLAS): no memory for the thread's handle table");
    }
  }
  for (int i = 0; i < t->n; i++)
    if (t->dev[i] == dev) {
      *out = t->h[i];
      return TD_OK;
    }
  if (t->n == 16)
    return td__error(TD_ERR_UNSUPPORTED, "gemm (cuBLAS): one thread used more than 16 devices");
  cublasStatus_t bs = cublasCreate(&t->h[t->n]);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return td__error(TD_ERR_CUDA, "gemm (cuBLAS): cublasCreate on device %d failed (status %d)", dev, (int)bs);
  t->dev[t->n] = dev;
  *out = t->h[t->n++];
  return TD_OK;
}

td_status td__gemm_cublas_run(const td_gemm_problem *p, void *stream) {
  if (!p || !p->a || !p->b || (!p->c && p->m > 0 && p->n > 0))
    return td__error(TD_ERR_INVALID_ARG, "gemm (cuBLAS): problem and its A, B and C must not be NULL");
  if (p->m == 0 || p->n == 0)
    return TD_OK;
  cublasHandle_t h = NULL;
  TD_CHECK(td__blas_handle(&h));
  cublasStatus_t bs = cublasSetStream(h, (cudaStream_t)stream);
  const cudaDataType_t t = p->dtype == TD_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  const int kn = p->b_layout == TD_GEMM_B_KN;
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasGemmEx(h, kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, p->n, p->m, p->k, &one, p->b, t,
                      kn ? p->n : p->k, p->a, t, p->k, &zero, p->c, t, p->n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return td__error(TD_ERR_CUDA, "gemm (cuBLAS): cublasGemmEx M=%d N=%d K=%d failed (status %d)", p->m, p->n,
                     p->k, (int)bs);
  return TD_OK;
}

/* Several GEMMs of one shape in one cublasGemmBatchedEx launch: the shape,
 * dtype and B layout of *p (its a, b, c are ignored); ptrs, device memory,
 * holds count B pointers, then count A pointers, then count C pointers (each
 * row-major and contiguous as in td_gemm_problem). Asynchronous on `stream`.
 * Declared where it is used (src/ops/cuda/fused.h: ag_gemm's direct GEMMs of
 * ranks sharing a GPU, one launch instead of one per rank), reached there
 * through a weak reference like td__gemm_cuda_run. */
td_status td__gemm_cublas_batched(const td_gemm_problem *p, const void *const *ptrs, int count, void *stream) {
  if (!p || !ptrs || count < 1)
    return td__error(TD_ERR_INVALID_ARG, "gemm (cuBLAS batched): problem, pointer table and count >= 1 needed");
  if (p->m == 0 || p->n == 0)
    return TD_OK;
  cublasHandle_t h = NULL;
  TD_CHECK(td__blas_handle(&h));
  cublasStatus_t bs = cublasSetStream(h, (cudaStream_t)stream);
  const cudaDataType_t t = p->dtype == TD_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float one = 1.0f, zero = 0.0f;
  const int kn = p->b_layout == TD_GEMM_B_KN;
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasGemmBatchedEx(h, kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, p->n, p->m, p->k, &one,
                             (const void *const *)ptrs, t, kn ? p->n : p->k, (const void *const *)(ptrs + count), t,
                             p->k, &zero, (void *const *)(ptrs + 2 * count), t, p->n, count, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return td__error(TD_ERR_CUDA, "gemm (cuBLAS): cublasGemmBatchedEx %d x M=%d N=%d K=%d failed (status %d)",
                     count, p->m, p->n, p->k, (int)bs);
  return TD_OK;
}

void td__gemm_config_name(const td_gemm_config *c, char *buf, size_t cap) {
  if (!c)
    snprintf(buf, cap, "(none)");
  else if (c->arch == TD_GEMM_CUBLAS)
    snprintf(buf, cap, "cuBLAS");
  else
    snprintf(buf, cap, "sm%d %dx%dx%d s%d c%d g%d%s", (int)c->arch, c->bm, c->bn, c->bk, c->stages, c->cluster,
             c->group_m, c->split_k > 1 ? " split" : "");
}
