/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench <op> --backend cuda` checks the GPUs once, before the first
 * case: with no usable GPU, or TD_CUDA_DEVICE outside the host's devices, it
 * exits 2 with one line naming the cause (the CUDA error string, or the
 * TD_CUDA_DEVICE value and the allowed range), runs no case and writes no
 * JSON. Runs on any machine without touching a GPU: TD_CUDA_DEVICE=1000 is
 * valid for the configuration table (0..1024) but beyond any host's count,
 * so a GPU host gets the range message, a host without a driver the CUDA
 * error, and a build without CUDA says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_test_util.h"

static void expect_refused_once(const char *op) {
  char json[256], args[1024];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_gpu_%s_%ld.json", op, (long)getpid());
  unlink(json);
  snprintf(args, sizeof args, "bench %s --backend cuda --ranks 2 --iters 1 --warmup 0 --variants none --json %s",
           op, json);
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 2)
    fprintf(stderr, "tdist %s: status %d\n%s\n", args, rc, out);
  assert_int_equal(rc, 2);
  assert_null(strstr(out, "case 1/")); /* refused before the first case */
  assert_null(strstr(out, "| tdist"));
  const char *nl = strchr(out, '\n');
  assert_true(nl && !nl[1]); /* one line */
  char want[128];
  snprintf(want, sizeof want, "tdist bench %s: ", op);
  assert_true(!strncmp(out, want, strlen(want)));
  const char *cuda_err = strstr(out, "--backend cuda: no usable CUDA device: ");
  if (strstr(out, "this build has no CUDA backend")) {
    /* cpu-only build: refused as such */
  } else if (cuda_err) {
    /* no driver or no device: CUDA's own words follow */
    const char *why = cuda_err + strlen("--backend cuda: no usable CUDA device: ");
    assert_true(*why && *why != '\n');
  } else {
    assert_non_null(strstr(out, "--backend cuda: TD_CUDA_DEVICE=1000 but this host has "));
    assert_non_null(strstr(out, "GPU(s): use 0.."));
  }
  assert_int_not_equal(access(json, F_OK), 0); /* no JSON describing GPUs that were not used */
}

static void test_gpu_checked_before_cases(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "1000", 1);
  expect_refused_once("ag_gemm");
  expect_refused_once("gemm_rs");
  expect_refused_once("gemm_ar");
  expect_refused_once("all_reduce");
  unsetenv("TD_CUDA_DEVICE");
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_checked_before_cases),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
