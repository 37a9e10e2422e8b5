/* SPDX-License-Identifier: Apache-2.0
 * When tdrun is killed with SIGKILL, what its ranks forked dies too: a rank
 * that is a shell running `sleep` in the background leaves no sleep behind
 * (PR_SET_PDEATHSIG reaches the rank only; tdrun's guard process kills the
 * ranks' process groups, guard.c). A job that ends normally leaves no guard. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tdrun/tdrun_test_util.h"

static void test_grandchildren_die_with_tdrun(void **state) {
  (void)state;
  char *dir = tdt_mkdtemp();
  char script[1024];
  /* the shell forks sleep (no exec), records its pid, and waits */
  snprintf(script, sizeof script, "sleep 60 & echo $! > %s/tmp.$TD_RANK && mv %s/tmp.$TD_RANK %s/gc.$TD_RANK; "
           "wait", dir, dir, dir);
  char *argv[] = {(char *)tdt_tdrun(), "-n", "2", "/bin/sh", "-c", script, NULL};
  int out_fd, err_fd;
  pid_t pid = tdt_start(argv, &out_fd, &err_fd);
  assert_int_equal(tdt_wait_files(dir, "gc.", 2), 0);
  pid_t gc[2] = {tdt_read_pid(dir, "gc.0"), tdt_read_pid(dir, "gc.1")};
  assert_true(gc[0] > 0 && gc[1] > 0);
  assert_true(tdt_pid_alive(gc[0]) && tdt_pid_alive(gc[1]));
  assert_int_equal(kill(pid, SIGKILL), 0);
  tdt_result res;
  tdt_finish(pid, out_fd, err_fd, &res);
  assert_true(WIFSIGNALED(res.status));
  for (int i = 0; i < 2; i++) {
    if (tdt_pid_alive_after_wait(gc[i]))
      fprintf(stderr, "rank %d's sleep (pid %ld) outlived tdrun\n", i, (long)gc[i]);
    assert_false(tdt_pid_alive(gc[i]));
  }
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_no_guard_left(void **state) {
  (void)state;
  /* the guard is a fork of tdrun: its command line is tdrun's, with this tag */
  char tag[64];
  snprintf(tag, sizeof tag, "guardcheck-%ld", (long)getpid());
  char *argv[] = {(char *)tdt_tdrun(), "-n", "2", "/bin/true", tag, NULL};
  int out_fd, err_fd;
  pid_t pid = tdt_start(argv, &out_fd, &err_fd);
  tdt_result res;
  tdt_finish(pid, out_fd, err_fd, &res);
  assert_int_equal(tdt_exit_code(&res), 0);
  char line[512];
  int left = 0;
  for (int tries = 0; tries < 50; tries++) { /* a killed guard may take a moment to be reaped */
    FILE *p = popen("ps -eo pid=,args=", "r");
    assert_non_null(p);
    left = 0;
    while (fgets(line, sizeof line, p))
      if (strstr(line, tag) && strstr(line, "tdrun") && tdt_pid_alive((pid_t)atol(line)))
        left++;
    pclose(p);
    if (!left)
      break;
    usleep(20000);
  }
  assert_int_equal(left, 0);
  tdt_result_free(&res);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grandchildren_die_with_tdrun),
      cmocka_unit_test(test_no_guard_left),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
