/* SPDX-License-Identifier: Apache-2.0
 * td_link_bench (bench, outside the library): how fast the GPUs of one host
 * reach each other, measured with the copy engines, as the communication
 * term of the operators' floor (issue 8: "measure the link first").
 *
 *   unidirectional  every ordered pair i -> j: cudaMemcpyPeerAsync of
 *                   --bytes (256 MiB) on a stream of GPU i, CUDA events,
 *                   median of --iters (>= 20) after --warmup copies
 *   bidirectional   every pair at once both ways (i -> j on i, j -> i on j),
 *                   both directions' bytes over the time of the pair
 *   all to all      every GPU sends --bytes / (n - 1) to every other GPU at
 *                   once (one stream per destination): per-GPU egress, the
 *                   rate a collective over all GPUs can count on
 *   latency         one 8-byte peer copy per pair: events around it (device
 *                   time) and issue-to-completion on the host, median of 200
 *   nccl            (when built with NCCL, --nccl) nccl-tests-style
 *                   all_reduce / all_gather / reduce_scatter over all GPUs
 *                   from one thread (ncclCommInitAll, grouped calls), bf16,
 *                   algorithm and bus bandwidth per size
 *
 * Peer access is enabled between every pair that supports it, so copies go
 * GPU to GPU (NVLink or PCIe) and never through the host. The bytes of every
 * unidirectional copy are checked once against the pattern written at the
 * source. Output: markdown tables and, with --json, one cJSON file with the
 * environment (GPUs, driver, runtime, p2p attributes, nvidia-smi topo -m).
 * NVLink multicast stays off (NCCL_NVLS_ENABLE=0 unless set). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/gpu_links.h"
#ifdef TD_HAVE_NCCL_BASE
#include <nccl.h>
#endif

enum { LB_MAX_GPUS = 16, LB_LAT_ITERS = 200 };

#define LB_CU(call)                                                                                  \
  do {                                                                                               \
    cudaError_t e_ = (call);                                                                         \
    if (e_ != cudaSuccess) {                                                                         \
      fprintf(stderr, "td_link_bench: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__,          \
              cudaGetErrorString(e_));                                                               \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

typedef struct lb_opts {
  size_t bytes;
  int iters, warmup, ngpus, nccl;
  const char *json;
} lb_opts;

static double lb_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int lb_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double lb_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, lb_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The pattern of GPU `g`'s source buffer: a hash of the word index and g,
 * so a copy from the wrong GPU or offset is caught. */
__device__ static inline uint32_t lb_word(size_t i, int g) {
  uint32_t x = (uint32_t)i * 2654435761u ^ (uint32_t)(g + 1) * 40503u;
  x ^= x >> 15;
  x *= 2246822519u;
  return x ^ (x >> 13);
}

__global__ void lb_fill(uint32_t *p, size_t words, int g) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = lb_word(i, g);
}

/* bf16 pairs in [0.5, 1) with random sign and mantissa: finite, never zero. */
__global__ void lb_fill_bf16(uint32_t *p, size_t words, int g) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (lb_word(i, g) & 0x807F807Fu) | 0x3F003F00u;
}

__global__ void lb_check(const uint32_t *p, size_t words, int g, unsigned long long *bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words; i += (size_t)gridDim.x * blockDim.x)
    mine += p[i] != lb_word(i, g);
  if (mine)
    atomicAdd(bad, mine);
}

typedef struct lb_gpu {
  void *src, *dst;           /* --bytes each */
  cudaStream_t s[LB_MAX_GPUS]; /* one per destination */
  unsigned long long *bad;
} lb_gpu;

static int lb_parse_size(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s)
    return -1;
  unsigned long long mul = *end == 'K' ? 1ull << 10 : *end == 'M' ? 1ull << 20 : *end == 'G' ? 1ull << 30 : 1;
  if (mul > 1)
    end++;
  if (*end || v == 0 || v > (64ull << 30) / mul)
    return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int lb_parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

static void lb_usage(FILE *f) {
  fprintf(f, "usage: td_link_bench [--bytes SIZE] [--iters N] [--warmup N] [--gpus N] [--nccl] [--json FILE]\n"
             "  --bytes    bytes per copy, a multiple of 4096 (K/M/G suffixes; default 256M)\n"
             "  --iters    timed copies per measurement, median reported (20..10000, default 20)\n"
             "  --warmup   untimed copies first (0..1000, default 3)\n"
             "  --gpus     use GPUs 0..N-1 (2..16, default all)\n"
             "  --nccl     also nccl-tests-style all_reduce/all_gather/reduce_scatter bus bandwidth\n"
             "  --json     write every figure and the environment to FILE (its directory must exist)\n"
             "Options take `--opt VALUE` or `--opt=VALUE`, each at most once; exit 2 on a bad one.\n");
}

/* One ordered pair i -> j, --bytes each copy. */
static double lb_uni(lb_gpu *g, const lb_opts *o, int i, int j) {
  cudaEvent_t e0, e1;
  LB_CU(cudaSetDevice(i));
  LB_CU(cudaEventCreate(&e0));
  LB_CU(cudaEventCreate(&e1));
  double *t = (double *)malloc(sizeof(double) * (size_t)o->iters);
  cudaStream_t s = g[i].s[j];
  for (int it = 0; it < o->warmup + o->iters; it++) {
    LB_CU(cudaEventRecord(e0, s));
    LB_CU(cudaMemcpyPeerAsync(g[j].dst, j, g[i].src, i, o->bytes, s));
    LB_CU(cudaEventRecord(e1, s));
    LB_CU(cudaEventSynchronize(e1));
    float ms = 0;
    LB_CU(cudaEventElapsedTime(&ms, e0, e1));
    if (it >= o->warmup)
      t[it - o->warmup] = ms * 1e-3;
  }
  double med = lb_median(t, o->iters);
  free(t);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return (double)o->bytes / med * 1e-9;
}

/* Copies from the ordered pairs in `pairs` (src, dst) all at once: each on
 * its source's stream for that destination, started by one event on GPU 0's
 * first stream and joined there; median seconds of the whole round. */
static double lb_concurrent(lb_gpu *g, const lb_opts *o, const int (*pairs)[2], int npairs, size_t bytes) {
  cudaEvent_t start, end, done[LB_MAX_GPUS * LB_MAX_GPUS];
  int g0 = pairs[0][0];
  LB_CU(cudaSetDevice(g0));
  LB_CU(cudaEventCreate(&start));
  LB_CU(cudaEventCreate(&end));
  cudaStream_t main_s = g[g0].s[pairs[0][1]];
  for (int p = 0; p < npairs; p++) {
    LB_CU(cudaSetDevice(pairs[p][0]));
    LB_CU(cudaEventCreateWithFlags(&done[p], cudaEventDisableTiming));
  }
  double *t = (double *)malloc(sizeof(double) * (size_t)o->iters);
  for (int it = 0; it < o->warmup + o->iters; it++) {
    LB_CU(cudaSetDevice(g0));
    LB_CU(cudaEventRecord(start, main_s));
    for (int p = 0; p < npairs; p++) {
      int i = pairs[p][0], j = pairs[p][1];
      LB_CU(cudaSetDevice(i));
      LB_CU(cudaStreamWaitEvent(g[i].s[j], start, 0));
      /* each source lands in its own slice of the destination's buffer */
      size_t off = bytes < o->bytes ? (size_t)(i < j ? i : i - 1) * bytes : 0;
      LB_CU(cudaMemcpyPeerAsync((char *)g[j].dst + off, j, g[i].src, i, bytes, g[i].s[j]));
      LB_CU(cudaEventRecord(done[p], g[i].s[j]));
    }
    LB_CU(cudaSetDevice(g0));
    for (int p = 0; p < npairs; p++)
      LB_CU(cudaStreamWaitEvent(main_s, done[p], 0));
    LB_CU(cudaEventRecord(end, main_s));
    LB_CU(cudaEventSynchronize(end));
    float ms = 0;
    LB_CU(cudaEventElapsedTime(&ms, start, end));
    if (it >= o->warmup)
      t[it - o->warmup] = ms * 1e-3;
  }
  double med = lb_median(t, o->iters);
  free(t);
  for (int p = 0; p < npairs; p++)
    cudaEventDestroy(done[p]);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return med;
}

/* One 8-byte copy i -> j: median device time (events) and host time (issue to completion), microseconds. */
static void lb_latency(lb_gpu *g, int i, int j, double *dev_us, double *host_us) {
  cudaEvent_t e0, e1;
  LB_CU(cudaSetDevice(i));
  LB_CU(cudaEventCreate(&e0));
  LB_CU(cudaEventCreate(&e1));
  double td[LB_LAT_ITERS], th[LB_LAT_ITERS];
  cudaStream_t s = g[i].s[j];
  for (int it = 0; it < 20 + LB_LAT_ITERS; it++) {
    double h0 = lb_now();
    LB_CU(cudaEventRecord(e0, s));
    LB_CU(cudaMemcpyPeerAsync(g[j].dst, j, g[i].src, i, 8, s));
    LB_CU(cudaEventRecord(e1, s));
    LB_CU(cudaEventSynchronize(e1));
    double h1 = lb_now();
    float ms = 0;
    LB_CU(cudaEventElapsedTime(&ms, e0, e1));
    if (it >= 20)
      td[it - 20] = ms * 1e3, th[it - 20] = (h1 - h0) * 1e6;
  }
  *dev_us = lb_median(td, LB_LAT_ITERS);
  *host_us = lb_median(th, LB_LAT_ITERS);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

static void lb_env(cJSON *env, int n) {
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cJSON_AddNumberToObject(env, "gpu_count", n);
  cJSON_AddNumberToObject(env, "cuda_driver_api", drv);
  cJSON_AddNumberToObject(env, "cuda_runtime", rt);
  const char *rev = getenv("TD_GIT_REV");
  cJSON_AddStringToObject(env, "git_revision", rev && *rev ? rev : "unknown");
  cJSON *gpus = cJSON_AddArrayToObject(env, "gpus");
  for (int i = 0; i < n; i++) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess) {
      char line[320];
      snprintf(line, sizeof line, "%d: %s, %d SMs, %.0f GiB, pci %04x:%02x:%02x", i, p.name, p.multiProcessorCount,
               (double)p.totalGlobalMem / (1 << 30), p.pciDomainID, p.pciBusID, p.pciDeviceID);
      cJSON_AddItemToArray(gpus, cJSON_CreateString(line));
    }
  }
  td_bench_gpu_links_json(env, n);
}

#ifdef TD_HAVE_NCCL_BASE
/* nccl-tests' bus bandwidth: algorithm bandwidth (size / time) times
 * 2(n-1)/n for all_reduce and (n-1)/n for all_gather and reduce_scatter
 * (size = the whole output of all_gather / input of reduce_scatter). */
static int lb_nccl(int n, const lb_opts *o, cJSON *root) {
  ncclComm_t comm[LB_MAX_GPUS];
  int devs[LB_MAX_GPUS];
  for (int i = 0; i < n; i++)
    devs[i] = i;
  ncclResult_t r = ncclCommInitAll(comm, n, devs);
  if (r != ncclSuccess) {
    fprintf(stderr, "td_link_bench: ncclCommInitAll: %s\n", ncclGetErrorString(r));
    return -1;
  }
  const size_t sizes[] = {8 << 10, 64 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20};
  const char *names[] = {"all_reduce", "all_gather", "reduce_scatter"};
  void *send[LB_MAX_GPUS], *recv[LB_MAX_GPUS];
  cudaStream_t s[LB_MAX_GPUS];
  cudaEvent_t e0[LB_MAX_GPUS], e1[LB_MAX_GPUS];
  size_t maxb = sizes[sizeof sizes / sizeof sizes[0] - 1];
  for (int i = 0; i < n; i++) {
    LB_CU(cudaSetDevice(i));
    LB_CU(cudaMalloc(&send[i], maxb));
    LB_CU(cudaMalloc(&recv[i], maxb));
    lb_fill_bf16<<<264, 256>>>((uint32_t *)send[i], maxb / 4, i);
    LB_CU(cudaMemset(recv[i], 0, maxb));
    LB_CU(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    LB_CU(cudaEventCreate(&e0[i]));
    LB_CU(cudaEventCreate(&e1[i]));
  }
  for (int i = 0; i < n; i++) {
    LB_CU(cudaSetDevice(i));
    LB_CU(cudaDeviceSynchronize());
  }
  cJSON *arr = cJSON_AddArrayToObject(root, "nccl");
  printf("\n## NCCL collectives over %d GPUs (nccl-tests style: bf16, one thread, grouped; median of %d)\n\n", n,
         o->iters);
  printf("| collective | bytes | time us | algbw GB/s | busbw GB/s |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (int c = 0; c < 3; c++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t bytes = sizes[k], count = bytes / 2; /* bf16 elements of the size */
      double *t = (double *)malloc(sizeof(double) * (size_t)o->iters);
      for (int it = 0; it < o->warmup + o->iters; it++) {
        for (int i = 0; i < n; i++) {
          LB_CU(cudaSetDevice(i));
          LB_CU(cudaEventRecord(e0[i], s[i]));
        }
        ncclGroupStart();
        for (int i = 0; i < n; i++) {
          if (c == 0)
            r = ncclAllReduce(send[i], recv[i], count, ncclBfloat16, ncclSum, comm[i], s[i]);
          else if (c == 1)
            r = ncclAllGather(send[i], recv[i], count / n, ncclBfloat16, comm[i], s[i]);
          else
            r = ncclReduceScatter(send[i], recv[i], count / n, ncclBfloat16, ncclSum, comm[i], s[i]);
          if (r != ncclSuccess)
            break;
        }
        ncclResult_t ge = ncclGroupEnd();
        if (r != ncclSuccess || ge != ncclSuccess) {
          fprintf(stderr, "td_link_bench: nccl %s: %s\n", names[c], ncclGetErrorString(r != ncclSuccess ? r : ge));
          free(t);
          return -1;
        }
        double worst = 0;
        for (int i = 0; i < n; i++) {
          LB_CU(cudaSetDevice(i));
          LB_CU(cudaEventRecord(e1[i], s[i]));
        }
        for (int i = 0; i < n; i++) {
          float ms = 0;
          LB_CU(cudaEventSynchronize(e1[i]));
          LB_CU(cudaEventElapsedTime(&ms, e0[i], e1[i]));
          worst = ms * 1e-3 > worst ? ms * 1e-3 : worst;
        }
        if (it >= o->warmup)
          t[it - o->warmup] = worst;
      }
      double med = lb_median(t, o->iters);
      free(t);
      double used = c == 0 ? (double)count * 2 : (double)(count / n * n) * 2;
      double alg = used / med * 1e-9, factor = c == 0 ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
      printf("| %s | %zu | %.1f | %.1f | %.1f |\n", names[c], bytes, med * 1e6, alg, alg * factor);
      cJSON *j = cJSON_CreateObject();
      cJSON_AddStringToObject(j, "collective", names[c]);
      cJSON_AddNumberToObject(j, "bytes", used);
      cJSON_AddNumberToObject(j, "time_s", med);
      cJSON_AddNumberToObject(j, "algbw_gb_s", alg);
      cJSON_AddNumberToObject(j, "busbw_gb_s", alg * factor);
      cJSON_AddItemToArray(arr, j);
    }
  for (int i = 0; i < n; i++) {
    ncclCommDestroy(comm[i]);
    cudaSetDevice(i);
    cudaFree(send[i]);
    cudaFree(recv[i]);
    cudaStreamDestroy(s[i]);
  }
  return 0;
}
#endif

/* --json's file must be creatable: checked before the run, not after minutes of copies. 0 when it is. */
static int lb_check_json(const char *path) {
  struct stat st;
  if (!*path) {
    fprintf(stderr, "td_link_bench: --json needs a file name (got '')\n");
    return -1;
  }
  if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
    fprintf(stderr, "td_link_bench: --json %s is a directory; give a file name\n", path);
    return -1;
  }
  const char *slash = strrchr(path, '/');
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
  if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "td_link_bench: --json %s: directory %s does not exist\n", path, dir);
    return -1;
  }
  if (access(dir, W_OK) || (!access(path, F_OK) && access(path, W_OK))) {
    fprintf(stderr, "td_link_bench: --json %s: not writable\n", path);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  lb_opts o = {256u << 20, 20, 3, 0, 0, NULL};
  static const char *const valued[] = {"--bytes", "--iters", "--warmup", "--gpus", "--json"};
  int given[5] = {0};
  for (int i = 1; i < argc; i++) {
    /* `--opt VALUE` or `--opt=VALUE` (as tdist); a value never starts with "--" */
    const char *a = argv[i], *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '='), *v = NULL;
    char name[32];
    snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
    int k = -1, bad = 0;
    for (int j = 0; j < 5; j++)
      if (!strcmp(name, valued[j]))
        k = j;
    if (k < 0) {
      if (eq && (!strcmp(name, "--help") || !strcmp(name, "--nccl"))) {
        fprintf(stderr, "td_link_bench: option %s takes no value (got '%s')\n", name, a);
        lb_usage(stderr);
        return 2;
      }
      if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        lb_usage(stdout);
        return 0;
      }
      if (!strcmp(a, "--nccl")) {
        o.nccl = 1;
        continue;
      }
      fprintf(stderr, "td_link_bench: unknown option %s\n", a);
      lb_usage(stderr);
      return 2;
    }
    if (eq)
      v = eq + 1;
    else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
      v = argv[++i];
    if (!v) {
      fprintf(stderr, "td_link_bench: %s needs a value\n", name);
      lb_usage(stderr);
      return 2;
    }
    if (given[k]++) {
      fprintf(stderr, "td_link_bench: %s given twice; give it once\n", name);
      return 2;
    }
    if (k == 0) {
      bad = lb_parse_size(v, &o.bytes) || o.bytes < 4096;
      if (!bad && o.bytes % 4096) { /* page-sized slices and whole words for the check: no silent rounding */
        fprintf(stderr, "td_link_bench: --bytes %s is %zu bytes, not a multiple of 4096 (e.g. %zu or %zu)\n", v,
                o.bytes, o.bytes & ~(size_t)4095, (o.bytes | 4095) + 1);
        return 2;
      }
    } else if (k == 1) {
      bad = lb_parse_int(v, 20, 10000, &o.iters);
    } else if (k == 2) {
      bad = lb_parse_int(v, 0, 1000, &o.warmup);
    } else if (k == 3) {
      bad = lb_parse_int(v, 2, LB_MAX_GPUS, &o.ngpus);
    } else {
      if (lb_check_json(v))
        return 2;
      o.json = v;
    }
    if (bad) {
      fprintf(stderr, "td_link_bench: %s needs a valid value (got '%s')\n", name, v);
      lb_usage(stderr);
      return 2;
    }
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0); /* NVLink multicast stays off: it can take a shared host's GPUs down */
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess || count < 2) {
    fprintf(stderr, "td_link_bench: needs at least 2 GPUs, found %d%s%s%s\n", ce == cudaSuccess ? count : 0,
            ce == cudaSuccess ? "" : " (cudaGetDeviceCount: ", ce == cudaSuccess ? "" : cudaGetErrorString(ce),
            ce == cudaSuccess ? "" : ")");
    return 2;
  }
  int n = o.ngpus ? o.ngpus : count;
  if (n > count || n > LB_MAX_GPUS) {
    fprintf(stderr, "td_link_bench: --gpus %d but %d GPU(s) present (at most %d used)\n", n, count, LB_MAX_GPUS);
    return 2;
  }
  if (o.bytes / (size_t)(n - 1) < 4096) { /* the all-to-all sends page-sized slices to each of n - 1 peers */
    fprintf(stderr, "td_link_bench: --bytes %zu is too small for the all-to-all over %d GPUs: at least %zu (4096 per peer)\n",
            o.bytes, n, (size_t)4096 * (size_t)(n - 1));
    return 2;
  }
  lb_gpu g[LB_MAX_GPUS];
  memset(g, 0, sizeof g);
  int access[LB_MAX_GPUS][LB_MAX_GPUS] = {{0}};
  for (int i = 0; i < n; i++) {
    LB_CU(cudaSetDevice(i));
    LB_CU(cudaMalloc(&g[i].src, o.bytes));
    LB_CU(cudaMalloc(&g[i].dst, o.bytes));
    LB_CU(cudaMalloc(&g[i].bad, sizeof *g[i].bad));
    for (int j = 0; j < n; j++)
      LB_CU(cudaStreamCreateWithFlags(&g[i].s[j], cudaStreamNonBlocking));
    lb_fill<<<264, 256>>>((uint32_t *)g[i].src, o.bytes / 4, i);
    LB_CU(cudaGetLastError());
    for (int j = 0; j < n; j++) {
      if (i == j)
        continue;
      LB_CU(cudaDeviceCanAccessPeer(&access[i][j], i, j));
      if (access[i][j]) {
        cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
          LB_CU(e);
        cudaGetLastError();
      }
    }
  }
  for (int i = 0; i < n; i++) {
    LB_CU(cudaSetDevice(i));
    LB_CU(cudaDeviceSynchronize());
  }
  cJSON *root = cJSON_CreateObject(), *env = cJSON_AddObjectToObject(root, "environment");
  lb_env(env, n);
  cJSON_AddNumberToObject(root, "bytes", (double)o.bytes);
  cJSON_AddNumberToObject(root, "iters", o.iters);
  cJSON_AddNumberToObject(root, "warmup", o.warmup);
  printf("# td_link_bench: %d GPUs, %zu %s per copy, median of %d after %d warm-up (GB/s = 1e9 B/s)\n", n,
         o.bytes % (1u << 20) ? o.bytes >> 10 : o.bytes >> 20, o.bytes % (1u << 20) ? "KiB" : "MiB", o.iters,
         o.warmup);

  /* unidirectional, with the check of every pair's bytes after its copies */
  double uni[LB_MAX_GPUS][LB_MAX_GPUS] = {{0}};
  unsigned long long bad_total = 0;
  cJSON *ju = cJSON_AddArrayToObject(root, "unidirectional");
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j)
        continue;
      uni[i][j] = lb_uni(g, &o, i, j);
      LB_CU(cudaSetDevice(j));
      unsigned long long bad = 0;
      LB_CU(cudaMemset(g[j].bad, 0, sizeof bad));
      lb_check<<<264, 256>>>((const uint32_t *)g[j].dst, o.bytes / 4, i, g[j].bad);
      LB_CU(cudaGetLastError());
      LB_CU(cudaMemcpy(&bad, g[j].bad, sizeof bad, cudaMemcpyDeviceToHost));
      bad_total += bad;
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "src", i);
      cJSON_AddNumberToObject(x, "dst", j);
      cJSON_AddNumberToObject(x, "gb_s", uni[i][j]);
      cJSON_AddBoolToObject(x, "peer_access", access[i][j]);
      cJSON_AddNumberToObject(x, "bad_words", (double)bad);
      cJSON_AddItemToArray(ju, x);
    }
  printf("\n## Unidirectional peer copy, GB/s (row: source GPU, column: destination)\n\n| src \\ dst |");
  for (int j = 0; j < n; j++)
    printf(" %d |", j);
  printf("\n| --- |");
  for (int j = 0; j < n; j++)
    printf(" ---: |");
  printf("\n");
  double umin = 1e30, umax = 0;
  for (int i = 0; i < n; i++) {
    printf("| %d |", i);
    for (int j = 0; j < n; j++) {
      if (i == j) {
        printf(" - |");
        continue;
      }
      printf(" %.1f |", uni[i][j]);
      umin = uni[i][j] < umin ? uni[i][j] : umin;
      umax = uni[i][j] > umax ? uni[i][j] : umax;
    }
    printf("\n");
  }
  printf("\ncopied bytes checked: %s (%llu bad 32-bit words over %d copies)\n", bad_total ? "MISMATCH" : "all equal",
         bad_total, n * (n - 1));

  /* bidirectional per pair */
  cJSON *jb = cJSON_AddArrayToObject(root, "bidirectional");
  printf("\n## Bidirectional per pair (both directions at once), GB/s total and per direction\n\n"
         "| pair | total GB/s | per direction |\n| --- | ---: | ---: |\n");
  double bmin = 1e30;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      const int pairs[2][2] = {{i, j}, {j, i}};
      double t = lb_concurrent(g, &o, pairs, 2, o.bytes);
      double tot = 2.0 * (double)o.bytes / t * 1e-9;
      bmin = tot < bmin ? tot : bmin;
      printf("| %d <-> %d | %.1f | %.1f |\n", i, j, tot, tot / 2);
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "a", i);
      cJSON_AddNumberToObject(x, "b", j);
      cJSON_AddNumberToObject(x, "total_gb_s", tot);
      cJSON_AddItemToArray(jb, x);
    }

  /* all to all at once: per-GPU egress */
  int (*pairs)[2] = (int (*)[2])malloc(sizeof(int[2]) * (size_t)(n * (n - 1)));
  int np = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j)
        pairs[np][0] = i, pairs[np][1] = j, np++;
  size_t slice = (o.bytes / (size_t)(n - 1)) & ~(size_t)4095;
  double ta = lb_concurrent(g, &o, (const int (*)[2])pairs, np, slice);
  free(pairs);
  double egress = (double)slice * (n - 1) / ta * 1e-9;
  printf("\n## All GPUs sending to all others at once\n\nper-GPU egress %.1f GB/s (= ingress; %zu MiB to each of %d "
         "peers, %.3f ms per round), aggregate %.1f GB/s\n", egress, slice >> 20, n - 1, ta * 1e3, egress * n);
  cJSON *jaa = cJSON_AddObjectToObject(root, "all_to_all");
  cJSON_AddNumberToObject(jaa, "bytes_per_peer", (double)slice);
  cJSON_AddNumberToObject(jaa, "time_s", ta);
  cJSON_AddNumberToObject(jaa, "egress_per_gpu_gb_s", egress);
  cJSON_AddNumberToObject(jaa, "aggregate_gb_s", egress * n);

  /* latency of one small copy */
  cJSON *jl = cJSON_AddArrayToObject(root, "latency_8B");
  printf("\n## One 8-byte peer copy, median of %d: device time (events) / host issue-to-completion, us\n\n"
         "| src -> dst | device us | host us |\n| --- | ---: | ---: |\n", LB_LAT_ITERS);
  double lmax = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j)
        continue;
      double d = 0, h = 0;
      lb_latency(g, i, j, &d, &h);
      lmax = h > lmax ? h : lmax;
      printf("| %d -> %d | %.2f | %.2f |\n", i, j, d, h);
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "src", i);
      cJSON_AddNumberToObject(x, "dst", j);
      cJSON_AddNumberToObject(x, "device_us", d);
      cJSON_AddNumberToObject(x, "host_us", h);
      cJSON_AddItemToArray(jl, x);
    }
  cJSON *sum = cJSON_AddObjectToObject(root, "summary");
  cJSON_AddNumberToObject(sum, "unidirectional_min_gb_s", umin);
  cJSON_AddNumberToObject(sum, "unidirectional_max_gb_s", umax);
  cJSON_AddNumberToObject(sum, "bidirectional_min_gb_s", bmin);
  cJSON_AddNumberToObject(sum, "all_to_all_egress_per_gpu_gb_s", egress);
  cJSON_AddNumberToObject(sum, "latency_8B_host_max_us", lmax);
  cJSON_AddNumberToObject(sum, "bad_words", (double)bad_total);
  int rc = bad_total ? 1 : 0;
#ifdef TD_HAVE_NCCL_BASE
  if (o.nccl && lb_nccl(n, &o, root))
    rc = 1;
#else
  if (o.nccl)
    printf("\n--nccl: this build has no NCCL\n");
#endif
  printf("\nsummary: unidirectional %.1f..%.1f GB/s, bidirectional >= %.1f GB/s per pair, all-to-all egress %.1f "
         "GB/s per GPU, 8-byte copy <= %.1f us (host), bytes %s\n", umin, umax, bmin, egress, lmax,
         bad_total ? "MISMATCH" : "checked");
  if (o.json) {
    char *text = cJSON_Print(root);
    FILE *f = fopen(o.json, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "td_link_bench: cannot write %s\n", o.json);
      rc = 1;
    }
    free(text);
  }
  cJSON_Delete(root);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(i);
    cudaFree(g[i].src);
    cudaFree(g[i].dst);
    cudaFree(g[i].bad);
    for (int j = 0; j < n; j++)
      cudaStreamDestroy(g[i].s[j]);
  }
  return rc;
}
