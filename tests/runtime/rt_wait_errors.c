/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: no silent hang. Waits, barriers and collective allocations
 * whose partner never comes fail at the deadline with a diagnostic (waiting
 * rank, signal owner and offset, comparison, expected and observed value, or
 * the ranks that never arrived); a rank that fails makes its peers' waits
 * fail at once with TD_ERR_PEER_FAILED naming it. */
#include "prim/prim_internal.h"
#include "runtime/rt_harness.h"

#define HAS(text) RT_CHECK(strstr(td_last_error(), (text)) != NULL)

static td_status timeout_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  uint64_t *sig = NULL;
  RT_OK(td_symm_alloc(team, 64, 0, (void **)&sig));
  sig[0] = 0;
  RT_OK(td_barrier_all(w));
  if (rank == 1) {
    /* Set the signal below the awaited value, then leave rank 0 alone. */
    RT_OK(td_signal_op(team, sig, 3, TD_SIGNAL_SET, 0));
    return td_barrier_all(w);
  }
  RT_OK(td_barrier_all(w));
  {
    uint64_t seen = 99;
    RT_CHECK(td_signal_wait_until(team, sig, TD_CMP_GE, 5, &seen) == TD_ERR_TIMEOUT);
    RT_CHECK(seen == 99); /* outputs only on success */
    char expect[128];
    snprintf(expect, sizeof expect, "timed out after %d ms", td_world_timeout_ms(w));
    HAS("rank 0: td_signal_wait_until");
    HAS(expect);
    void *base = NULL;
    size_t heap = 0;
    RT_OK(td_symm_heap_base(w, 0, &base, &heap));
    snprintf(expect, sizeof expect, "signal owned by rank 0 at heap offset %zu", (size_t)((char *)sig - (char *)base));
    HAS(expect);
    HAS("until value ge 5");
    HAS("last observed 3");
    /* The internal wait on a peer's copy names `what` and the owner. */
    _Atomic uint64_t *peer = td_symm_ptr(team, sig + 1, 1);
    RT_CHECK(td__wait_u64(team, peer, TD_CMP_EQ, 42, "the test's flag", NULL) == TD_ERR_TIMEOUT);
    HAS("waiting for the test's flag");
    HAS("owned by rank 1");
    HAS("until value eq 42; last observed 0");
    RT_CHECK(td__wait_u64(team, peer, (td_cmp)8, 42, "x", NULL) == TD_ERR_INVALID_ARG);
  }
  return TD_OK;
}

static void test_wait_timeout(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 100;
  td_status st = td_local_world_run(2, &o, timeout_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

/* TD_TIMEOUT_MS from the environment sets the deadline. */
static td_status env_timeout_rank(td_world *w, int rank, void *arg) {
  RT_CHECK(td_world_timeout_ms(w) == 120);
  return TD_OK;
}

static void test_env_timeout(void **state) {
  setenv("TD_TIMEOUT_MS", "120", 1);
  td_status st = td_local_world_run(2, NULL, env_timeout_rank, NULL);
  unsetenv("TD_TIMEOUT_MS");
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
  setenv("TD_TIMEOUT_MS", "soon", 1);
  td_local_world *lw = NULL;
  st = td_local_world_create(2, NULL, &lw);
  unsetenv("TD_TIMEOUT_MS");
  assert_int_equal(st, TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "TD_TIMEOUT_MS='soon'"));
}

/* A member that calls something else: every rank fails at once with a
 * mismatch naming each rank's call (no deadline passes). */
static td_status absent_rank(td_world *w, int rank, void *arg) {
  if (rank != 2) {
    void *p = NULL;
    RT_CHECK(td_symm_alloc(td_world_team(w), 64, 0, &p) == TD_ERR_MISMATCH);
    HAS("td_symm_alloc: the ranks of the team of 3 made different collective calls");
    HAS("team rank 0 called td_symm_alloc, team rank 1 called td_symm_alloc, team rank 2 called td_team_split");
  } else {
    td_team *t = NULL;
    RT_CHECK(td_team_split(td_world_team(w), 0, 0, &t) == TD_ERR_MISMATCH);
    HAS("team rank 2 called td_team_split");
  }
  return TD_OK;
}

static void test_absent_member(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 100;
  td_status st = td_local_world_run(3, &o, absent_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

static td_status absent_barrier_rank(td_world *w, int rank, void *arg) {
  if (rank == 0) {
    RT_CHECK(td_barrier_all(w) == TD_ERR_TIMEOUT);
    HAS("rank 0: td_barrier_all timed out after 100 ms");
    HAS("team of 2 ranks");
    HAS("waited for team rank 1 (world rank 1)");
  }
  return TD_OK;
}

static void test_absent_barrier(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 100;
  td_status st = td_local_world_run(2, &o, absent_barrier_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

/* Rank 1 fails; ranks 0 and 2 (60 s deadline) must return at once. */
typedef struct {
  td_status seen[3];
  char msg[3][512];
} failure_log;

static td_status failing_rank(td_world *w, int rank, void *arg) {
  failure_log *log = arg;
  td_team *team = td_world_team(w);
  uint64_t *sig = NULL;
  RT_OK(td_symm_alloc(team, 8, 0, (void **)&sig));
  *sig = 0;
  RT_OK(td_barrier_all(w));
  /* Rank 1 fails only once the others are past the barrier (a peer that
   * fails while another still finishes the barrier fails that barrier too). */
  if (rank != 1)
    RT_OK(td_signal_op(team, sig, 1, TD_SIGNAL_ADD, 1));
  if (rank == 1) {
    RT_OK(td_signal_wait_until(team, sig, TD_CMP_EQ, 2, NULL));
    return td__error(TD_ERR_SHAPE, "rank 1 gave up on purpose");
  }
  td_status st = rank == 0 ? td_signal_wait_until(team, sig, TD_CMP_EQ, 1, NULL) : td_barrier_all(w);
  log->seen[rank] = st;
  snprintf(log->msg[rank], sizeof log->msg[rank], "%s", td_last_error());
  return st;
}

static void test_peer_failure(void **state) {
  failure_log log;
  memset(&log, 0, sizeof log);
  td_status st = td_local_world_run(3, NULL, failing_rank, &log);
  assert_int_equal(st, TD_ERR_SHAPE);
  assert_non_null(strstr(td_last_error(), "rank 1: rank 1 gave up on purpose"));
  for (int r = 0; r < 3; r += 2) {
    assert_int_equal(log.seen[r], TD_ERR_PEER_FAILED);
    assert_non_null(strstr(log.msg[r], "rank 1 failed with TD_ERR_SHAPE"));
  }
  assert_non_null(strstr(log.msg[0], "td_signal_wait_until abandoned"));
  assert_non_null(strstr(log.msg[2], "td_barrier_all abandoned"));
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wait_timeout),
      cmocka_unit_test(test_env_timeout),
      cmocka_unit_test(test_absent_member),
      cmocka_unit_test(test_absent_barrier),
      cmocka_unit_test(test_peer_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
