/* SPDX-License-Identifier: Apache-2.0
 * td_plan_parse refuses what it used to misread silently: versions with
 * trailing text, a fraction or a sign, unquoted tokens longer than 255
 * characters (once truncated), \x escapes without two hex digits, and
 * numbers with a '+' sign. Each is TD_ERR_PARSE naming line:col. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tdist/tdist.h"

static void expect_parse_error(const char *text, const char *needle) {
  td_plan *p = NULL;
  assert_int_equal(td_plan_parse(text, &p), TD_ERR_PARSE);
  assert_null(p);
  if (!strstr(td_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", td_last_error(), needle);
}

static void test_versions(void **state) {
  (void)state;
  expect_parse_error("tdist-plan 1abc\nranks 1\n", "line 1:12: version '1abc' is not supported");
  expect_parse_error("tdist-plan 1.9\nranks 1\n", "line 1:12: version '1.9' is not supported");
  expect_parse_error("tdist-plan +1\nranks 1\n", "line 1:12: version '+1' is not supported");
  td_plan *p = NULL;
  assert_int_equal(td_plan_parse("tdist-plan 1\nranks 1\n", &p), TD_OK);
  td_plan_destroy(p);
}

static void test_long_token(void **state) {
  (void)state;
  char text[2048];
  int n = snprintf(text, sizeof text, "tdist-plan 1\nranks 1\nbuffer 0 \"x\" local f32 ");
  for (int i = 0; i < 255; i++)
    text[n++] = '0';
  snprintf(text + n, sizeof text - (size_t)n, "7 4\n");
  expect_parse_error(text, "line 3:24: token longer than 255 characters");
}

static void test_hex_escapes(void **state) {
  (void)state;
  expect_parse_error("tdist-plan 1\nranks 1\nsignal 0 \"a\\x-1\"\n", "bad escape \\x-1; allowed \\x01 to \\xff");
  expect_parse_error("tdist-plan 1\nranks 1\nsignal 0 \"a\\x+1\"\n", "line 3:");
  expect_parse_error("tdist-plan 1\nranks 1\nsignal 0 \"a\\x00\"\n", "bad escape \\x00");
  td_plan *p = NULL;
  assert_int_equal(td_plan_parse("tdist-plan 1\nranks 1\nsignal 0 \"a\\x7e\"\n", &p), TD_OK);
  assert_string_equal(td_plan_signal_name(p, 0), "a~");
  td_plan_destroy(p);
}

static void test_signed_numbers(void **state) {
  (void)state;
  const char *task = "tdist-plan 1\nranks 1\nsignal 0 \"s\"\ntask 0 0 nop comm op 0 alpha 0 a -1 -1 0 0 0 0 "
                     "b -1 -1 0 0 0 0 c -1 -1 0 0 0 0 deps 0 waits 1 0 ge %s raises 0 label \"\"\n";
  char text[512];
  snprintf(text, sizeof text, task, "+5");
  expect_parse_error(text, "line 4:");
  expect_parse_error(text, "expected an unsigned 64-bit integer, got '+5'");
  snprintf(text, sizeof text, task, "-0");
  expect_parse_error(text, "got '-0'");
  expect_parse_error("tdist-plan 1\nranks +2\n", "line 2:7: expected an integer from 1 to 4096, got '+2'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_long_token),
      cmocka_unit_test(test_hex_escapes),
      cmocka_unit_test(test_signed_numbers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
