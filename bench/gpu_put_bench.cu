/* SPDX-License-Identifier: Apache-2.0
 * Device-primitive benchmark (bench layer): two ranks of the CUDA local
 * transport share one GPU. Rank 0 puts into rank 1's symmetric heap with the
 * device API in block, warp and thread forms (a full grid, each block / warp /
 * thread moving its slice), with one block alone, and with the copy engine
 * (cudaMemcpyAsync + cuStreamWriteValue64 signal); beside them, in the same
 * run, a plain device-to-device cudaMemcpyAsync of the same bytes. Then the
 * signal round trip between the two ranks (thread 0 of one kernel per rank,
 * ping-pong on signal words; also with an 8-byte putmem_signal), timed inside
 * the kernel with %globaltimer.
 *
 * Bandwidth counts payload bytes (one read + one write each): multiply by 2
 * for the "read + write" convention of DESIGN.md's 4.2 TB/s copy. Timing:
 * CUDA events, warm-up, median of --reps runs (default 50), inputs random.
 * Usage: gpu_put_bench [--reps N] [--max-mib M] [--devices A,B]
 * (--devices puts the two ranks on devices A and B; default 0,0 = sharing). */
#include <algorithm>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "gemm/bench_cuda.cuh" /* CK */
#include "tdist/device.h"
#include "tdist/device/cuda_local.h"

#define TK(x)                                                                          \
  do {                                                                                 \
    td_status s_ = (x);                                                                \
    if (s_ != TD_OK) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, td_last_error());     \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

enum { FORM_BLOCK = 0, FORM_WARP = 1, FORM_THREAD = 2 };

/* Each unit (block, warp or thread) of the grid puts its slice of [0, bytes). */
__global__ void k_put(td_dev_ctx c, int form, char *dst, const char *src, size_t bytes, int pe) {
  const size_t gthreads = (size_t)gridDim.x * blockDim.x;
  size_t units, unit;
  if (form == FORM_BLOCK) {
    units = gridDim.x;
    unit = blockIdx.x;
  } else if (form == FORM_WARP) {
    units = gthreads / 32;
    unit = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  } else {
    units = gthreads;
    unit = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  }
  /* 16-byte aligned slices keep every form on the vector path */
  size_t slice = (bytes / units + 15) & ~(size_t)15;
  size_t off = unit * slice;
  size_t len = off >= bytes ? 0 : (bytes - off < slice ? bytes - off : slice);
  if (form == FORM_BLOCK)
    td_dev_putmem_nbi_block(&c, dst + off, src + off, len, pe);
  else if (form == FORM_WARP)
    td_dev_putmem_nbi_warp(&c, dst + off, src + off, len, pe);
  else
    td_dev_putmem_nbi(&c, dst + off, src + off, len, pe);
}

__global__ void k_fill(uint32_t *p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    p[i] = x ^ (x >> 15);
  }
}

/* Rank 0 starts each round; rank 1 answers. with_data: 8-byte putmem_signal;
 * with_data 2: raw st_release / ld_acquire at GPU scope (enough for ranks on
 * one device; the API's signals use system scope, correct across devices). */
__global__ void k_pingpong(td_dev_ctx c, uint64_t *sig, uint64_t *data, int iters, uint64_t base, int with_data,
                           uint64_t *ns_out) {
  if (threadIdx.x != 0)
    return;
  const int peer = c.rank ^ 1;
  uint64_t t0 = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (int i = 1; i <= iters; i++) {
    const uint64_t v = base + (uint64_t)i;
    if (with_data == 2) {
      uint64_t *peer_sig = (uint64_t *)td_dev_symm_at(&c, sig, peer);
      if (c.rank == 0)
        td_dev_st_release(peer_sig, v, TD_SCOPE_GPU);
      for (long spins = 0; td_dev_ld_acquire(sig, TD_SCOPE_GPU) != v; spins++)
        if (spins > 100000000L) /* bounded: a lost peer ends the run, not the machine */
          return;
      if (c.rank == 1)
        td_dev_st_release(peer_sig, v, TD_SCOPE_GPU);
    } else if (c.rank == 0) {
      if (with_data)
        td_dev_putmem_signal(&c, data, &v, 8, sig, v, TD_SIGNAL_SET, peer);
      else
        td_dev_signal_op(&c, sig, v, TD_SIGNAL_SET, peer);
      td_dev_signal_wait_until(&c, sig, TD_CMP_EQ, v);
    } else {
      td_dev_signal_wait_until(&c, sig, TD_CMP_EQ, v);
      if (with_data)
        td_dev_putmem_signal(&c, data, &v, 8, sig, v, TD_SIGNAL_SET, peer);
      else
        td_dev_signal_op(&c, sig, v, TD_SIGNAL_SET, peer);
    }
  }
  uint64_t t1 = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  if (c.rank == 0)
    *ns_out = t1 - t0;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char **argv) {
  int reps = 50;
  size_t max_mib = 256;
  int devices[2] = {0, 0};
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-mib"))
      max_mib = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--devices"))
      sscanf(argv[++i], "%d,%d", &devices[0], &devices[1]);
  }
  const size_t max_bytes = max_mib << 20;
  td_cuda_local_opts o;
  td_cuda_local_opts_init(&o);
  o.nranks = 2;
  o.devices = devices;
  o.heap_size = 2 * max_bytes + (16u << 20);
  td_cuda_local *cl = NULL;
  TK(td_cuda_local_create(&o, &cl));
  size_t src_off, dst_off, sig_off;
  TK(td_cuda_local_alloc(cl, max_bytes, 0, &src_off));
  TK(td_cuda_local_alloc(cl, max_bytes, 0, &dst_off));
  TK(td_cuda_local_alloc(cl, 64, 0, &sig_off));
  td_dev_ctx c0, c1;
  TK(td_cuda_local_ctx(cl, 0, &c0));
  TK(td_cuda_local_ctx(cl, 1, &c1));
  char *src = (char *)td_cuda_local_ptr(cl, 0, src_off);
  char *dst0 = (char *)td_cuda_local_ptr(cl, 0, dst_off); /* rank 0's symmetric address */
  char *dst1 = (char *)td_cuda_local_ptr(cl, 1, dst_off); /* rank 1's copy (memcpy baseline) */
  cudaStream_t s = td_cuda_local_stream(cl, 0);
  k_fill<<<264, 256, 0, s>>>((uint32_t *)src, max_bytes / 4, 12345u);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));

  printf("# gpu_put_bench: %s, %d SMs, rank 0 on device %d, rank 1 on device %d, median of %d, GB/s of payload\n",
         prop.name, sms, devices[0], devices[1], reps);
  printf("| size | cudaMemcpyAsync D2D | copy engine put+signal | block form (%d blk x 512) | warp form | thread form | "
         "block form, 1 block | best put / memcpy |\n",
         sms);
  printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  uint64_t epoch = 0;
  for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 16) {
    double gbs[7];
    for (int v = 0; v < 6; v++) {
      std::vector<double> ms;
      for (int r = -5; r < reps; r++) {
        CK(cudaEventRecord(a, s));
        if (v == 0) {
          CK(cudaMemcpyAsync(dst1, src, bytes, cudaMemcpyDeviceToDevice, s));
        } else if (v == 1) {
          TK(td_cuda_ce_putmem_signal(cl, 0, dst_off, src, bytes, sig_off, ++epoch, TD_SIGNAL_SET, 1, s));
        } else {
          const int form = v == 2 ? FORM_BLOCK : v == 3 ? FORM_WARP : v == 4 ? FORM_THREAD : FORM_BLOCK;
          const int grid = v == 5 ? 1 : sms;
          k_put<<<grid, 512, 0, s>>>(c0, form, dst0, src, bytes, 1);
          CK(cudaGetLastError());
        }
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float t = 0;
        CK(cudaEventElapsedTime(&t, a, b));
        if (r >= 0)
          ms.push_back(t);
      }
      gbs[v] = (double)bytes / (median(ms) * 1e-3) / 1e9;
    }
    /* verify the last put landed (block form, 1 block ran last) */
    std::vector<char> h1(std::min(bytes, (size_t)1 << 20)), h2(h1.size());
    CK(cudaMemcpy(h1.data(), src, h1.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), dst1, h2.size(), cudaMemcpyDeviceToHost));
    if (memcmp(h1.data(), h2.data(), h1.size()) != 0) {
      fprintf(stderr, "put of %zu bytes: data mismatch\n", bytes);
      return 1;
    }
    double best = std::max(std::max(gbs[1], gbs[2]), std::max(gbs[3], gbs[4]));
    char size[32];
    if (bytes >= (1u << 20))
      snprintf(size, sizeof size, "%zu MiB", bytes >> 20);
    else
      snprintf(size, sizeof size, "%zu KiB", bytes >> 10);
    printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", size, gbs[0], gbs[1], gbs[2], gbs[3], gbs[4],
           gbs[5], best / gbs[0]);
  }

  /* Round trip: one kernel per rank, co-resident, thread 0 each. */
  size_t lat_sig, lat_data, lat_ns;
  TK(td_cuda_local_alloc(cl, 8, 0, &lat_sig));
  TK(td_cuda_local_alloc(cl, 8, 0, &lat_data));
  TK(td_cuda_local_alloc(cl, 8, 0, &lat_ns));
  const int iters = 10000;
  uint64_t base = 0;
  printf("\n| round trip between the 2 ranks | median ns per round trip (%d round trips x 7 runs) |\n|---|---:|\n",
         iters);
  for (int with_data = 0; with_data < 3; with_data++) {
    if (with_data == 2 && devices[0] != devices[1])
      continue; /* GPU scope does not order across devices */
    std::vector<double> ns;
    for (int run = 0; run < 8; run++) {
      uint64_t *sig = (uint64_t *)td_cuda_local_ptr(cl, 0, lat_sig);
      uint64_t *data = (uint64_t *)td_cuda_local_ptr(cl, 0, lat_data);
      uint64_t *nso = (uint64_t *)td_cuda_local_ptr(cl, 0, lat_ns);
      /* the symmetric addresses are rank 0's; each kernel gets its own rank's */
      uint64_t *sig1 = (uint64_t *)td_cuda_local_ptr(cl, 1, lat_sig);
      uint64_t *data1 = (uint64_t *)td_cuda_local_ptr(cl, 1, lat_data);
      void *args0[] = {&c0, &sig, &data, (void *)&iters, &base, &with_data, &nso};
      void *args1[] = {&c1, &sig1, &data1, (void *)&iters, &base, &with_data, &nso};
      void **args[] = {args0, args1};
      TK(td_cuda_local_launch(cl, (const void *)k_pingpong, 1, 32, 0, args));
      TK(td_cuda_local_sync(cl));
      base += (uint64_t)iters;
      uint64_t t = 0;
      CK(cudaMemcpy(&t, nso, 8, cudaMemcpyDeviceToHost));
      if (run > 0)
        ns.push_back((double)t / iters);
    }
    static const char *const what[] = {"signal_op + signal_wait_until (system scope)", "putmem_signal 8 B + wait",
                                       "raw st_release / ld_acquire, GPU scope"};
    printf("| %s | %.0f |\n", what[with_data], median(ns));
  }
  /* Host-side baseline: an 8-byte cudaMemcpyAsync D2D and a stream sync. */
  {
    std::vector<double> us;
    for (int r = -10; r < 200; r++) {
      CK(cudaEventRecord(a, s));
      CK(cudaMemcpyAsync(dst1, src, 8, cudaMemcpyDeviceToDevice, s));
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float t = 0;
      CK(cudaEventElapsedTime(&t, a, b));
      if (r >= 0)
        us.push_back(t * 1e3);
    }
    printf("| baseline: cudaMemcpyAsync 8 B D2D (event to event) | %.0f |\n", median(us) * 1e3);
  }
  td_cuda_local_destroy(cl);
  return 0;
}
