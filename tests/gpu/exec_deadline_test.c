/* SPDX-License-Identifier: Apache-2.0
 * CUDA executor failure paths on the GPU (label gpu): a schedule that passes
 * validation but deadlocks at run time (a wait for a signal to EQUAL a value
 * that a dependency has already overshot) ends with TD_ERR_TIMEOUT naming
 * the stuck task, the signal, the expected and the observed value, instead of
 * hanging; ranks sharing one GPU that ask for more persistent blocks than fit
 * at once are refused with a message saying how many fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "exec/exec_harness.h"

typedef struct {
  td_plan *plan;
  int compute;
  td_status want;
  const char *needles[4];
} case_ctx;

static td_status rank_fn(td_world *w, int rank, void *arg) {
  case_ctx *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.timeout_ms = 300;
  o.compute_workers = c->compute;
  td_exec *ex = NULL;
  td_status st = td_exec_create(c->plan, td_world_team(w), &o, &ex);
  if (st == TD_OK) {
    st = td_exec_run(ex);
    td_exec_destroy(ex);
  }
  if (st != c->want)
    return EX_FAIL("rank %d: got %s, expected %s: %s", rank, td_status_name(st), td_status_name(c->want),
                   td_last_error());
  for (int i = 0; i < 4 && c->needles[i]; i++)
    if (!strstr(td_last_error(), c->needles[i]))
      return EX_FAIL("rank %d: message lacks '%s': %s", rank, c->needles[i], td_last_error());
  return TD_OK;
}

static void test_runtime_deadlock_names_task(void **state) {
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  uint32_t sig;
  assert_int_equal(td_plan_add_signal(p, "never equal", &sig), TD_OK);
  td_task raise = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raiser");
  td_raise r = {sig, TD_PEER_SELF, 1};
  uint32_t t0, t1;
  assert_int_equal(td_plan_add_task(p, 0, &raise, NULL, 0, NULL, 0, &r, 1, &t0), TD_OK);
  td_task stuck = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "stuck");
  td_wait wt = {sig, TD_CMP_EQ, 0}; /* already 1 once its dependency ran */
  assert_int_equal(td_plan_add_task(p, 0, &stuck, &t0, 1, &wt, 1, NULL, 0, &t1), TD_OK);
  assert_int_equal(td_plan_validate(p), TD_OK);
  case_ctx c = {p, 0, TD_ERR_TIMEOUT, {"task 1 'stuck'", "signal 0 'never equal'", "eq 0", "observed 1"}};
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(1, &o, rank_fn, &c);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
  td_plan_destroy(p);
}

/* The same deadlock on a copy-engine task: its copy was queued on the
 * copy-engine stream behind a wait that never holds; the launch must still end
 * (the host releases the queue) and name the task. */
static void test_stuck_copy_engine_task_releases_queue(void **state) {
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  td_buffer_desc d = {"x", TD_BUF_SYMM, TD_F32, 4, 64};
  int32_t x;
  assert_int_equal(td_plan_add_buffer(p, &d, &x), TD_OK);
  uint32_t sig;
  assert_int_equal(td_plan_add_signal(p, "never equal", &sig), TD_OK);
  td_task raise = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raiser");
  td_raise r = {sig, TD_PEER_SELF, 1};
  uint32_t t0, t1;
  assert_int_equal(td_plan_add_task(p, 0, &raise, NULL, 0, NULL, 0, &r, 1, &t0), TD_OK);
  td_task copy = ex_task(TD_TASK_COPY, TD_WORKER_COPY_ENGINE, 0, "stuck copy");
  copy.a = ex_view(x, TD_PEER_SELF, 0, 0, 2, 64);
  copy.c = ex_view(x, TD_PEER_SELF, 2, 0, 2, 64);
  td_wait wt = {sig, TD_CMP_EQ, 0};
  assert_int_equal(td_plan_add_task(p, 0, &copy, &t0, 1, &wt, 1, NULL, 0, &t1), TD_OK);
  assert_int_equal(td_plan_validate(p), TD_OK);
  case_ctx c = {p, 0, TD_ERR_TIMEOUT, {"task 1 'stuck copy'", "copy_engine", "observed 1"}};
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(1, &o, rank_fn, &c);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
  td_plan_destroy(p);
}

static void test_oversubscribed_gpu_is_refused(void **state) {
  enum { N = 4 };
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(N, &p), TD_OK);
  for (int r = 0; r < N; r++)
    for (int i = 0; i < 1024; i++) {
      td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "nop");
      uint32_t idx;
      assert_int_equal(td_plan_add_task(p, r, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
    }
  assert_int_equal(td_plan_validate(p), TD_OK);
  case_ctx c = {p, 1024, TD_ERR_UNSUPPORTED, {"4 ranks sharing GPU", "need 4096 blocks", "fit"}};
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(N, &o, rank_fn, &c);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
  td_plan_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runtime_deadlock_names_task),
      cmocka_unit_test(test_stuck_copy_engine_task_releases_queue),
      cmocka_unit_test(test_oversubscribed_gpu_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
