/* SPDX-License-Identifier: Apache-2.0
 * tdrun's command line: every kind of bad input is refused with exit status 2,
 * before any rank starts, and a message saying what was given and what is
 * allowed; --help and --version succeed. */
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

/* Runs tdrun with up to 6 arguments; expects exit 2, no output on stdout,
 * and `message` in stderr. */
static void expect_refused(const char *message, const char *a1, const char *a2, const char *a3, const char *a4) {
  char *argv[] = {(char *)tdt_tdrun(), (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
  tdt_result res;
  tdt_run(argv, &res);
  if (!strstr(res.err, message))
    fprintf(stderr, "expected \"%s\" in stderr, got:\n%s\n", message, res.err);
  assert_int_equal(tdt_exit_code(&res), 2);
  assert_non_null(strstr(res.err, message));
  assert_non_null(strstr(res.err, "usage: tdrun -n N"));
  assert_string_equal(res.out, "");
  tdt_result_free(&res);
}

static void test_rank_count_zero(void **state) {
  (void)state;
  expect_refused("tdrun: -n needs the number of ranks: a whole number from 1 to 4096, not '0'", "-n", "0", "true",
                 NULL);
}

static void test_rank_count_not_a_number(void **state) {
  (void)state;
  expect_refused("-n needs the number of ranks: a whole number from 1 to 4096, not 'abc'", "-n", "abc", "true", NULL);
  expect_refused("--np needs the number of ranks: a whole number from 1 to 4096, not '-3'", "--np", "-3", "true", NULL);
  expect_refused("--np needs the number of ranks: a whole number from 1 to 4096, not '2x'", "--np=2x", "true", NULL,
                 NULL);
  expect_refused("-n needs the number of ranks: a whole number from 1 to 4096, not '4097'", "-n", "4097", "true", NULL);
}

static void test_rank_count_missing(void **state) {
  (void)state;
  expect_refused("tdrun: -n needs a value: the number of ranks, from 1 to 4096", "-n", NULL, NULL, NULL);
  expect_refused("tdrun: -n N is required: the number of ranks to start, from 1 to 4096", "true", NULL, NULL, NULL);
}

static void test_program_missing(void **state) {
  (void)state;
  expect_refused("tdrun: no program given: name the program each rank runs, after the options", "-n", "2", NULL, NULL);
  expect_refused("tdrun: no program given", "-n", "2", "--", NULL);
}

static void test_unknown_option(void **state) {
  (void)state;
  expect_refused("tdrun: unknown option '--bogus' (allowed: -n/--np N, --timeout SEC", "--bogus", "-n", "2", "true");
  expect_refused("tdrun: unknown option '-x'", "-n", "2", "-x", "true");
}

static void test_program_not_found(void **state) {
  (void)state;
  expect_refused("tdrun: program 'tdrun-no-such-program' not found in PATH (give a path such as "
                 "./tdrun-no-such-program, or a name found in PATH)",
                 "-n", "2", "tdrun-no-such-program", NULL);
  expect_refused("tdrun: program '/nonexistent/prog' does not exist", "-n", "2", "/nonexistent/prog", NULL);
}

static void test_program_not_executable(void **state) {
  (void)state;
  char *dir = tdt_mkdtemp();
  char path[4096];
  snprintf(path, sizeof path, "%s/plain-file", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("not a program\n", f);
  fclose(f);
  chmod(path, 0644);
  char message[4200];
  snprintf(message, sizeof message,
           "tdrun: program '%s' is not executable (need a regular file with execute permission)", path);
  expect_refused(message, "-n", "2", path, NULL);
  snprintf(message, sizeof message, "tdrun: program '%s' is a directory", dir);
  expect_refused(message, "-n", "1", dir, NULL);
  tdt_rmdir(dir);
}

static void test_bad_timeout(void **state) {
  (void)state;
  expect_refused("tdrun: --timeout needs a number of seconds greater than 0 (up to 1e7), not 'abc'", "--timeout",
                 "abc", "-n", "1");
  expect_refused("tdrun: --timeout needs a number of seconds greater than 0 (up to 1e7), not '0'", "--timeout=0",
                 "-n", "1", "true");
  expect_refused("tdrun: --timeout needs a value", "-n", "1", "--timeout", NULL);
}

static void test_help_and_version(void **state) {
  (void)state;
  char *help[] = {(char *)tdt_tdrun(), "--help", NULL};
  tdt_result res;
  tdt_run(help, &res);
  assert_int_equal(tdt_exit_code(&res), 0);
  assert_non_null(strstr(res.out, "usage: tdrun -n N [options] [--] PROGRAM [ARGS...]"));
  assert_non_null(strstr(res.out, "--timeout SEC"));
  assert_string_equal(res.err, "");
  tdt_result_free(&res);
  char *version[] = {(char *)tdt_tdrun(), "--version", NULL};
  tdt_run(version, &res);
  assert_int_equal(tdt_exit_code(&res), 0);
  assert_non_null(strstr(res.out, "tdrun (tdist) "));
  tdt_result_free(&res);
}

static void test_option_given_twice(void **state) {
  (void)state;
  expect_refused("tdrun: the number of ranks is given twice (-n and -n); give -n once", "-n", "2", "-n", "3");
  expect_refused("the number of ranks is given twice (-n2 and --np=3)", "-n2", "--np=3", "true", NULL);
  expect_refused("tdrun: --timeout is given twice ('--timeout=5' and '--timeout'); give it once", "--timeout=5",
                 "--timeout", "6", "true");
  expect_refused("-n needs the number of ranks: a whole number from 1 to 4096, not ' 2'", "-n", " 2", "true", NULL);
  expect_refused("--timeout needs a number of seconds greater than 0 (up to 1e7), not ' 5'", "--timeout", " 5",
                 "true", NULL);
}

static void test_option_spellings(void **state) {
  (void)state;
  /* -n N, -nN, --np=N, -np N and a program after -- all start the job. */
  const char *forms[][3] = {{"-n", "2", NULL}, {"-n2", NULL, NULL}, {"--np=2", NULL, NULL}, {"-np", "2", NULL}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    char *argv[8] = {(char *)tdt_tdrun()};
    int k = 1;
    for (int j = 0; j < 3 && forms[i][j]; j++)
      argv[k++] = (char *)forms[i][j];
    argv[k++] = "--";
    argv[k++] = "echo";
    argv[k++] = "ok";
    tdt_result res;
    tdt_run(argv, &res);
    assert_int_equal(tdt_exit_code(&res), 0);
    assert_non_null(strstr(res.out, "[0] ok\n"));
    assert_non_null(strstr(res.out, "[1] ok\n"));
    assert_int_equal(tdt_count_lines(res.out), 2);
    tdt_result_free(&res);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_count_zero),      cmocka_unit_test(test_rank_count_not_a_number),
      cmocka_unit_test(test_rank_count_missing),   cmocka_unit_test(test_program_missing),
      cmocka_unit_test(test_unknown_option),       cmocka_unit_test(test_program_not_found),
      cmocka_unit_test(test_program_not_executable), cmocka_unit_test(test_bad_timeout),
      cmocka_unit_test(test_help_and_version),     cmocka_unit_test(test_option_spellings),
      cmocka_unit_test(test_option_given_twice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
