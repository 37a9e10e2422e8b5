/* SPDX-License-Identifier: Apache-2.0
 * Device API on the CPU: a put, get or signal naming a pe outside the team
 * writes nothing and records a diagnostic (TD_ERR_INVALID_ARG naming the
 * call and the pe), td_dev_symm_at gives NULL, td_dev_wait_until_all refuses
 * a negative count, and a wait on a word outside the symmetric heap says so
 * (not "in the control area"). */
#include "runtime/rt_harness.h"
#include "tdist/device.h"

static td_status bad_pe_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  uint64_t *buf = NULL;
  RT_OK(td_symm_alloc(team, 4 * sizeof(uint64_t), 64, (void **)&buf));
  memset(buf, 0, 4 * sizeof(uint64_t));
  RT_OK(td_team_barrier(team));
  if (rank == 0) {
    uint64_t v = 7;
    RT_CHECK(td_dev_symm_at(&c, buf, -1) == NULL);
    RT_CHECK(td_dev_symm_at(&c, buf, c.n_pes) == NULL);
    td_dev_putmem(&c, buf, &v, sizeof v, -1);
    RT_CHECK(strstr(td_last_error(), "td_dev_putmem: pe -1 is outside the team (0 to 1)") != NULL);
    td_dev_getmem(&c, &v, buf, sizeof v, c.n_pes);
    RT_CHECK(strstr(td_last_error(), "td_dev_getmem: pe 2 is outside the team") != NULL);
    RT_CHECK(v == 7);
    td_dev_signal_op(&c, &buf[1], 1, TD_SIGNAL_ADD, 63);
    RT_CHECK(strstr(td_last_error(), "td_dev_signal_op: pe 63") != NULL);
    /* The first bad call is the one the diagnostic keeps. */
    RT_CHECK(td_dev_diagnostic_status(c.diag) == TD_ERR_INVALID_ARG);
    RT_CHECK(strstr(td_last_error(), "named pe -1, outside the team (0 to 1)") != NULL);
    RT_CHECK(td_dev_wait_until_all(&c, buf, -5, TD_CMP_GE, 0, TD_SCOPE_SYS) == TD_ERR_INVALID_ARG);
    RT_CHECK(strstr(td_last_error(), "count -5 is negative") != NULL);
    RT_OK(td_dev_wait_until_all(&c, buf, 0, TD_CMP_GE, 1, TD_SCOPE_SYS)); /* nothing to wait for */
  }
  RT_OK(td_team_barrier(team));
  for (int i = 0; i < 4; i++)
    RT_CHECK(buf[i] == 0); /* nothing landed anywhere in the team */
  return td_symm_free(team, buf);
}

static void test_bad_pe(void **state) {
  (void)state;
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 1 << 20;
  assert_int_equal(td_local_world_run(2, &o, bad_pe_rank, NULL), TD_OK);
}

static td_status stack_word_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  (void)arg;
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(td_world_team(w), &c));
  uint64_t word = 0;
  RT_CHECK(td_dev_signal_wait_until(&c, &word, TD_CMP_EQ, 1) == TD_ERR_TIMEOUT);
  RT_CHECK(strstr(td_last_error(), "(not in the symmetric heap)") != NULL);
  RT_CHECK(strstr(td_last_error(), "control area") == NULL);
  return TD_OK;
}

static void test_wait_outside_heap(void **state) {
  (void)state;
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 1 << 20;
  o.timeout_ms = 100;
  assert_int_equal(td_local_world_run(1, &o, stack_word_rank, NULL), TD_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_pe),
      cmocka_unit_test(test_wait_outside_heap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
