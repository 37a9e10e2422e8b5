/* SPDX-License-Identifier: Apache-2.0
 * Test helpers for the `tdist` CLI tests: run `tdist ARGS` with stderr merged
 * into the captured output, and expect a usage error (exit status 2) whose
 * text contains a given message. Include after <cmocka.h>; set tdist_bin
 * (e.g. from TD_BIN_DIR) before the first run. */
#ifndef TD_TESTS_CLI_TEST_UTIL_H
#define TD_TESTS_CLI_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char tdist_bin[4096];

/* Runs the shell command CMD; returns its exit status (-1 if it did not exit), output in out. */
static inline int run_cmd(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, cap - 1, p);
  out[len] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `tdist ARGS`; returns the exit status (-1 if it did not exit), output in out. */
static inline int run(const char *args, char *out, size_t cap) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tdist_bin, args);
  return run_cmd(cmd, out, cap);
}

/* Runs `cd DIR && [ENV] $TD_BIN_DIR/tdist ARGS` (ENV: "NAME=value ..." or NULL;
 * TD_BIN_DIR unset: ./tdist); returns the exit status (-1 if it did not
 * exit), stdout and stderr in out. */
static inline int run_in(const char *dir, const char *env, const char *args, char *out, size_t cap) {
  const char *bin = getenv("TD_BIN_DIR");
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cd '%s' && %s '%s/tdist' %s 2>&1", dir, env ? env : "", bin ? bin : ".", args);
  return run_cmd(cmd, out, cap);
}

/* Writes len bytes of data to DIR/NAME (fails the test when it cannot). */
static inline void write_in(const char *dir, const char *name, const void *data, size_t len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

static inline void expect_usage_error(const char *args, const char *needle) {
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 2 || !strstr(out, needle))
    fprintf(stderr, "tdist %s: status %d, output:\n%s\n", args, rc, out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, needle));
}

#ifdef cJSON__h /* the including test uses cJSON (included before this header) */
/* Parses the JSON file a command wrote (up to 1 MiB); fails the test when it cannot. */
static inline cJSON *load_json(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  cJSON *j = cJSON_Parse(buf);
  assert_non_null(j);
  return j;
}
#endif

#endif
