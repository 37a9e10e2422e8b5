/* SPDX-License-Identifier: Apache-2.0
 * td_link_bench (bench/link_bench.cu), what can be checked without GPUs:
 * every malformed option exits 2 naming the option and the value, --help
 * exits 0 with the usage, and with no GPU visible (CUDA_VISIBLE_DEVICES
 * empty) it refuses with exit 2 and says it needs two. The measurements
 * themselves run on the GPU machine (scripts/gpu-multi.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "cli_test_util.h"

static int setup(void **state) {
  (void)state;
  const char *dir = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/td_link_bench", dir ? dir : ".");
  return 0;
}

static void test_option_errors(void **state) {
  (void)state;
  expect_usage_error("--iters 5", "--iters needs a valid value (got '5')");
  expect_usage_error("--iters 20x", "--iters needs a valid value (got '20x')");
  expect_usage_error("--warmup -1", "--warmup needs a valid value (got '-1')");
  expect_usage_error("--bytes 12Q", "--bytes needs a valid value (got '12Q')");
  expect_usage_error("--bytes 1K", "--bytes needs a valid value (got '1K')"); /* under one page */
  expect_usage_error("--bytes 100G", "--bytes needs a valid value (got '100G')");
  expect_usage_error("--gpus 1", "--gpus needs a valid value (got '1')");
  expect_usage_error("--json", "--json needs a value");
  /* a valued option followed by another option: the option is not taken as the value */
  expect_usage_error("--json --nccl", "--json needs a value");
  expect_usage_error("--bytes --iters 20", "--bytes needs a value");
  expect_usage_error("--json /nonexistent/dir/x.json", "--json /nonexistent/dir/x.json: directory /nonexistent/dir "
                                                        "does not exist");
  expect_usage_error("--json /tmp", "--json /tmp is a directory");
  expect_usage_error("--json=", "--json needs a file name");
  expect_usage_error("--bytes 5000", "--bytes 5000 is 5000 bytes, not a multiple of 4096 (e.g. 4096 or 8192)");
  expect_usage_error("--bytes=12Q", "--bytes needs a valid value (got '12Q')");
  expect_usage_error("--iters 20 --iters 30", "--iters given twice");
  expect_usage_error("--nccl=1", "option --nccl takes no value");
  expect_usage_error("--frobnicate", "unknown option --frobnicate");
  /* every refusal shows the usage, so the allowed ranges are one read away */
  expect_usage_error("--gpus 99", "--gpus     use GPUs 0..N-1 (2..16, default all)");
}

static void test_help(void **state) {
  (void)state;
  static char out[1 << 14];
  assert_int_equal(run("--help", out, sizeof out), 0);
  assert_non_null(strstr(out, "usage: td_link_bench"));
  assert_non_null(strstr(out, "--nccl"));
}

static void test_needs_two_gpus(void **state) {
  (void)state;
  static char out[1 << 14];
  char cmd[4200];
  /* no GPU visible: the count is 0 whatever the machine has */
  snprintf(cmd, sizeof cmd, "env CUDA_VISIBLE_DEVICES= '%s' --iters 20 2>&1", tdist_bin);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int st = pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(out, "needs at least 2 GPUs, found 0"))
    fprintf(stderr, "status %d, output:\n%s\n", st, out);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  assert_non_null(strstr(out, "needs at least 2 GPUs, found 0"));
}

/* --opt=value is read as `--opt value` (as tdist): these reach the GPU count, which is 0 here, and the
 * refusal carries CUDA's own reason. */
static void test_equals_form_and_cuda_reason(void **state) {
  (void)state;
  static char out[1 << 14];
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "env CUDA_VISIBLE_DEVICES= '%s' --bytes=4M --iters=20 --json=/tmp/td_lb_never.json 2>&1",
           tdist_bin);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int st = pclose(p);
  if (!strstr(out, "(cudaGetDeviceCount: "))
    fprintf(stderr, "status %d, output:\n%s\n", st, out);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  assert_non_null(strstr(out, "needs at least 2 GPUs, found 0 (cudaGetDeviceCount: "));
  assert_null(strstr(out, "unknown option"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_option_errors),
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_needs_two_gpus),
      cmocka_unit_test(test_equals_form_and_cuda_reason),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
