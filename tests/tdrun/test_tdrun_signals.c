/* SPDX-License-Identifier: Apache-2.0
 * Signals sent to tdrun reach every rank: SIGTERM and SIGINT are forwarded,
 * tdrun exits with 128+signal, and no rank or grandchild is left (also when
 * the ranks ignore the signal: tdrun sends SIGKILL after a grace). When tdrun
 * itself is killed with SIGKILL, its ranks die with it. --timeout
 * stops a job that runs too long with exit status 124. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tdrun/tdrun_test_util.h"

static void signal_job(int sig, const char *spec, const char *want_message) {
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", "3", NULL};
  const char *specs[] = {spec, NULL};
  int out_fd, err_fd;
  pid_t pid = tdt_start_helper(dir, opts, specs, &out_fd, &err_fd);
  /* Signal only once every rank runs (and has recorded its pids). */
  assert_int_equal(tdt_wait_files(dir, "ready.", 3), 0);
  assert_int_equal(kill(pid, sig), 0);
  tdt_result res;
  tdt_finish(pid, out_fd, err_fd, &res);
  assert_int_equal(tdt_exit_code(&res), 128 + sig);
  assert_non_null(strstr(res.err, want_message));
  assert_null(strstr(res.err, "timed out"));
  assert_int_equal(tdt_expect_all_gone(dir, 3), 6);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_sigterm_forwarded(void **state) {
  (void)state;
  signal_job(SIGTERM, "*=child+sleep", "tdrun: got SIGTERM; forwarding it to all ranks\n");
}

static void test_sigint_forwarded(void **state) {
  (void)state;
  signal_job(SIGINT, "*=child+sleep", "tdrun: got SIGINT; forwarding it to all ranks\n");
}

static void test_signal_ignored_by_ranks(void **state) {
  (void)state;
  signal_job(SIGTERM, "*=child+ignore_term+sleep", "tdrun: got SIGTERM; forwarding it to all ranks\n");
}

static void test_tdrun_killed(void **state) {
  (void)state;
  /* SIGKILL cannot be forwarded: the kernel kills the ranks (PR_SET_PDEATHSIG). */
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", "3", NULL};
  const char *specs[] = {"*=sleep", NULL};
  int out_fd, err_fd;
  pid_t pid = tdt_start_helper(dir, opts, specs, &out_fd, &err_fd);
  assert_int_equal(tdt_wait_files(dir, "ready.", 3), 0);
  assert_int_equal(kill(pid, SIGKILL), 0);
  tdt_result res;
  tdt_finish(pid, out_fd, err_fd, &res);
  assert_true(WIFSIGNALED(res.status));
  /* This process is a subreaper: the orphaned ranks come here to be reaped. */
  assert_int_equal(tdt_expect_all_gone(dir, 3), 3);
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_timeout(void **state) {
  (void)state;
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "0.3", "-n", "2", NULL};
  const char *specs[] = {"*=child+sleep", NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  assert_int_equal(tdt_exit_code(&res), 124);
  assert_non_null(strstr(res.err, "tdrun: job timed out after 0.3 s (--timeout); stopping 2 running ranks\n"));
  tdt_expect_all_gone(dir, 2);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

int main(void) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sigterm_forwarded),
      cmocka_unit_test(test_sigint_forwarded),
      cmocka_unit_test(test_signal_ignored_by_ranks),
      cmocka_unit_test(test_tdrun_killed),
      cmocka_unit_test(test_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
