/* SPDX-License-Identifier: Apache-2.0
 * CUDA executor copy-engine queue (label gpu): a ring of ranks sharing one
 * GPU where each rank's copy-engine task puts its input into the next rank's
 * symmetric buffer and raises that rank's signal, and a compute task waits
 * for it and scales it into the output; 30 launches with no reset, inputs
 * changed every launch, exact results checked. With TD_EXPECT_COPY_ENGINE=1
 * (set by scripts/exec-cuda-gpu.sh on the H200) the test also fails if the
 * copies did not go through the copy-engine stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "exec/cuda/cuda_exec.h"
#include "exec/exec_harness.h"

enum { ROWS = 37, COLS = 520, RUNS = 30 };

typedef struct {
  td_plan *plan;
  int32_t in, xfer, out;
} ring_plan;

static void build_ring(int n, ring_plan *rp) {
  assert_int_equal(td_plan_create(n, &rp->plan), TD_OK);
  rp->in = ex_buffer(rp->plan, "in", TD_BUF_INPUT, TD_F32, ROWS, COLS);
  /* Wider than the chunk: the copy is a strided 2-D one. */
  rp->xfer = ex_buffer(rp->plan, "xfer", TD_BUF_SYMM, TD_F32, ROWS, COLS + 8);
  rp->out = ex_buffer(rp->plan, "out", TD_BUF_OUTPUT, TD_F32, ROWS, COLS);
  uint32_t sig;
  assert_int_equal(td_plan_add_signal(rp->plan, "xfer ready", &sig), TD_OK);
  for (int r = 0; r < n; r++) {
    const int next = (r + 1) % n;
    td_task put = ex_task(TD_TASK_COPY, TD_WORKER_COPY_ENGINE, 0, "ce put");
    put.a = ex_view(rp->in, TD_PEER_SELF, 0, 0, ROWS, COLS);
    put.c = ex_view(rp->xfer, next, 0, 4, ROWS, COLS);
    td_raise raise = {sig, next, 1};
    uint32_t idx;
    assert_int_equal(td_plan_add_task(rp->plan, r, &put, NULL, 0, NULL, 0, &raise, 1, &idx), TD_OK);
    td_task scale = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, TD_EW_SCALE, "scale");
    scale.alpha = 2.0f;
    scale.a = ex_view(rp->xfer, TD_PEER_SELF, 0, 4, ROWS, COLS);
    scale.c = ex_view(rp->out, TD_PEER_SELF, 0, 0, ROWS, COLS);
    td_wait wait = {sig, TD_CMP_GE, 1};
    assert_int_equal(td_plan_add_task(rp->plan, r, &scale, NULL, 0, &wait, 1, NULL, 0, &idx), TD_OK);
  }
  assert_int_equal(td_plan_validate(rp->plan), TD_OK);
}

static td_status ring_rank(td_world *w, int rank, void *arg) {
  ring_plan *rp = arg;
  const int n = td_world_size(w), prev = (rank + n - 1) % n;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(rp->plan, td_world_team(w), &o, &ex));
  const td__cuda_exec *cx = ex->impl;
  if (rank == 0)
    printf("copy-engine queue: %s (%u task(s) per rank)\n", cx->ce_enabled ? "on" : "off", cx->nce);
  const char *expect = getenv("TD_EXPECT_COPY_ENGINE");
  /* The stream budget (td__cuda_stream_plan) turns the queue off for too many ranks per GPU. */
  if (expect && *expect == '1' && cx->streams_ce_ok && (!cx->ce_enabled || cx->nce != 1))
    return EX_FAIL("rank %d: copy-engine queue expected but %s", rank, cx->ce_enabled ? "no task on it" : "off");
  float *in = NULL, *out = NULL;
  const size_t bytes = sizeof(float) * ROWS * COLS;
  float *h = malloc(bytes);
  td_status st = TD_OK;
  if (!h || cudaMalloc((void **)&in, bytes) || cudaMalloc((void **)&out, bytes))
    st = EX_FAIL("allocation failed");
  if (st == TD_OK)
    st = td_exec_bind(ex, rp->in, in);
  if (st == TD_OK)
    st = td_exec_bind(ex, rp->out, out);
  for (int run = 1; run <= RUNS && st == TD_OK; run++) {
    for (int i = 0; i < ROWS * COLS; i++)
      h[i] = (float)(rank * 100000 + run * 1000 + i % 997);
    /* The launch barrier of the next run keeps peers from reading `in` early. */
    if (cudaMemcpy(in, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
      st = EX_FAIL("cudaMemcpy");
    if (st == TD_OK)
      st = td_exec_run(ex);
    if (st == TD_OK && cudaMemcpy(h, out, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
      st = EX_FAIL("cudaMemcpy back");
    for (int i = 0; i < ROWS * COLS && st == TD_OK; i++) {
      const float want = 2.0f * (float)(prev * 100000 + run * 1000 + i % 997);
      if (h[i] != want)
        st = EX_FAIL("rank %d run %d: out[%d] = %g, expected %g", rank, run, i, (double)h[i], (double)want);
    }
  }
  cudaFree(in);
  cudaFree(out);
  free(h);
  td_status st2 = td_exec_destroy(ex);
  return st != TD_OK ? st : st2;
}

static void test_ring(void **state) {
  const int sizes[] = {1, 2, 4, 8};
  for (int k = 0; k < 4; k++) {
    ring_plan rp;
    build_ring(sizes[k], &rp);
    td_world_opts o = ex_world_opts(20000);
    td_status st = td_local_world_run(sizes[k], &o, ring_rank, &rp);
    if (st != TD_OK)
      fail_msg("%d ranks: %s: %s", sizes[k], td_status_name(st), td_last_error());
    td_plan_destroy(rp.plan);
  }
}

int main(void) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); /* as the tdist CLI: 8 ranks x 2 streams fit */
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_ring)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
