/* SPDX-License-Identifier: Apache-2.0
 * The configuration table's checks: a misspelt TD_* variable is reported
 * with the nearest table name (td_config_unknown), every set variable that
 * does not parse is reported with its name, value and what is allowed
 * (td_config_check_all), and `tdist doctor` prints both and exits 1 on a value
 * that does not parse, 0 otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tdist/tdist.h"

/* Captures what fn writes to a FILE. */
static int capture(int (*fn)(FILE *), char *buf, size_t cap) {
  FILE *f = tmpfile();
  assert_non_null(f);
  int n = fn(f);
  rewind(f);
  size_t len = fread(buf, 1, cap - 1, f);
  buf[len] = 0;
  fclose(f);
  return n;
}

static void test_unknown(void **state) {
  (void)state;
  char out[4096];
  unsetenv("TD_TIMEOUT_MSS");
  int base = td_config_unknown(NULL); /* whatever the test environment sets */
  setenv("TD_TIMEOUT_MSS", "5", 1);
  setenv("TD_ZZZ_NOTHING_LIKE_IT", "1", 1);
  int n = capture(td_config_unknown, out, sizeof out);
  assert_int_equal(n, base + 2);
  assert_non_null(strstr(out, "TD_TIMEOUT_MSS (not a tdist variable; did you mean TD_TIMEOUT_MS?)"));
  assert_non_null(strstr(out, "TD_ZZZ_NOTHING_LIKE_IT (not a tdist variable)\n"));
  setenv("TD_timeout_ms", "5", 1); /* case is a typo too */
  capture(td_config_unknown, out, sizeof out);
  assert_non_null(strstr(out, "TD_timeout_ms (not a tdist variable; did you mean TD_TIMEOUT_MS?)"));
  unsetenv("TD_timeout_ms");
  /* a table variable is never reported */
  setenv("TD_TIMEOUT_MS", "1000", 1);
  assert_int_equal(td_config_unknown(NULL), base + 2);
  unsetenv("TD_TIMEOUT_MSS");
  unsetenv("TD_ZZZ_NOTHING_LIKE_IT");
  unsetenv("TD_TIMEOUT_MS");
  assert_int_equal(td_config_unknown(NULL), base);
}

/* td_config_unknown_set: the misspelt knobs td_config_check_prefix refuses, counted (doctor's problems) */
static void test_unknown_set(void **state) {
  (void)state;
  const int base = td_config_unknown_set("TD_OPS_"); /* whatever the test environment sets */
  setenv("TD_OPS_FUSED_BCAST_HAFL", "pace", 1);
  setenv("TD_OPS_FUSED_TALE", "split", 1);
  setenv("TD_OPS_FUSED_TAIL", "split", 1); /* a table name: not counted */
  setenv("TD_TIMEOUT_MSS", "5", 1);        /* outside the prefix */
  assert_int_equal(td_config_unknown_set("TD_OPS_"), base + 2);
  assert_int_equal(td_config_check_prefix("TD_OPS_"), TD_ERR_INVALID_ARG);
  setenv("TD_OPS_FUSED_TALE", "", 1); /* empty reads as unset: no typo in use */
  assert_int_equal(td_config_unknown_set("TD_OPS_"), base + 1);
  assert_int_equal(td_config_unknown_set("TD_"), 0); /* as td_config_check_prefix: only a longer prefix */
  assert_int_equal(td_config_unknown_set(NULL), 0);
  unsetenv("TD_OPS_FUSED_BCAST_HAFL");
  unsetenv("TD_OPS_FUSED_TALE");
  unsetenv("TD_OPS_FUSED_TAIL");
  unsetenv("TD_TIMEOUT_MSS");
  assert_int_equal(td_config_unknown_set("TD_OPS_"), base);
}

static void test_check_all(void **state) {
  (void)state;
  char out[4096];
  setenv("TD_TIMEOUT_MS", "12x", 1);
  setenv("TD_SYMM_HEAP_SIZE", "1T", 1);
  setenv("TD_TRANSPORT", "carrier-pigeon", 1);
  setenv("TD_COLL_SINGLE_COPY", "1", 1);
  setenv("TD_OPS_FUSED_AG_GEMMS", "5", 1); /* in range, not in the list */
  setenv("TD_OPS_FUSED_TILE", "128x", 1);  /* not the grammar */
  int n = capture(td_config_check_all, out, sizeof out);
  assert_int_equal(n, 5);
  assert_non_null(strstr(out, "TD_OPS_FUSED_TILE='128x' is not allowed; allowed: cublas, tiles, BMxBN or BMxBNcC"));
  assert_non_null(strstr(out, "TD_OPS_FUSED_AG_GEMMS='5' is not allowed; allowed: 0,1,3,8"));
  assert_non_null(strstr(out, "TD_TIMEOUT_MS='12x' is not a decimal integer"));
  assert_non_null(strstr(out, "TD_SYMM_HEAP_SIZE='1T'"));
  assert_non_null(strstr(out, "TD_TRANSPORT='carrier-pigeon' is not allowed; allowed: local,shm"));
  assert_null(strstr(out, "TD_COLL_SINGLE_COPY"));
  unsetenv("TD_TIMEOUT_MS");
  unsetenv("TD_SYMM_HEAP_SIZE");
  unsetenv("TD_TRANSPORT");
  unsetenv("TD_COLL_SINGLE_COPY");
  setenv("TD_OPS_FUSED_AG_GEMMS", "3", 1);
  const char *tiles[] = {"cublas", "tiles", "128x256", "128x256c2"};
  for (int i = 0; i < 4; i++) {
    setenv("TD_OPS_FUSED_TILE", tiles[i], 1);
    assert_int_equal(td_config_check_all(NULL), 0);
  }
  /* signs, spaces, overflowing or out-of-range numbers are not the grammar (sscanf took some of them) */
  const char *bad[] = {" 128x256", "128x 256", "+128x+256", "99999999999x256", "128x256 ", "0x256", "512x256",
                       "128x256c3", "128x256c", "128X256", "-1x256"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("TD_OPS_FUSED_TILE", bad[i], 1);
    char msg[1024];
    int nb = capture(td_config_check_all, msg, sizeof msg);
    if (nb != 1)
      print_error("TD_OPS_FUSED_TILE='%s' passed the check\n", bad[i]);
    assert_int_equal(nb, 1);
    assert_non_null(strstr(msg, "BM, BN in 1..256 and C 1 or 2, digits only"));
  }
  unsetenv("TD_OPS_FUSED_TILE");
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
}

/* Runs `tdist ARGS` with extra environment, stdout and stderr into out;
 * returns its exit status (-1 when it did not exit). */
static int tdist_cmd(const char *env, const char *args, char *out, size_t cap) {
  const char *bin = getenv("TD_BIN_DIR");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "env %s '%s/tdist' %s 2>&1", env, bin ? bin : ".", args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, cap - 1, p);
  out[len] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `tdist doctor` with extra environment; returns its exit status. */
static int doctor(const char *env, char *out, size_t cap) { return tdist_cmd(env, "doctor", out, cap); }

static void test_doctor(void **state) {
  (void)state;
  static char out[1 << 16];
  const char *bin = getenv("TD_BIN_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/tdist", bin ? bin : ".");
  if (access(path, X_OK) != 0) {
    print_message("tdist CLI not built (%s): skipped\n", path);
    skip();
  }
  assert_int_equal(doctor("TD_TIMEOUT_MS=500 TD_CPU_COMPUTE_WORKRS=2", out, sizeof out), 0);
  assert_non_null(strstr(out, "TD_CPU_COMPUTE_WORKRS (not a tdist variable; did you mean TD_CPU_COMPUTE_WORKERS?)"));
  assert_int_equal(doctor("TD_CUDA_DEVICE=-1", out, sizeof out), 1);
  assert_non_null(strstr(out, "TD_CUDA_DEVICE='-1' is out of range; allowed 0 to 1024"));
  assert_non_null(strstr(out, "doctor: 1 problem in the configuration"));
  assert_int_equal(doctor("", out, sizeof out), 0);
  /* a calibration file that run/explain would refuse is reported too */
  char dir[] = "/tmp/td-rtcfg-XXXXXX", envs[256], file[300];
  assert_non_null(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/calibration.json", dir);
  FILE *cf = fopen(file, "w");
  assert_non_null(cf);
  fputs("{\"flops_s\": -1}", cf);
  fclose(cf);
  snprintf(envs, sizeof envs, "TD_CACHE_DIR=%s", dir);
  assert_int_equal(doctor(envs, out, sizeof out), 1);
  assert_non_null(strstr(out, "flops_s is -1"));
  unlink(file);
  rmdir(dir);
  assert_non_null(strstr(out, "cores online"));
  assert_non_null(strstr(out, "/dev/shm"));
  assert_non_null(strstr(out, "BLAS"));
  assert_non_null(strstr(out, "CUDA"));
  /* doctor takes no arguments */
  assert_int_equal(tdist_cmd("", "doctor --bogus", out, sizeof out), 2);
  assert_non_null(strstr(out, "unexpected argument '--bogus'"));
  /* every other command refuses a bad variable before any work, naming it */
  assert_int_equal(tdist_cmd("TD_CPU_COMPUTE_WORKERS=-3 TD_TRANSPORT=ib", "explain x.td --ranks 2", out, sizeof out),
                   2);
  assert_non_null(strstr(out, "tdist explain: the environment has configuration variables that do not parse"));
  assert_non_null(strstr(out, "TD_CPU_COMPUTE_WORKERS='-3' is out of range"));
  assert_non_null(strstr(out, "TD_TRANSPORT='ib' is not allowed; allowed: local,shm"));
  /* but a command's --help is still shown: the variables are what the user may be asking about */
  assert_int_equal(tdist_cmd("TD_TRANSPORT=ib TD_OPS_FUSED_TALE=x", "explain --help", out, sizeof out), 0);
  assert_null(strstr(out, "do not parse"));
  assert_non_null(strstr(out, "explain"));
}

static int dump_all(FILE *f) {
  td_config_dump(f);
  return 0;
}

/* Every variable is one row of the table: a name listed twice would be
 * parsed by the first row and documented by both. */
static void test_rows_unique(void **state) {
  (void)state;
  static char out[1 << 16];
  capture(dump_all, out, sizeof out);
  int rows = 0;
  for (char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    if (strncmp(line, "TD_", 3) != 0)
      continue;
    rows++;
    char name[64];
    size_t len = strcspn(line, " \n");
    assert_true(len < sizeof name);
    memcpy(name, line, len);
    name[len] = 0;
    int seen = 0;
    for (char *l2 = out; l2 && *l2; l2 = strchr(l2, '\n') ? strchr(l2, '\n') + 1 : NULL)
      seen += strncmp(l2, name, len) == 0 && (l2[len] == ' ' || l2[len] == '\n');
    if (seen != 1)
      fprintf(stderr, "%s is listed %d times\n", name, seen);
    assert_int_equal(seen, 1);
  }
  assert_true(rows >= 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_unknown), cmocka_unit_test(test_unknown_set),
                                     cmocka_unit_test(test_check_all),
                                     cmocka_unit_test(test_doctor), cmocka_unit_test(test_rows_unique)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
