/* SPDX-License-Identifier: Apache-2.0
 * The floor of the GEMM hooks' cost on a one-wave launch (bench layer): what
 * any kernel pays for one satisfied wait before its first dependent load and
 * one release raise after its last store, with no GEMM in it.
 *
 * Why: at M = 128 the Hopper tile (64x64, 112 CTAs, one tile each, ~26 us)
 * has nothing to run before the first wait or after the last raise, so both
 * sit on the critical path. This kernel keeps only that structure, at the
 * same grid, block size and duration:
 *   - (wait) thread 0 acquires a signal that is already satisfied, then a
 *     block barrier, then every thread's first global load, which the body
 *     depends on (the tile's A load);
 *   - a body of dependent FMAs calibrated to the tile's time (--us);
 *   - every consumer thread stores its part of a 64x64 bf16 tile (8 KiB);
 *   - (raise) a barrier over the storing threads, then one thread's
 *     acq_rel fence and a relaxed add: the release pattern of the tile's raise
 *     (gemm_sm80_hooks.cuh td__gemm_raise_fence / td__gemm_raise_span).
 * Variants: wait, raise, both, at system and GPU scope. The method is
 * gemm_bench's: launches queued behind one spin kernel, each between its own
 * events, plain and hooked alternating; the figure is the median of the
 * per-pair ratios and the difference of the median times.
 *
 * usage: hook_floor [--us T] [--ctas N] [--pairs P] [--json FILE]
 *   --us T     body time to calibrate the plain launch to, in microseconds
 *              (default 26; 1..10000)
 *   --ctas N   grid size (default 112: the M = 128 tile's grid; 1..1024)
 *   --pairs P  alternating pairs per variant (default 200; 10..100000)
 * Exit 2 on a bad option (message names the option, its value and the range), 1 on a CUDA failure (no usable GPU
 * included) or a raise that did not land, 0 otherwise. */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include <cjson/cJSON.h>

#include "bench_cuda.cuh"

constexpr int THREADS = 384; /* the tile's block: one producer and two consumer warpgroups */
constexpr int STORERS = 256; /* the consumer threads that store the tile */

enum { F_WAIT = 1, F_RAISE = 2, F_GPU = 4 };

template <int F>
__global__ void __launch_bounds__(THREADS) floor_kernel(const float4 *a, unsigned long long *sig,
                                                      unsigned *c, int body) {
  if constexpr ((F & F_WAIT) != 0) {
    if (threadIdx.x == 0) {
      unsigned long long v;
      do {
        if constexpr ((F & F_GPU) != 0)
          asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(sig + blockIdx.x % 8) : "memory");
        else
          asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(sig + blockIdx.x % 8) : "memory");
      } while (v < 1);
    }
    __syncthreads();
  }
  const float4 x = a[blockIdx.x * THREADS + threadIdx.x];
  float p = x.x, q = x.y, r = x.z, s = x.w;
  for (int i = 0; i < body; i++) { /* four dependent chains: latency-bound, like nothing but time */
    p = fmaf(p, 0.999f, q);
    q = fmaf(q, 0.999f, r);
    r = fmaf(r, 0.999f, s);
    s = fmaf(s, 0.999f, p);
  }
  if (threadIdx.x < STORERS) {
    /* 64 rows x 128 bytes: thread t stores 8 words of row t / 4 (32 bytes), as the tile's 4-byte pair stores */
    unsigned *row = c + ((size_t)blockIdx.x * 64 + threadIdx.x / 4) * 32 + (threadIdx.x % 4) * 8;
    const unsigned w = __float_as_uint(p + q + r + s);
#pragma unroll
    for (int j = 0; j < 8; j++)
      row[j] = w + j;
  }
  if constexpr ((F & F_RAISE) != 0) {
    if (threadIdx.x < STORERS) {
      asm volatile("bar.sync 1, %0;" ::"n"(STORERS) : "memory");
      if (threadIdx.x == 0) {
        if constexpr ((F & F_GPU) != 0) {
          asm volatile("fence.acq_rel.gpu;" ::: "memory");
          asm volatile("red.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(sig + 8 + blockIdx.x % 8) : "memory");
        } else {
          asm volatile("fence.acq_rel.sys;" ::: "memory");
          asm volatile("red.relaxed.sys.global.add.u64 [%0], 1;" ::"l"(sig + 8 + blockIdx.x % 8) : "memory");
        }
      }
    }
  }
}

__global__ void spin(unsigned long long cycles) {
  const long long t0 = clock64();
  while ((unsigned long long)(clock64() - t0) < cycles) {
  }
}

typedef void (*kfn)(const float4 *, unsigned long long *, unsigned *, int);

struct variant {
  const char *name;
  kfn fn;
};

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static long parse(const char *opt, const char *v, long lo, long hi) {
  char *end = NULL;
  errno = 0;
  const long x = v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || x < lo || x > hi) {
    fprintf(stderr, "hook_floor: %s %s: must be an integer in %ld..%ld\n", opt, v ? v : "(missing)", lo, hi);
    exit(2);
  }
  return x;
}

int main(int argc, char **argv) {
  long us = 26, ctas = 112, pairs = 200;
  const char *json = NULL;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--us"))
      us = parse("--us", v, 1, 10000), i++;
    else if (!strcmp(argv[i], "--ctas"))
      ctas = parse("--ctas", v, 1, 1024), i++;
    else if (!strcmp(argv[i], "--pairs"))
      pairs = parse("--pairs", v, 10, 100000), i++;
    else if (!strcmp(argv[i], "--json")) {
      if (!v || !*v) {
        fprintf(stderr, "hook_floor: --json needs a FILE to write\n");
        return 2;
      }
      json = v, i++;
    } else {
      fprintf(stderr, "hook_floor: unknown or incomplete option '%s' (allowed: --us T, --ctas N, --pairs P, "
                      "--json FILE)\n", argv[i]);
      return 2;
    }
  }
  float4 *a;
  unsigned long long *sig;
  unsigned *c;
  CK(cudaMalloc(&a, (size_t)ctas * THREADS * sizeof(float4)));
  CK(cudaMalloc(&sig, 16 * sizeof(unsigned long long)));
  CK(cudaMalloc(&c, (size_t)ctas * 64 * 128));
  std::vector<float4> ha((size_t)ctas * THREADS);
  for (size_t i = 0; i < ha.size(); i++) /* random, never zero */
    ha[i] = make_float4(0.5f + (rand() % 1000) * 1e-3f, 0.5f + (rand() % 1000) * 1e-3f,
                        0.5f + (rand() % 1000) * 1e-3f, 0.5f + (rand() % 1000) * 1e-3f);
  CK(cudaMemcpy(a, ha.data(), ha.size() * sizeof(float4), cudaMemcpyHostToDevice));
  const unsigned long long one[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  CK(cudaMemcpy(sig, one, sizeof one, cudaMemcpyHostToDevice));

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  /* calibrate the body: time the plain kernel at two sizes, solve for the target */
  auto time_plain = [&](int body) {
    std::vector<float> t;
    for (int i = 0; i < 21; i++) {
      CK(cudaEventRecord(e0));
      floor_kernel<0><<<(int)ctas, THREADS>>>(a, sig, c, body);
      CK(cudaGetLastError()); /* a GPU the sm_90a build cannot run on fails here, not in a nonsense calibration */
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms);
    }
    return median(t) * 1e3; /* us */
  };
  time_plain(1000);
  const double t1 = time_plain(1000), t2 = time_plain(9000);
  const double per = (t2 - t1) / 8000.0;
  const double iters = per > 0 ? (us - t1) / per + 1000.0 : 1000.0;
  const int body = iters < 0 ? 0 : iters > 1e8 ? 100000000 : (int)iters; /* a timer hiccup cannot overflow it */
  printf("hook_floor: %ld CTAs x %d threads, body %d iterations (plain ~%.1f us by calibration: %.2f us at 1000, "
         "%.2f us at 9000), %ld alternating pairs per variant\n",
         ctas, THREADS, body, t1 + per * (body - 1000), t1, t2, pairs);

  const variant vs[] = {
      {"wait", floor_kernel<F_WAIT>},           {"raise", floor_kernel<F_RAISE>},
      {"both", floor_kernel<F_WAIT | F_RAISE>}, {"wait_gpu", floor_kernel<F_WAIT | F_GPU>},
      {"raise_gpu", floor_kernel<F_RAISE | F_GPU>}, {"both_gpu", floor_kernel<F_WAIT | F_RAISE | F_GPU>},
  };
  std::vector<cudaEvent_t> ev(4 * pairs);
  for (auto &e : ev)
    CK(cudaEventCreate(&e));
  cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "variants");
  cJSON_AddNumberToObject(root, "ctas", (double)ctas);
  cJSON_AddNumberToObject(root, "threads", THREADS);
  cJSON_AddNumberToObject(root, "body_iterations", body);
  cJSON_AddNumberToObject(root, "us", (double)us);
  cJSON_AddNumberToObject(root, "pairs", (double)pairs);
  printf("| variant | plain us | hooked us | difference us | median of the pair ratios - 1 |\n"
         "|---|---:|---:|---:|---:|\n");
  for (const variant &v : vs) {
    for (int i = 0; i < 10; i++) { /* warm-up, both kernels */
      floor_kernel<0><<<(int)ctas, THREADS>>>(a, sig, c, body);
      v.fn<<<(int)ctas, THREADS>>>(a, sig, c, body);
    }
    CK(cudaDeviceSynchronize());
    spin<<<1, 1>>>(2000000ull + 2ull * (unsigned long long)pairs * 60000ull);
    const bench_pairs t = bench_pairs_run(ev.data(), pairs, [&](long i) {
      if (i & 1)
        v.fn<<<(int)ctas, THREADS>>>(a, sig, c, body);
      else
        floor_kernel<0><<<(int)ctas, THREADS>>>(a, sig, c, body);
    });
    const double mp = median(t.first) * 1e3, mh = median(t.second) * 1e3, r = median(t.ratio);
    printf("| %s | %.3f | %.3f | %+.3f | %+.2f%% |\n", v.name, mp, mh, mh - mp, 100.0 * (r - 1.0));
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "variant", v.name);
    cJSON_AddNumberToObject(j, "plain_us", mp);
    cJSON_AddNumberToObject(j, "hooked_us", mh);
    cJSON_AddNumberToObject(j, "median_ratio", r);
    cJSON_AddItemToArray(rows, j);
  }
  unsigned long long after[16];
  CK(cudaMemcpy(after, sig, sizeof after, cudaMemcpyDeviceToHost));
  unsigned long long raised = 0;
  for (int i = 8; i < 16; i++)
    raised += after[i];
  /* every raising launch added one per CTA: 4 raising variants x (10 warm-up + pairs) launches */
  const unsigned long long want = 4ull * (unsigned long long)(10 + pairs) * (unsigned long long)ctas;
  printf("raises counted %llu, expected %llu: %s\n", raised, want, raised == want ? "ok" : "MISMATCH");
  if (json) {
    char *txt = cJSON_Print(root);
    FILE *f = fopen(json, "w");
    if (!f || fputs(txt, f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "hook_floor: cannot write --json %s: %s\n", json, strerror(errno));
      return 1;
    }
    free(txt);
  }
  cJSON_Delete(root);
  return raised == want ? 0 : 1;
}
