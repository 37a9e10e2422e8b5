/* SPDX-License-Identifier: Apache-2.0
 * A schedule that passes validation but deadlocks at run time: rank 0 adds
 * 1 to `sig` twice before it raises `go`; rank 1 waits for `go`, then for
 * sig EQ 1, which has already passed (validation treats EQ as GE, so only
 * the run can tell). With a short deadline the run fails with
 * TD_ERR_TIMEOUT naming the rank, the stuck task and its label, the signal,
 * the expected and the observed value; a sibling worker blocked on the
 * stuck task's completion returns at once instead of waiting its own
 * deadline, and the executor refuses further runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec_harness.h"

typedef struct {
  td_plan *plan;
  char message[2048];
  td_status second_run;
} deadlock_case;

static td_plan *build(void) {
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(2, &p), TD_OK);
  uint32_t sig, go, idx;
  assert_int_equal(td_plan_add_signal(p, "sig", &sig), TD_OK);
  assert_int_equal(td_plan_add_signal(p, "go", &go), TD_OK);
  td_raise r_sig = {sig, 1, 1}, r_go = {go, 1, 1};
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raise sig a");
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, &r_sig, 1, &idx), TD_OK);
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raise sig b");
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, &r_sig, 1, &idx), TD_OK);
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raise go");
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, &r_go, 1, &idx), TD_OK);
  td_wait w_go = {go, TD_CMP_GE, 1}, w_eq = {sig, TD_CMP_EQ, 1};
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "wait go");
  assert_int_equal(td_plan_add_task(p, 1, &t, NULL, 0, &w_go, 1, NULL, 0, &idx), TD_OK);
  uint32_t dep = 0;
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "eq too late");
  assert_int_equal(td_plan_add_task(p, 1, &t, &dep, 1, &w_eq, 1, NULL, 0, &idx), TD_OK);
  dep = 1; /* a comm worker that waits on the stuck task */
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "after stuck");
  assert_int_equal(td_plan_add_task(p, 1, &t, &dep, 1, NULL, 0, NULL, 0, &idx), TD_OK);
  assert_int_equal(td_plan_validate(p), TD_OK);
  return p;
}

static td_status rank_fn(td_world *w, int rank, void *arg) {
  deadlock_case *dc = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.compute_workers = 2;
  o.comm_workers = 1;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(dc->plan, td_world_team(w), &o, &ex));
  td_status st = td_exec_run(ex);
  if (rank == 1) {
    snprintf(dc->message, sizeof dc->message, "%s", td_last_error());
    dc->second_run = td_exec_run(ex);
  }
  td_status dst = td_exec_destroy(ex);
  if (st != TD_OK)
    return td__error(st, "%s", dc->message);
  return dst;
}

static void test_runtime_deadlock_is_diagnosed(void **state) {
  (void)state;
  deadlock_case dc = {build(), "", TD_OK};
  td_world_opts o = ex_world_opts(300);
  td_status st = td_local_world_run(2, &o, rank_fn, &dc);
  assert_int_equal(st, TD_ERR_TIMEOUT);
  const char *m = dc.message;
  const char *needles[] = {"rank 1", "timed out after 300 ms", "task 1 'eq too late'", "signal 0 'sig'",
                           "launch 1", "expected eq 1", "observed 2"};
  for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
    if (!strstr(m, needles[i]))
      fail_msg("diagnostic '%s' lacks '%s'", m, needles[i]);
  /* The sibling blocked on the stuck task did not report its own failure. */
  assert_null(strstr(m, "after stuck"));
  assert_int_equal(dc.second_run, TD_ERR_STATE);
  td_plan_destroy(dc.plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_runtime_deadlock_is_diagnosed)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
