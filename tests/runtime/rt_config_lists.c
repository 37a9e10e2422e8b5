/* SPDX-License-Identifier: Apache-2.0
 * The configuration table's messages for variables with an allowed list: a
 * number outside the list's ends quotes the list (not "min to max", which
 * reads as if every number between were allowed); TD_CUDA_TARGET_SM takes
 * the SM versions CUDA builds for only; and td_config_dump shows a variable
 * set to the empty string as "(empty)", since it reads as unset; a byte
 * count takes one suffix, K/M/G, KB/MB/GB or KiB/MiB/GiB, and nothing after it;
 * a near miss of a listed string value is answered with the value meant. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/suggest.h"
#include "tdist/tdist.h"

static void expect_refused(const char *name, const char *value, const char *message) {
  setenv(name, value, 1);
  int64_t v = 0;
  assert_int_equal(td_config_int(name, &v), TD_ERR_INVALID_ARG);
  if (!strstr(td_last_error(), message))
    fprintf(stderr, "%s=%s: got '%s'\n", name, value, td_last_error());
  assert_non_null(strstr(td_last_error(), message));
  assert_null(strstr(td_last_error(), "out of range"));
  unsetenv(name);
}

static void test_listed_int_quotes_list(void **state) {
  (void)state;
  const char *msg = "is not allowed; allowed: 0,1,3,8";
  expect_refused("TD_OPS_FUSED_AG_GEMMS", "9", "TD_OPS_FUSED_AG_GEMMS='9' is not allowed; allowed: 0,1,3,8");
  expect_refused("TD_OPS_FUSED_AG_GEMMS", "-1", msg);
  expect_refused("TD_OPS_FUSED_AG_GEMMS", "12345678901234567890123", msg);
  expect_refused("TD_OPS_FUSED_AG_GEMMS", "2", msg); /* inside the ends, not in the list (as before) */
  setenv("TD_OPS_FUSED_AG_GEMMS", "3", 1);
  int64_t v = 0;
  assert_int_equal(td_config_int("TD_OPS_FUSED_AG_GEMMS", &v), TD_OK);
  assert_int_equal(v, 3);
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
  /* a variable without a list keeps the range message */
  setenv("TD_CUDA_DEVICE", "-1", 1);
  assert_int_equal(td_config_int("TD_CUDA_DEVICE", &v), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "TD_CUDA_DEVICE='-1' is out of range; allowed 0 to 1024"));
  unsetenv("TD_CUDA_DEVICE");
}

static void test_target_sm_real_versions(void **state) {
  (void)state;
  const char *msg = "is not allowed; allowed: 75,80,86,87,88,89,90,100,103,110,120,121";
  expect_refused("TD_CUDA_TARGET_SM", "9", msg);
  expect_refused("TD_CUDA_TARGET_SM", "0", msg);
  expect_refused("TD_CUDA_TARGET_SM", "91", msg);
  expect_refused("TD_CUDA_TARGET_SM", "1000", msg);
  const char *ok[] = {"75", "80", "90", "100", "120"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    setenv("TD_CUDA_TARGET_SM", ok[i], 1);
    int64_t v = 0;
    assert_int_equal(td_config_int("TD_CUDA_TARGET_SM", &v), TD_OK);
    assert_int_equal(v, atoi(ok[i]));
  }
  unsetenv("TD_CUDA_TARGET_SM");
}

static void dump(char *buf, size_t cap) {
  FILE *f = tmpfile();
  assert_non_null(f);
  td_config_dump(f);
  rewind(f);
  size_t len = fread(buf, 1, cap - 1, f);
  buf[len] = 0;
  fclose(f);
}

/* The line of the dump that starts with `name`. */
static const char *line_of(const char *buf, const char *name, char *line, size_t cap) {
  for (const char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, name, strlen(name)) && p[strlen(name)] == ' ') {
      size_t n = strcspn(p, "\n");
      snprintf(line, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
      return line;
    }
  return NULL;
}

static void test_empty_shown_as_empty(void **state) {
  (void)state;
  static char buf[1 << 16];
  char line[512];
  setenv("TD_OPS_FUSED_AR", "", 1);
  dump(buf, sizeof buf);
  assert_non_null(line_of(buf, "TD_OPS_FUSED_AR", line, sizeof line));
  assert_non_null(strstr(line, "(empty)"));
  assert_null(strstr(line, "(set)"));
  assert_non_null(strstr(line, "value='' (empty: treated as unset, the default applies)"));
  const char *s = NULL; /* and it is indeed read as unset: the default */
  assert_int_equal(td_config_str("TD_OPS_FUSED_AR", &s), TD_OK);
  assert_string_equal(s, "auto");
  setenv("TD_OPS_FUSED_AR", "two-shot", 1);
  dump(buf, sizeof buf);
  assert_non_null(line_of(buf, "TD_OPS_FUSED_AR", line, sizeof line));
  assert_non_null(strstr(line, "(set)"));
  assert_non_null(strstr(line, "value=two-shot"));
  unsetenv("TD_OPS_FUSED_AR");
  dump(buf, sizeof buf);
  assert_non_null(line_of(buf, "TD_OPS_FUSED_AR", line, sizeof line));
  assert_non_null(strstr(line, "(unset)"));
}

static void test_byte_suffix_once(void **state) {
  (void)state;
  const char *msg = "is not a byte count (digits with an optional K, M or G suffix, also written KB or KiB";
  expect_refused("TD_SYMM_HEAP_SIZE", "1GBB", msg);
  expect_refused("TD_SYMM_HEAP_SIZE", "1GiBB", msg);
  expect_refused("TD_SYMM_HEAP_SIZE", "1Gi", msg);
  expect_refused("TD_SYMM_HEAP_SIZE", "1GG", msg);
  const char *ok[] = {"1G", "1GB", "1GiB", "1g", "64K", "64KiB"};
  const int64_t want[] = {INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30, 65536, 65536};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    setenv("TD_SYMM_HEAP_SIZE", ok[i], 1);
    int64_t v = 0;
    assert_int_equal(td_config_int("TD_SYMM_HEAP_SIZE", &v), TD_OK);
    assert_int_equal(v, want[i]);
  }
  unsetenv("TD_SYMM_HEAP_SIZE");
}

/* TD_OPS_FUSED_RS / TD_OPS_FUSED_AR take kgather exactly: no other case, no space around it, no list */
static void test_fused_kgather_values(void **state) {
  (void)state;
  const char *names[2] = {"TD_OPS_FUSED_RS", "TD_OPS_FUSED_AR"};
  const char *lists[2] = {"allowed: auto,pull,push,kgather", "allowed: auto,two-shot,all-push,kgather"};
  const char *bad[] = {"KGATHER", "Kgather", "kgather ", " kgather", "kgather,push", "k-gather", "kgathe"};
  for (int v = 0; v < 2; v++) {
    const char *s = NULL;
    setenv(names[v], "kgather", 1);
    assert_int_equal(td_config_str(names[v], &s), TD_OK);
    assert_string_equal(s, "kgather");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      char want[160];
      setenv(names[v], bad[i], 1);
      assert_int_equal(td_config_str(names[v], &s), TD_ERR_INVALID_ARG);
      snprintf(want, sizeof want, "%s='%s' is not allowed; %s", names[v], bad[i], lists[v]);
      if (!strstr(td_last_error(), want))
        fprintf(stderr, "got '%s', want '%s'\n", td_last_error(), want);
      assert_non_null(strstr(td_last_error(), want));
    }
    unsetenv(names[v]);
  }
}

/* A string variable of two values, exactly: its default, the other one, and
 * near misses refused with the variable, the value and the allowed list. */
static void expect_two_values(const char *name, const char *dflt, const char *other, const char *allowed,
                              const char *const *bad, size_t nbad) {
  const char *s = NULL;
  unsetenv(name);
  assert_int_equal(td_config_str(name, &s), TD_OK);
  assert_string_equal(s, dflt);
  setenv(name, other, 1);
  assert_int_equal(td_config_str(name, &s), TD_OK);
  assert_string_equal(s, other);
  for (size_t i = 0; i < nbad; i++) {
    char want[160];
    setenv(name, bad[i], 1);
    assert_int_equal(td_config_str(name, &s), TD_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "%s='%s' is not allowed; allowed: %s", name, bad[i], allowed);
    if (!strstr(td_last_error(), want))
      fprintf(stderr, "got '%s', want '%s'\n", td_last_error(), want);
    assert_non_null(strstr(td_last_error(), want));
  }
  unsetenv(name);
}

/* A third value of a string variable, read back as set. */
static void expect_accepted(const char *name, const char *value) {
  const char *s = NULL;
  setenv(name, value, 1);
  assert_int_equal(td_config_str(name, &s), TD_OK);
  assert_string_equal(s, value);
  unsetenv(name);
}

/* TD_OPS_FUSED_BCAST_HINT: none (the default) or evict_first, exactly */
static void test_fused_bcast_hint_values(void **state) {
  (void)state;
  const char *bad[] = {"evict-first", "EVICT_FIRST", "evict_first ", "first", "1"};
  expect_two_values("TD_OPS_FUSED_BCAST_HINT", "none", "evict_first", "none,evict_first", bad, 5);
}

/* TD_OPS_FUSED_BCAST_HALF: pace (the default), wait or defer, exactly */
static void test_fused_bcast_half_values(void **state) {
  (void)state;
  const char *bad[] = {"deferred", "Defer", "defer ", "late", "1", "paced", "PACE", " pace"};
  expect_two_values("TD_OPS_FUSED_BCAST_HALF", "pace", "defer", "wait,defer,pace", bad, 8);
  expect_accepted("TD_OPS_FUSED_BCAST_HALF", "wait");
}

/* TD_OPS_FUSED_MAP_FENCE: tile (the default) or start, exactly */
static void test_fused_map_fence_values(void **state) {
  (void)state;
  const char *bad[] = {"Start", "tile ", "0", "1", "each", "per-tile", "tiles"};
  expect_two_values("TD_OPS_FUSED_MAP_FENCE", "tile", "start", "tile,start", bad, 7);
}

/* TD_OPS_FUSED_TAIL: split (the default), split2 or none, exactly */
static void test_fused_tail_values(void **state) {
  (void)state;
  const char *bad[] = {"off", "Split", "split ", "0", "stream-k", "split-2", "split22", "split3"};
  expect_two_values("TD_OPS_FUSED_TAIL", "split", "none", "split,split2,none", bad, 8);
  expect_accepted("TD_OPS_FUSED_TAIL", "split2");
}

/* TD_OPS_FUSED_AG: gather (each rank's launch), gather-one (one launch for every rank), gather-share (each
 * rank's launch on its share of the SMs) and batched-one (rank 0's one cuBLAS batched launch) exactly */
static void test_fused_ag_values(void **state) {
  (void)state;
  const char *s = NULL;
  const char *good[] = {"gather", "gather-one", "gather-share", "batched-one"};
  for (size_t i = 0; i < 4; i++) {
    setenv("TD_OPS_FUSED_AG", good[i], 1);
    assert_int_equal(td_config_str("TD_OPS_FUSED_AG", &s), TD_OK);
    assert_string_equal(s, good[i]);
  }
  const char *bad[] = {"gather_one", "gather-1", "gatherone", "gather-one ", "gather-", "Gather-one", "one",
                       "gather-shared", "gather_share", "share", "batched_one", "batched-1", "batchedone"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[200];
    setenv("TD_OPS_FUSED_AG", bad[i], 1);
    assert_int_equal(td_config_str("TD_OPS_FUSED_AG", &s), TD_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "TD_OPS_FUSED_AG='%s' is not allowed; allowed: auto,copy,direct,batched,batched-one,gather,"
             "gather-one,gather-share",
             bad[i]);
    if (!strstr(td_last_error(), want))
      fprintf(stderr, "got '%s', want '%s'\n", td_last_error(), want);
    assert_non_null(strstr(td_last_error(), want));
  }
  unsetenv("TD_OPS_FUSED_AG");
}

/* TD_OPS_FUSED_BCAST_PACE: 3 by default, any of 1..16 read back, the rest
 * refused with the variable, the value and the range */
static void test_fused_bcast_pace_values(void **state) {
  (void)state;
  int64_t v = 0;
  unsetenv("TD_OPS_FUSED_BCAST_PACE");
  assert_int_equal(td_config_int("TD_OPS_FUSED_BCAST_PACE", &v), TD_OK);
  assert_int_equal(v, 3);
  const char *good[] = {"1", "2", "16"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    setenv("TD_OPS_FUSED_BCAST_PACE", good[i], 1);
    assert_int_equal(td_config_int("TD_OPS_FUSED_BCAST_PACE", &v), TD_OK);
    assert_int_equal(v, atoi(good[i]));
  }
  const char *range[] = {"0", "17", "-3"};
  for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
    char want[128];
    setenv("TD_OPS_FUSED_BCAST_PACE", range[i], 1);
    assert_int_equal(td_config_int("TD_OPS_FUSED_BCAST_PACE", &v), TD_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "TD_OPS_FUSED_BCAST_PACE='%s' is out of range; allowed 1 to 16", range[i]);
    assert_non_null(strstr(td_last_error(), want));
  }
  const char *bad[] = {"three", "3k", " 3", "3 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("TD_OPS_FUSED_BCAST_PACE", bad[i], 1);
    assert_int_equal(td_config_int("TD_OPS_FUSED_BCAST_PACE", &v), TD_ERR_INVALID_ARG);
    char want[160]; /* not a number: the value and the range said all the same */
    snprintf(want, sizeof want, "TD_OPS_FUSED_BCAST_PACE='%s' is not a decimal integer (digits only, no spaces); "
             "allowed 1 to 16", bad[i]);
    assert_non_null(strstr(td_last_error(), want));
  }
  setenv("TD_OPS_FUSED_BCAST_PACE", "", 1); /* empty is unset, as for every variable: the default */
  assert_int_equal(td_config_int("TD_OPS_FUSED_BCAST_PACE", &v), TD_OK);
  assert_int_equal(v, 3);
  unsetenv("TD_OPS_FUSED_BCAST_PACE");
}

/* td__suggest: the nearest items within max(1, len / 3) edits, case and - / _ free; nothing for an exact
 * value, a far one, an empty or an over-long one */
static void test_suggest_rule(void **state) {
  (void)state;
  char b[48];
  const char *ag = "auto,copy,direct,batched,batched-one,gather,gather-one,gather-share";
  assert_int_equal(td__suggest("batched_one", ag, NULL, b, sizeof b), 1);
  assert_string_equal(b, "'batched-one'");
  assert_int_equal(td__suggest("Batched-One", ag, NULL, b, sizeof b), 1);
  assert_string_equal(b, "'batched-one'");
  assert_int_equal(td__suggest("gahter", ag, NULL, b, sizeof b), 1); /* a swap of neighbours is one edit */
  assert_string_equal(b, "'gather'");
  assert_int_equal(td__suggest("gather-on", ag, NULL, b, sizeof b), 1);
  assert_string_equal(b, "'gather-one'");
  assert_int_equal(td__suggest("gather", ag, NULL, b, sizeof b), 0); /* exact: no miss */
  assert_string_equal(b, "");
  assert_int_equal(td__suggest("xyz", ag, NULL, b, sizeof b), 0);
  assert_int_equal(td__suggest("", ag, NULL, b, sizeof b), 0);
  assert_int_equal(td__suggest("smh", "local,shm", NULL, b, sizeof b), 1);
  assert_string_equal(b, "'shm'");
  assert_int_equal(td__suggest("sh", "local,shm", NULL, b, sizeof b), 1);
  assert_string_equal(b, "'shm'");
  assert_int_equal(td__suggest("lo", "local,shm", NULL, b, sizeof b), 0); /* 3 edits from local: too far */
  assert_int_equal(td__suggest("w", "x,w1,w2", NULL, b, sizeof b), 2); /* one letter is not near every letter */
  assert_string_equal(b, "'w1' or 'w2'");
  assert_int_equal(td__suggest("w", "x,y", NULL, b, sizeof b), 0);
  assert_int_equal(td__suggest("split3", "split,split2,none", NULL, b, sizeof b), 2); /* a tie names both */
  assert_string_equal(b, "'split' or 'split2'");
  assert_int_equal(td__suggest("pull", " a b  pul ", " ", b, sizeof b), 1); /* other separators, runs of them */
  assert_string_equal(b, "'pul'");
  char longer[80];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  assert_int_equal(td__suggest(longer, ag, NULL, b, sizeof b), 0);
  assert_int_equal(td__suggest("batched_one", ag, NULL, b, 6), 0); /* does not fit: nothing, not a cut name */
  assert_string_equal(b, "");
  assert_int_equal(td__edit_distance("kitten", "sitting"), 3);
  assert_int_equal(td__edit_distance("ca", "abc"), 3); /* the alignment distance: no edit of a swapped pair */
  assert_int_equal(td__edit_distance("TD_TIMEOUT_SM", "TD_TIMEOUT_MS"), 1);
  assert_int_equal(td__edit_distance("TD_X", "td-x"), 0);
}

/* A listed string variable set to a near miss says which value was meant, after the allowed list */
static void test_listed_string_near_miss(void **state) {
  (void)state;
  const char *s = NULL;
  setenv("TD_OPS_FUSED_AG", "batched_one", 1);
  assert_int_equal(td_config_str("TD_OPS_FUSED_AG", &s), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "TD_OPS_FUSED_AG='batched_one' is not allowed; allowed: auto,copy,"));
  assert_non_null(strstr(td_last_error(), ",gather-share (did you mean 'batched-one'?)"));
  setenv("TD_OPS_FUSED_AG", "zzzzzz", 1);
  assert_int_equal(td_config_str("TD_OPS_FUSED_AG", &s), TD_ERR_INVALID_ARG);
  assert_null(strstr(td_last_error(), "did you mean"));
  unsetenv("TD_OPS_FUSED_AG");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_listed_int_quotes_list),
      cmocka_unit_test(test_target_sm_real_versions),
      cmocka_unit_test(test_empty_shown_as_empty),
      cmocka_unit_test(test_byte_suffix_once),
      cmocka_unit_test(test_fused_kgather_values),
      cmocka_unit_test(test_fused_bcast_hint_values),
      cmocka_unit_test(test_fused_tail_values),
      cmocka_unit_test(test_fused_map_fence_values),
      cmocka_unit_test(test_fused_bcast_half_values),
      cmocka_unit_test(test_fused_ag_values),
      cmocka_unit_test(test_fused_bcast_pace_values),
      cmocka_unit_test(test_suggest_rule),
      cmocka_unit_test(test_listed_string_near_miss),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
