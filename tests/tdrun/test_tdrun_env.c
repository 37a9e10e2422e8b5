/* SPDX-License-Identifier: Apache-2.0
 * The environment tdrun gives each rank: TD_RANK, TD_WORLD_SIZE,
 * TD_LOCAL_RANK, TD_LOCAL_WORLD_SIZE (one host: equal to the world values),
 * one TD_JOB_ID shared by the job's ranks, and TD_LAUNCHER=tdrun. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdrun/tdrun_test_util.h"

/* Value of "[rank] NAME=VALUE" in text, copied into out. */
static void value_of(const char *text, int rank, const char *name, char *out, size_t size) {
  char key[96];
  snprintf(key, sizeof key, "[%d] %s=", rank, name);
  const char *p = strstr(text, key);
  if (!p)
    fprintf(stderr, "no '%s' in:\n%s\n", key, text);
  assert_non_null(p);
  p += strlen(key);
  size_t len = strcspn(p, "\n");
  assert_true(len < size);
  memcpy(out, p, len);
  out[len] = '\0';
}

static void test_rank_environment(void **state) {
  (void)state;
  /* TD_RANK from the caller's environment must not leak into the ranks. */
  setenv("TD_RANK", "77", 1);
  setenv("TD_JOB_ID", "stale-id", 1);
  for (int n = 1; n <= 5; n += 4) {
    char *dir = tdt_mkdtemp();
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    const char *opts[] = {"-n", count, NULL};
    const char *specs[] = {"*=env", NULL};
    tdt_result res;
    tdt_run_helper(dir, opts, specs, &res);
    assert_int_equal(tdt_exit_code(&res), 0);
    assert_int_equal(tdt_count_lines(res.out), 6 * n);
    char job0[128];
    value_of(res.out, 0, "TD_JOB_ID", job0, sizeof job0);
    assert_string_not_equal(job0, "stale-id");
    assert_true(strlen(job0) > 0);
    assert_int_equal(strspn(job0, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"),
                     strlen(job0));
    for (int r = 0; r < n; r++) {
      char v[128], want[16];
      snprintf(want, sizeof want, "%d", r);
      value_of(res.out, r, "TD_RANK", v, sizeof v);
      assert_string_equal(v, want);
      value_of(res.out, r, "TD_LOCAL_RANK", v, sizeof v);
      assert_string_equal(v, want);
      value_of(res.out, r, "TD_WORLD_SIZE", v, sizeof v);
      assert_string_equal(v, count);
      value_of(res.out, r, "TD_LOCAL_WORLD_SIZE", v, sizeof v);
      assert_string_equal(v, count);
      value_of(res.out, r, "TD_LAUNCHER", v, sizeof v);
      assert_string_equal(v, "tdrun");
      value_of(res.out, r, "TD_JOB_ID", v, sizeof v);
      assert_string_equal(v, job0);
    }
    tdt_result_free(&res);
    tdt_rmdir(dir);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
