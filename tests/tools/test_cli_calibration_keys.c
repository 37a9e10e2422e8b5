/* SPDX-License-Identifier: Apache-2.0
 * A calibration file ($TD_CACHE_DIR/calibration.json) with a key the perf
 * model does not have (a misspelt "flop_s" was ignored, its default used
 * without a word) or a key given twice (the first won) is refused by every
 * command that reads it (run, explain, bench; exit 2) and listed by doctor
 * (exit 1), naming the key, FILE:LINE and the allowed keys;
 * td_perf_model_load_checked refuses it the same way and td_perf_model_load
 * skips the key. A file tdist calibrate writes passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_test_util.h"
#include "tdist/tdist.h"

static char tmpdir[256], prog[512], calib[512], env[600];
static char out[1 << 16];

static void write_calib(const char *text) {
  FILE *f = fopen(calib, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

static int run_env(const char *args) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, tdist_bin, args);
  return run_cmd(cmd, out, sizeof out);
}

#define ALLOWED "allowed keys: alpha_s, beta_bytes_s, flops_s, mem_bytes_s, task_overhead_s, transcendental_s, cores"

static void expect_refused(const char *want) {
  char args[1024];
  snprintf(args, sizeof args, "explain '%s' --ranks 2", prog);
  int rc = run_env(args);
  if (rc != 2 || !strstr(out, want))
    fprintf(stderr, "explain: status %d\n%s\n", rc, out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, want));
  snprintf(args, sizeof args, "run '%s' --ranks 2 --iters 1 --rounds 1", prog);
  assert_int_equal(run_env(args), 2);
  assert_non_null(strstr(out, want));
  assert_int_equal(run_env("bench all_reduce --sizes 8K --iters 1"), 2);
  assert_non_null(strstr(out, want));
  assert_int_equal(run_env("doctor"), 1);
  assert_non_null(strstr(out, want));
  td_perf_model m;
  assert_int_equal(td_perf_model_load_checked(&m), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), want));
}

static void test_unknown_key(void **state) {
  (void)state;
  char want[1024];
  write_calib("{\n  \"alpha_s\": 5e-06,\n  \"flop_s\": 3e9\n}\n");
  snprintf(want, sizeof want, "calibration file %s:3: unknown key 'flop_s'; " ALLOWED, calib);
  expect_refused(want);
  td_perf_model m, def;
  td_perf_model_load(&m); /* the lenient loader skips it, and keeps the rest */
  assert_true(m.alpha_s == 5e-06);
  unlink(calib);
  td_perf_model_load(&def);
  assert_true(m.flops_s == def.flops_s);
  /* a key hidden in an odd spot is still found on its line: after a nested value holding braces and quotes */
  write_calib("{\"alpha_s\": 5e-06, \"note\": {\"a\": \"}{\\\"\"},\n\n \"cores\": 2}");
  snprintf(want, sizeof want, "calibration file %s:1: unknown key 'note'", calib);
  expect_refused(want);
}

static void test_key_twice(void **state) {
  (void)state;
  char want[1024];
  write_calib("{\"flops_s\": 3e9,\n\"cores\": 2,\n\"flops_s\": 4e9}");
  snprintf(want, sizeof want, "calibration file %s:3: key 'flops_s' given twice", calib);
  expect_refused(want);
}

static void test_known_keys_pass(void **state) {
  (void)state;
  write_calib("{\"alpha_s\": 5e-06, \"beta_bytes_s\": 4e9, \"flops_s\": 3e9, \"mem_bytes_s\": 5e9, "
              "\"task_overhead_s\": 3e-6, \"cores\": 0, \"transcendental_s\": 1e-8}");
  char args[1024];
  snprintf(args, sizeof args, "explain '%s' --ranks 2", prog);
  assert_int_equal(run_env(args), 0);
  td_perf_model m;
  assert_int_equal(td_perf_model_load_checked(&m), TD_OK);
  assert_true(m.flops_s == 3e9);
  /* what td_perf_model_save writes reads back */
  assert_int_equal(td_perf_model_save(&m, NULL, 0), TD_OK);
  assert_int_equal(td_perf_model_load_checked(&m), TD_OK);
  unlink(calib);
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_calkeys_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(prog, sizeof prog, "%s/small.td", tmpdir);
  snprintf(calib, sizeof calib, "%s/calibration.json", tmpdir);
  snprintf(env, sizeof env, "TD_CACHE_DIR=%s", tmpdir);
  setenv("TD_CACHE_DIR", tmpdir, 1); /* for the library calls made here */
  static const char small[] = "dim M = 8, H = 8\ninput x : f32[M, H] shard(0)\noutput y = all_gather(x)\n";
  FILE *f = fopen(prog, "w");
  if (!f || fputs(small, f) < 0 || fclose(f))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_key),
      cmocka_unit_test(test_key_twice),
      cmocka_unit_test(test_known_keys_pass),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(calib);
  unlink(prog);
  rmdir(tmpdir);
  return rc;
}
