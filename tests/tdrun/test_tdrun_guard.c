/* SPDX-License-Identifier: Apache-2.0
 * When tdrun is killed with SIGKILL, what its ranks forked dies too: a rank
 * that is a shell running `sleep` in the background leaves no sleep behind
 * (PR_SET_PDEATHSIG reaches the rank only; tdrun's guard process kills the
 * ranks' process groups, guard.c), also when the SIGKILL goes to tdrun's
 * whole process group (the guard has a session of its own). A job that ends
 * normally leaves no guard; a guard that dies during the job is reported once. */
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

/* Starts `setsid tdrun -n 2 sh -c SCRIPT` (tdrun leads a group of its own,
 * as under `timeout`) where each rank's shell forks a sleep and records its
 * pid in dir/gc.RANK; waits until both are recorded. */
static pid_t start_leader(const char *dir, const char *script_tail, int *out_fd, int *err_fd) {
  char script[1024];
  snprintf(script, sizeof script, "sleep 60 & echo $! > %s/tmp.$TD_RANK && mv %s/tmp.$TD_RANK %s/gc.$TD_RANK; %s",
           dir, dir, dir, script_tail);
  /* --timeout: a failed check must not leave the job waiting for dir/go */
  char *argv[] = {"/usr/bin/setsid", (char *)tdt_tdrun(), "--timeout", "60", "-n", "2", "/bin/sh", "-c", script, NULL};
  pid_t pid = tdt_start(argv, out_fd, err_fd);
  assert_int_equal(tdt_wait_files(dir, "gc.", 2), 0);
  return pid;
}

static void test_group_kill(void **state) {
  (void)state;
  if (access("/usr/bin/setsid", X_OK) != 0)
    skip();
  char *dir = tdt_mkdtemp();
  int out_fd, err_fd;
  pid_t pid = start_leader(dir, "wait", &out_fd, &err_fd);
  pid_t gc[2] = {tdt_read_pid(dir, "gc.0"), tdt_read_pid(dir, "gc.1")};
  assert_true(gc[0] > 0 && gc[1] > 0);
  assert_int_equal(getpgid(pid), pid); /* setsid exec'd tdrun in place: it leads its group */
  assert_int_equal(killpg(pid, SIGKILL), 0); /* as `timeout -s KILL` does */
  tdt_result res;
  tdt_finish(pid, out_fd, err_fd, &res);
  assert_true(WIFSIGNALED(res.status));
  for (int i = 0; i < 2; i++) {
    if (tdt_pid_alive_after_wait(gc[i]))
      fprintf(stderr, "rank %d's sleep (pid %ld) outlived tdrun's group\n", i, (long)gc[i]);
    assert_false(tdt_pid_alive(gc[i]));
  }
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

/* The child of `parent` that is not in `parent`'s process group: the guard
 * (the ranks lead their own groups too, so look for the one whose session is
 * its own pid and that runs tdrun's program). 0 if none within 5 s. */
static pid_t find_guard(pid_t parent) {
  char cmd[128], line[256];
  snprintf(cmd, sizeof cmd, "ps -o pid=,sid=,args= --ppid %ld", (long)parent);
  for (int tries = 0; tries < 250; tries++) {
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    pid_t found = 0;
    while (fgets(line, sizeof line, p)) {
      long cpid = 0, sid = 0;
      if (sscanf(line, "%ld %ld", &cpid, &sid) == 2 && cpid == sid && strstr(line, "tdrun"))
        found = (pid_t)cpid;
    }
    pclose(p);
    if (found)
      return found;
    usleep(20000);
  }
  return 0;
}

static void test_guard_death_reported(void **state) {
  (void)state;
  char *dir = tdt_mkdtemp();
  char tail[512];
  snprintf(tail, sizeof tail, "while [ ! -e %s/go ]; do sleep 0.05; done; kill $!", dir);
  int out_fd, err_fd;
  pid_t pid = start_leader(dir, tail, &out_fd, &err_fd);
  pid_t guard = find_guard(pid);
  assert_true(guard > 0);
  assert_int_not_equal(getsid(guard), getsid(pid)); /* a session of its own */
  assert_int_equal(kill(guard, SIGKILL), 0);
  for (int i = 0; i < 250 && tdt_pid_alive(guard); i++)
    usleep(20000);
  char go[512];
  snprintf(go, sizeof go, "%s/go", dir);
  FILE *f = fopen(go, "w");
  assert_non_null(f);
  fclose(f);
  tdt_result res;
  tdt_finish(pid, out_fd, err_fd, &res);
  assert_int_equal(tdt_exit_code(&res), 0); /* not fatal */
  const char *msg = strstr(res.err, "tdrun: its guard process (pid ");
  if (!msg || !strstr(msg, "was killed by signal 9 (SIGKILL); the job goes on"))
    fail_msg("stderr: %s", res.err);
  assert_null(strstr(msg + 1, "tdrun: its guard process")); /* said once */
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
      cmocka_unit_test(test_group_kill),
      cmocka_unit_test(test_guard_death_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
