/* SPDX-License-Identifier: Apache-2.0
 * A TD_* environment variable tdist does not know (a misspelt TD_TIMEOUT_MS)
 * was ignored without a word by every command but doctor. Now the tdist CLI
 * warns once per process on stderr, naming the closest known variable, and
 * goes on (a warning, not an error: other tools may set TD_* variables):
 * once for bench coll, not again from each rank process; not for --help, not
 * for an empty value; doctor keeps listing them itself.
 * td_config_warn_unknown writes its lines only on its first call. The names
 * tdist's own scripts and tests use (TD_ITERS, TD_BIN_DIR, ...) are known,
 * so none of them is warned about: every TD_* name in scripts/ and in the
 * tests' getenv calls is checked against the library's lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_test_util.h"
#include "tdist/tdist.h"

static char tmpdir[256], prog[512];
static char out[1 << 16];

static int run_env(const char *env, const char *args) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, tdist_bin, args);
  return run_cmd(cmd, out, sizeof out);
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

#define WARN_MSS "tdist: warning: TD_TIMEOUT_MSS is not a tdist variable and is ignored; did you mean TD_TIMEOUT_MS?"

static void test_cli_warns_once(void **state) {
  (void)state;
  char args[1024];
  snprintf(args, sizeof args, "explain '%s' --ranks 2", prog);
  assert_int_equal(run_env("TD_TIMEOUT_MSS=5000", args), 0); /* a warning: the command still runs */
  assert_int_equal(count(out, WARN_MSS), 1);
  assert_non_null(strstr(out, "rank 1:"));
  snprintf(args, sizeof args, "run '%s' --ranks 2 --iters 1 --rounds 1", prog);
  assert_int_equal(run_env("TD_TIMEOUT_MSS=5000 TD_ZZZ_NOTHING_LIKE_IT=1", args), 0);
  assert_int_equal(count(out, WARN_MSS), 1);
  /* no table name within 3 edits: named, without a guess */
  assert_int_equal(count(out, "tdist: warning: TD_ZZZ_NOTHING_LIKE_IT is not a tdist variable and is ignored "
                              "(`tdist doctor` lists them)"), 1);
  /* rank processes of bench coll are the parent's: one warning, not one per rank */
  assert_int_equal(run_env("TD_TIMEOUT_MSS=5000", "bench coll --no-mpi --ranks 3 --op all_reduce --min 8 --max 8 "
                           "--iters 1"), 0);
  assert_int_equal(count(out, "warning: TD_TIMEOUT_MSS"), 1);
  /* --help does no work and reads no environment; an empty value changes nothing */
  assert_int_equal(run_env("TD_TIMEOUT_MSS=5000", "run --help"), 0);
  assert_null(strstr(out, "warning:"));
  snprintf(args, sizeof args, "explain '%s' --ranks 2", prog);
  assert_int_equal(run_env("TD_TIMEOUT_MSS=", args), 0);
  assert_null(strstr(out, "warning:"));
  /* doctor lists them in its own words, and does not warn as well */
  assert_int_equal(run_env("TD_TIMEOUT_MSS=5000", "doctor"), 0);
  assert_null(strstr(out, "warning: TD_TIMEOUT_MSS"));
  assert_non_null(strstr(out, "TD_TIMEOUT_MSS (not a tdist variable; did you mean TD_TIMEOUT_MS?)"));
  /* a misspelt operator knob stays an error (TD_OPS_* is our namespace), said once */
  assert_int_equal(run_env("TD_OPS_FUSED_TALE=split", args), 2);
  assert_int_equal(count(out, "TD_OPS_FUSED_TALE"), 1);
}

static void test_library_once(void **state) {
  (void)state;
  setenv("TD_CPU_COMPUTE_WORKRS", "2", 1);
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(td_config_warn_unknown(NULL, "x"), 0); /* NULL out: nothing, and the once is not spent */
  assert_true(td_config_warn_unknown(f, "prog") >= 1);
  assert_int_equal(td_config_warn_unknown(f, "prog"), 0);
  rewind(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  fclose(f);
  assert_int_equal(count(out, "prog: warning: TD_CPU_COMPUTE_WORKRS is not a tdist variable and is ignored; did you "
                              "mean TD_CPU_COMPUTE_WORKERS?"), 1);
  unsetenv("TD_CPU_COMPUTE_WORKRS");
}

/* Adds every TD_* name of `text` used as a shell variable ($TD_X, ${TD_X, TD_X=, export TD_X) or through
 * a getenv call to the environment (value "1"); returns how many. */
static int set_names(const char *text, int shell) {
  int n = 0;
  for (const char *p = strstr(text, "TD_"); p; p = strstr(p + 1, "TD_")) {
    if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
      continue;
    size_t len = 3;
    while (isupper((unsigned char)p[len]) || isdigit((unsigned char)p[len]) || p[len] == '_')
      len++;
    if (len < 4 || len > 60)
      continue;
    int used = shell ? (p > text && (p[-1] == '$' || (p[-1] == '{' && p - 1 > text && p[-2] == '$'))) ||
                           p[len] == '=' || (p - text >= 7 && !strncmp(p - 7, "export ", 7))
                     : p - text >= 8 && !strncmp(p - 8, "getenv(\"", 8) && p[len] == '"';
    if (!used)
      continue;
    char name[64];
    memcpy(name, p, len);
    name[len] = 0;
    if (!getenv(name)) {
      setenv(name, "1", 1);
      n++;
    }
  }
  return n;
}

static void scan_dir(const char *dir, const char *ext, int shell, int *names) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  static char text[1 << 20];
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name), el = strlen(ext);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (e->d_name[0] == '.')
      continue;
    if (e->d_type == DT_DIR) {
      scan_dir(path, ext, shell, names);
      continue;
    }
    if (l < el || strcmp(e->d_name + l - el, ext))
      continue;
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    *names += set_names(text, shell);
  }
  closedir(d);
}

static void test_own_names_known(void **state) {
  (void)state;
  const char *src = getenv("TD_SOURCE_DIR");
  if (!src)
    skip();
  int base = td_config_unknown(NULL);
  char dir[1024];
  int names = 0;
  snprintf(dir, sizeof dir, "%s/scripts", src);
  scan_dir(dir, ".sh", 1, &names);
  snprintf(dir, sizeof dir, "%s/tests", src);
  scan_dir(dir, ".c", 0, &names);
  snprintf(dir, sizeof dir, "%s/bench", src);
  scan_dir(dir, ".c", 0, &names);
  assert_true(names > 10);
  int now = td_config_unknown(NULL);
  if (now != base)
    td_config_unknown(stderr); /* which are missing from the lists in src/core/config.c */
  assert_int_equal(now, base);
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_envwarn_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(prog, sizeof prog, "%s/small.td", tmpdir);
  static const char small[] = "dim M = 8, H = 8\ninput x : f32[M, H] shard(0)\noutput y = all_gather(x)\n";
  FILE *f = fopen(prog, "w");
  if (!f || fputs(small, f) < 0 || fclose(f))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cli_warns_once),
      cmocka_unit_test(test_library_once),
      cmocka_unit_test(test_own_names_known), /* last: it fills this process's environment */
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(prog);
  rmdir(tmpdir);
  return rc;
}
