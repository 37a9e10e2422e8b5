/* SPDX-License-Identifier: Apache-2.0
 * tdrun removes the job's shared memory (/dev/shm/tdist-<TD_JOB_ID>*) once
 * every rank has ended, also when a rank was killed by SIGKILL and could not
 * clean up, and the job id is unique and made of [A-Za-z0-9_-] only. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdrun/tdrun_test_util.h"

/* Reads the job id every rank recorded; all must agree. Returns it (malloc'd). */
static char *job_id_of(const char *dir, int nranks) {
  char *id = tdt_read_file(dir, "job.0");
  assert_non_null(id);
  for (int r = 1; r < nranks; r++) {
    char name[32];
    snprintf(name, sizeof name, "job.%d", r);
    char *other = tdt_read_file(dir, name);
    assert_non_null(other);
    assert_string_equal(other, id);
    free(other);
  }
  assert_true(strlen(id) > 0);
  assert_int_equal(strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"), strlen(id));
  return id;
}

static void run_and_check(const char *const *specs, int want_code) {
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", "3", NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  assert_int_equal(tdt_exit_code(&res), want_code);
  char *id = job_id_of(dir, 3);
  assert_int_equal(tdt_count_job_shm(id), 0);
  tdt_expect_all_gone(dir, 3);
  free(id);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_segments_of_killed_rank_removed(void **state) {
  (void)state;
  const char *specs[] = {"*=shm+sleep", "1=shm+kill9", NULL};
  run_and_check(specs, 128 + 9);
}

static void test_segments_of_successful_job_removed(void **state) {
  (void)state;
  const char *specs[] = {"*=shm+exit:0", NULL};
  run_and_check(specs, 0);
}

static void test_other_jobs_segments_kept(void **state) {
  (void)state;
  /* A segment of another job (a name tdrun never generates for this one) survives. */
  char name[64], path[96];
  snprintf(name, sizeof name, "tdrun-test-other-job-%ld", (long)getpid());
  snprintf(path, sizeof path, "/dev/shm/tdist-%s", name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  const char *specs[] = {"*=shm+exit:0", NULL};
  run_and_check(specs, 0);
  assert_int_equal(tdt_count_job_shm(name), 1);
  remove(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_segments_of_killed_rank_removed),
      cmocka_unit_test(test_segments_of_successful_job_removed),
      cmocka_unit_test(test_other_jobs_segments_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
