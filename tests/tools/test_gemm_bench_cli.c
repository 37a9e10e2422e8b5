/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench (bench/gemm/gemm_bench.cu) through its binary, on any machine:
 * a bad option exits 2 with its message and the usage BEFORE the GPU probe
 * (no CUDA error in the output), --help exits 0, and a --configs item that
 * is not in the configuration table is refused there too. The parser's
 * every case is tested in test_gemm_bench_args.c. */
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
  snprintf(tdist_bin, sizeof tdist_bin, "%s/gemm_bench", dir ? dir : ".");
  return 0;
}

static void before_probe(const char *args, const char *needle) {
  static char out[1 << 16];
  expect_usage_error(args, needle);
  run(args, out, sizeof out);
  assert_null(strstr(out, "cudaGetDeviceProperties"));
  assert_non_null(strstr(out, "usage: "));
}

static void test_option_errors_before_probe(void **state) {
  (void)state;
  before_probe("--hook-modes bogus", "gemm_bench: --hook-modes expects a comma-separated list of both, wait");
  before_probe("--hook-variants 7", "gemm_bench: --hook-variants expects a comma-separated list of the variants "
                                    "compiled in (0,");
  before_probe("--stamps -5", "gemm_bench: --stamps expects a whole number 1..1000000, got '-5'");
  before_probe("--layout xyz", "gemm_bench: --layout expects nk");
  before_probe("--shapes 0x0x0", "gemm_bench: --shapes expects a comma-separated list of MxNxK");
  before_probe("--json /nonexistent/x.json", "gemm_bench: --json /nonexistent/x.json: directory /nonexistent");
  before_probe("--json --iters 3", "gemm_bench: --json needs a value");
}

static void test_unknown_config(void **state) {
  (void)state;
  static char out[1 << 16];
  expect_usage_error("--configs 999x1x1", "gemm_bench: --configs names 999x1x1, which is not a configuration");
  run("--configs 999x1x1", out, sizeof out);
  assert_non_null(strstr(out, "64x64x8")); /* the known ones are listed */
  assert_null(strstr(out, "cudaGetDeviceProperties"));
}

static void test_help(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(run("--help", out, sizeof out), 0);
  assert_non_null(strstr(out, "--hook-modes     hook modes to time (implies --hooks): both (wait + raise)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_option_errors_before_probe),
      cmocka_unit_test(test_unknown_config),
      cmocka_unit_test(test_help),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
