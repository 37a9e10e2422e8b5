/* SPDX-License-Identifier: Apache-2.0
 * Device API on the CPU: every error path of the host entry points, and the
 * deadline rule. A wait that can never be satisfied fails after the world's
 * deadline with TD_ERR_TIMEOUT, a message naming rank, worker, the signal's
 * owner and offset, the comparison and both values, and a filled diagnostic
 * record that td_dev_diagnostic_status turns into the same facts. */
#include "runtime/rt_harness.h"
#include "tdist/device.h"

static void test_ctx_null_arguments(void **state) {
  td_dev_ctx c;
  assert_int_equal(td_dev_ctx_cpu(NULL, &c), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "team is NULL"));
}

static td_status null_out_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  (void)arg;
  RT_CHECK(td_dev_ctx_cpu(td_world_team(w), NULL) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "out is NULL") != NULL);
  return TD_OK;
}
static void test_ctx_null_out(void **state) {
  assert_int_equal(td_local_world_run(2, NULL, null_out_rank, NULL), TD_OK);
}

static td_status too_many_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  (void)arg;
  td_dev_ctx c;
  RT_CHECK(td_dev_ctx_cpu(td_world_team(w), &c) == TD_ERR_UNSUPPORTED);
  RT_CHECK(strstr(td_last_error(), "team of 65 ranks") != NULL);
  RT_CHECK(strstr(td_last_error(), "TD_DEV_MAX_PEERS") != NULL);
  return TD_OK;
}
static void test_ctx_team_too_large(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 1 << 20;
  assert_int_equal(td_local_world_run(TD_DEV_MAX_PEERS + 1, &o, too_many_rank, NULL), TD_OK);
}

/* A context not made by td_dev_ctx_cpu: the out-of-line calls refuse it. */
static void test_foreign_context(void **state) {
  td_dev_ctx c;
  memset(&c, 0, sizeof c);
  uint64_t word = 0;
  assert_int_equal(td_dev_cpu_wait(&c, &word, TD_CMP_EQ, 1), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "not a CPU device context"));
  assert_int_equal(td_dev_cpu_wait(&c, NULL, TD_CMP_EQ, 1), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "signal address is NULL"));
  assert_int_equal(td_dev_barrier_all_block(&c), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_dev_barrier_all_block"));
  td_dev_cpu_wake(&c, 0); /* ignored, must not crash */
  td_dev_cpu_wake(NULL, 0);
}

/* Rank n-1 waits for a value nobody writes; the others leave. */
static td_status stuck_rank(td_world *w, int rank, void *arg) {
  td_dev_diagnostic *out = arg;
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(td_world_team(w), &c));
  uint64_t *sig = NULL;
  RT_OK(td_symm_alloc(td_world_team(w), 4 * sizeof *sig, 8, (void **)&sig));
  memset(sig, 0, 4 * sizeof *sig);
  sig[2] = 4;
  RT_OK(td_dev_barrier_all_block(&c));
  if (rank != c.n_pes - 1)
    return TD_OK;
  c.worker = 3;
  td_status st = td_dev_signal_wait_until(&c, &sig[2], TD_CMP_GE, 5);
  if (st == TD_ERR_TIMEOUT)
    *out = *c.diag;
  return st;
}

static void test_deadline_diagnostic(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 200;
  for (int n = 1; n <= 3; n += 2) {
    td_dev_diagnostic d;
    memset(&d, 0, sizeof d);
    td_status st = td_local_world_run(n, &o, stuck_rank, &d);
    assert_int_equal(st, TD_ERR_TIMEOUT);
    const char *msg = td_last_error();
    char want[64];
    snprintf(want, sizeof want, "rank %d", n - 1);
    assert_non_null(strstr(msg, want));
    assert_non_null(strstr(msg, "worker 3"));
    assert_non_null(strstr(msg, "ge"));
    assert_non_null(strstr(msg, "5"));
    /* The record: who, where, what. */
    assert_int_equal(d.state, 2);
    assert_int_equal(d.rank, n - 1);
    assert_int_equal(d.owner, n - 1);
    assert_int_equal(d.block, 3);
    assert_int_equal(d.cmp, TD_CMP_GE);
    assert_int_equal(d.expected, 5);
    assert_int_equal(d.observed, 4);
    assert_true(d.offset != UINT64_MAX && d.offset % 8 == 0);
    /* The host-side conversion says the same. */
    assert_int_equal(td_dev_diagnostic_status(&d), TD_ERR_TIMEOUT);
    msg = td_last_error();
    assert_non_null(strstr(msg, want));
    assert_non_null(strstr(msg, "block 3"));
    assert_non_null(strstr(msg, "device wait timed out after 200 ms"));
    assert_non_null(strstr(msg, "needed value ge 5, observed 4"));
    char off[64];
    snprintf(off, sizeof off, "heap offset 0x%llx of rank %d", (unsigned long long)d.offset, n - 1);
    assert_non_null(strstr(msg, off));
  }
}

static void test_diagnostic_status(void **state) {
  assert_int_equal(td_dev_diagnostic_status(NULL), TD_OK);
  td_dev_diagnostic d;
  memset(&d, 0, sizeof d);
  assert_int_equal(td_dev_diagnostic_status(&d), TD_OK);
  d.state = 2;
  d.rank = 5;
  d.owner = 5;
  d.block = 17;
  d.thread = 64;
  d.cmp = TD_CMP_EQ;
  d.offset = UINT64_MAX;
  d.expected = 9;
  d.observed = 2;
  d.waited_ns = 1500000000u;
  assert_int_equal(td_dev_diagnostic_status(&d), TD_ERR_TIMEOUT);
  const char *msg = td_last_error();
  assert_non_null(strstr(msg, "rank 5 (block 17, thread 64)"));
  assert_non_null(strstr(msg, "after 1500 ms"));
  assert_non_null(strstr(msg, "a word outside the symmetric heap"));
  assert_non_null(strstr(msg, "needed value eq 9, observed 2"));
}

/* The barrier area cannot be allocated: the heap is full. */
static td_status full_heap_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  (void)arg;
  td_team *team = td_world_team(w);
  size_t used = 0, total = 0;
  td_symm_usage(w, &used, &total);
  void *all = NULL;
  RT_OK(td_symm_alloc(team, total - used, 8, &all));
  td_dev_ctx c;
  RT_CHECK(td_dev_ctx_cpu(team, &c) == TD_ERR_HEAP_EXHAUSTED);
  RT_CHECK(strstr(td_last_error(), "td_dev_ctx_cpu: allocating the barrier signal area") != NULL);
  RT_OK(td_symm_free(team, all));
  /* with room again, the same team gets its context */
  RT_OK(td_dev_ctx_cpu(team, &c));
  return TD_OK;
}
static void test_ctx_heap_exhausted(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 64 << 10;
  assert_int_equal(td_local_world_run(2, &o, full_heap_rank, NULL), TD_OK);
}

/* Rank 0 fails; rank 1's device-API wait ends with TD_ERR_PEER_FAILED naming
 * it, long before the deadline. */
static td_status fail_or_wait_rank(td_world *w, int rank, void *arg) {
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(td_world_team(w), &c));
  uint64_t *sig = NULL;
  RT_OK(td_symm_alloc(td_world_team(w), sizeof *sig, 8, (void **)&sig));
  *sig = 0;
  RT_OK(td_dev_barrier_all_block(&c));
  if (rank == 0)
    return td__error(TD_ERR_INVALID_ARG, "rank 0 gives up on purpose");
  td_status st = td_dev_signal_wait_until(&c, sig, TD_CMP_EQ, 1);
  int *seen = arg;
  *seen = st == TD_ERR_PEER_FAILED && strstr(td_last_error(), "rank 0 failed") != NULL;
  return st;
}
static void test_wait_sees_peer_failure(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 30000;
  int seen = 0;
  assert_int_equal(td_local_world_run(2, &o, fail_or_wait_rank, &seen), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "gives up on purpose"));
  assert_true(seen);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ctx_null_arguments), cmocka_unit_test(test_ctx_null_out),
      cmocka_unit_test(test_ctx_team_too_large), cmocka_unit_test(test_foreign_context),
      cmocka_unit_test(test_deadline_diagnostic), cmocka_unit_test(test_diagnostic_status),
      cmocka_unit_test(test_ctx_heap_exhausted),  cmocka_unit_test(test_wait_sees_peer_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
