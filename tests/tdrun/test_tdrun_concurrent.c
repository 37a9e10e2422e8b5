/* SPDX-License-Identifier: Apache-2.0
 * Two tdrun jobs at once do not collide: their ranks meet (each waits until
 * the other job's ranks are running too), each job gets its own TD_JOB_ID,
 * both succeed, and each removes its own shared memory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdrun/tdrun_test_util.h"

static void test_two_jobs_at_once(void **state) {
  (void)state;
  char *meet = tdt_mkdtemp();
  setenv("TDRUN_TEST_MEET", meet, 1);
  setenv("TDRUN_TEST_MEET_COUNT", "6", 1); /* 3 ranks in each job */
  char *dirs[2] = {tdt_mkdtemp(), tdt_mkdtemp()};
  const char *opts[] = {"--timeout", "60", "-n", "3", NULL};
  const char *specs[] = {"*=shm+meet", NULL};
  pid_t pids[2];
  int out_fd[2], err_fd[2];
  for (int j = 0; j < 2; j++)
    pids[j] = tdt_start_helper(dirs[j], opts, specs, &out_fd[j], &err_fd[j]);
  char *ids[2];
  for (int j = 0; j < 2; j++) {
    tdt_result res;
    tdt_finish(pids[j], out_fd[j], err_fd[j], &res);
    if (tdt_exit_code(&res) != 0)
      fprintf(stderr, "job %d stderr:\n%s\n", j, res.err);
    assert_int_equal(tdt_exit_code(&res), 0);
    tdt_result_free(&res);
    ids[j] = tdt_read_file(dirs[j], "job.0");
    assert_non_null(ids[j]);
    assert_int_equal(tdt_count_job_shm(ids[j]), 0);
    tdt_expect_all_gone(dirs[j], 3);
  }
  assert_string_not_equal(ids[0], ids[1]);
  for (int j = 0; j < 2; j++) {
    free(ids[j]);
    tdt_rmdir(dirs[j]);
  }
  tdt_rmdir(meet);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_jobs_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
