/* SPDX-License-Identifier: Apache-2.0
 * CUDA helpers of the GEMM benches (bench layer), shared by gemm_bench and
 * hook_floor: CK, and alternating-pair timing:
 * 2 x pairs launches, each between its own pair of CUDA events, so that
 * clock and thermal drift hit both sides of a pair alike (docs/gemm-notes.md).
 * The caller queues a spin kernel first when host enqueue time must stay out
 * of the figures, and takes medians of what comes back. */
#ifndef TD_BENCH_CUDA_CUH
#define TD_BENCH_CUDA_CUH

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

/* Per-pair times in ms of the pair's first and second launch, and second / first. */
struct bench_pairs {
  std::vector<float> first, second, ratio;
};

/* Exits 1 naming the call and CUDA's message when a CUDA call fails (no
 * usable GPU included: 2 is for bad options, as in the tools). */
#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* Launches launch(i) for i = 0 .. 2 * pairs - 1 on the default stream, i
 * between events ev[2i] and ev[2i + 1] (ev: 4 * pairs created events), waits
 * for all of them and returns the times: pair j is launches 2j and 2j + 1. */
template <class F>
bench_pairs bench_pairs_run(cudaEvent_t *ev, long pairs, F &&launch) {
  for (long i = 0; i < 2 * pairs; i++) {
    CK(cudaEventRecord(ev[2 * i]));
    launch(i);
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  bench_pairs out;
  for (long j = 0; j < pairs; j++) {
    float t0, t1;
    CK(cudaEventElapsedTime(&t0, ev[4 * j], ev[4 * j + 1]));
    CK(cudaEventElapsedTime(&t1, ev[4 * j + 2], ev[4 * j + 3]));
    out.first.push_back(t0), out.second.push_back(t1), out.ratio.push_back(t1 / t0);
  }
  return out;
}

#endif
