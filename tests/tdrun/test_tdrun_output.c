/* SPDX-License-Identifier: Apache-2.0
 * tdrun's output relay: every line of rank R appears whole, once, prefixed
 * "[R] ", in the rank's own order, on the stream the rank wrote it to; a
 * partial last line is written at the end; --no-prefix and -q drop the prefix. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdrun/tdrun_test_util.h"

enum { NRANKS = 3, NLINES = 300 };

/* Checks that `text` holds exactly the lines the helper prints (print:N) and
 * nothing else, prefixed or not. */
static void check_lines(const char *text, int is_err, int prefix) {
  int next[NRANKS] = {0}, tails[NRANKS] = {0};
  char payload[NRANKS][201];
  for (int r = 0; r < NRANKS; r++) {
    memset(payload[r], 'a' + r, 200);
    payload[r][200] = '\0';
  }
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    assert_non_null(nl); /* tdrun ends every line, partial ones too */
    char line[512];
    size_t len = (size_t)(nl - p);
    assert_true(len < sizeof line);
    memcpy(line, p, len);
    line[len] = '\0';
    p = nl + 1;
    int r = -1, r2 = -1, k = -1, used = 0;
    const char *body = line;
    if (prefix) {
      assert_int_equal(sscanf(line, "[%d] %n", &r, &used), 1);
      assert_true(used > 0);
      body = line + used;
    }
    char rest[256] = "";
    if (is_err) {
      assert_int_equal(sscanf(body, "rank %d err %d%255s", &r2, &k, rest), 2);
    } else if (strstr(body, " tail")) {
      assert_int_equal(sscanf(body, "rank %d tail%255s", &r2, rest), 1);
      assert_true(r2 >= 0 && r2 < NRANKS);
      tails[r2]++;
      assert_int_equal(next[r2], NLINES); /* the tail comes after every full line */
      if (prefix)
        assert_int_equal(r, r2);
      continue;
    } else {
      assert_int_equal(sscanf(body, "rank %d line %d %255s", &r2, &k, rest), 3);
      assert_string_equal(rest, payload[r2]);
    }
    assert_true(r2 >= 0 && r2 < NRANKS);
    if (prefix)
      assert_int_equal(r, r2);
    assert_int_equal(k, next[r2]);
    next[r2]++;
  }
  for (int r = 0; r < NRANKS; r++) {
    assert_int_equal(next[r], NLINES);
    assert_int_equal(tails[r], is_err ? 0 : 1);
  }
}

static void run_and_check(const char *flag) {
  char *dir = tdt_mkdtemp();
  char count[32], spec[64];
  snprintf(count, sizeof count, "%d", NRANKS);
  snprintf(spec, sizeof spec, "*=print:%d", NLINES);
  const char *opts[] = {"-n", count, flag, NULL};
  const char *specs[] = {spec, NULL};
  tdt_result res;
  tdt_run_helper(dir, opts, specs, &res);
  assert_int_equal(tdt_exit_code(&res), 0);
  check_lines(res.out, 0, flag == NULL);
  check_lines(res.err, 1, flag == NULL);
  tdt_result_free(&res);
  tdt_rmdir(dir);
}

static void test_prefixed_lines(void **state) {
  (void)state;
  run_and_check(NULL);
}

static void test_no_prefix(void **state) {
  (void)state;
  run_and_check("--no-prefix");
  run_and_check("-q");
}

static void test_program_arguments_passed(void **state) {
  (void)state;
  char *argv[] = {(char *)tdt_tdrun(), "-n", "2", "/bin/sh", "-c", "echo \"$0:$1\"", "a b", "-n", NULL};
  tdt_result res;
  tdt_run(argv, &res);
  assert_int_equal(tdt_exit_code(&res), 0);
  assert_non_null(strstr(res.out, "[0] a b:-n\n"));
  assert_non_null(strstr(res.out, "[1] a b:-n\n"));
  tdt_result_free(&res);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prefixed_lines),
      cmocka_unit_test(test_no_prefix),
      cmocka_unit_test(test_program_arguments_passed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
