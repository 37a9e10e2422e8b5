/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: creating a launched world from the environment. Malformed or
 * inconsistent launcher variables (tdrun's, torchrun's, Open MPI's) and
 * configuration variables give TD_ERR_INVALID_ARG (or UNSUPPORTED) with a
 * message naming the variable and its value; a process with no variables is
 * a world of one. Runs only outside a launcher (it rewrites the environment). */
#include "runtime/rt_harness.h"

static const char *const all_vars[] = {
    "TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE", "TD_JOB_ID", "TD_TRANSPORT",
    "TD_SYMM_HEAP_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};

static int clear_env(void **state) {
  for (size_t i = 0; i < sizeof all_vars / sizeof all_vars[0]; i++)
    unsetenv(all_vars[i]);
  return 0;
}

/* Sets "NAME=value" pairs, runs td_world_init, checks status and message. */
static void expect_init(td_status want, const char *text, const char *const *pairs) {
  clear_env(NULL);
  for (int i = 0; pairs[i]; i += 2)
    setenv(pairs[i], pairs[i + 1], 1);
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  if (st != want)
    fail_msg("want %s, got %s: %s", td_status_name(want), td_status_name(st), td_last_error());
  assert_null(w);
  if (!strstr(td_last_error(), text))
    fail_msg("message '%s' lacks '%s'", td_last_error(), text);
  clear_env(NULL);
}

static void test_tdrun_vars(void **state) {
  expect_init(TD_ERR_INVALID_ARG, "TD_RANK='abc' is not a decimal integer",
              (const char *const[]){"TD_RANK", "abc", "TD_WORLD_SIZE", "2", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_RANK=4 is not below TD_WORLD_SIZE=4",
              (const char *const[]){"TD_RANK", "4", "TD_WORLD_SIZE", "4", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_WORLD_SIZE is not set",
              (const char *const[]){"TD_RANK", "0", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_WORLD_SIZE='0' is out of range",
              (const char *const[]){"TD_RANK", "0", "TD_WORLD_SIZE", "0", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_LOCAL_RANK=3 is not below TD_LOCAL_WORLD_SIZE=2",
              (const char *const[]){"TD_RANK", "1", "TD_WORLD_SIZE", "2", "TD_LOCAL_RANK", "3",
                                    "TD_LOCAL_WORLD_SIZE", "2", NULL});
  expect_init(TD_ERR_UNSUPPORTED, "2 of 4 ranks are on this host",
              (const char *const[]){"TD_RANK", "1", "TD_WORLD_SIZE", "4", "TD_LOCAL_RANK", "1",
                                    "TD_LOCAL_WORLD_SIZE", "2", NULL});
  expect_init(TD_ERR_INVALID_ARG, "transport 'local' cannot join 2 processes",
              (const char *const[]){"TD_RANK", "1", "TD_WORLD_SIZE", "2", "TD_TRANSPORT", "local", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_TRANSPORT='ib' is not allowed",
              (const char *const[]){"TD_RANK", "1", "TD_WORLD_SIZE", "2", "TD_TRANSPORT", "ib", NULL});
  expect_init(TD_ERR_INVALID_ARG, "TD_SYMM_HEAP_SIZE='12Q'",
              (const char *const[]){"TD_SYMM_HEAP_SIZE", "12Q", NULL});
}

static void test_torchrun_vars(void **state) {
  expect_init(TD_ERR_INVALID_ARG, "WORLD_SIZE is not set", (const char *const[]){"RANK", "0", NULL});
  expect_init(TD_ERR_INVALID_ARG, "RANK='-1' is out of range",
              (const char *const[]){"RANK", "-1", "WORLD_SIZE", "2", NULL});
  expect_init(TD_ERR_INVALID_ARG, "LOCAL_WORLD_SIZE=8 is larger than WORLD_SIZE=2",
              (const char *const[]){"RANK", "0", "WORLD_SIZE", "2", "LOCAL_WORLD_SIZE", "8", NULL});
}

static void test_ompi_vars(void **state) {
  expect_init(TD_ERR_INVALID_ARG, "OMPI_COMM_WORLD_SIZE='2x' is not a decimal integer",
              (const char *const[]){"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2x", NULL});
  expect_init(TD_ERR_INVALID_ARG, "OMPI_COMM_WORLD_RANK is not set",
              (const char *const[]){"OMPI_COMM_WORLD_SIZE", "2", NULL});
}

/* Variables of a job of one rank give a working world; so do options. */
static void test_valid_single(void **state) {
  clear_env(NULL);
  setenv("TD_RANK", "0", 1);
  setenv("TD_WORLD_SIZE", "1", 1);
  setenv("TD_SYMM_HEAP_SIZE", "2M", 1);
  td_world *w = NULL;
  assert_int_equal(td_world_init(NULL, &w), TD_OK);
  assert_int_equal(td_world_size(w), 1);
  size_t total = 0;
  td_symm_usage(w, NULL, &total);
  assert_int_equal(total, 2 << 20);
  assert_int_equal(td_world_finalize(w), TD_OK);
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 1 << 20;
  o.timeout_ms = 1234;
  o.transport = "nvlink";
  assert_int_equal(td_world_init(&o, &w), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "transport 'nvlink' is unknown"));
  assert_null(strstr(td_last_error(), "did you mean")); /* nothing near */
  o.transport = "SHM "; /* a near miss names the transport meant */
  assert_int_equal(td_world_init(&o, &w), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "transport 'SHM ' is unknown; allowed: local, shm (did you mean 'shm'?)"));
  o.transport = NULL;
  assert_int_equal(td_world_init(&o, &w), TD_OK);
  assert_int_equal(td_world_timeout_ms(w), 1234);
  td_symm_usage(w, NULL, &total);
  assert_int_equal(total, 1 << 20);
  assert_int_equal(td_world_finalize(w), TD_OK);
  assert_int_equal(td_world_finalize(NULL), TD_OK);
  assert_int_equal(td_world_init(NULL, NULL), TD_ERR_INVALID_ARG);
  clear_env(NULL);
}

int main(int argc, char **argv) {
  if (rt_launched())
    return 0; /* this test rewrites the launcher's variables: it runs only alone */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_tdrun_vars, clear_env),
      cmocka_unit_test_setup(test_torchrun_vars, clear_env),
      cmocka_unit_test_setup(test_ompi_vars, clear_env),
      cmocka_unit_test_setup(test_valid_single, clear_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
