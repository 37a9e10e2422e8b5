/* SPDX-License-Identifier: Apache-2.0
 * The cuda executor backend on a machine without a usable GPU (CI): creation
 * is refused with TD_ERR_UNSUPPORTED and a message that says so and points to
 * the cpu backend, on every rank, without a hang; nothing is left half-made
 * (a cpu executor on the same team works afterwards). On a machine with a GPU
 * the refusal cannot be provoked and the test checks only the cpu part. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>

#include "exec/exec_harness.h"

static td_plan *g_plan;
static int32_t g_buf;

static td_status rank_fn(td_world *w, int rank, void *arg) {
  const int have_gpu = *(const int *)arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  td_exec *ex = NULL;
  if (!have_gpu) {
    EX_CHECK(td_exec_create(g_plan, td_world_team(w), &o, &ex) == TD_ERR_UNSUPPORTED);
    EX_CHECK(strstr(td_last_error(), "no usable CUDA device") != NULL);
    EX_CHECK(strstr(td_last_error(), "cpu backend") != NULL);
    EX_CHECK(ex == NULL);
  }
  td_exec_opts_init(&o);
  EX_OK(td_exec_create(g_plan, td_world_team(w), &o, &ex));
  void *p = NULL;
  EX_OK(td_exec_buffer(ex, g_buf, &p));
  EX_OK(td_exec_run(ex));
  (void)rank;
  return td_exec_destroy(ex);
}

static void test_refused_without_gpu(void **state) {
  int count = 0;
  const int have_gpu = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  assert_int_equal(td_plan_create(2, &g_plan), TD_OK);
  g_buf = ex_buffer(g_plan, "x", TD_BUF_SYMM, TD_F32, 2, 8);
  for (int r = 0; r < 2; r++) {
    td_task t = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, TD_EW_SCALE, "scale");
    t.a = t.c = ex_view(g_buf, TD_PEER_SELF, 0, 0, 2, 8);
    uint32_t idx;
    assert_int_equal(td_plan_add_task(g_plan, r, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  }
  assert_int_equal(td_plan_validate(g_plan), TD_OK);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(2, &o, rank_fn, (void *)&have_gpu);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  td_plan_destroy(g_plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_refused_without_gpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
