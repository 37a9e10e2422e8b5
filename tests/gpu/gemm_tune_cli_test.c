/* SPDX-License-Identifier: Apache-2.0
 * `tdist tune` argument errors and help (label cpu: none of these reach the
 * GPU). Runs the built CLI ($TD_BIN_DIR/tdist) and checks exit status and
 * message of each refusal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int run(const char *args, char *out, size_t cap) {
  char cmd[1024];
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(cmd, sizeof cmd, "%s/tdist tune %s 2>&1", bin ? bin : ".", args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, cap - 1, p);
  out[len] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_help_and_kinds(void **state) {
  (void)state;
  char out[4096];
  assert_int_equal(run("--help", out, sizeof out), 0);
  assert_non_null(strstr(out, "usage: tdist tune gemm"));
  assert_int_equal(run("", out, sizeof out), 2);
  assert_non_null(strstr(out, "usage: tdist tune gemm"));
  assert_int_equal(run("conv", out, sizeof out), 2);
  assert_non_null(strstr(out, "unknown kind 'conv'"));
  assert_int_equal(run("gemm --help", out, sizeof out), 0);
  assert_non_null(strstr(out, "shape class"));
}

static void test_bad_options(void **state) {
  (void)state;
  char out[4096];
  assert_int_equal(run("gemm --M 128 --N 256", out, sizeof out), 2);
  assert_non_null(strstr(out, "--M, --N, --K"));
  assert_int_equal(run("gemm --M 128 --N 256 --K 64 --layout xy", out, sizeof out), 2);
  assert_non_null(strstr(out, "--layout must be nk or kn, not 'xy'"));
  assert_int_equal(run("gemm --M 128 --N 256 --K 64 --dtype f32", out, sizeof out), 2);
  assert_non_null(strstr(out, "--dtype must be bf16 or f16, not 'f32'"));
  assert_int_equal(run("gemm --M 128 --N 256 --K 64 --arch 70", out, sizeof out), 2);
  assert_non_null(strstr(out, "--arch must be 90 or 80, not 70"));
  assert_int_equal(run("gemm --M 128 --N 256 --K 64 --bogus", out, sizeof out), 2);
  assert_non_null(strstr(out, "unknown or incomplete option '--bogus'"));
  assert_int_equal(run("gemm --M 128 --N 256 --K 64 --iters 0", out, sizeof out), 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help_and_kinds),
      cmocka_unit_test(test_bad_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
