/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: calls that cannot meet. Ranks making different collective
 * calls at the same point (a barrier against td_symm_alloc, or against a
 * collective's first call) fail with TD_ERR_MISMATCH naming what each rank
 * called, instead of waiting for their deadline (collectives are numbered
 * with the runtime's team calls). After a timeout, a peer
 * failure or such a mismatch the team is broken: every later call on it,
 * td_world_finalize included, fails at once with TD_ERR_STATE naming the
 * first failure (a full deadline would otherwise pass again). */
#include "runtime/rt_harness.h"
#include "tdist/coll.h"

#define HAS(text) RT_CHECK(strstr(td_last_error(), (text)) != NULL)

static td_status barrier_vs_alloc_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  void *p = NULL;
  td_status st = rank == 0 ? td_barrier_all(w) : td_symm_alloc(t, 64, 0, &p);
  RT_CHECK(st == TD_ERR_MISMATCH);
  HAS("made different collective calls as call 1");
  HAS("team rank 0 called td_barrier_all");
  HAS("team rank 1 called td_symm_alloc");
  /* Broken from now on: at once, naming the cause. */
  RT_CHECK(td_team_sync(t) == TD_ERR_STATE);
  HAS("td_team_sync: the team of 2 ranks is broken since an earlier call on it failed");
  HAS("team rank 0 called td_barrier_all");
  RT_CHECK(td_symm_alloc(t, 64, 0, &p) == TD_ERR_STATE);
  td_team *sub = NULL;
  RT_CHECK(td_team_split(t, 0, 0, &sub) == TD_ERR_STATE);
  RT_CHECK(td_world_finalize(w) == TD_ERR_STATE);
  HAS("td_world_finalize: the team of 2 ranks is broken");
  return TD_OK;
}

static td_status barrier_vs_collective_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  float x = 1, y = 0;
  td_status st = rank == 1 ? td_barrier_all(w) : td_all_reduce(td_world_team(w), &y, &x, 1, TD_F32, TD_SUM);
  RT_CHECK(st == TD_ERR_MISMATCH);
  HAS(rank == 1 ? "td_barrier_all: the ranks of the team" : "the ranks of the team of 3 made different");
  HAS("team rank 0 called td_symm_alloc, team rank 1 called td_barrier_all, team rank 2 called td_symm_alloc");
  HAS("a collective's first call on a team makes td_symm_alloc");
  return TD_OK;
}

/* The tester's case: one rank in td_barrier_all, the others in td_all_reduce
 * (not the first collective call, which allocates: see above). */
static td_status barrier_vs_later_collective_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  float x = 1, y = 0;
  RT_OK(td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM));
  td_status st = rank == 0 ? td_barrier_all(w) : td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM);
  RT_CHECK(st == TD_ERR_MISMATCH);
  HAS("team rank 0 called td_barrier_all, team rank 1 called td_all_reduce");
  if (rank != 0)
    HAS("td_all_reduce: ");
  RT_CHECK(td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM) == TD_ERR_STATE);
  HAS("is broken since an earlier call on it failed");
  return TD_OK;
}

static td_status timeout_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  float x = 1, y = 0;
  RT_OK(td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM)); /* the collectives' state exists on both */
  if (rank == 1)
    return TD_OK; /* never makes the calls below */
  RT_CHECK(td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM) == TD_ERR_TIMEOUT);
  RT_CHECK(td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM) == TD_ERR_STATE);
  HAS("is broken since an earlier call on it failed");
  HAS("timed out after 300 ms");
  RT_CHECK(td_barrier_all(w) == TD_ERR_STATE);
  RT_CHECK(td_world_finalize(w) == TD_ERR_STATE);
  HAS("td_world_finalize");
  return TD_OK;
}

static td_status barrier_timeout_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  if (rank == 1)
    return TD_OK;
  RT_CHECK(td_team_barrier(td_world_team(w)) == TD_ERR_TIMEOUT);
  RT_CHECK(td_team_barrier(td_world_team(w)) == TD_ERR_STATE);
  HAS("td_team_barrier timed out after 300 ms");
  return TD_OK;
}

static void run(int n, rt_fn fn) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 300;
  td_status st = td_local_world_run(n, &o, fn, NULL);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
}

static void test_barrier_vs_alloc(void **state) { run(2, barrier_vs_alloc_rank); }
static void test_barrier_vs_collective(void **state) { run(3, barrier_vs_collective_rank); }
static void test_barrier_vs_later_collective(void **state) { run(3, barrier_vs_later_collective_rank); }
static void test_broken_after_collective_timeout(void **state) { run(2, timeout_rank); }
static void test_broken_after_barrier_timeout(void **state) { run(2, barrier_timeout_rank); }

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_barrier_vs_alloc),
      cmocka_unit_test(test_barrier_vs_collective),
      cmocka_unit_test(test_barrier_vs_later_collective),
      cmocka_unit_test(test_broken_after_collective_timeout),
      cmocka_unit_test(test_broken_after_barrier_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
