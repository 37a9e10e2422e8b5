/* SPDX-License-Identifier: Apache-2.0
 * tdrun's exit status and message when a rank fails: a non-zero exit gives
 * that status, a signal gives 128+signal, the message names the rank and how
 * it ended, and the other ranks are stopped (tdrun runs with --timeout 60, so
 * ending with the rank's status, not 124, shows they did not run on). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tdrun/tdrun_test_util.h"

static void run_and_check(const char *n, const char *const *specs, int want_code, const char *want_message) {
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", n, NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  if (tdt_exit_code(&res) != want_code)
    fprintf(stderr, "tdrun stderr:\n%s\n", res.err);
  assert_int_equal(tdt_exit_code(&res), want_code);
  if (want_message) {
    assert_non_null(strstr(res.err, want_message));
    assert_null(strstr(res.err, "timed out"));
  } else {
    assert_string_equal(res.err, "");
  }
  /* Every rank wrote its pid before anything failed; none may be left. */
  assert_int_equal(tdt_expect_all_gone(dir, atoi(n)), atoi(n));
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_all_succeed(void **state) {
  (void)state;
  const char *specs[] = {"*=exit:0", NULL};
  run_and_check("3", specs, 0, NULL);
}

static void test_rank_exits_nonzero(void **state) {
  (void)state;
  const char *specs[] = {"*=sleep", "1=exit:3", NULL};
  run_and_check("4", specs, 3, "tdrun: rank 1 exited with status 3; stopping the other 3 ranks\n");
}

static void test_single_rank_exits_nonzero(void **state) {
  (void)state;
  const char *specs[] = {"0=exit:7", NULL};
  run_and_check("1", specs, 7, "tdrun: rank 0 exited with status 7\n");
}

static void test_rank_killed_by_signal(void **state) {
  (void)state;
  const char *specs[] = {"*=sleep", "2=kill9", NULL};
  run_and_check("3", specs, 128 + 9, "tdrun: rank 2 was killed by signal 9 (SIGKILL); stopping the other 2 ranks\n");
}

static void test_ranks_ignoring_sigterm_are_killed(void **state) {
  (void)state;
  /* SIGTERM does not stop these ranks; tdrun's SIGKILL after the grace must. */
  const char *specs[] = {"*=ignore_term+sleep", "0=exit:5", NULL};
  run_and_check("3", specs, 5, "tdrun: rank 0 exited with status 5; stopping the other 2 ranks\n");
}

static void test_first_failure_decides(void **state) {
  (void)state;
  /* Ranks stopped by tdrun after the failure are not reported as failures. */
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", "4", NULL};
  const char *specs[] = {"*=sleep", "3=exit:9", NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  assert_int_equal(tdt_exit_code(&res), 9);
  assert_non_null(strstr(res.err, "tdrun: rank 3 exited with status 9"));
  assert_null(strstr(res.err, "signal 15"));
  assert_int_equal(tdt_count_lines(res.err), 1);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_root_cause_not_collateral(void **state) {
  (void)state;
  /* Rank 7 is killed; the others exit with status 4 as soon as they see it
   * dead, as ranks do on TD_ERR_PEER_FAILED. However waitpid orders them,
   * tdrun must name rank 7's signal, not a collateral exit. */
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", "8", NULL};
  const char *specs[] = {"*=after_dead:7+exit:4", "7=kill9", NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  if (tdt_exit_code(&res) != 128 + 9)
    fprintf(stderr, "tdrun stderr:\n%s\n", res.err);
  assert_int_equal(tdt_exit_code(&res), 128 + 9);
  assert_non_null(strstr(res.err, "tdrun: rank 7 was killed by signal 9 (SIGKILL)"));
  assert_null(strstr(res.err, "exited with status 4"));
  /* The count of ranks to stop, when given, is of ranks still running: never more than 7. */
  const char *stop = strstr(res.err, "stopping the other ");
  if (stop)
    assert_true(atoi(stop + strlen("stopping the other ")) <= 7);
  assert_int_equal(tdt_count_lines(res.err), 1);
  assert_int_equal(tdt_expect_all_gone(dir, 8), 8);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_program_cannot_execute(void **state) {
  (void)state;
  /* Executable, but its interpreter does not exist: execv itself fails. */
  char *dir = tdt_mkdtemp();
  char path[4096];
  snprintf(path, sizeof path, "%s/bad-script", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("#!/nonexistent/interpreter\n", f);
  fclose(f);
  chmod(path, 0755);
  char *argv[] = {(char *)tdt_tdrun(), "-n", "2", path, NULL};
  tdt_result res;
  tdt_run(argv, &res);
  assert_int_equal(tdt_exit_code(&res), 127);
  char want[4200];
  snprintf(want, sizeof want, "cannot execute '%s': No such file or directory", path);
  assert_non_null(strstr(res.err, want));
  assert_non_null(strstr(res.err, "exited with status 127"));
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_succeed),
      cmocka_unit_test(test_rank_exits_nonzero),
      cmocka_unit_test(test_single_rank_exits_nonzero),
      cmocka_unit_test(test_rank_killed_by_signal),
      cmocka_unit_test(test_ranks_ignoring_sigterm_are_killed),
      cmocka_unit_test(test_first_failure_decides),
      cmocka_unit_test(test_root_cause_not_collateral),
      cmocka_unit_test(test_program_cannot_execute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
