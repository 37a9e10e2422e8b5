/* SPDX-License-Identifier: Apache-2.0
 * When td_exec_create fails on one rank, every rank reports that rank's
 * failure: the same status on all ranks, and a message that names the
 * failing rank and carries its own reason, whichever step of creation failed
 * (argument checks, the cpu backend's local preparation, its symmetric
 * buffers and workers). The failure is injected through the executor's
 * internal test hook (td__exec_test_fail_at, exec/backend.h) on 2, 4 and 8
 * ranks, at rank 0, a middle rank and the last rank. Afterwards the team's
 * collective sequence is intact: a team barrier and a new executor (created,
 * run around a ring, destroyed) work on every rank. The same failures seen
 * through td_program_run are reported as the root cause, not as a peer's
 * mismatch or peer failure; and so is a rank that fails its readiness for a
 * launch (its peers then fail with TD_ERR_PEER_FAILED). Every rank failing
 * the same way is said once per rank, with no rank blamed on another.
 *
 * Every case uses a world deadline of 20 s, so a rank left waiting would show
 * as a slow test; nothing here waits for a deadline. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/backend.h" /* the internal test hook */
#include "exec_harness.h"
#include "tdist/program.h"

enum { MAXR = 8, W = 8 };

typedef struct rc_case {
  int n;              /* ranks */
  int fail_rank;      /* team rank the hook fails */
  int step;           /* TD__EXEC_STEP_* */
  td_status injected; /* status the hook returns */
  td_plan *plan;
  td_status st[MAXR];
  char msg[MAXR][1024];
  int ex_null[MAXR];  /* *out left NULL by the failed create */
  td_status after[MAXR]; /* barrier + second executor, per rank */
  char after_msg[MAXR][1024];
} rc_case;

/* The ring of exec_harness.h (ex_ring). */
static td_plan *ring(int n) { return ex_ring(n, 1, W); }

/* After the failed create: the collective sequence is intact, and a new
 * executor works (rank 0 turns the hook off between two barriers, which
 * order it before every rank's next create). */
static td_status after_failure(td_world *w, int rank, rc_case *c) {
  td_team *team = td_world_team(w);
  EX_OK(td_team_barrier(team));
  if (rank == 0)
    td__exec_test_fail_at.step = 0;
  EX_OK(td_team_barrier(team));
  td_exec *ex = NULL;
  EX_OK(td_exec_create(c->plan, team, NULL, &ex));
  float in[W], out[W];
  for (int i = 0; i < W; i++)
    in[i] = (float)(rank * 100 + i);
  EX_OK(td_exec_bind(ex, 0, in));
  EX_OK(td_exec_bind(ex, 2, out));
  td_status st = td_exec_run(ex);
  td_status ds = td_exec_destroy(ex);
  EX_OK(st);
  EX_OK(ds);
  int from = (rank + c->n - 1) % c->n;
  for (int i = 0; i < W; i++)
    EX_CHECK(out[i] == (float)(from * 100 + i));
  return TD_OK;
}

static td_status rank_fn(td_world *w, int rank, void *arg) {
  rc_case *c = arg;
  td_exec *ex = NULL;
  c->st[rank] = td_exec_create(c->plan, td_world_team(w), NULL, &ex);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", c->st[rank] != TD_OK ? td_last_error() : "");
  c->ex_null[rank] = ex == NULL;
  if (ex) /* a create that wrongly succeeded: leave the team usable */
    td_exec_destroy(ex);
  c->after[rank] = after_failure(w, rank, c);
  snprintf(c->after_msg[rank], sizeof c->after_msg[rank], "%s", c->after[rank] != TD_OK ? td_last_error() : "");
  return TD_OK;
}

/* What every rank's message must hold: the failing rank named as such, its
 * own reason (the hook's text, which names the rank and the step), and on a
 * peer the reporting rank first. */
static void check_messages(const rc_case *c) {
  char named[128], reason[128], peer[160];
  snprintf(named, sizeof named, "rank %d failed to create the executor: ", c->fail_rank);
  snprintf(reason, sizeof reason, "rank %d: injected failure at step %d (", c->fail_rank, c->step);
  for (int r = 0; r < c->n; r++) {
    if (r == c->fail_rank)
      snprintf(peer, sizeof peer, "td_exec_create: rank %d failed to create the executor: ", r);
    else
      snprintf(peer, sizeof peer, "td_exec_create: rank %d: rank %d failed to create the executor: ", r,
               c->fail_rank);
    if (c->st[r] != c->injected || !strstr(c->msg[r], named) || !strstr(c->msg[r], reason) ||
        strncmp(c->msg[r], peer, strlen(peer)) != 0 || !c->ex_null[r])
      fail_msg("%d ranks, rank %d fails step %d: rank %d got %s '%s' (out %s); want %s starting '%s' with '%s'",
               c->n, c->fail_rank, c->step, r, td_status_name(c->st[r]), c->msg[r],
               c->ex_null[r] ? "NULL" : "written", td_status_name(c->injected), peer, reason);
    if (c->after[r] != TD_OK)
      fail_msg("%d ranks, rank %d fails step %d: rank %d: the team or a new executor failed afterwards: %s '%s'",
               c->n, c->fail_rank, c->step, r, td_status_name(c->after[r]), c->after_msg[r]);
  }
}

/* One injected failure: `step` fails on `fail_rank` of an n-rank team. */
static void run_one(int n, int fail_rank, int step, td_status injected) {
  rc_case *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->n = n;
  c->fail_rank = fail_rank;
  c->step = step;
  c->injected = injected;
  c->plan = ring(n);
  assert_non_null(c->plan);
  td__exec_test_fail_at = (td__exec_fault){step, fail_rank, injected};
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(n, &o, rank_fn, c);
  td__exec_test_fail_at.step = 0;
  if (st != TD_OK)
    fail_msg("%d ranks, rank %d fails step %d: %s: %s", n, fail_rank, step, td_status_name(st), td_last_error());
  check_messages(c);
  td_plan_destroy(c->plan);
  free(c);
}

/* Each step on 2, 4 and 8 ranks, failing the first, a middle and the last
 * rank, with a status that is not one a peer's failure produces. */
static void run_step(int step, td_status injected) {
  const int sizes[] = {2, 4, 8};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    int n = sizes[i];
    const int fails[] = {0, n / 2, n - 1};
    for (size_t k = 0; k < sizeof fails / sizeof *fails; k++)
      run_one(n, fails[k], step, injected);
  }
}

static void test_argument_step_fails_on_one_rank(void **state) {
  (void)state;
  run_step(TD__EXEC_STEP_ARGS, TD_ERR_INVALID_ARG);
}

static void test_cpu_preparation_fails_on_one_rank(void **state) {
  (void)state;
  run_step(TD__EXEC_STEP_CPU_PREPARE, TD_ERR_NO_MEMORY);
}

/* After the symmetric allocations: the failing rank and its peers free the
 * same blocks, so the heap and the team stay consistent (the second executor
 * in after_failure allocates and runs on them). */
static void test_cpu_start_fails_on_one_rank(void **state) {
  (void)state;
  run_step(TD__EXEC_STEP_CPU_START, TD_ERR_SYSTEM);
}

/* Two ranks failing at once (the hook on rank 1, a bad option on rank 3):
 * every rank returns the status of the lowest failing rank, the other
 * failing rank is listed, and it keeps its own reason in its message. */
typedef struct two_case {
  td_plan *plan;
  td_status st[4];
  char msg[4][1024];
} two_case;

static td_status two_rank(td_world *w, int rank, void *arg) {
  two_case *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  if (rank == 3)
    o.comm_workers = 5000; /* refused by the argument check on this rank only */
  td_exec *ex = NULL;
  c->st[rank] = td_exec_create(c->plan, td_world_team(w), &o, &ex);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  EX_CHECK(ex == NULL);
  return TD_OK;
}

static void test_two_ranks_fail(void **state) {
  (void)state;
  two_case c;
  memset(&c, 0, sizeof c);
  c.plan = ring(4);
  assert_non_null(c.plan);
  td__exec_test_fail_at = (td__exec_fault){TD__EXEC_STEP_ARGS, 1, TD_ERR_UNSUPPORTED};
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(4, &o, two_rank, &c);
  td__exec_test_fail_at.step = 0;
  assert_int_equal(st, TD_OK);
  for (int r = 0; r < 4; r++) {
    if (c.st[r] != TD_ERR_UNSUPPORTED || !strstr(c.msg[r], "rank 1 failed to create the executor: rank 1: injected "
                                                 "failure at step 1") || !strstr(c.msg[r], "(rank 3 failed too)"))
      fail_msg("rank %d got %s '%s'", r, td_status_name(c.st[r]), c.msg[r]);
  }
  /* Rank 3 also says what was wrong with its own call. */
  assert_non_null(strstr(c.msg[3], "this rank failed too, with TD_ERR_INVALID_ARG: worker counts compute 0, comm "
                                   "5000"));
  td_plan_destroy(c.plan);
}

/* Every rank failing the same way (the same bad option everywhere): each
 * rank names itself and its reason once, says every rank failed the same
 * way, and blames no other rank (breaker5 B7: "(every rank failed)" beside
 * "rank 1 failed earlier ... as a consequence"). */
static td_status same_rank(td_world *w, int rank, void *arg) {
  two_case *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.comm_workers = 5000;
  td_exec *ex = NULL;
  c->st[rank] = td_exec_create(c->plan, td_world_team(w), &o, &ex);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  EX_CHECK(ex == NULL);
  EX_CHECK(td__exec_create_cause() == rank); /* no rank is another's consequence */
  return TD_OK;
}

static void test_every_rank_fails_the_same_way(void **state) {
  (void)state;
  two_case c;
  memset(&c, 0, sizeof c);
  c.plan = ring(4);
  assert_non_null(c.plan);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(4, &o, same_rank, &c);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  for (int r = 0; r < 4; r++) {
    char want[128];
    snprintf(want, sizeof want, "td_exec_create: rank %d failed to create the executor: ", r);
    if (c.st[r] != TD_ERR_INVALID_ARG || strncmp(c.msg[r], want, strlen(want)) != 0 ||
        !strstr(c.msg[r], "worker counts compute 0, comm 5000") ||
        !strstr(c.msg[r], "(every rank failed the same way)") || strstr(c.msg[r], "failed too") ||
        strstr(c.msg[r], "not all for this reason"))
      fail_msg("rank %d got %s '%s'", r, td_status_name(c.st[r]), c.msg[r]);
  }
  td_plan_destroy(c.plan);
}

/* The program-level API reports the failing rank's status and reason (the
 * executor create inside td_program_run fails on one rank). */
static td_program *small_program(void) {
  const char *text = "input x : f32[16, 8] shard(0)\noutput y = gelu(x)\n";
  td_program *p = NULL;
  assert_int_equal(td_program_parse(text, strlen(text), "rootcause.td", &p), TD_OK);
  return p;
}

static void program_case(td_program *p, int n, int fail_rank, int step, td_status injected) {
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.compute_workers = 1;
  co.comm_workers = 1;
  td_program_run_opts ro = {n, "cpu", 1, 7, 1, 1, NULL, &co, 0, NULL, NULL};
  td_program_run_result res;
  td__exec_test_fail_at = (td__exec_fault){step, fail_rank, injected};
  td_status st = td_program_run(p, &ro, &res);
  td__exec_test_fail_at.step = 0;
  char reason[128], cause[64];
  snprintf(reason, sizeof reason, "rank %d: injected failure at step %d (", fail_rank, step);
  snprintf(cause, sizeof cause, "rank %d failed", fail_rank); /* the rank reported as the cause */
  const char *msg = td_last_error();
  if (st != injected || strncmp(msg, cause, strlen(cause)) != 0 || !strstr(msg, reason))
    fail_msg("td_program_run, %d ranks, rank %d fails step %d: got %s '%s'; want %s starting '%s' with '%s'", n,
             fail_rank, step, td_status_name(st), msg, td_status_name(injected), cause, reason);
  if (step != TD__EXEC_STEP_RUN) {
    char named[96];
    snprintf(named, sizeof named, "rank %d failed to create the executor", fail_rank);
    if (!strstr(msg, named))
      fail_msg("td_program_run: '%s' lacks '%s'", msg, named);
  }
}

static void test_program_run_reports_the_root_cause(void **state) {
  (void)state;
  td_program *p = small_program();
  const int sizes[] = {2, 4, 8};
  const int steps[] = {TD__EXEC_STEP_ARGS, TD__EXEC_STEP_CPU_PREPARE, TD__EXEC_STEP_CPU_START};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++)
      program_case(p, sizes[i], (int)(k * (size_t)(sizes[i] - 1) / 2), steps[k], TD_ERR_SYSTEM);
  /* A launch one rank is not ready for: its peers fail with
   * TD_ERR_PEER_FAILED, which td_program_run must not report as the cause. */
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int f = 0; f < sizes[i]; f += sizes[i] - 1)
      program_case(p, sizes[i], f, TD__EXEC_STEP_RUN, TD_ERR_NO_MEMORY);
  td_program_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_argument_step_fails_on_one_rank),
      cmocka_unit_test(test_cpu_preparation_fails_on_one_rank),
      cmocka_unit_test(test_cpu_start_fails_on_one_rank),
      cmocka_unit_test(test_two_ranks_fail),
      cmocka_unit_test(test_every_rank_fails_the_same_way),
      cmocka_unit_test(test_program_run_reports_the_root_cause),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
