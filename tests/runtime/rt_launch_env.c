/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: which launcher's variables a process believes when several
 * sets are present, and how numeric variables are read. Sets that agree are
 * fine; sets that disagree are resolved in favour of the one launcher that is
 * visibly running (mpirun's OMPI_COMM_WORLD_*, tdrun's TD_* with
 * TD_LAUNCHER=tdrun, torchrun's with TORCHELASTIC_RUN_ID), else refused naming
 * both sets and their values. Numbers: no spaces on either side, too many
 * digits is "out of range" with the range, ranks and sizes limited to the
 * largest world (4096), a lone variable of a pair names the one that is set.
 * Runs only outside a launcher (it rewrites the environment). */
#include "runtime/rt_harness.h"
#include "core/error.h"
#include "tdist/config.h"

static const char *const all_vars[] = {
    "TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE", "TD_JOB_ID", "TD_LAUNCHER", "TD_TRANSPORT",
    "TD_SYMM_HEAP_SIZE", "TD_TIMEOUT_MS", "TD_ATTACH_TIMEOUT_MS", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};

static int clear_env(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
    unsetenv(all_vars[i]);
  return 0;
}

static void set_pairs(const char *const *pairs) {
  clear_env(NULL);
  setenv("TD_SYMM_HEAP_SIZE", "1M", 1);
  for (int i = 0; pairs[i]; i += 2)
    setenv(pairs[i], pairs[i + 1], 1);
}

/* td_world_init fails with `want` and a message holding both texts. */
static void expect_init(td_status want, const char *a, const char *b, const char *const *pairs) {
  set_pairs(pairs);
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  if (st != want || !strstr(td_last_error(), a) || (b && !strstr(td_last_error(), b)))
    fail_msg("want %s with '%s' and '%s', got %s: %s", td_status_name(want), a, b ? b : "", td_status_name(st),
             td_last_error());
  assert_null(w);
  clear_env(NULL);
}

/* td_world_init succeeds with a world of `size` where this process is `rank`. */
static void expect_world(int rank, int size, const char *const *pairs) {
  set_pairs(pairs);
  setenv("TD_ATTACH_TIMEOUT_MS", "1", 1); /* a world of more than one would fail at once: it never starts */
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  if (size > 1) {
    /* Rank and size are read before any attach: a timeout naming them shows which set won. */
    char want[160];
    snprintf(want, sizeof want, rank == 0 ? "waited 1 ms (TD_ATTACH_TIMEOUT_MS) for all %d ranks" : "rank %d found",
             rank == 0 ? size : rank);
    if (st != TD_ERR_TIMEOUT || !strstr(td_last_error(), want))
      fail_msg("want a timeout with '%s', got %s: %s", want, td_status_name(st), td_last_error());
  } else {
    if (st != TD_OK)
      fail_msg("%s: %s", td_status_name(st), td_last_error());
    assert_int_equal(td_world_size(w), 1);
    assert_int_equal(td_world_finalize(w), TD_OK);
  }
  clear_env(NULL);
}

static void test_conflicting_sets(void **state) {
  (void)state;
  /* The tester's case: stale torchrun variables under mpirun -n 3. */
  expect_world(2, 3, (const char *const[]){"RANK", "0", "WORLD_SIZE", "1", "OMPI_COMM_WORLD_RANK", "2",
                                           "OMPI_COMM_WORLD_SIZE", "3", NULL});
  /* Stale TD_* (no TD_LAUNCHER) under mpirun. */
  expect_world(1, 2, (const char *const[]){"TD_RANK", "0", "TD_WORLD_SIZE", "1", "OMPI_COMM_WORLD_RANK", "1",
                                           "OMPI_COMM_WORLD_SIZE", "2", NULL});
  /* tdrun running, stale torchrun variables. */
  expect_world(1, 2, (const char *const[]){"TD_RANK", "1", "TD_WORLD_SIZE", "2", "TD_LAUNCHER", "tdrun", "RANK",
                                           "0", "WORLD_SIZE", "1", NULL});
  /* Sets that agree are fine. */
  expect_world(0, 1, (const char *const[]){"TD_RANK", "0", "TD_WORLD_SIZE", "1", "RANK", "0", "WORLD_SIZE", "1",
                                           NULL});
  /* Nobody visibly running: refused, naming both sets and values. */
  expect_init(TD_ERR_INVALID_ARG, "launcher variables disagree: tdrun (TD_RANK='0', TD_WORLD_SIZE='1') and "
                                  "torchrun (RANK='1', WORLD_SIZE='4')",
              "none is marked as running",
              (const char *const[]){"TD_RANK", "0", "TD_WORLD_SIZE", "1", "RANK", "1", "WORLD_SIZE", "4", NULL});
  /* Two running launchers: refused as well. */
  expect_init(TD_ERR_INVALID_ARG, "Open MPI (OMPI_COMM_WORLD_RANK='0', OMPI_COMM_WORLD_SIZE='2')",
              "more than one of them is marked as running",
              (const char *const[]){"TD_RANK", "1", "TD_WORLD_SIZE", "2", "TD_LAUNCHER", "tdrun",
                                    "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", NULL});
}

static void test_numbers(void **state) {
  (void)state;
  expect_init(TD_ERR_INVALID_ARG, "TD_RANK is not set, but TD_WORLD_SIZE='0' is", NULL,
              (const char *const[]){"TD_WORLD_SIZE", "0", NULL});
  expect_init(TD_ERR_INVALID_ARG, "WORLD_SIZE is not set, but RANK='3' is", NULL,
              (const char *const[]){"RANK", "3", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_WORLD_SIZE='5000' is out of range; allowed 1 to 4096", NULL,
              (const char *const[]){"TD_RANK", "0", "TD_WORLD_SIZE", "5000", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_RANK='99999999999999999999' is out of range; allowed 0 to 4095", NULL,
              (const char *const[]){"TD_RANK", "99999999999999999999", "TD_WORLD_SIZE", "2", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_RANK=' 1' is not a decimal integer", NULL,
              (const char *const[]){"TD_RANK", " 1", "TD_WORLD_SIZE", "2", NULL});
  expect_init(TD_ERR_INVALID_ARG, "OMPI_COMM_WORLD_SIZE='2 ' is not a decimal integer", NULL,
              (const char *const[]){"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2 ", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_TIMEOUT_MS='99999999999999999999' is out of range; allowed 1 to 2147483647",
              NULL, (const char *const[]){"TD_TIMEOUT_MS", "99999999999999999999", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_TIMEOUT_MS=' 100' is not a decimal integer", NULL,
              (const char *const[]){"TD_TIMEOUT_MS", " 100", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_TIMEOUT_MS='100 ' is not a decimal integer", NULL,
              (const char *const[]){"TD_TIMEOUT_MS", "100 ", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_SYMM_HEAP_SIZE=' 4M' is not a byte count", NULL,
              (const char *const[]){"TD_SYMM_HEAP_SIZE", " 4M", NULL});
  /* The table agrees with the limit. */
  setenv("TD_RANK", "4096", 1);
  int64_t v = 0;
  assert_int_equal(td_config_int("TD_RANK", &v), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "allowed 0 to 4095"));
  setenv("TD_WORLD_SIZE", "4096", 1);
  assert_int_equal(td_config_int("TD_WORLD_SIZE", &v), TD_OK);
  assert_int_equal(v, 4096);
  clear_env(NULL);
}

/* A local world's failure message names the rank once. */
static td_status failing_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  void *p = NULL;
  td_status st = td_symm_alloc(td_world_team(w), 64, rank == 1 ? 3 : 0, &p);
  return rank == 1 ? st : TD_OK; /* rank 0 fails too (told about rank 1); only rank 1 reports */
}

static void test_local_world_prefix(void **state) {
  (void)state;
  td_status st = td_local_world_run(2, NULL, failing_rank, NULL);
  assert_int_equal(st, TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "rank 1: td_symm_alloc: align=3"));
  assert_null(strstr(td_last_error(), "rank 1: rank 1:"));
}

/* td__error_prefix names a rank once: a prefix tagged "rank N: " takes the
 * same tag off the message (the executor's context around a rank's own
 * td_symm_alloc error), but not another rank's, nor a longer number's. */
static void test_error_prefix_rank_once(void **state) {
  (void)state;
  td__error(TD_ERR_TIMEOUT, "rank 3: td_symm_alloc timed out");
  td__error_prefix("rank 3: task 7 'x': ");
  assert_string_equal(td_last_error(), "rank 3: task 7 'x': td_symm_alloc timed out");
  td__error(TD_ERR_TIMEOUT, "rank 1: td_symm_alloc timed out"); /* another rank's: both stay */
  td__error_prefix("rank 3: ");
  assert_string_equal(td_last_error(), "rank 3: rank 1: td_symm_alloc timed out");
  td__error(TD_ERR_TIMEOUT, "rank 12: late");
  td__error_prefix("rank 1: x: ");
  assert_string_equal(td_last_error(), "rank 1: x: rank 12: late");
  td__error(TD_ERR_TIMEOUT, "rank 2: late");
  td__error_prefix("while waiting: "); /* untagged prefixes as before */
  assert_string_equal(td_last_error(), "while waiting: rank 2: late");
  assert_int_equal(td__rank_tag_len("rank 40: x"), 9);
  assert_int_equal(td__rank_tag_len("rank 4"), 0);
  assert_int_equal(td__rank_tag_len("rank x: "), 0);
  assert_int_equal(td__rank_tag_len("rank 4:x"), 0);
  td_clear_error();
}

int main(void) {
  if (rt_launched())
    return 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_conflicting_sets, clear_env),
      cmocka_unit_test_setup(test_numbers, clear_env),
      cmocka_unit_test_setup(test_local_world_prefix, clear_env),
      cmocka_unit_test(test_error_prefix_rank_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
