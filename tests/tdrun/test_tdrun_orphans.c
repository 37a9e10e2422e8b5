/* SPDX-License-Identifier: Apache-2.0
 * tdrun leaves no process behind: grandchildren in a rank's process group,
 * grandchildren that left it (setsid), and grandchildren of ranks that
 * succeeded are all gone, checked by pid, when tdrun returns. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tdrun/tdrun_test_util.h"

static void run_and_check(const char *const *specs, int want_code) {
  char *dir = tdt_mkdtemp();
  const char *opts[] = {"--timeout", "60", "-n", "3", NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  assert_int_equal(tdt_exit_code(&res), want_code);
  /* 3 ranks and 3 grandchildren. */
  assert_int_equal(tdt_expect_all_gone(dir, 3), 6);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_grandchildren_of_failed_job(void **state) {
  (void)state;
  const char *specs[] = {"*=child+sleep", "0=child+exit:4", NULL};
  run_and_check(specs, 4);
}

static void test_grandchildren_that_left_the_group(void **state) {
  (void)state;
  const char *specs[] = {"*=escape+sleep", "1=escape+kill9", NULL};
  run_and_check(specs, 128 + 9);
}

static void test_grandchildren_of_successful_job(void **state) {
  (void)state;
  /* The grandchildren hold the ranks' output pipes open: tdrun must still end. */
  const char *specs[] = {"*=child+exit:0", "2=escape+exit:0", NULL};
  run_and_check(specs, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grandchildren_of_failed_job),
      cmocka_unit_test(test_grandchildren_that_left_the_group),
      cmocka_unit_test(test_grandchildren_of_successful_job),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
