/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench` for the tensor-parallel operators (tools layer): the
 * NCCL + cuBLAS side, the baseline the field measures against, for ranks
 * that are threads each on its own GPU (NCCL refuses two ranks of one
 * communicator on one GPU, so with ranks sharing a GPU the side is skipped,
 * with that reason, on every rank alike). One communicator per rank: rank 0
 * makes the unique id, the team broadcasts it, every rank thread calls
 * ncclCommInitRankConfig at once. Per call, on the rank's one stream:
 *   ag_gemm     ncclAllGather of A (padded parts), then cublasGemmEx
 *   gemm_rs     cublasGemmEx into per-destination parts, ncclReduceScatter
 *   gemm_ar     cublasGemmEx into C, ncclAllReduce in place
 *   all_reduce  ncclAllReduce
 * The "gemm only" side is the same GEMM with no communication: the GEMM
 * term of an operator's floor.
 *
 * The communicator is a blocking one, as PyTorch makes them: NCCL runs a
 * non-blocking communicator's every ncclGroupEnd (each collective call) on a
 * thread it creates for that call, which added ~0.15 ms per call (64 KiB
 * all_reduce: 0.20 ms against 0.02 ms back to back) and made the baseline
 * slower than NCCL is.
 *
 * No silent hang: init runs on a helper thread that the rank waits for with
 * the TD_TIMEOUT_MS deadline (past it the rank fails, naming what it waited
 * for; the helper is left behind in NCCL, which cannot be cancelled). Every
 * stream wait polls with the deadline and aborts the communicator past it,
 * which ends NCCL's kernels. Every rank makes every collective call, also
 * after its GEMM failed to launch, so no peer waits for a call that never
 * comes. Release is ncclCommAbort, which waits for nobody: the caller has
 * synchronised the ranks after their last stream wait. */
#ifdef TD_HAVE_GEMM_CUDA
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef TD_HAVE_NCCL_BASE
#include <nccl.h>
#endif

#include "bench_ops.h"

static double bn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static cudaDataType bn_cuda_type(td_dtype dt) {
  return dt == TD_F32 ? CUDA_R_32F : dt == TD_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* Row-major C[rows, cols] = A[rows, k] * B[k, cols] through column-major cuBLAS (C^T = B^T A^T). */
static int bn_gemm(bo_base *B, int64_t rows, int64_t cols, int64_t k, const void *a, int64_t lda, const void *b,
                   int64_t ldb, void *c, int64_t ldc, char *msg, size_t ms) {
  if (rows <= 0 || cols <= 0)
    return 0;
  const float one = 1.0f, zero = 0.0f;
  cudaDataType t = bn_cuda_type(B->dt);
  cublasStatus_t e = cublasGemmEx((cublasHandle_t)B->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)cols, (int)rows, (int)k,
                                  &one, b, t, (int)ldb, a, t, (int)lda, &zero, c, t, (int)ldc, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT);
  if (e != CUBLAS_STATUS_SUCCESS) {
    snprintf(msg, ms, "%s: rank %d: cublasGemmEx %lldx%lldx%lld: cuBLAS status %d", bo_base_mode_name(B->mode),
             B->me, (long long)rows, (long long)cols, (long long)k, (int)e);
    return -1;
  }
  return 0;
}

/* Whether every part of the operand has the largest part's rows (then the
 * padded parts are back to back and one GEMM covers them all). */
static int bn_even(const td_tp_layout *l, int n) {
  for (int r = 1; r < n; r++)
    if (l[r].rows != l[0].rows)
      return 0;
  return 1;
}

/* The GEMM of the operator on this rank, reading the gathered A (ag_gemm)
 * or writing the parts the collective reduces (gemm_rs, gemm_ar). */
static int bn_gemm_step(bo_base *B, char *msg, size_t ms) {
  size_t es = td_dtype_size(B->dt);
  const td_tp_layout *la = &B->la[B->me], *lc = &B->lc[B->me];
  int64_t M = B->s.m, N = B->s.n, K = B->s.k;
  switch (B->kind) {
  case TD_TP_AG_GEMM: {
    size_t per = B->la[0].bytes / es; /* elements of one padded part */
    if (bn_even(B->la, B->n) && (size_t)(B->la[0].rows * K) == per)
      return bn_gemm(B, M, lc->cols, K, B->work, K, B->b, B->lb.ld, B->c, lc->ld, msg, ms);
    for (int r = 0; r < B->n; r++) /* uneven: the rows of rank r's part sit at r * per */
      if (bn_gemm(B, B->la[r].rows, lc->cols, K, (const char *)B->work + (size_t)r * per * es, K, B->b, B->lb.ld,
                  (char *)B->c + (size_t)(B->la[r].row0 * lc->ld) * es, lc->ld, msg, ms))
        return -1;
    return 0;
  }
  case TD_TP_GEMM_RS: {
    size_t per = B->lc[0].bytes / es; /* elements of one padded destination part */
    if (bn_even(B->lc, B->n) && (size_t)(B->lc[0].rows * N) == per)
      return bn_gemm(B, M, N, la->cols, B->a, la->ld, B->b, N, B->work, N, msg, ms);
    for (int r = 0; r < B->n; r++)
      if (bn_gemm(B, B->lc[r].rows, N, la->cols, (const char *)B->a + (size_t)(B->lc[r].row0 * la->ld) * es,
                  la->ld, B->b, N, (char *)B->work + (size_t)r * per * es, N, msg, ms))
        return -1;
    return 0;
  }
  case TD_TP_GEMM_AR:
    return bn_gemm(B, M, N, la->cols, B->a, la->ld, B->b, N, B->c, lc->ld, msg, ms);
  default:
    return 0;
  }
}

#ifdef TD_HAVE_NCCL_BASE
static ncclDataType_t bn_nccl_type(td_dtype dt) {
  return dt == TD_F32 ? ncclFloat32 : dt == TD_BF16 ? ncclBfloat16 : ncclFloat16;
}

static void bn_abort(bo_base *B) {
  if (B->nccl)
    ncclCommAbort((ncclComm_t)B->nccl);
  B->nccl = NULL;
}

/* A non-blocking communicator's call returned r: wait until its state
 * leaves ncclInProgress (deadline), then report a failure by name. */
static int bn_nccl_done(bo_base *B, ncclResult_t r, const char *what, char *msg, size_t ms) {
  ncclComm_t comm = (ncclComm_t)B->nccl;
  double t0 = bn_now();
  while (r == ncclInProgress) {
    if (bn_now() - t0 > B->timeout_s) {
      snprintf(msg, ms, "nccl+cublas: rank %d: %s still in progress after %.0f s (TD_TIMEOUT_MS): a peer never "
               "joined; communicator aborted", B->me, what, B->timeout_s);
      bn_abort(B);
      return -1;
    }
    sched_yield();
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess)
      break;
  }
  if (r != ncclSuccess) {
    snprintf(msg, ms, "nccl+cublas: rank %d: %s: %s (%s)", B->me, what, ncclGetErrorString(r),
             ncclGetLastError(comm));
    bn_abort(B);
    return -1;
  }
  return 0;
}
#endif

/* Waits for the stream with the deadline, watching the communicator's
 * asynchronous error; aborts the communicator when either goes wrong. */
static int bn_stream_wait(bo_base *B, const char *what, char *msg, size_t ms) {
  cudaStream_t s = (cudaStream_t)B->stream;
  double t0 = bn_now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess)
      return 0;
    if (e != cudaErrorNotReady) {
      snprintf(msg, ms, "%s: rank %d: %s: %s", bo_base_mode_name(B->mode), B->me, what, cudaGetErrorString(e));
      return -1;
    }
#ifdef TD_HAVE_NCCL_BASE
    if (B->nccl) {
      ncclResult_t ae = ncclSuccess;
      ncclCommGetAsyncError((ncclComm_t)B->nccl, &ae);
      if (ae != ncclSuccess && ae != ncclInProgress)
        return bn_nccl_done(B, ae, what, msg, ms);
    }
#endif
    if (bn_now() - t0 > B->timeout_s) {
      snprintf(msg, ms, "%s: rank %d: %s not finished after %.0f s (TD_TIMEOUT_MS): a peer never joined the "
               "collective%s", bo_base_mode_name(B->mode), B->me, what, B->timeout_s,
               B->nccl ? "; communicator aborted" : "");
#ifdef TD_HAVE_NCCL_BASE
      bn_abort(B);
#endif
      return -1;
    }
    sched_yield();
  }
}

#ifdef TD_HAVE_NCCL_BASE
/* One rank's blocking init, on a thread of its own so the rank can give up
 * at the deadline. */
typedef struct bn_init_job {
  ncclUniqueId id;
  int n, me, device;
  ncclComm_t comm;
  ncclResult_t r;
  int done; /* set last, with release order */
} bn_init_job;

static void *bn_init_main(void *arg) {
  bn_init_job *j = arg;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cudaSetDevice(j->device);
  j->r = ncclCommInitRankConfig(&j->comm, j->n, j->id, j->me, &cfg);
  __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
  return NULL;
}
#endif

void bo_nccl_version(char *buf, size_t size) {
#ifdef TD_HAVE_NCCL_BASE
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess) {
    /* 2.9 and later: major * 10000 + minor * 100 + patch */
    snprintf(buf, size, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    return;
  }
#endif
  snprintf(buf, size, "none: this build has no NCCL");
}

int bo_nccl_setup(bo_base *B, const int *devices, char *msg, size_t ms) {
  int64_t tmo = 60000;
  if (td_config_int("TD_TIMEOUT_MS", &tmo) != TD_OK || tmo <= 0)
    tmo = 60000;
  B->timeout_s = (double)tmo * 1e-3;
  if (B->mode == BO_BASE_GEMM) {
    /* ag_gemm's GEMM reads the gathered A, which no collective fills here:
     * random values, never zeros (they run faster than real data). */
    if (B->kind == TD_TP_AG_GEMM && bo_fill(1, B->work, B->work_bytes, B->dt, 77 + (uint64_t)B->me, 1.0)) {
      snprintf(msg, ms, "gemm only: rank %d: filling the gathered A failed", B->me);
      return -1;
    }
    return 0;
  }
  /* The same decision on every rank: it is made from the exchanged devices. */
  for (int r = 0; r < B->n; r++)
    for (int q = 0; q < r; q++)
      if (devices[r] == devices[q]) {
        snprintf(msg, ms, "skipped: ranks %d and %d share GPU %d (NCCL refuses two ranks of one communicator on one "
                 "GPU; give every rank its own GPU: --ranks <= GPUs)", q, r, devices[r]);
        return 1;
      }
#ifndef TD_HAVE_NCCL_BASE
  snprintf(msg, ms, "skipped: this build has no NCCL (nccl.h and libnccl were not found at configure time)");
  return 1;
#else
  /* Equal parts for the collectives: the padded parts of td_tp_operand. */
  size_t es = td_dtype_size(B->dt);
  if ((B->kind == TD_TP_GEMM_RS && (B->lc[B->me].ld != B->s.n || B->lc[0].bytes % (es * (size_t)B->s.n))) ||
      (B->kind == TD_TP_GEMM_AR && B->lc[B->me].ld != B->s.n)) {
    snprintf(msg, ms, "nccl+cublas: rank %d: C's row stride %lld is not N = %lld", B->me,
             (long long)B->lc[B->me].ld, (long long)B->s.n);
    return -1;
  }
  if (B->kind == TD_TP_GEMM_RS) /* padding rows of the parts are reduced too: keep them finite */
    if (cudaMemset(B->work, 0, B->work_bytes) != cudaSuccess) {
      snprintf(msg, ms, "nccl+cublas: rank %d: cudaMemset of the partials failed", B->me);
      return -1;
    }
  /* Rank 0 makes the id; its status travels with it so nobody waits on a
   * rank 0 that failed. */
  struct {
    int32_t ok;
    char id[NCCL_UNIQUE_ID_BYTES];
  } pack;
  memset(&pack, 0, sizeof pack);
  ncclResult_t r = ncclSuccess;
  if (B->me == 0) {
    ncclUniqueId id;
    r = ncclGetUniqueId(&id);
    pack.ok = r == ncclSuccess;
    memcpy(pack.id, id.internal, sizeof pack.id);
  }
  if (td_broadcast(B->team, &pack, &pack, sizeof pack, TD_U8, 0) != TD_OK) {
    snprintf(msg, ms, "nccl+cublas: rank %d: unique id broadcast: %s", B->me, td_last_error());
    return -1;
  }
  if (!pack.ok) {
    snprintf(msg, ms, "nccl+cublas: ncclGetUniqueId failed on rank 0%s%s", B->me == 0 ? ": " : "",
             B->me == 0 ? ncclGetErrorString(r) : "");
    return -1;
  }
  ncclUniqueId id;
  memcpy(id.internal, pack.id, sizeof pack.id);
  bn_init_job *job = calloc(1, sizeof *job);
  if (!job) {
    snprintf(msg, ms, "nccl+cublas: rank %d: out of host memory", B->me);
    return -1;
  }
  job->id = id, job->n = B->n, job->me = B->me;
  if (cudaGetDevice(&job->device) != cudaSuccess)
    job->device = 0;
  pthread_t th;
  if (pthread_create(&th, NULL, bn_init_main, job) != 0) {
    free(job);
    snprintf(msg, ms, "nccl+cublas: rank %d: could not start the init thread", B->me);
    return -1;
  }
  double t0 = bn_now();
  while (!__atomic_load_n(&job->done, __ATOMIC_ACQUIRE)) {
    if (bn_now() - t0 > B->timeout_s) {
      pthread_detach(th); /* stuck in NCCL: left behind, job with it */
      snprintf(msg, ms, "nccl+cublas: rank %d: ncclCommInitRankConfig not finished after %.0f s (TD_TIMEOUT_MS): "
               "a peer never joined", B->me, B->timeout_s);
      return -1;
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  pthread_join(th, NULL);
  r = job->r;
  B->nccl = job->comm;
  free(job);
  if (r != ncclSuccess || !B->nccl) {
    snprintf(msg, ms, "nccl+cublas: rank %d: ncclCommInitRankConfig: %s", B->me, ncclGetErrorString(r));
    if (B->nccl)
      bn_abort(B);
    return -1;
  }
  return 0;
#endif
}

int bo_nccl_run(bo_base *B, int with_comm, char *msg, size_t ms) {
#ifndef TD_HAVE_NCCL_BASE
  if (with_comm) {
    snprintf(msg, ms, "nccl+cublas: this build has no NCCL");
    return -1;
  }
#else
  size_t es = td_dtype_size(B->dt);
  ncclComm_t comm = (ncclComm_t)B->nccl;
  cudaStream_t s = (cudaStream_t)B->stream;
  ncclDataType_t t = bn_nccl_type(B->dt);
  if (with_comm && !comm) {
    snprintf(msg, ms, "nccl+cublas: rank %d: the communicator was aborted by an earlier failure", B->me);
    return -1;
  }
  if (with_comm && B->kind == TD_TP_AG_GEMM &&
      bn_nccl_done(B, ncclAllGather(B->a, B->work, B->la[0].bytes / es, t, comm, s), "ncclAllGather", msg, ms))
    return -1;
  if (with_comm && B->kind == TD_TP_ALL_REDUCE &&
      bn_nccl_done(B, ncclAllReduce(B->a, B->c, B->s.count, t, ncclSum, comm, s), "ncclAllReduce", msg, ms))
    return -1;
#endif
  /* A GEMM that failed to launch still lets the collective below go: the
   * peers are in it (a blocking communicator waits for them on the host). */
  int gemm_rc = bn_gemm_step(B, msg, ms);
#ifdef TD_HAVE_NCCL_BASE
  char cmsg[256] = "";
  if (with_comm && B->kind == TD_TP_GEMM_RS &&
      bn_nccl_done(B, ncclReduceScatter(B->work, B->c, B->lc[0].bytes / es, t, ncclSum, comm, s),
                   "ncclReduceScatter", cmsg, sizeof cmsg))
    gemm_rc = gemm_rc ? gemm_rc : (snprintf(msg, ms, "%s", cmsg), -1);
  if (with_comm && B->kind == TD_TP_GEMM_AR &&
      bn_nccl_done(B, ncclAllReduce(B->c, B->c, (size_t)(B->s.m * B->s.n), t, ncclSum, comm, s), "ncclAllReduce",
                   cmsg, sizeof cmsg))
    gemm_rc = gemm_rc ? gemm_rc : (snprintf(msg, ms, "%s", cmsg), -1);
#endif
  if (gemm_rc) {
    char keep[256];
    snprintf(keep, sizeof keep, "%s", msg);
    bn_stream_wait(B, "the collective after a failed GEMM", msg, ms); /* the peers' collective ends */
    snprintf(msg, ms, "%s", keep);
    return -1;
  }
  return bn_stream_wait(B, with_comm ? td_tp_kind_name(B->kind) : "cuBLAS GEMM", msg, ms);
}

void bo_nccl_release(bo_base *B) {
#ifdef TD_HAVE_NCCL_BASE
  ncclComm_t comm = (ncclComm_t)B->nccl;
  if (!comm)
    return;
  /* Abort frees the communicator without waiting for any peer (finalize of a
   * blocking communicator would wait, with no deadline). The callers reach
   * here after every rank's last stream wait and a team barrier, so no peer
   * kernel still reads this rank's buffers. */
  ncclCommAbort(comm);
  B->nccl = NULL;
#else
  (void)B;
#endif
}
#else
typedef int bo_nccl_unused; /* ISO C wants a non-empty file */
#endif
