/* SPDX-License-Identifier: Apache-2.0
 * CPU executor basics: a two-stage pipeline across ranks (each rank puts a
 * chunk into the next rank's symmetric buffer and raises its signal; the
 * next rank waits, scales it into a caller-bound output), run 50 times with
 * no reset between runs, plus the argument errors of td_exec_*. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "exec_harness.h"

enum { ROWS = 3, COLS = 5, RUNS = 50 };

typedef struct {
  td_plan *plan;
  int32_t in, xfer, out;
} pipe_plan;

static void build_pipe(int n, pipe_plan *pp) {
  assert_int_equal(td_plan_create(n, &pp->plan), TD_OK);
  pp->in = ex_buffer(pp->plan, "in", TD_BUF_INPUT, TD_F32, ROWS, COLS);
  pp->xfer = ex_buffer(pp->plan, "xfer", TD_BUF_SYMM, TD_F32, ROWS, COLS);
  pp->out = ex_buffer(pp->plan, "out", TD_BUF_OUTPUT, TD_F32, ROWS, COLS);
  uint32_t sig;
  assert_int_equal(td_plan_add_signal(pp->plan, "xfer ready", &sig), TD_OK);
  for (int r = 0; r < n; r++) {
    int next = (r + 1) % n;
    td_task put = ex_task(TD_TASK_COPY, TD_WORKER_COMM, 0, "put");
    put.a = ex_view(pp->in, TD_PEER_SELF, 0, 0, ROWS, COLS);
    put.c = ex_view(pp->xfer, next, 0, 0, ROWS, COLS);
    td_raise raise = {sig, next, 2};
    uint32_t idx;
    assert_int_equal(td_plan_add_task(pp->plan, r, &put, NULL, 0, NULL, 0, &raise, 1, &idx), TD_OK);
    td_task scale = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, TD_EW_SCALE, "scale");
    scale.alpha = 3.0f;
    scale.a = ex_view(pp->xfer, TD_PEER_SELF, 0, 0, ROWS, COLS);
    scale.c = ex_view(pp->out, TD_PEER_SELF, 0, 0, ROWS, COLS);
    td_wait wait = {sig, TD_CMP_GE, 2};
    assert_int_equal(td_plan_add_task(pp->plan, r, &scale, NULL, 0, &wait, 1, NULL, 0, &idx), TD_OK);
  }
  assert_int_equal(td_plan_validate(pp->plan), TD_OK);
}

static td_status pipe_rank(td_world *w, int rank, void *arg) {
  pipe_plan *pp = arg;
  td_team *team = td_world_team(w);
  int n = td_world_size(w);
  td_exec *ex = NULL;
  EX_OK(td_exec_create(pp->plan, team, NULL, &ex));
  float in[ROWS * COLS], out[ROWS * COLS];
  EX_OK(td_exec_bind(ex, pp->in, in));
  EX_OK(td_exec_bind(ex, pp->out, out));
  int prev = (rank + n - 1) % n;
  for (int run = 1; run <= RUNS; run++) {
    for (int i = 0; i < ROWS * COLS; i++)
      in[i] = (float)(rank * 1000 + run * 10 + i);
    EX_OK(td_exec_run(ex));
    EX_CHECK(td_exec_epoch(ex) == (uint64_t)run);
    for (int i = 0; i < ROWS * COLS; i++)
      if (out[i] != 3.0f * (float)(prev * 1000 + run * 10 + i))
        return EX_FAIL("rank %d run %d: out[%d] = %g, expected %g", rank, run, i, (double)out[i],
                       3.0 * (prev * 1000 + run * 10 + i));
  }
  return td_exec_destroy(ex);
}

static void test_pipeline_repeated_runs(void **state) {
  (void)state;
  for (int n = 1; n <= 4; n++) {
    pipe_plan pp;
    build_pipe(n, &pp);
    td_world_opts o = ex_world_opts(20000);
    td_status st = td_local_world_run(n, &o, pipe_rank, &pp);
    if (st != TD_OK)
      fail_msg("%d ranks: %s: %s", n, td_status_name(st), td_last_error());
    td_plan_destroy(pp.plan);
  }
}

/* Argument errors, each with its message. */
static td_status errors_rank(td_world *w, int rank, void *arg) {
  pipe_plan *pp = arg;
  td_team *team = td_world_team(w);
  td_exec *ex = NULL;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.backend = (td_exec_backend)7;
  EX_CHECK(td_exec_create(pp->plan, team, &o, &ex) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "unknown backend 7") != NULL);
  td_exec_opts_init(&o);
  o.compute_workers = -1;
  EX_CHECK(td_exec_create(pp->plan, team, &o, &ex) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "worker counts") != NULL);
  /* Without the cuda backend, or with it but no GPU (CI), creation is refused clearly. */
  td_exec_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  td_status cst = td_exec_create(pp->plan, team, &o, &ex);
  if (cst == TD_OK) {
    EX_OK(td_exec_destroy(ex)); /* a CUDA build on a GPU machine */
    ex = NULL;
  } else {
    EX_CHECK(cst == TD_ERR_UNSUPPORTED);
    EX_CHECK(strstr(td_last_error(), "'cuda' is not in this build") != NULL ||
             strstr(td_last_error(), "no usable CUDA device") != NULL);
  }
  td_exec_opts_init(&o);
  o.timeout_ms = -5;
  EX_CHECK(td_exec_create(pp->plan, team, &o, &ex) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "timeout_ms -5 must be >= 0") != NULL);
  EX_CHECK(td_exec_run(NULL) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "td_exec_run: exec is NULL") != NULL);
  EX_CHECK(td_exec_create(NULL, team, NULL, &ex) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "must not be NULL") != NULL);
  EX_CHECK(ex == NULL);

  EX_OK(td_exec_create(pp->plan, team, NULL, &ex));
  void *p = NULL;
  EX_CHECK(td_exec_bind(ex, 99, p) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "buffer 99 is out of range") != NULL);
  EX_CHECK(td_exec_bind(ex, pp->xfer, &p) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "owned by the executor") != NULL);
  EX_CHECK(td_exec_bind(ex, pp->in, NULL) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "NULL pointer for buffer") != NULL);
  EX_CHECK(td_exec_buffer(ex, pp->in, &p) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "bound by the caller") != NULL);
  EX_CHECK(td_exec_buffer(ex, -1, &p) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "out of range") != NULL);
  EX_OK(td_exec_buffer(ex, pp->xfer, &p));
  EX_CHECK(p != NULL && td_symm_contains(w, p, ROWS * COLS * sizeof(float)));
  /* Running with an unbound caller buffer names it (on every rank: the launch
   * barrier carries the verdict). */
  EX_CHECK(td_exec_run(ex) == TD_ERR_STATE);
  EX_CHECK(strstr(td_last_error(), "'in' (input) is used by task 0 'put' but not bound") != NULL);
  const td_trace_event *evs;
  size_t nev;
  EX_CHECK(td_exec_trace_events(ex, &evs, &nev) == TD_ERR_STATE);
  EX_CHECK(strstr(td_last_error(), "tracing is off") != NULL);
  (void)rank;
  return td_exec_destroy(ex);
}

static void test_errors(void **state) {
  (void)state;
  pipe_plan pp;
  build_pipe(2, &pp);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(2, &o, errors_rank, &pp);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  /* A plan changed after validation is refused until validated again. */
  uint32_t sig;
  assert_int_equal(td_plan_add_signal(pp.plan, "late", &sig), TD_OK);
  /* A one-rank world: argument errors are exchanged over the team, so a
   * single rank of a larger team would wait for its peers. */
  td_local_world *lw = NULL;
  assert_int_equal(td_local_world_create(1, &o, &lw), TD_OK);
  td_exec *ex = NULL;
  assert_int_equal(td_exec_create(pp.plan, td_world_team(td_local_world_rank(lw, 0)), NULL, &ex),
                   TD_ERR_STATE);
  assert_non_null(strstr(td_last_error(), "has not passed td_plan_validate"));
  assert_int_equal(td_plan_validate(pp.plan), TD_OK);
  assert_int_equal(td_exec_create(pp.plan, td_world_team(td_local_world_rank(lw, 0)), NULL, &ex), TD_ERR_MISMATCH);
  assert_non_null(strstr(td_last_error(), "the plan has 2 ranks but the team has 1 members"));
  assert_null(ex);
  td_local_world_destroy(lw);
  td_plan_destroy(pp.plan);
}

static td_status env_rank(td_world *w, int rank, void *arg) {
  pipe_plan *pp = arg;
  td_exec *ex = NULL;
  (void)rank;
  EX_CHECK(td_exec_create(pp->plan, td_world_team(w), NULL, &ex) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "TD_CPU_COMPUTE_WORKERS='many' is not a decimal integer") != NULL);
  EX_CHECK(ex == NULL);
  return TD_OK;
}

/* A malformed worker-count variable fails td_exec_create before any
 * collective call, with the variable's message (set in the main thread). */
static void test_bad_worker_env(void **state) {
  (void)state;
  pipe_plan pp;
  build_pipe(1, &pp);
  setenv("TD_CPU_COMPUTE_WORKERS", "many", 1);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(1, &o, env_rank, &pp);
  unsetenv("TD_CPU_COMPUTE_WORKERS");
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  td_plan_destroy(pp.plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_repeated_runs),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_bad_worker_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
