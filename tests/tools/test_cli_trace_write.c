/* SPDX-License-Identifier: Apache-2.0
 * `tdist run --trace FILE` whose write fails after the run (a full disk;
 * here /dev/full, which passes the up-front writability check) behaves as
 * --json does: the table is printed, then "tdist run: cannot write FILE:
 * REASON" and exit 1; it was reported as a failed overlapped run with no
 * table. The trace goes through a temporary file in $TMPDIR that is removed
 * on every path; without a usable $TMPDIR the library writes --trace itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_test_util.h"

static char tmpdir[256], prog[512], scratch[512];
static char out[1 << 16];

/* Files left in the scratch TMPDIR. */
static int leftovers(void) {
  DIR *d = opendir(scratch);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int run_env(const char *env, const char *rest) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env %s '%s' run '%s' --ranks 2 --iters 1 --rounds 1 %s 2>&1", env, tdist_bin, prog, rest);
  int rc = run_cmd(cmd, out, sizeof out);
  fprintf(stderr, "%s: status %d\n%s", cmd, rc, out);
  return rc;
}

static void test_trace_write_failure(void **state) {
  (void)state;
  if (access("/dev/full", W_OK))
    skip();
  char env[600];
  snprintf(env, sizeof env, "TMPDIR=%s", scratch);
  assert_int_equal(run_env(env, "--trace /dev/full"), 1);
  assert_non_null(strstr(out, "  overlapped ")); /* the table */
  assert_non_null(strstr(out, "speedup"));
  assert_non_null(strstr(out, "tdist run: cannot write /dev/full: No space left on device"));
  assert_null(strstr(out, "run failed"));
  assert_null(strstr(out, "trace: /dev/full")); /* not said to be written */
  assert_int_equal(leftovers(), 0);
  /* with --check the verdict stays in the table; the write failure still exits 1 */
  assert_int_equal(run_env(env, "--check --trace /dev/full"), 1);
  assert_non_null(strstr(out, "result: PASS"));
  assert_non_null(strstr(out, "tdist run: cannot write /dev/full"));
  assert_int_equal(leftovers(), 0);
}

static void test_trace_written(void **state) {
  (void)state;
  char env[600], args[1024], trace[600];
  snprintf(env, sizeof env, "TMPDIR=%s", scratch);
  snprintf(trace, sizeof trace, "%s/t.json", tmpdir);
  snprintf(args, sizeof args, "--trace '%s'", trace);
  assert_int_equal(run_env(env, args), 0);
  assert_non_null(strstr(out, "  trace: "));
  FILE *f = fopen(trace, "r");
  assert_non_null(f);
  char head[32] = "";
  assert_non_null(fgets(head, sizeof head, f));
  fclose(f);
  assert_int_equal(strncmp(head, "{\"traceEvents\":[", 16), 0);
  assert_int_equal(leftovers(), 0);
  unlink(trace);
  /* no usable TMPDIR: the trace is still written (by the library, straight to the file) */
  assert_int_equal(run_env("TMPDIR=/nonexistent-td-dir", args), 0);
  assert_int_equal(access(trace, F_OK), 0);
  unlink(trace);
  /* a trace written beside a --json that fails: both reported, the trace intact */
  if (!access("/dev/full", W_OK)) {
    snprintf(args, sizeof args, "--trace '%s' --json /dev/full", trace);
    assert_int_equal(run_env(env, args), 1);
    assert_non_null(strstr(out, "tdist run: cannot write /dev/full"));
    assert_int_equal(access(trace, F_OK), 0);
    unlink(trace);
  }
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_tracewrite_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(prog, sizeof prog, "%s/small.td", tmpdir);
  snprintf(scratch, sizeof scratch, "%s/tmp", tmpdir);
  static const char small[] = "dim M = 8, H = 8\ninput x : f32[M, H] shard(0)\noutput y = all_gather(x)\n";
  FILE *f = fopen(prog, "w");
  if (!f || fputs(small, f) < 0 || fclose(f) || mkdir(scratch, 0700))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_write_failure),
      cmocka_unit_test(test_trace_written),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(prog);
  rmdir(scratch);
  rmdir(tmpdir);
  return rc;
}
