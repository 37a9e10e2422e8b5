/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce`: the limits of the case
 * lists and of the options themselves, all refused before anything runs
 * (exit 2, a message naming the option, the count or the value and what is
 * allowed): an option given twice (not "the last one wins"), --help with a
 * value, an empty --models, items named twice in --models / --m / --sizes,
 * more cases than one run takes (models x M, or sizes) instead of a silent
 * cut, and --sizes items that are not a whole number of the dtype's
 * elements (checked with the dtype in force, whichever option came first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_test_util.h"

/* "1S,2S,...,nS" (S = suffix) into buf: n distinct items. */
static const char *list_of(char *buf, size_t cap, const char *suffix, int n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 1; i <= n && len + 16 < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%d%s", i > 1 ? "," : "", i, suffix);
  return buf;
}

static void test_repeated_options(void **state) {
  (void)state;
  expect_usage_error("bench ag_gemm --ranks 2 --ranks 3", "tdist bench ag_gemm: --ranks given twice");
  expect_usage_error("bench gemm_rs --shape 8x8x8 --shape=16x8x8", "tdist bench gemm_rs: --shape given twice");
  expect_usage_error("bench gemm_ar --json /tmp/a.json --json /tmp/b.json", "--json given twice");
  expect_usage_error("bench ag_gemm --variants sm --variants ring", "--variants given twice");
  expect_usage_error("bench all_reduce --sizes 8K --sizes 16K", "--sizes given twice");
  expect_usage_error("bench ag_gemm --m 64 --m 128", "--m given twice");
  expect_usage_error("bench ag_gemm --models check --models all", "--models given twice");
  expect_usage_error("bench ag_gemm --help=1", "tdist bench ag_gemm: option --help takes no value");
}

static void test_list_items(void **state) {
  (void)state;
  expect_usage_error("bench ag_gemm --models ''", "--models expects a comma-separated list of all, check or model "
                                                  "names (llama3.1-8b");
  expect_usage_error("bench ag_gemm --models ,", "got ','");
  expect_usage_error("bench gemm_rs --models ,check", "got ',check'");
  expect_usage_error("bench gemm_rs --models cpu-small,cpu-small", "--models names cpu-small twice");
  expect_usage_error("bench ag_gemm --models all,llama3.1-8b", "--models: all already includes llama3.1-8b");
  expect_usage_error("bench ag_gemm --m 512,1024,512", "--m names 512 twice ('512,1024,512')");
  expect_usage_error("bench all_reduce --sizes 8K,8192", "--sizes names 8192 bytes twice ('8K,8192')");
  expect_usage_error("bench all_reduce --sizes ,8K", "--sizes expects a comma-separated list of byte sizes");
  expect_usage_error("bench all_reduce --sizes ,8K", "got ',8K'");
}

/* Below one element, or not a multiple of one, for the dtype in force
 * (f32 on cpu by default; --dtype after --sizes still counts). */
static void test_sizes_whole_elements(void **state) {
  (void)state;
  expect_usage_error("bench all_reduce --sizes 2", "--sizes 2: 2 bytes is less than one f32 element (4 bytes "
                     "each); give a multiple of 4");
  expect_usage_error("bench all_reduce --sizes 8K,6", "--sizes 6 (in '8K,6'): 6 bytes is not a whole number of "
                     "f32 elements (4 bytes each); give a multiple of 4");
  expect_usage_error("bench all_reduce --sizes 3 --dtype bf16", "--sizes 3: 3 bytes is not a whole number of bf16 "
                     "elements (2 bytes each); give a multiple of 2");
  static char out[1 << 16];
  /* 6 bytes are 3 bf16 elements: accepted */
  int rc = run("bench all_reduce --ranks 2 --iters 1 --warmup 0 --dtype bf16 --sizes 6 --variants none", out,
               sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "case 1/1: 6 ..."));
}

/* More cases than one run takes: refused whole, with the count and the limit, never cut short. */
static void test_case_limit(void **state) {
  (void)state;
  char ms[1024], sizes[1024], args[3072];
  /* 5 models x 20 M + the check case */
  snprintf(args, sizeof args, "bench ag_gemm --models all --m %s", list_of(ms, sizeof ms, "", 20));
  expect_usage_error(args, "tdist bench ag_gemm: --models x --m selects 101 cases; at most 64 in one run");
  snprintf(args, sizeof args, "bench gemm_rs --models all --m %s", list_of(ms, sizeof ms, "", 13));
  expect_usage_error(args, "selects 66 cases; at most 64");
  snprintf(args, sizeof args, "bench all_reduce --sizes %s", list_of(sizes, sizeof sizes, "K", 80));
  expect_usage_error(args, "tdist bench all_reduce: --sizes gives 80 sizes; at most 64 cases in one run");
  static char out[1 << 16];
  assert_int_equal(run("bench ag_gemm --help", out, sizeof out), 0);
  assert_non_null(strstr(out, "--m at most 32 values, at most 64 cases in one run"));
  /* the limits themselves are accepted: 64 sizes (not run: --json to a missing folder stops it first) */
  snprintf(args, sizeof args, "bench all_reduce --sizes %s --json /nonexistent-td-dir/x.json",
           list_of(sizes, sizeof sizes, "K", 64));
  expect_usage_error(args, "/nonexistent-td-dir");
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repeated_options),
      cmocka_unit_test(test_list_items),
      cmocka_unit_test(test_sizes_whole_elements),
      cmocka_unit_test(test_case_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
