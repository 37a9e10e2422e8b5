/* SPDX-License-Identifier: Apache-2.0
 * GPU test helpers shared by the CUDA executor's random-graph tests
 * (exec_random_test, exec_gemm_queue_test): put a random graph's initial
 * buffers on the device (caller-bound ones in cudaMalloc memory bound to the
 * executor, the rest in the executor's own), and check the buffers tasks
 * write against the sequential interpreter (tests/exec/randgraph.h). */
#ifndef TD_TESTS_GPU_EXEC_GPU_GRAPH_H
#define TD_TESTS_GPU_EXEC_GPU_GRAPH_H

#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "exec/exec_harness.h"
#include "exec/randgraph.h"

static inline int eg_caller_bound(td_buffer_kind k) {
  return k == TD_BUF_INPUT || k == TD_BUF_WEIGHT || k == TD_BUF_OUTPUT;
}

/* Uploads rank `rank`'s initial contents of every buffer; dev[] gets the
 * device addresses, owned[] marks the ones to cudaFree (eg_free). */
static inline td_status eg_upload(td_exec *ex, const rg_graph *g, int rank, void *dev[RG_NBUFS],
                                  int owned[RG_NBUFS]) {
  td_status st = TD_OK;
  for (int b = 0; b < RG_NBUFS && st == TD_OK; b++) {
    const size_t bytes = rg_bytes(g, b);
    if (g->buf[b] < 0 || bytes == 0)
      continue;
    const td_buffer_desc *d = td_plan_buffer(g->plan, g->buf[b]);
    if (eg_caller_bound(d->kind)) {
      if (cudaMalloc(&dev[b], bytes) != cudaSuccess)
        st = EX_FAIL("cudaMalloc of %zu bytes", bytes);
      owned[b] = 1;
      if (st == TD_OK)
        st = td_exec_bind(ex, g->buf[b], dev[b]);
    } else {
      st = td_exec_buffer(ex, g->buf[b], &dev[b]);
    }
    if (st == TD_OK && cudaMemcpy(dev[b], g->init[rank * RG_NBUFS + b], bytes, cudaMemcpyHostToDevice))
      st = EX_FAIL("cudaMemcpy of buffer %d", b);
  }
  return st;
}

/* Compares the buffers tasks write (RG_OUT..) with the interpreter's result. */
static inline td_status eg_check_outputs(const rg_graph *g, int rank, void *const dev[RG_NBUFS]) {
  td_status st = TD_OK;
  char msg[512];
  for (int b = RG_OUT; b < RG_NBUFS && st == TD_OK; b++) {
    const size_t bytes = rg_bytes(g, b);
    if (!dev[b] || bytes == 0)
      continue;
    void *host = malloc(bytes);
    if (!host || cudaMemcpy(host, dev[b], bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
      st = EX_FAIL("copy back of buffer %d", b);
    else if (!rg_compare(g, rank, b, host, msg, sizeof msg))
      st = EX_FAIL("rank %d buffer %d: %s", rank, b, msg);
    free(host);
  }
  return st;
}

static inline void eg_free(void *dev[RG_NBUFS], const int owned[RG_NBUFS]) {
  for (int b = 0; b < RG_NBUFS; b++)
    if (owned[b])
      cudaFree(dev[b]);
}

#endif
