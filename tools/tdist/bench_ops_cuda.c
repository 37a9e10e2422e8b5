/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench` for the tensor-parallel operators, cuda part (tools layer):
 * the setup every cuda side outside tdist shares (stream, cuBLAS handle, the
 * agreement on which GPU each rank uses), the environment's GPU links, and
 * the sequential baseline written for ranks that are threads sharing one
 * GPU, where NCCL refuses to run. That baseline does the collective the way
 * NCCL would at best on a local transport: cudaMemcpyAsync copies straight
 * from the peers' buffers and cublasAxpyEx reductions (f32 accumulate, rank
 * order 0..n-1), then cuBLAS GEMM (cublasGemmEx, f32 compute), all on the
 * rank's one stream; a host barrier (after a stream sync) sits wherever a
 * rank needs every peer's data. With ranks on several GPUs the peers' memory
 * is reached through peer access, enabled here. The NCCL + cuBLAS side is in
 * bench_ops_nccl.c. Built only with the CUDA backend. */
#ifdef TD_HAVE_GEMM_CUDA
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "bench_ops.h"
#include "gpu_links.h"

static cudaDataType bo_cuda_type(td_dtype dt) {
  return dt == TD_F32 ? CUDA_R_32F : dt == TD_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

#define BO_CU(call)                                                                   \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      snprintf(msg, ms, "cuda baseline: %s: %s", #call, cudaGetErrorString(e_));      \
      return -1;                                                                      \
    }                                                                                 \
  } while (0)
#define BO_BL(call)                                                                   \
  do {                                                                                \
    cublasStatus_t e_ = (call);                                                       \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                                \
      snprintf(msg, ms, "cuda baseline: %s: cuBLAS status %d", #call, (int)e_);       \
      return -1;                                                                      \
    }                                                                                 \
  } while (0)

/* Peer access from this rank's GPU to every other GPU a rank uses, so the
 * baseline's axpy kernels can read peers' buffers ("already enabled" is fine:
 * another side or rank thread did it). */
static int bo_peer_access(const int *devices, int n, char *msg, size_t ms) {
  int me = 0;
  BO_CU(cudaGetDevice(&me));
  for (int r = 0; r < n; r++) {
    int ok = 0, d = devices[r];
    if (d == me || cudaDeviceCanAccessPeer(&ok, me, d) != cudaSuccess || !ok)
      continue;
    cudaError_t e = cudaDeviceEnablePeerAccess(d, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
      cudaGetLastError(); /* clears the sticky-free error it set */
    else if (e != cudaSuccess) {
      snprintf(msg, ms, "cuda baseline: cudaDeviceEnablePeerAccess(GPU %d -> GPU %d): %s", me, d,
               cudaGetErrorString(e));
      return -1;
    }
  }
  return 0;
}

static int bo_cuda_local(bo_base *B, char *msg, size_t ms) {
  cudaStream_t s = NULL;
  cublasHandle_t h = NULL;
  BO_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  B->stream = s;
  BO_BL(cublasCreate(&h));
  B->blas = h;
  BO_BL(cublasSetStream(h, s));
  return 0;
}

int bo_cuda_setup(bo_base *B, int local_ok, char *msg, size_t ms) {
  /* Stream and handle first, then one exchange: (ok, GPU, A, C, scratch) of
   * every rank, so a rank that failed makes every rank fail with its name
   * and message instead of leaving the others waiting. */
  char mine_msg[256] = "";
  if (local_ok && bo_cuda_local(B, mine_msg, sizeof mine_msg))
    local_ok = 0;
  else if (!local_ok)
    snprintf(mine_msg, sizeof mine_msg, "%s", msg);
  int dev = -1;
  cudaGetDevice(&dev);
  enum { F = 5 };
  uint64_t mine[F] = {(uint64_t)local_ok, (uint64_t)(int64_t)dev, (uint64_t)(uintptr_t)B->a,
                      (uint64_t)(uintptr_t)B->c, (uint64_t)(uintptr_t)B->work};
  uint64_t *all = calloc((size_t)B->n * F, sizeof *all);
  int *devices = calloc((size_t)B->n, sizeof *devices);
  B->peer_a = calloc((size_t)B->n, sizeof *B->peer_a);
  B->peer_c = calloc((size_t)B->n, sizeof *B->peer_c);
  B->peer_w = calloc((size_t)B->n, sizeof *B->peer_w);
  /* Out of host memory on one rank: it still joins the exchange (with a
   * stack copy), so the others fail at once too. */
  uint64_t fallback[64 * F];
  uint64_t *buf = all ? all : fallback;
  int oom = !all || !devices || !B->peer_a || !B->peer_c || !B->peer_w;
  if (oom) {
    mine[0] = 0;
    snprintf(mine_msg, sizeof mine_msg, "%s: out of host memory", bo_base_mode_name(B->mode));
  }
  td_status st = td_all_gather(B->team, buf, mine, F, TD_I64);
  int rc = 0;
  if (st != TD_OK) {
    snprintf(msg, ms, "%s: setup exchange: %s", bo_base_mode_name(B->mode), td_last_error());
    rc = -1;
  }
  for (int r = 0; r < B->n && rc == 0; r++)
    if (!buf[F * r]) {
      if (r == B->me)
        snprintf(msg, ms, "%s", mine_msg);
      else
        snprintf(msg, ms, "%s: rank %d could not prepare (see its message; out of memory?)",
                 bo_base_mode_name(B->mode), r);
      rc = -1;
    }
  if (rc == 0)
    for (int r = 0; r < B->n; r++) {
      devices[r] = (int)(int64_t)buf[F * r + 1];
      B->peer_a[r] = buf[F * r + 2], B->peer_c[r] = buf[F * r + 3], B->peer_w[r] = buf[F * r + 4];
    }
  if (rc == 0 && B->mode == BO_BASE_SEQ)
    rc = bo_peer_access(devices, B->n, msg, ms);
  else if (rc == 0)
    rc = bo_nccl_setup(B, devices, msg, ms);
  free(all);
  free(devices);
  return rc;
}

void bo_cuda_release(bo_base *B) {
  bo_nccl_release(B);
  if (B->blas)
    cublasDestroy((cublasHandle_t)B->blas);
  if (B->stream)
    cudaStreamDestroy((cudaStream_t)B->stream);
}

/* Row-major C[rows, cols] = A[rows, k] * B[k, cols] through column-major cuBLAS (C^T = B^T A^T). */
static int bo_gemm(bo_base *B, int64_t rows, int64_t cols, int64_t k, const void *a, int64_t lda, const void *b,
                   int64_t ldb, void *c, int64_t ldc, char *msg, size_t ms) {
  if (rows <= 0 || cols <= 0)
    return 0;
  const float one = 1.0f, zero = 0.0f;
  cudaDataType t = bo_cuda_type(B->dt);
  BO_BL(cublasGemmEx((cublasHandle_t)B->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)cols, (int)rows, (int)k, &one, b, t,
                     (int)ldb, a, t, (int)lda, &zero, c, t, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

/* y += x over `count` elements, f32 accumulate. */
static int bo_axpy(bo_base *B, size_t count, const void *x, void *y, char *msg, size_t ms) {
  const float one = 1.0f;
  cudaDataType t = bo_cuda_type(B->dt);
  if (count)
    BO_BL(cublasAxpyEx((cublasHandle_t)B->blas, (int)count, &one, CUDA_R_32F, x, t, 1, y, t, 1, CUDA_R_32F));
  return 0;
}

static int bo_sync_all(bo_base *B, char *msg, size_t ms) {
  BO_CU(cudaStreamSynchronize((cudaStream_t)B->stream));
  td_status st = td_team_sync(B->team);
  if (st != TD_OK) {
    snprintf(msg, ms, "cuda baseline: barrier: %s", td_last_error());
    return -1;
  }
  return 0;
}

/* Reduce elements [off, off+len) of every rank's vector at peers[] into dst,
 * then (gather) copy every rank's reduced range from outs[] into this rank's out. */
static int bo_reduce_range(bo_base *B, const uint64_t *peers, size_t off, size_t len, void *dst, char *msg,
                           size_t ms) {
  size_t es = td_dtype_size(B->dt);
  cudaStream_t s = (cudaStream_t)B->stream;
  if (!len)
    return 0;
  BO_CU(cudaMemcpyAsync(dst, (const char *)(uintptr_t)peers[0] + off * es, len * es, cudaMemcpyDeviceToDevice, s));
  for (int r = 1; r < B->n; r++)
    if (bo_axpy(B, len, (const char *)(uintptr_t)peers[r] + off * es, dst, msg, ms))
      return -1;
  return 0;
}

static int bo_all_reduce(bo_base *B, const uint64_t *src, size_t count, void *c, char *msg, size_t ms) {
  size_t es = td_dtype_size(B->dt), off, len;
  td_chunk_range(count, B->n, B->me, &off, &len);
  if (bo_sync_all(B, msg, ms) || bo_reduce_range(B, src, off, len, (char *)c + off * es, msg, ms) ||
      bo_sync_all(B, msg, ms))
    return -1;
  cudaStream_t s = (cudaStream_t)B->stream;
  for (int r = 0; r < B->n; r++) {
    if (r == B->me)
      continue;
    td_chunk_range(count, B->n, r, &off, &len);
    if (len)
      BO_CU(cudaMemcpyAsync((char *)c + off * es, (const char *)(uintptr_t)B->peer_c[r] + off * es, len * es,
                            cudaMemcpyDeviceToDevice, s));
  }
  return 0;
}

int bo_cuda_run(bo_base *B, char *msg, size_t ms) {
  if (B->mode != BO_BASE_SEQ)
    return bo_nccl_run(B, B->mode == BO_BASE_NCCL, msg, ms);
  size_t es = td_dtype_size(B->dt);
  cudaStream_t s = (cudaStream_t)B->stream;
  const td_tp_layout *la = &B->la[B->me], *lc = &B->lc[B->me];
  int64_t M = B->s.m, N = B->s.n, K = B->s.k;
  switch (B->kind) {
  case TD_TP_AG_GEMM:
    /* what a collective implies: a rank reads its peers' A only after they
     * reached this call (the inputs of a real step change between calls) */
    if (bo_sync_all(B, msg, ms))
      return -1;
    for (int r = 0; r < B->n; r++)
      if (B->la[r].rows)
        BO_CU(cudaMemcpyAsync((char *)B->work + (size_t)(B->la[r].row0 * K) * es, (const void *)(uintptr_t)B->peer_a[r],
                              (size_t)(B->la[r].rows * K) * es, cudaMemcpyDeviceToDevice, s));
    if (bo_gemm(B, M, lc->cols, K, B->work, K, B->b, B->lb.ld, B->c, lc->ld, msg, ms))
      return -1;
    break;
  case TD_TP_GEMM_RS: {
    if (bo_gemm(B, M, N, la->cols, B->a, la->ld, B->b, N, B->work, N, msg, ms) || bo_sync_all(B, msg, ms))
      return -1;
    if (bo_reduce_range(B, B->peer_w, (size_t)(lc->row0 * N), (size_t)(lc->rows * N), B->c, msg, ms))
      return -1;
    break;
  }
  case TD_TP_GEMM_AR:
    if (bo_gemm(B, M, N, la->cols, B->a, la->ld, B->b, N, B->work, N, msg, ms) ||
        bo_all_reduce(B, B->peer_w, (size_t)(M * N), B->c, msg, ms))
      return -1;
    break;
  default:
    if (bo_all_reduce(B, B->peer_a, B->s.count, B->c, msg, ms))
      return -1;
    break;
  }
  BO_CU(cudaStreamSynchronize(s));
  return 0;
}
void bo_cuda_env(void *json_obj, int ranks, const int *devices) {
  cJSON *e = json_obj;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess)
    count = 0;
  cJSON_AddNumberToObject(e, "gpu_count", count);
  if (count < 1 || !devices) { /* no topology to describe (bo_devices refuses this before a run) */
    cJSON_AddStringToObject(e, "placement", "none: no usable GPU");
    cJSON_AddStringToObject(e, "interconnect", "none: no usable GPU");
    return;
  }
  /* From the devices the ranks use (bo_devices: rank r on GPU r % count, or
   * every rank on TD_CUDA_DEVICE), not from the count alone. */
  int used = 0, pinned = getenv("TD_CUDA_DEVICE") && *getenv("TD_CUDA_DEVICE");
  for (int r = 0; r < ranks; r++) {
    int seen = 0;
    for (int q = 0; q < r; q++)
      seen |= devices[q] == devices[r];
    used += !seen;
  }
  char place[200];
  if (pinned)
    snprintf(place, sizeof place, "%d ranks on 1 GPU of %d: every rank on GPU %d (TD_CUDA_DEVICE)%s", ranks, count,
             devices[0], ranks > 1 ? ": ranks share it (nccl+cublas skipped)" : "");
  else
    snprintf(place, sizeof place, "%d ranks on %d GPU(s) of %d, rank r on GPU r %% %d: %s", ranks, used, count,
             count, used == ranks ? "one GPU per rank" : "ranks share GPUs (nccl+cublas skipped)");
  cJSON_AddStringToObject(e, "placement", place);
  td_bench_gpu_links_json(e, count);
  cJSON_AddStringToObject(e, "interconnect", used < 2          ? "none: the ranks share one GPU (transport local)"
                                             : used == ranks ? "peer links between the ranks' GPUs: see p2p, "
                                                               "nvidia_smi_topo"
                                                             : "ranks share GPUs: see p2p, nvidia_smi_topo");
}
#else
typedef int bo_cuda_unused; /* ISO C wants a non-empty file */
#endif
