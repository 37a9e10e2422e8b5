/* SPDX-License-Identifier: Apache-2.0
 * The GEMM tuning cache without a GPU (label cpu): shape classes, store then
 * lookup, replacement of an entry, separate keys per GPU/dtype/layout/class,
 * a corrupt file read as empty and replaced, and the error messages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdist/types.h"
#include "tile/cuda/gemm.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/td_gemm_tune_%ld/nested", (long)getpid());
  setenv("TD_CACHE_DIR", dir, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf /tmp/td_gemm_tune_%ld", (long)getpid());
  return system(cmd) == 0 ? 0 : -1;
}

static void test_shape_class(void **state) {
  (void)state;
  char buf[64];
  td__gemm_shape_class(8192, 3584, 8192, buf, sizeof buf);
  assert_string_equal(buf, "m8192_n4096_k8192");
  td__gemm_shape_class(1, 7, 100, buf, sizeof buf);
  assert_string_equal(buf, "m64_n64_k128");
}

static void test_store_lookup_replace(void **state) {
  (void)state;
  td_gemm_config a = {TD_GEMM_SM90, 128, 256, 64, 4, 1, 8, 1}, b = {TD_GEMM_SM90, 128, 224, 64, 5, 2, 16, 1};
  td_gemm_config out;
  char path[4200];
  assert_int_equal(td__gemm_tune_cache_path(path, sizeof path), TD_OK);
  assert_non_null(strstr(path, "nested/gemm-tune.json"));
  assert_int_equal(td__gemm_tune_store("GPU X", TD_BF16, TD_GEMM_B_NK, 8192, 3584, 8192, &a, 700), TD_OK);
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_BF16, TD_GEMM_B_NK, 8000, 4000, 8000, &out), TD_OK);
  assert_int_equal(out.bn, 256);
  assert_int_equal(out.stages, 4);
  /* same class, new best: replaced, not duplicated */
  assert_int_equal(td__gemm_tune_store("GPU X", TD_BF16, TD_GEMM_B_NK, 8192, 3584, 8192, &b, 720), TD_OK);
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_BF16, TD_GEMM_B_NK, 8192, 3584, 8192, &out), TD_OK);
  assert_int_equal(out.bn, 224);
  assert_int_equal(out.cluster, 2);
  assert_int_equal(out.group_m, 16);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char text[8192];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = 0;
  assert_non_null(strstr(text, "GPU X|bf16|nk|m8192_n4096_k8192"));
  assert_null(strstr(strstr(text, "m8192_n4096_k8192") + 1, "m8192_n4096_k8192"));
  /* other keys are separate */
  td_clear_error();
  assert_int_equal(td__gemm_tune_lookup("GPU Y", TD_BF16, TD_GEMM_B_NK, 8192, 3584, 8192, &out),
                   TD_ERR_NOT_FOUND);
  assert_non_null(strstr(td_last_error(), "no entry for GPU Y|bf16|nk|m8192_n4096_k8192"));
  assert_non_null(strstr(td_last_error(), "tdist tune gemm"));
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_F16, TD_GEMM_B_NK, 8192, 3584, 8192, &out),
                   TD_ERR_NOT_FOUND);
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_BF16, TD_GEMM_B_KN, 8192, 3584, 8192, &out),
                   TD_ERR_NOT_FOUND);
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_BF16, TD_GEMM_B_NK, 128, 3584, 8192, &out),
                   TD_ERR_NOT_FOUND);
}

static void test_corrupt_file(void **state) {
  (void)state;
  char path[4200];
  td_gemm_config a = {TD_GEMM_SM90, 64, 64, 64, 8, 1, 8, 1}, out;
  assert_int_equal(td__gemm_tune_cache_path(path, sizeof path), TD_OK);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{ not json", f);
  fclose(f);
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_BF16, TD_GEMM_B_NK, 128, 3584, 8192, &out),
                   TD_ERR_NOT_FOUND);
  assert_int_equal(td__gemm_tune_store("GPU X", TD_BF16, TD_GEMM_B_NK, 128, 3584, 8192, &a, 290), TD_OK);
  assert_int_equal(td__gemm_tune_lookup("GPU X", TD_BF16, TD_GEMM_B_NK, 100, 3000, 8000, &out), TD_OK);
  assert_int_equal(out.bm, 64);
}

static void test_errors(void **state) {
  (void)state;
  td_gemm_config a = {TD_GEMM_SM90, 64, 64, 64, 8, 1, 8, 1}, out;
  assert_int_equal(td__gemm_tune_store(NULL, TD_BF16, 0, 1, 1, 8, &a, 1), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "must not be NULL"));
  assert_int_equal(td__gemm_tune_lookup("x", TD_BF16, 0, 1, 1, 8, NULL), TD_ERR_INVALID_ARG);
  assert_int_equal(td__gemm_tune(TD_GEMM_SM90, TD_BF16, 0, 0, 1, 8, 5, NULL, NULL, &out, NULL),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "M=0"));
  char saved[256];
  snprintf(saved, sizeof saved, "%s", getenv("TD_CACHE_DIR"));
  setenv("TD_CACHE_DIR", "/proc/no_such_dir/x", 1);
  char path[4200];
  assert_int_equal(td__gemm_tune_cache_path(path, sizeof path), TD_ERR_SYSTEM);
  assert_non_null(strstr(td_last_error(), "cannot create"));
  assert_int_equal(td__gemm_tune_store("x", TD_BF16, 0, 1, 1, 8, &a, 1), TD_ERR_SYSTEM);
  unsetenv("TD_CACHE_DIR");
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  unsetenv("HOME");
  assert_int_equal(td__gemm_tune_cache_path(path, sizeof path), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "set TD_CACHE_DIR"));
  if (home)
    setenv("HOME", home, 1);
  free(home);
  setenv("TD_CACHE_DIR", saved, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shape_class),
      cmocka_unit_test(test_store_lookup_replace),
      cmocka_unit_test(test_corrupt_file),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
