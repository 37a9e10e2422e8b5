/* SPDX-License-Identifier: Apache-2.0
 * tdist run's outputs are checked to be distinct files before anything runs
 * (td_cli_check_distinct), also where neither exists yet: --json out.json
 * --trace link, link -> out.json dangling, got through (no inode to compare)
 * and the trace overwrote the JSON. Dangling links are resolved (the chain
 * read, the last name's folder resolved) before comparing: a chain of links,
 * a relative link in another folder and an absolute one are caught (exit 2,
 * naming both options). The up-front writability probe keeps a dangling
 * link (it removed the link and left an empty target); a --json through a
 * dangling link to another name writes through it. */
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

static char tmpdir[256];
static char out[1 << 16];

static int is_link(const char *name) {
  char path[600];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static int exists(const char *name) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return access(path, F_OK) == 0;
}

static void link_in(const char *target, const char *name) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  unlink(path);
  assert_int_equal(symlink(target, path), 0);
}

static void expect_same(const char *json, const char *trace) {
  char args[1024], want[1024];
  snprintf(args, sizeof args, "run small.td --ranks 2 --iters 1 --rounds 1 --json %s --trace %s", json, trace);
  int rc = run_in(tmpdir, NULL, args, out, sizeof out);
  snprintf(want, sizeof want, "tdist run: --json %s is also --trace ('%s'): writing it would overwrite that file; "
           "give another path", json, trace);
  if (rc != 2 || !strstr(out, want))
    fprintf(stderr, "%s: status %d\n%s\n", args, rc, out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, want));
  assert_null(strstr(out, "overlapped")); /* nothing ran */
}

static void test_dangling_links(void **state) {
  (void)state;
  link_in("out.json", "link"); /* neither exists */
  expect_same("out.json", "link");
  expect_same("link", "out.json");
  expect_same("./out.json", "link");
  assert_true(is_link("link")); /* the probe kept the link and made nothing */
  assert_false(exists("out.json"));
  link_in("link", "link2"); /* a chain */
  expect_same("out.json", "link2");
  assert_int_equal(mkdir(strcat(strcpy(out, tmpdir), "/sub"), 0755), 0);
  link_in("../out.json", "sub/rel"); /* relative to the link's folder, not the working one */
  expect_same("out.json", "sub/rel");
  char abs[600];
  snprintf(abs, sizeof abs, "%s/out.json", tmpdir);
  link_in(abs, "abs");
  expect_same("abs", "sub/rel");
  assert_true(is_link("link") && is_link("link2") && is_link("sub/rel") && is_link("abs"));
  assert_false(exists("out.json"));
}

/* Distinct names still run; a dangling link is written through, and stays a link. */
static void test_distinct_runs(void **state) {
  (void)state;
  link_in("other.json", "olink");
  int rc = run_in(tmpdir, NULL, "run small.td --ranks 2 --iters 1 --rounds 1 --json olink --trace t.json", out,
                  sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  assert_true(is_link("olink"));
  assert_true(exists("other.json") && exists("t.json"));
  /* a link into a folder that does not exist cannot be resolved: refused as unwritable, not compared */
  link_in("nodir/x.json", "bad");
  rc = run_in(tmpdir, NULL, "run small.td --ranks 2 --iters 1 --rounds 1 --json bad", out, sizeof out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "--json bad cannot be written"));
  assert_true(is_link("bad"));
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_samefile_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  static const char small[] = "dim M = 8, H = 8\ninput x : f32[M, H] shard(0)\noutput y = all_gather(x)\n";
  char prog[600];
  snprintf(prog, sizeof prog, "%s/small.td", tmpdir);
  FILE *f = fopen(prog, "w");
  if (!f || fputs(small, f) < 0 || fclose(f))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dangling_links),
      cmocka_unit_test(test_distinct_runs),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0)
    rc = 1;
  return rc;
}
