/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` on cpu: option errors
 * (exit status 2 and a message naming the option), and a tiny run of each
 * operator whose JSON holds the environment and, per side, a positive p50,
 * p99 >= p50 and a result equal to the baseline's within f32 rounding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tdist_bin[4096];

static int run(const char *args, char *out, size_t cap) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tdist_bin, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, cap - 1, p);
  out[len] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_usage_error(const char *args, const char *needle) {
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 2 || !strstr(out, needle))
    fprintf(stderr, "tdist %s: status %d, output:\n%s\n", args, rc, out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, needle));
}

static void test_option_errors(void **state) {
  (void)state;
  expect_usage_error("bench ag_gemm --backend gpu", "--backend gpu: use cpu or cuda");
  expect_usage_error("bench ag_gemm --ranks 0", "--ranks must be 1..64");
  expect_usage_error("bench gemm_rs --shape 3x4", "--shape 3x4: use MxNxK, each >= 1");
  expect_usage_error("bench gemm_ar --dtype q8", "dtype 'q8'");
  expect_usage_error("bench ag_gemm --variants sm,fast", "--variants: variant 'fast' is unknown");
  expect_usage_error("bench all_reduce --sizes 9x", "no shape selected");
  expect_usage_error("bench ag_gemm --models nothing", "no shape selected");
  expect_usage_error("bench ag_gemm --frobnicate 1", "unknown option --frobnicate");
  expect_usage_error("bench ag_gemm --iters", "--iters needs a value");
}

static cJSON *load_json(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 18];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  assert_non_null(j);
  return j;
}

static void tiny(const char *kind, const char *shape_args, int nsides) {
  char json[256], args[1024];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_%s_%ld.json", kind, (long)getpid());
  snprintf(args, sizeof args, "bench %s --backend cpu --ranks 3 --iters 3 --warmup 1 %s --json %s", kind,
           shape_args, json);
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "tdist %s: status %d\n%s\n", args, rc, out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "| case | side | variant |"));
  cJSON *j = load_json(json);
  assert_string_equal(cJSON_GetObjectItem(j, "operator")->valuestring, kind);
  cJSON *env = cJSON_GetObjectItem(j, "environment");
  assert_non_null(cJSON_GetObjectItem(env, "git_revision"));
  assert_non_null(cJSON_GetObjectItem(env, "interconnect"));
  cJSON *res = cJSON_GetObjectItem(j, "results");
  assert_true(cJSON_GetArraySize(res) >= 1);
  cJSON *c;
  cJSON_ArrayForEach(c, res) {
    assert_null(cJSON_GetObjectItem(c, "error"));
    cJSON *sides = cJSON_GetObjectItem(c, "sides"), *s;
    assert_int_equal(cJSON_GetArraySize(sides), nsides);
    cJSON_ArrayForEach(s, sides) {
      assert_null(cJSON_GetObjectItem(s, "error"));
      double p50 = cJSON_GetObjectItem(s, "p50_s")->valuedouble, p99 = cJSON_GetObjectItem(s, "p99_s")->valuedouble;
      assert_true(p50 > 0 && p99 >= p50);
      assert_true(cJSON_GetObjectItem(s, "max_rel_diff")->valuedouble < 1e-4);
    }
  }
  cJSON_Delete(j);
  unlink(json);
}

static void test_tiny_runs(void **state) {
  (void)state;
  tiny("ag_gemm", "--shape 37x20x16", 6);  /* baseline, auto, sequential, sm, copy_engine, ring */
  tiny("gemm_rs", "--shape 37x20x16", 4);  /* baseline, auto, sequential, sm */
  tiny("gemm_ar", "--shape 11x20x16", 5);  /* baseline, auto, sequential, one_shot, two_shot */
  tiny("all_reduce", "--sizes 4K,1000", 4); /* baseline, auto, one_shot, two_shot */
  tiny("gemm_rs", "--shape 37x20x16 --variants none", 2); /* baseline and auto only */
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_option_errors),
      cmocka_unit_test(test_tiny_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
