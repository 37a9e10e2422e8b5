/* SPDX-License-Identifier: Apache-2.0
 * NVRTC compilation and load-or-compile through the cache: a miss compiles
 * and stores, a hit reads back the same image, a corrupt entry is rebuilt, an
 * unwritable cache folder still yields an image; bad architectures and
 * source errors give messages with NVRTC's log. No GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/jit.h"

static const char *k_src = "extern \"C\" __global__ void td_probe(float *x) { x[threadIdx.x] *= 2.0f; }\n";
static char g_dir[256];

static int setup(void **state) {
  snprintf(g_dir, sizeof g_dir, "/tmp/tdist-jitc-test-%ld", (long)getpid());
  setenv("TD_CACHE_DIR", g_dir, 1);
  return 0;
}

static int teardown(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_version_known(void **state) { assert_true(td__jit_nvrtc_version() >= 11000); }

static void test_compile_both_archs(void **state) {
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < 2; i++) {
    td__jit_image img = {0};
    assert_int_equal(td__jit_compile(k_src, "probe.cu", archs[i], NULL, 0, &img), TD_OK);
    assert_true(img.size > 64);
    assert_memory_equal(img.data, "\177ELF", 4); /* a cubin is an ELF image */
    td__jit_image_free(&img);
  }
}

static void test_get_miss_hit_corrupt(void **state) {
  td__jit_image a = {0}, b = {0}, c = {0};
  assert_int_equal(td__jit_get(k_src, "probe.cu", "sm_90a", NULL, 0, &a), TD_OK);
  assert_int_equal(a.from_cache, 0);
  assert_int_equal(td__jit_get(k_src, "probe.cu", "sm_90a", NULL, 0, &b), TD_OK);
  assert_int_equal(b.from_cache, 1);
  assert_int_equal(a.size, b.size);
  assert_memory_equal(a.data, b.data, a.size);
  /* Overwrite the payload's last byte: the next get must recompile, not trust it. */
  char dir[512], key[TD__JIT_KEY_CHARS + 1], path[700];
  assert_int_equal(td__jit_cache_dir(dir, sizeof dir), TD_OK);
  td__jit_cache_key(k_src, "sm_90a", NULL, 0, key);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, key);
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, -1, SEEK_END);
  fputc(~((unsigned char *)a.data)[a.size - 1] & 0xff, f);
  fclose(f);
  assert_int_equal(td__jit_get(k_src, "probe.cu", "sm_90a", NULL, 0, &c), TD_OK);
  assert_int_equal(c.from_cache, 0);
  assert_memory_equal(a.data, c.data, a.size);
  td__jit_image_free(&a);
  td__jit_image_free(&b);
  td__jit_image_free(&c);
  /* ... and the rebuilt entry is intact again. */
  assert_int_equal(td__jit_get(k_src, "probe.cu", "sm_90a", NULL, 0, &a), TD_OK);
  assert_int_equal(a.from_cache, 1);
  td__jit_image_free(&a);
}

static void test_unwritable_cache_still_compiles(void **state) {
  setenv("TD_CACHE_DIR", "/proc/tdist-cannot-write-here", 1);
  td__jit_image img = {0};
  assert_int_equal(td__jit_get(k_src, "probe.cu", "sm_80", NULL, 0, &img), TD_OK);
  assert_int_equal(img.from_cache, 0);
  td__jit_image_free(&img);
  setenv("TD_CACHE_DIR", g_dir, 1);
}

static void test_bad_arch(void **state) {
  td__jit_image img = {0};
  const char *bad[] = {"sm90", "compute_90", "sm_9", "sm_90ab", ""};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(td__jit_compile(k_src, "probe.cu", bad[i], NULL, 0, &img), TD_ERR_INVALID_ARG);
    assert_non_null(strstr(td_last_error(), "sm_90a"));
    assert_null(img.data);
  }
  assert_int_equal(td__jit_compile(NULL, "probe.cu", "sm_80", NULL, 0, &img), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "NULL"));
}

static void test_source_error_has_log(void **state) {
  td__jit_image img = {0};
  const char *src = "extern \"C\" __global__ void k(float *x) { x[0] = undefined_name; }\n";
  assert_int_equal(td__jit_compile(src, "broken.cu", "sm_90a", NULL, 0, &img), TD_ERR_CUDA);
  assert_non_null(strstr(td_last_error(), "broken.cu"));
  assert_non_null(strstr(td_last_error(), "undefined_name"));
  assert_null(img.data);
  const char *opts[] = {"--no-such-option"};
  assert_int_equal(td__jit_compile(k_src, "probe.cu", "sm_80", opts, 1, &img), TD_ERR_CUDA);
  assert_non_null(strstr(td_last_error(), "probe.cu"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_known),
      cmocka_unit_test(test_compile_both_archs),
      cmocka_unit_test(test_get_miss_hit_corrupt),
      cmocka_unit_test(test_unwritable_cache_still_compiles),
      cmocka_unit_test(test_bad_arch),
      cmocka_unit_test(test_source_error_has_log),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
