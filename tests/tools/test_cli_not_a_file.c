/* SPDX-License-Identifier: Apache-2.0
 * Every path the tdist CLI takes from the user is checked for what it is
 * before it is read or written (core/file.h): a directory given as the
 * calibration file, as an --input .npy, as the PROGRAM, or as an output
 * (--json, --trace, --dump) is said to be "a directory, expected a file"
 * (exit 2), not read as "not a JSON object", "bad magic" or an empty
 * program; `tdist calibrate` says so before measuring. Character devices
 * (/dev/null) stay usable outputs. */
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

static char tmpdir[256], prog[512], cache[512], calib[600];

static char out[1 << 16];

/* `env ENV tdist ARGS` exits 2 with `needle`, and without `absent` (NULL: not checked). */
static void expect_env(const char *env, const char *args, const char *needle, const char *absent) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, tdist_bin, args);
  int rc = run_cmd(cmd, out, sizeof out);
  if (rc != 2 || !strstr(out, needle) || (absent && strstr(out, absent)))
    fprintf(stderr, "%s: status %d, output:\n%s\n", cmd, rc, out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, needle));
  if (absent)
    assert_null(strstr(out, absent));
}

/* TD_CACHE_DIR's calibration.json is a directory: every command that reads it says so. */
static void test_calibration_directory(void **state) {
  (void)state;
  char env[700], args[1024], want[1024];
  snprintf(env, sizeof env, "TD_CACHE_DIR=%s", cache);
  snprintf(want, sizeof want, "calibration file '%s' is a directory, expected a file; remove it, or set TD_CACHE_DIR "
           "to another folder", calib);
  snprintf(args, sizeof args, "explain '%s' --ranks 2", prog);
  expect_env(env, args, want, "not a JSON object");
  snprintf(args, sizeof args, "run '%s' --ranks 2 --iters 1 --rounds 1", prog);
  expect_env(env, args, want, "not a JSON object");
  expect_env(env, "bench all_reduce --sizes 8K --iters 1", want, "not a JSON object");
  /* calibrate would write there: refused before seconds of measuring */
  char wc[1100];
  snprintf(wc, sizeof wc, "tdist calibrate: %s", want);
  expect_env(env, "calibrate --quick", wc, "alpha");
}

static void test_input_directory(void **state) {
  (void)state;
  char args[1024], want[1024];
  snprintf(args, sizeof args, "run '%s' --ranks 2 --iters 1 --rounds 1 --input x=%s", prog, tmpdir);
  snprintf(want, sizeof want, "tdist run: --input x: %s is a directory, expected a file (a .npy array)", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, "bad magic");
  assert_null(strstr(out, "run failed"));
}

static void test_program_directory(void **state) {
  (void)state;
  char args[1024], want[1024];
  snprintf(args, sizeof args, "explain '%s' --ranks 2", tmpdir);
  snprintf(want, sizeof want, "tdist explain: %s is a directory, expected a file (a .td program)", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, NULL);
}

/* Outputs: a directory is refused as one before anything runs; /dev/null is fine. */
static void test_output_directory(void **state) {
  (void)state;
  char args[1024], want[1024];
  snprintf(args, sizeof args, "run '%s' --ranks 2 --json %s", prog, tmpdir);
  snprintf(want, sizeof want, "tdist run: --json %s is a directory, expected a file (checked before running)", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, "Is a directory");
  snprintf(args, sizeof args, "run '%s' --ranks 2 --trace %s", prog, tmpdir);
  snprintf(want, sizeof want, "tdist run: --trace %s is a directory, expected a file", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, NULL);
  snprintf(args, sizeof args, "explain '%s' --ranks 2 --dump %s", prog, tmpdir);
  snprintf(want, sizeof want, "tdist explain: --dump %s is a directory, expected a file", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, NULL);
  snprintf(args, sizeof args, "bench coll --no-mpi --json %s", tmpdir);
  snprintf(want, sizeof want, "tdist bench coll: --json %s is a directory, expected a file", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, NULL);
  snprintf(args, sizeof args, "bench gemm_rs --shape 8x8x8 --json %s", tmpdir);
  snprintf(want, sizeof want, "--json %s is a directory, expected a file", tmpdir);
  expect_env("TD_CACHE_DIR=/nonexistent", args, want, NULL);
  snprintf(args, sizeof args, "explain '%s' --ranks 2 --dump /dev/null", prog);
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env TD_CACHE_DIR=/nonexistent '%s' %s 2>&1", tdist_bin, args);
  assert_int_equal(run_cmd(cmd, out, sizeof out), 0);
}

/* An output naming the program (as ./name, through a link or as itself), an --input file or the other output is
 * refused before anything runs, and the program is left as it was. */
static void test_output_is_an_input(void **state) {
  (void)state;
  char args[4096], link[600], dotted[600];
  snprintf(link, sizeof link, "%s/link.td", tmpdir);
  snprintf(dotted, sizeof dotted, "%s/./small.td", tmpdir);
  assert_int_equal(symlink(prog, link), 0);
  snprintf(args, sizeof args, "run '%s' --ranks 2 --json '%s'", prog, dotted);
  expect_env("TD_CACHE_DIR=/nonexistent", args, "is also the program", NULL);
  snprintf(args, sizeof args, "run '%s' --ranks 2 --trace '%s'", prog, link);
  expect_env("TD_CACHE_DIR=/nonexistent", args, "is also the program", NULL);
  snprintf(args, sizeof args, "explain '%s' --ranks 2 --dump '%s'", prog, link);
  expect_env("TD_CACHE_DIR=/nonexistent", args, "is also the program", NULL);
  snprintf(args, sizeof args, "run '%s' --ranks 2 --input x='%s' --json '%s'", prog, link, prog);
  expect_env("TD_CACHE_DIR=/nonexistent", args, "is also", NULL);
  FILE *f = fopen(prog, "r");
  char head[16] = "";
  assert_non_null(f);
  assert_non_null(fgets(head, sizeof head, f));
  fclose(f);
  assert_int_equal(strncmp(head, "dim M = 8", 9), 0); /* still the program */
  unlink(link);
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_notafile_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(prog, sizeof prog, "%s/small.td", tmpdir);
  snprintf(cache, sizeof cache, "%s/cache", tmpdir);
  snprintf(calib, sizeof calib, "%s/calibration.json", cache);
  static const char small[] = "dim M = 8, H = 8\ninput x : f32[M, H] shard(0)\noutput y = all_gather(x)\n";
  FILE *f = fopen(prog, "w");
  if (!f || fputs(small, f) < 0 || fclose(f) || mkdir(cache, 0755) || mkdir(calib, 0755))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calibration_directory), cmocka_unit_test(test_input_directory),
      cmocka_unit_test(test_program_directory),     cmocka_unit_test(test_output_directory),
      cmocka_unit_test(test_output_is_an_input),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rmdir(calib);
  rmdir(cache);
  unlink(prog);
  rmdir(tmpdir);
  return rc;
}
