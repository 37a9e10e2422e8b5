/* SPDX-License-Identifier: Apache-2.0
 * The executor's collective calls fail together: a rank that is not ready
 * for a launch (unbound buffer), a rank that destroys while its peer runs, a
 * rank whose trace_write arguments are bad or whose trace file cannot be
 * written, different plans on different ranks, a plan changed after create,
 * and opts.timeout_ms governing the run's waits. Every case uses a world
 * deadline of 20 s, so a peer left waiting would show as a slow test; each
 * case must end in well under a second (except the 300 ms timeout case). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h" /* the launch-limit case sets the epoch directly */
#include "exec_harness.h"

enum { NR = 2, W = 16 };

typedef struct agree_case {
  td_plan *plan, *plan_b; /* plan_b: rank 1's plan when it differs */
  const char *mode;
  const char *path;
  td_status st[NR];
  char msg[NR][1024];
} agree_case;

/* The ring of exec_harness.h (ex_ring). */
static td_plan *ring(int raises) { return ex_ring(NR, raises, W); }

static td_status note(agree_case *c, int rank, td_status st) {
  c->st[rank] = st;
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", st != TD_OK ? td_last_error() : "");
  return TD_OK;
}

static td_status rank_fn(td_world *w, int rank, void *arg) {
  agree_case *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.trace = 1;
  td_exec *ex = NULL;
  td_status st = td_exec_create(rank == 1 && c->plan_b ? c->plan_b : c->plan, td_world_team(w), &o, &ex);
  if (!strcmp(c->mode, "plans"))
    return note(c, rank, st);
  EX_OK(st);
  float in[W] = {0}, out[W];
  if (strcmp(c->mode, "unbound") || rank != 1) {
    EX_OK(td_exec_bind(ex, 0, in));
    EX_OK(td_exec_bind(ex, 2, out));
  }
  if (!strcmp(c->mode, "destroy_race") && rank == 0) {
    note(c, rank, td_exec_destroy(ex));
    return TD_OK;
  }
  if (!strcmp(c->mode, "changed")) {
    uint32_t s;
    if (rank == 0)
      EX_OK(td_plan_add_signal(c->plan, "late", &s));
    EX_OK(td_team_barrier(td_world_team(w))); /* nobody reads the plan while it changes */
  }
  st = td_exec_run(ex);
  if (!strcmp(c->mode, "unbound") || !strcmp(c->mode, "destroy_race") || !strcmp(c->mode, "changed")) {
    note(c, rank, st);
    /* No task ran: the next run after binding works (only the destroy case
     * leaves the executor unusable). */
    return td_exec_destroy(ex);
  }
  EX_OK(st);
  note(c, rank, td_exec_trace_write(ex, rank == 0 ? c->path : NULL));
  return td_exec_destroy(ex);
}

static void run_case(agree_case *c, const char *mode) {
  c->mode = mode;
  memset(c->st, 0, sizeof c->st);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(NR, &o, rank_fn, c);
  if (st != TD_OK)
    fail_msg("%s: %s: %s", mode, td_status_name(st), td_last_error());
}

static void expect(const agree_case *c, int rank, td_status st, const char *needle) {
  if (c->st[rank] != st || !strstr(c->msg[rank], needle))
    fail_msg("%s: rank %d got %s '%s'; want %s with '%s'", c->mode, rank, td_status_name(c->st[rank]),
             c->msg[rank], td_status_name(st), needle);
}

static void test_unbound_rank_fails_every_rank(void **state) {
  (void)state;
  agree_case c = {ring(1), NULL, "", NULL, {0}, {{0}}};
  assert_non_null(c.plan);
  run_case(&c, "unbound");
  expect(&c, 1, TD_ERR_STATE, "td_exec_run: rank 1: buffer 0 'in' (input) is used by task 0 'put' but not bound");
  expect(&c, 0, TD_ERR_PEER_FAILED, "td_exec_run: rank 0: rank 1 failed with TD_ERR_STATE");
  expect(&c, 0, TD_ERR_PEER_FAILED, "'in' (input) is used by task 0 'put' but not bound");
  td_plan_destroy(c.plan);
}

static void test_destroy_while_peer_runs(void **state) {
  (void)state;
  agree_case c = {ring(1), NULL, "", NULL, {0}, {{0}}};
  run_case(&c, "destroy_race");
  expect(&c, 1, TD_ERR_STATE, "rank 0 is in td_exec_destroy at the same time");
  assert_int_equal(c.st[0], TD_OK); /* the destroy completed once rank 1 destroyed too */
  td_plan_destroy(c.plan);
}

static void test_plan_changed_after_create(void **state) {
  (void)state;
  agree_case c = {ring(1), NULL, "", NULL, {0}, {{0}}};
  run_case(&c, "changed");
  expect(&c, 0, TD_ERR_STATE, "td_exec_run: rank 0: the plan changed after td_exec_create");
  expect(&c, 1, TD_ERR_STATE, "td_exec_run: rank 1: the plan changed after td_exec_create");
  td_plan_destroy(c.plan);
}

static void test_different_plans_are_refused(void **state) {
  (void)state;
  agree_case c = {ring(1), ring(2), "", NULL, {0}, {{0}}};
  run_case(&c, "plans");
  for (int r = 0; r < NR; r++)
    expect(&c, r, TD_ERR_MISMATCH, "the ranks pass different plans: rank 1's plan");
  td_plan_destroy(c.plan);
  td_plan_destroy(c.plan_b);
}

static void test_trace_write_errors_reach_every_rank(void **state) {
  (void)state;
  agree_case c = {ring(1), NULL, "", NULL, {0}, {{0}}};
  run_case(&c, "trace"); /* NULL path on rank 0 */
  expect(&c, 0, TD_ERR_INVALID_ARG, "path is NULL on team rank 0");
  expect(&c, 1, TD_ERR_INVALID_ARG, "rank 0 failed with TD_ERR_INVALID_ARG");
  c.path = "/nonexistent-dir-of-tdist/trace.json";
  run_case(&c, "trace");
  expect(&c, 0, TD_ERR_SYSTEM, "cannot write trace file '/nonexistent-dir-of-tdist/trace.json'");
  expect(&c, 1, TD_ERR_SYSTEM, "rank 0 failed with TD_ERR_SYSTEM");
  td_plan_destroy(c.plan);
}

/* opts.timeout_ms (300 ms) governs the run's signal waits even with a world
 * deadline of 20 s, and the stuck signal wait is reported, not the local
 * dependency blocked behind it. Nothing here rests on timing: rank 0 makes
 * both raises before rank 1 starts its run (no launch barrier; a team
 * barrier, under the world's deadline, orders them), so rank 1's EQ wait
 * can only ever see 2. */
typedef struct to_case {
  td_plan *plan;
  td_status st;
  char msg[1024];
} to_case;

static td_status to_rank(td_world *w, int rank, void *arg) {
  to_case *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.timeout_ms = 300;
  o.skip_launch_barrier = 1; /* the team barriers below order the launches */
  td_exec *ex = NULL;
  EX_OK(td_exec_create(c->plan, td_world_team(w), &o, &ex));
  if (rank == 0) {
    EX_OK(td_exec_run(ex)); /* both raises land before rank 1 runs */
    EX_OK(td_team_barrier(td_world_team(w)));
  } else {
    EX_OK(td_team_barrier(td_world_team(w)));
    c->st = td_exec_run(ex);
    snprintf(c->msg, sizeof c->msg, "%s", td_last_error());
  }
  return td_exec_destroy(ex);
}

static void test_opts_timeout_governs_signal_waits(void **state) {
  (void)state;
  to_case c = {NULL, TD_OK, ""};
  assert_int_equal(td_plan_create(2, &c.plan), TD_OK);
  uint32_t sig, idx;
  td_plan_add_signal(c.plan, "sig", &sig);
  td_raise rs = {sig, 1, 1};
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raise a");
  td_plan_add_task(c.plan, 0, &t, NULL, 0, NULL, 0, &rs, 1, &idx);
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raise b");
  td_plan_add_task(c.plan, 0, &t, NULL, 0, NULL, 0, &rs, 1, &idx);
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "eq one");
  td_wait w1 = {sig, TD_CMP_EQ, 1}; /* rank 0's two raises overshoot it: stuck */
  td_plan_add_task(c.plan, 1, &t, NULL, 0, &w1, 1, NULL, 0, &idx);
  uint32_t dep = 0;
  t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "after stuck");
  td_plan_add_task(c.plan, 1, &t, &dep, 1, NULL, 0, NULL, 0, &idx);
  assert_int_equal(td_plan_validate(c.plan), TD_OK);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(2, &o, to_rank, &c);
  assert_int_equal(st, TD_OK);
  assert_int_equal(c.st, TD_ERR_TIMEOUT);
  const char *needles[] = {"rank 1: task 0 'eq one' timed out after 300 ms", "signal 0 'sig'", "expected eq 1",
                           "observed 2"};
  for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
    if (!strstr(c.msg, needles[i]))
      fail_msg("diagnostic '%s' lacks '%s'", c.msg, needles[i]);
  assert_null(strstr(c.msg, "after stuck"));
  td_plan_destroy(c.plan);
}

/* Create agrees collectively: one rank's bad options fail every rank at
 * once with that rank's status and reason, and a failed collective
 * allocation keeps its own message (not a later teardown message). */
static td_status create_rank(td_world *w, int rank, void *arg) {
  agree_case *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  if (!strcmp(c->mode, "bad_opts") && rank == 1)
    o.compute_workers = -1;
  td_exec *ex = NULL;
  note(c, rank, td_exec_create(c->plan, td_world_team(w), &o, &ex));
  EX_CHECK(ex == NULL);
  return TD_OK;
}

static void test_create_failures_reach_every_rank(void **state) {
  (void)state;
  agree_case c = {ring(1), NULL, "bad_opts", NULL, {0}, {{0}}};
  td_world_opts o = ex_world_opts(20000);
  assert_int_equal(td_local_world_run(NR, &o, create_rank, &c), TD_OK);
  expect(&c, 1, TD_ERR_INVALID_ARG, "td_exec_create: rank 1 failed to create the executor: worker counts compute -1");
  expect(&c, 0, TD_ERR_INVALID_ARG, "td_exec_create: rank 0: rank 1 failed to create the executor: worker counts "
         "compute -1");
  td_plan_destroy(c.plan);

  assert_int_equal(td_plan_create(NR, &c.plan), TD_OK);
  ex_buffer(c.plan, "small", TD_BUF_SYMM, TD_F32, 4, 4);
  ex_buffer(c.plan, "huge", TD_BUF_SYMM, TD_F32, 4096, 4096); /* 64 MiB > the 4 MiB heap */
  assert_int_equal(td_plan_validate(c.plan), TD_OK);
  c.mode = "heap";
  assert_int_equal(td_local_world_run(NR, &o, create_rank, &c), TD_OK);
  for (int r = 0; r < NR; r++) {
    expect(&c, r, TD_ERR_HEAP_EXHAUSTED, "symm buffer 1 'huge'");
    assert_null(strstr(c.msg[r], "td_symm_free"));
  }
  td_plan_destroy(c.plan);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) /* their pthread_create wrappers abort */
/* A worker thread that cannot start on rank 1 (a default stack far beyond
 * the address space makes pthread_create fail; rank 0 has no tasks and so
 * starts no threads): both ranks fail create with rank 1's status and
 * message, naming rank 1, and no teardown message replaces it. */
static pthread_barrier_t thr_bar;

static td_status thread_rank(td_world *w, int rank, void *arg) {
  agree_case *c = arg;
  td_exec *ex = NULL;
  pthread_attr_t old, huge;
  if (rank == 1) {
    pthread_getattr_default_np(&old);
    pthread_attr_init(&huge);
    pthread_attr_setstacksize(&huge, (size_t)1 << 46);
    pthread_setattr_default_np(&huge);
  }
  pthread_barrier_wait(&thr_bar);
  note(c, rank, td_exec_create(c->plan, td_world_team(w), NULL, &ex));
  pthread_barrier_wait(&thr_bar);
  if (rank == 1) {
    pthread_setattr_default_np(&old);
    pthread_attr_destroy(&old);
    pthread_attr_destroy(&huge);
  }
  EX_CHECK(ex == NULL);
  return TD_OK;
}

static void test_worker_start_failure(void **state) {
  (void)state;
  agree_case c = {NULL, NULL, "thread", NULL, {0}, {{0}}};
  assert_int_equal(td_plan_create(NR, &c.plan), TD_OK);
  int32_t x = ex_buffer(c.plan, "x", TD_BUF_SYMM, TD_F32, 1, 4);
  (void)x;
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "only on 1");
  uint32_t idx;
  assert_int_equal(td_plan_add_task(c.plan, 1, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  assert_int_equal(td_plan_validate(c.plan), TD_OK);
  pthread_barrier_init(&thr_bar, NULL, NR);
  td_world_opts o = ex_world_opts(20000);
  assert_int_equal(td_local_world_run(NR, &o, thread_rank, &c), TD_OK);
  pthread_barrier_destroy(&thr_bar);
  expect(&c, 1, TD_ERR_SYSTEM, "td_exec_create: rank 1 failed to create the executor: rank 1: starting worker 0 of "
         "1 failed");
  expect(&c, 0, TD_ERR_SYSTEM, "td_exec_create: rank 0: rank 1 failed to create the executor: rank 1: starting "
         "worker 0 of 1 failed");
  for (int r = 0; r < NR; r++)
    assert_null(strstr(c.msg[r], "td_symm_free"));
  td_plan_destroy(c.plan);
}
#endif

/* A launch past the executor's limit (2^63 / the largest per-launch total of
 * this rank's signals, at least TD_PLAN_LAUNCH_MAX; 2^63 here, where every
 * total is 1) would let signal words pass 2^63: refused on every rank before
 * any task runs (the epoch is set directly, as no test runs 2^40 launches). */
static td_status limit_rank(td_world *w, int rank, void *arg) {
  agree_case *c = arg;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(c->plan, td_world_team(w), NULL, &ex));
  float in[W] = {0}, out[W];
  EX_OK(td_exec_bind(ex, 0, in));
  EX_OK(td_exec_bind(ex, 2, out));
  EX_OK(td_exec_run(ex));
  EX_CHECK(ex->launch_max >= TD_PLAN_LAUNCH_MAX);
  if (rank == 0)
    ex->epoch = ex->launch_max;
  note(c, rank, td_exec_run(ex));
  return td_exec_destroy(ex);
}

static void test_launch_limit(void **state) {
  (void)state;
  agree_case c = {ring(1), NULL, "limit", NULL, {0}, {{0}}};
  td_world_opts o = ex_world_opts(20000);
  assert_int_equal(td_local_world_run(NR, &o, limit_rank, &c), TD_OK);
  expect(&c, 0, TD_ERR_STATE, "launch 9223372036854775809 would exceed this executor's 9223372036854775808 launches");
  expect(&c, 1, TD_ERR_PEER_FAILED, "rank 0 failed with TD_ERR_STATE");
  td_plan_destroy(c.plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unbound_rank_fails_every_rank),
      cmocka_unit_test(test_destroy_while_peer_runs),
      cmocka_unit_test(test_plan_changed_after_create),
      cmocka_unit_test(test_different_plans_are_refused),
      cmocka_unit_test(test_trace_write_errors_reach_every_rank),
      cmocka_unit_test(test_opts_timeout_governs_signal_waits),
      cmocka_unit_test(test_create_failures_reach_every_rank),
      cmocka_unit_test(test_launch_limit),
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
      cmocka_unit_test(test_worker_start_failure),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
