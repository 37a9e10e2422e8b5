/* SPDX-License-Identifier: Apache-2.0
 * JIT disk cache: keys, round trips, crash-safe stores, and corrupt entries
 * (truncated, bad magic, flipped payload byte, stored under another key) that
 * must be deleted and rebuilt, never trusted; concurrent writers and readers
 * never observe a partial entry. No GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit/jit.h"

static char g_dir[256];

static int setup(void **state) {
  snprintf(g_dir, sizeof g_dir, "/tmp/tdist-jit-test-%ld", (long)getpid());
  return 0;
}

static int teardown(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void entry_path(char *buf, size_t cap, const char *key) {
  snprintf(buf, cap, "%s/%s.cubin", g_dir, key);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static void test_key_depends_on_every_part(void **state) {
  char k1[TD__JIT_KEY_CHARS + 1], k2[TD__JIT_KEY_CHARS + 1], k3[TD__JIT_KEY_CHARS + 1],
      k4[TD__JIT_KEY_CHARS + 1], k5[TD__JIT_KEY_CHARS + 1];
  const char *opt[] = {"-DX=1"};
  td__jit_cache_key("src", "sm_90a", NULL, 0, k1);
  td__jit_cache_key("src", "sm_90a", NULL, 0, k2);
  td__jit_cache_key("src", "sm_80", NULL, 0, k3);
  td__jit_cache_key("srd", "sm_90a", NULL, 0, k4);
  td__jit_cache_key("src", "sm_90a", opt, 1, k5);
  assert_int_equal(strlen(k1), TD__JIT_KEY_CHARS);
  assert_string_equal(k1, k2);
  assert_string_not_equal(k1, k3);
  assert_string_not_equal(k1, k4);
  assert_string_not_equal(k1, k5);
  /* Parts are separated: moving a character across the boundary changes the key. */
  td__jit_cache_key("srcs", "m_90a", NULL, 0, k2);
  assert_string_not_equal(k1, k2);
}

static void test_dir_from_env(void **state) {
  char buf[512], want[600];
  setenv("TD_CACHE_DIR", g_dir, 1);
  assert_int_equal(td__jit_cache_dir(buf, sizeof buf), TD_OK);
  snprintf(want, sizeof want, "%s/jit", g_dir);
  assert_string_equal(buf, want);
  unsetenv("TD_CACHE_DIR");
  setenv("HOME", "/home/someone", 1);
  assert_int_equal(td__jit_cache_dir(buf, sizeof buf), TD_OK);
  assert_string_equal(buf, "/home/someone/.cache/tdist/jit");
  assert_int_equal(td__jit_cache_dir(buf, 8), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "longer than"));
  const char *home = getenv("HOME");
  char saved[256];
  snprintf(saved, sizeof saved, "%s", home);
  unsetenv("HOME");
  assert_int_equal(td__jit_cache_dir(buf, sizeof buf), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "set TD_CACHE_DIR"));
  setenv("HOME", saved, 1);
}

static void test_round_trip_and_no_temp_left(void **state) {
  unsigned char payload[3000];
  for (size_t i = 0; i < sizeof payload; i++)
    payload[i] = (unsigned char)(i * 7 + 3);
  assert_int_equal(td__jit_cache_store(g_dir, "0123abcd", payload, sizeof payload), TD_OK);
  td__jit_image img = {0};
  int corrupt = -1;
  assert_int_equal(td__jit_cache_load(g_dir, "0123abcd", &img, &corrupt), TD_OK);
  assert_int_equal(corrupt, 0);
  assert_int_equal(img.size, sizeof payload);
  assert_int_equal(img.from_cache, 1);
  assert_memory_equal(img.data, payload, sizeof payload);
  td__jit_image_free(&img);
  assert_int_equal(count_files(g_dir), 1); /* the entry only: the temp file was renamed */
  assert_int_equal(td__jit_cache_load(g_dir, "ffff0000", &img, &corrupt), TD_ERR_NOT_FOUND);
  assert_int_equal(corrupt, 0);
}

/* Damages entry `key` in one of several ways, then checks it is refused and removed. */
static void damage_and_check(const char *key, int how) {
  unsigned char payload[512];
  memset(payload, 0x5a, sizeof payload);
  assert_int_equal(td__jit_cache_store(g_dir, key, payload, sizeof payload), TD_OK);
  char path[512];
  entry_path(path, sizeof path, key);
  if (how == 0) {
    assert_int_equal(truncate(path, 100), 0); /* a crash mid-write without rename */
  } else if (how == 1 || how == 2) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    fseek(f, how == 1 ? 0 : (long)st.st_size - 10, SEEK_SET); /* magic, or a payload byte */
    fputc('#', f);
    fclose(f);
  } else {
    char other[512];
    entry_path(other, sizeof other, "aaaa1111");
    assert_int_equal(rename(path, other), 0); /* an entry under the wrong name */
    snprintf(path, sizeof path, "%s", other);
    key = "aaaa1111";
  }
  td__jit_image img = {0};
  int corrupt = 0;
  assert_int_equal(td__jit_cache_load(g_dir, key, &img, &corrupt), TD_ERR_NOT_FOUND);
  assert_int_equal(corrupt, 1);
  assert_null(img.data);
  assert_int_not_equal(access(path, F_OK), 0); /* deleted so the rebuild replaces it */
}

static void test_corrupt_entries_are_removed(void **state) {
  damage_and_check("c0000000", 0);
  damage_and_check("c0000001", 1);
  damage_and_check("c0000002", 2);
  damage_and_check("c0000003", 3);
}

static void test_store_errors(void **state) {
  unsigned char b = 1;
  assert_int_equal(td__jit_cache_store("/proc/no/such/dir", "k", &b, 1), TD_ERR_SYSTEM);
  assert_non_null(strstr(td_last_error(), "/proc/no/such/dir"));
  assert_int_equal(td__jit_cache_store(g_dir, "k", &b, 0), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "empty"));
  td__jit_image img = {0};
  assert_int_equal(td__jit_cache_load(NULL, "k", &img, NULL), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "NULL"));
}

/* Writers store one key over and over while readers load it: a reader sees the
 * entry absent or intact, never corrupt (rename is atomic). */
enum { NTHREADS = 4, ROUNDS = 60, PAYLOAD = 64 * 1024 };
static unsigned char g_payload[PAYLOAD];
static int g_bad;

static void *hammer(void *arg) {
  const int writer = (int)(intptr_t)arg % 2 == 0;
  for (int r = 0; r < ROUNDS; r++) {
    if (writer) {
      if (td__jit_cache_store(g_dir, "beef", g_payload, PAYLOAD) != TD_OK)
        __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
    } else {
      td__jit_image img = {0};
      int corrupt = 0;
      td_status st = td__jit_cache_load(g_dir, "beef", &img, &corrupt);
      if (corrupt || (st == TD_OK && (img.size != PAYLOAD || memcmp(img.data, g_payload, PAYLOAD))))
        __atomic_add_fetch(&g_bad, 1, __ATOMIC_RELAXED);
      td__jit_image_free(&img);
    }
  }
  return NULL;
}

static void test_concurrent_store_and_load(void **state) {
  for (int i = 0; i < PAYLOAD; i++)
    g_payload[i] = (unsigned char)(i ^ (i >> 8));
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, hammer, (void *)(intptr_t)i), 0);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  assert_int_equal(g_bad, 0);
  td__jit_image img = {0};
  assert_int_equal(td__jit_cache_load(g_dir, "beef", &img, NULL), TD_OK);
  assert_memory_equal(img.data, g_payload, PAYLOAD);
  td__jit_image_free(&img);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_depends_on_every_part),
      cmocka_unit_test(test_dir_from_env),
      cmocka_unit_test(test_round_trip_and_no_temp_left),
      cmocka_unit_test(test_corrupt_entries_are_removed),
      cmocka_unit_test(test_store_errors),
      cmocka_unit_test(test_concurrent_store_and_load),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
