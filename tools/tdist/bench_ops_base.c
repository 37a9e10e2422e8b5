/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench` for the tensor-parallel operators (tools layer): the sides
 * from outside tdist (creation, dispatch) and the memory and environment
 * helpers of both backends.
 *
 * cpu baseline (f32): the host collective of coll.h on the padded local
 * buffers, then OpenBLAS sgemm (ag_gemm: all_gather then one GEMM over the
 * gathered rows; gemm_rs: one GEMM per destination's rows into a padded
 * partial, then reduce_scatter; gemm_ar: GEMM then all_reduce).
 * cuda sides: the sequential baseline of peer copies + cuBLAS
 * (bench_ops_cuda.c), NCCL + cuBLAS with one GPU per rank and the GEMM alone
 * (bench_ops_nccl.c). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_ops.h"
#include "cli_common.h"

#ifdef TD_HAVE_GEMM_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif


static size_t bo_es(td_dtype dt) { return td_dtype_size(dt); }

void *bo_alloc(int cuda, size_t bytes) {
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda) {
    void *p = NULL;
    return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
  }
#endif
  return cuda ? NULL : malloc(bytes ? bytes : 1);
}

void bo_free(int cuda, void *p) {
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda) {
    cudaFree(p);
    return;
  }
#endif
  free(p);
}

/* Every rank's device, worked out once by bo_devices before any rank runs
 * (read-only afterwards, so the rank threads may read it), and the count of
 * distinct ones. */
#ifdef TD_HAVE_GEMM_CUDA
static int bo_dev[64], bo_ndev;
#endif

int bo_devices(int cuda, int ranks, int *devices, char *msg, size_t ms) {
  if (!cuda || ranks < 1 || ranks > 64) {
    if (cuda)
      snprintf(msg, ms, "%d ranks; 1..64 allowed", ranks);
    return cuda ? -1 : 0;
  }
#ifdef TD_HAVE_GEMM_CUDA
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    snprintf(msg, ms, "no usable CUDA device: %s", cudaGetErrorString(e));
    return -1;
  }
  if (count < 1) {
    snprintf(msg, ms, "no usable CUDA device: none found");
    return -1;
  }
  /* TD_CUDA_DEVICE puts every rank on one GPU, as it does the operators'
   * ranks (src/ops/cuda/fused.c, the cuda executor): the sides then share
   * that GPU alike */
  int64_t pin = -1;
  const char *env = getenv("TD_CUDA_DEVICE");
  if (env && *env) {
    if (td_config_int("TD_CUDA_DEVICE", &pin) != TD_OK) {
      snprintf(msg, ms, "%s", td_last_error());
      return -1;
    }
    if (pin < 0 || pin >= count) {
      snprintf(msg, ms, "TD_CUDA_DEVICE=%s but this host has %d GPU(s): use 0..%d, or unset it for rank r on "
               "GPU r %% %d", env, count, count - 1, count);
      return -1;
    }
  }
  int nd = 0;
  for (int r = 0; r < ranks; r++) {
    int d = pin >= 0 ? (int)pin : r % count, seen = 0;
    for (int q = 0; q < r; q++)
      seen |= bo_dev[q] == d;
    bo_dev[r] = d;
    devices[r] = d;
    if (seen)
      continue;
    nd++;
    /* A context on each device now: a driver or device fault is said once here, not once per case and side. */
    e = cudaSetDevice(d);
    if (e == cudaSuccess)
      e = cudaFree(NULL);
    if (e != cudaSuccess) {
      snprintf(msg, ms, "GPU %d (rank %d) is not usable: %s", d, r, cudaGetErrorString(e));
      return -1;
    }
  }
  bo_ndev = nd;
  return 0;
#else
  (void)devices;
  snprintf(msg, ms, "this build has no CUDA backend");
  return -1;
#endif
}

int bo_set_device(int cuda, int rank) {
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda)
    return bo_ndev > 0 && rank >= 0 && rank < 64 && cudaSetDevice(bo_dev[rank]) == cudaSuccess ? 0 : -1;
#endif
  (void)rank;
  return cuda ? -1 : 0;
}

int bo_fill(int cuda, void *p, size_t bytes, td_dtype dt, uint64_t seed, double scale) {
  /* A block of random values repeated: generating every element of a
   * multi-GiB weight on the host would take longer than the benchmark. */
  size_t es = bo_es(dt), block = 1u << 20, nel = bytes / es;
  size_t bl = nel < block ? nel : block;
  unsigned char *h = malloc(bl * es + 1);
  if (!h)
    return -1;
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + 12345;
  for (size_t i = 0; i < bl; i++) {
    z ^= z << 13, z ^= z >> 7, z ^= z << 17;
    double x = ((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0) * scale;
    if (dt == TD_F32)
      ((float *)h)[i] = (float)x;
    else if (dt == TD_BF16)
      ((uint16_t *)h)[i] = td_f32_to_bf16((float)x);
    else
      ((uint16_t *)h)[i] = td_f32_to_f16((float)x);
  }
  int rc = 0;
  for (size_t off = 0; off < nel && rc == 0; off += bl) {
    size_t len = nel - off < bl ? nel - off : bl;
#ifdef TD_HAVE_GEMM_CUDA
    if (cuda) {
      rc = cudaMemcpy((char *)p + off * es, h, len * es, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
      continue;
    }
#endif
    memcpy((char *)p + off * es, h, len * es);
  }
  free(h);
  return rc;
}

int bo_rows_to_host(int cuda, void *dst, const void *p, int64_t row0, int64_t rows, int64_t cols, int64_t ld,
                    td_dtype dt) {
  size_t es = bo_es(dt);
  const char *src = (const char *)p + (size_t)row0 * (size_t)ld * es;
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda)
    return cudaMemcpy2D(dst, (size_t)cols * es, src, (size_t)ld * es, (size_t)cols * es, (size_t)rows,
                        cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
#endif
  for (int64_t i = 0; i < rows; i++)
    memcpy((char *)dst + (size_t)i * (size_t)cols * es, src + (size_t)i * (size_t)ld * es, (size_t)cols * es);
  return 0;
}

size_t bo_mem_used(int cuda, td_world *w) {
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda) {
    /* Summed over the devices the ranks use (bo_devices), each once: right
     * for one GPU per rank, all ranks on one GPU (TD_CUDA_DEVICE) and ranks
     * sharing some; the caller divides by the ranks. */
    size_t used = 0;
    int cur = 0;
    cudaGetDevice(&cur);
    for (int r = 0, n = td_world_size(w); r < n && r < 64; r++) {
      int seen = 0;
      for (int q = 0; q < r; q++)
        seen |= bo_dev[q] == bo_dev[r];
      size_t fr = 0, tot = 0;
      if (!seen && cudaSetDevice(bo_dev[r]) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess)
        used += tot - fr;
    }
    cudaSetDevice(cur);
    return used;
  }
#endif
  size_t used = 0, total = 0;
  td_symm_usage(w, &used, &total);
  return used;
}

double bo_device_capacity(int cuda, int ranks) {
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda && bo_ndev > 0 && ranks > 0 && ranks <= 64) {
    /* Each distinct device's memory split over the ranks placed on it
     * (bo_devices), the smallest share: the figure a rank can count on. */
    double cap = 0;
    int cur = 0;
    cudaGetDevice(&cur);
    for (int r = 0; r < ranks; r++) {
      int seen = 0, on = 0;
      for (int q = 0; q < ranks; q++) {
        seen |= q < r && bo_dev[q] == bo_dev[r];
        on += bo_dev[q] == bo_dev[r];
      }
      size_t fr = 0, tot = 0;
      if (seen || cudaSetDevice(bo_dev[r]) != cudaSuccess || cudaMemGetInfo(&fr, &tot) != cudaSuccess)
        continue;
      double share = (double)tot / on;
      if (cap == 0 || share < cap)
        cap = share;
    }
    cudaSetDevice(cur);
    return cap;
  }
#endif
  (void)cuda;
  (void)ranks;
  return 0;
}

const char *bo_base_mode_name(bo_base_mode mode) {
  return mode == BO_BASE_NCCL ? "nccl+cublas" : mode == BO_BASE_GEMM ? "gemm only" : "baseline";
}

const char *bo_base_mode_variant(bo_base_mode mode) {
  return mode == BO_BASE_NCCL ? "nccl" : mode == BO_BASE_GEMM ? "cublas" : "sequential";
}

void bo_env(int cuda, int ranks, const int *devices, void *json_obj) {
  cJSON *e = json_obj;
  char rev[64];
  td_cli_git_revision(rev, sizeof rev); /* shared with tdist run --json (cli_common.c) */
  cJSON_AddStringToObject(e, "git_revision", rev);
  cJSON_AddStringToObject(e, "tdist_version", td_version());
  cJSON_AddStringToObject(e, "openblas", openblas_get_config());
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda) {
    struct cudaDeviceProp p;
    int drv = 0, rt = 0, blas = 0;
    if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
      cJSON_AddStringToObject(e, "gpu", p.name);
      cJSON_AddNumberToObject(e, "sms", p.multiProcessorCount);
      cJSON_AddNumberToObject(e, "gpu_memory_bytes", (double)p.totalGlobalMem);
    }
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    cublasGetVersion(NULL, &blas);
    cJSON_AddNumberToObject(e, "cuda_driver_api", drv);
    cJSON_AddNumberToObject(e, "cuda_runtime", rt);
    cJSON_AddNumberToObject(e, "cublas", blas);
    FILE *g = popen("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null", "r");
    char dv[64] = "unknown";
    if (g) {
      if (fgets(dv, sizeof dv, g))
        dv[strcspn(dv, "\n")] = 0;
      pclose(g);
    }
    cJSON_AddStringToObject(e, "driver", dv);
    /* NVLink multicast can take a shared host's GPUs out of service: off
     * unless the caller set it (before any thread: setenv is not thread-safe). */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    cJSON_AddStringToObject(e, "NCCL_NVLS_ENABLE", getenv("NCCL_NVLS_ENABLE"));
    char nv[32];
    bo_nccl_version(nv, sizeof nv);
    cJSON_AddStringToObject(e, "nccl", nv);
    bo_cuda_env(e, ranks, devices); /* GPU count, placement, peer links, nvidia-smi topo -m */
    return;
  }
#endif
  (void)ranks, (void)devices;
  cJSON_AddStringToObject(e, "nccl", cuda ? "none: this build has no CUDA backend"
                                          : "not used: the cpu baseline collective is tdist's host collectives");
  cJSON_AddStringToObject(e, "interconnect", "shared memory (ranks are threads of one process)");
}

/* ---- cpu baseline ---- */

static int bo_cpu_run(bo_base *B, char *msg, size_t ms) {
  const float *a = B->a, *b = B->b;
  float *c = B->c, *w = B->work;
  const td_tp_layout *la = &B->la[B->me], *lc = &B->lc[B->me];
  td_team *t = B->team;
  td_status st = TD_OK;
  int64_t K = B->s.k;
  switch (B->kind) {
  case TD_TP_AG_GEMM: {
    size_t per = B->la[0].bytes / sizeof(float); /* padded part, same on every rank */
    st = td_all_gather(t, w, a, per, TD_F32);
    /* Close the padding gaps so the gathered rows are contiguous, then one GEMM. */
    for (int r = 0; st == TD_OK && r < B->n; r++)
      memmove(w + B->la[r].row0 * K, w + (size_t)r * per, sizeof(float) * (size_t)(B->la[r].rows * K));
    if (st == TD_OK && lc->cols > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B->s.m, (int)lc->cols, (int)K, 1.0f, w, (int)K,
                  b, (int)B->lb.ld, 0.0f, c, (int)lc->ld);
    break;
  }
  case TD_TP_GEMM_RS: {
    int64_t pad = B->lc[0].bytes / sizeof(float) / (size_t)B->s.n; /* rows of the largest part */
    for (int r = 0; r < B->n; r++)
      if (B->lc[r].rows > 0 && la->cols > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B->lc[r].rows, (int)B->s.n, (int)la->cols,
                    1.0f, a + B->lc[r].row0 * la->ld, (int)la->ld, b, (int)B->s.n, 0.0f,
                    w + (size_t)r * (size_t)pad * (size_t)B->s.n, (int)B->s.n);
    st = td_reduce_scatter(t, c, w, (size_t)B->n * (size_t)pad * (size_t)B->s.n, TD_F32, TD_SUM);
    break;
  }
  case TD_TP_GEMM_AR:
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B->s.m, (int)B->s.n, (int)la->cols, 1.0f, a,
                (int)la->ld, b, (int)B->s.n, 0.0f, w, (int)B->s.n);
    st = td_all_reduce(t, c, w, (size_t)(B->s.m * B->s.n), TD_F32, TD_SUM);
    break;
  default:
    st = td_all_reduce(t, c, a, B->s.count, B->dt, TD_SUM);
    break;
  }
  if (st != TD_OK) {
    snprintf(msg, ms, "cpu baseline: %s: %s", td_status_name(st), td_last_error());
    return -1;
  }
  return 0;
}

int bo_base_create(int cuda, bo_base_mode mode, td_tp_kind kind, const bo_shape *s, td_dtype dt, td_team *team,
                   const td_tp_op *op, const void *a, const void *b, void *c, bo_base **out, char *msg, size_t ms) {
  int n = td_team_size(team);
  if (!cuda && mode != BO_BASE_SEQ) { /* the same answer on every rank */
    snprintf(msg, ms, "skipped: %s needs --backend cuda", bo_base_mode_name(mode));
    return 1;
  }
  if (n > 64) {
    snprintf(msg, ms, "baseline: at most 64 ranks");
    return -1;
  }
  if (!cuda && dt != TD_F32 && kind != TD_TP_ALL_REDUCE) { /* all_reduce's is a host collective: any dtype */
    snprintf(msg, ms, "cpu baseline: f32 only (OpenBLAS sgemm), %s asked", td_dtype_name(dt));
    return -1;
  }
  bo_base *B = calloc(1, sizeof *B);
  if (!B) {
    snprintf(msg, ms, "baseline: out of memory");
    return -1;
  }
  B->cuda = cuda, B->mode = mode, B->kind = kind, B->s = *s, B->dt = dt, B->team = team;
  B->n = n, B->me = td_team_rank(team), B->a = a, B->b = b, B->c = c;
  for (int r = 0; r < n; r++) {
    td_tp_operand(op, TD_TP_A, r, &B->la[r]);
    td_tp_operand(op, TD_TP_C, r, &B->lc[r]);
  }
  td_tp_operand(op, TD_TP_B, B->me, &B->lb);
  size_t es = bo_es(dt);
  /* nccl+cublas and gemm only: the gathered A (ag_gemm) or the padded
   * per-destination partials (gemm_rs); gemm_ar reduces C in place. */
  int own = mode != BO_BASE_SEQ;
  switch (kind) {
  case TD_TP_AG_GEMM: B->work_bytes = (size_t)n * B->la[0].bytes + (own ? 0 : (size_t)s->m * (size_t)s->k * es); break;
  case TD_TP_GEMM_RS: B->work_bytes = (size_t)n * B->lc[0].bytes + (own ? 0 : (size_t)s->m * (size_t)s->n * es); break;
  case TD_TP_GEMM_AR: B->work_bytes = own ? es : (size_t)s->m * (size_t)s->n * es; break;
  default: B->work_bytes = es; break;
  }
  B->work = bo_alloc(cuda, B->work_bytes);
  int rc = B->work ? 0 : -1;
  if (rc)
    snprintf(msg, ms, "%s: cannot allocate %zu bytes of scratch", bo_base_mode_name(mode), B->work_bytes);
#ifdef TD_HAVE_GEMM_CUDA
  if (cuda) /* collective even when this rank failed: the others learn it instead of waiting */
    rc = bo_cuda_setup(B, rc == 0, msg, ms);
#endif
  if (rc) {
    bo_base_destroy(B);
    return rc > 0 ? 1 : -1;
  }
  *out = B;
  return 0;
}

int bo_base_run(bo_base *B, char *msg, size_t ms) {
#ifdef TD_HAVE_GEMM_CUDA
  if (B->cuda)
    return bo_cuda_run(B, msg, ms);
#endif
  return bo_cpu_run(B, msg, ms);
}

void bo_base_destroy(bo_base *B) {
  if (!B)
    return;
#ifdef TD_HAVE_GEMM_CUDA
  if (B->cuda)
    bo_cuda_release(B);
#endif
  bo_free(B->cuda, B->work);
  free(B->peer_a);
  free(B->peer_c);
  free(B->peer_w);
  free(B);
}
