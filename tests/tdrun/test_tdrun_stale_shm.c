/* SPDX-License-Identifier: Apache-2.0
 * tdrun removes, when it starts, other jobs' /dev/shm/tdist-* leftovers that
 * no job can use: unchanged for over a minute and with a dead creator or
 * never initialised. A fresh dead-creator region (the transport and its tests
 * deal with those) and a live creator's region are kept. A file that merely
 * starts with "tdist-" (no region header) is left alone, said so under -v, and
 * `tdist doctor` does not list it as stale either; an empty object named like
 * a tdrun job's region (its creator died before sizing it) is removed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tdrun/tdrun_test_util.h"
#include "transport/transport.h"

/* /dev/shm/<name>: a region header with creator `pid` (0: never initialised), last changed `age_s` ago. */
/* Dates the object's times age_s seconds back (the sweep's age test), then closes it. */
static void age_and_close(int fd, int age_s) {
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age_s;
  t[1] = t[0];
  assert_int_equal(futimens(fd, t), 0);
  close(fd);
}

static void make_region(const char *name, int32_t pid, int age_s) {
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 65536), 0);
  if (pid) {
    td__region_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(h != MAP_FAILED);
    h->creator_pid = pid;
    h->world_size = 2;
    atomic_store_explicit(&h->magic, TD__REGION_MAGIC, memory_order_release);
    munmap(h, sizeof *h);
  }
  age_and_close(fd, age_s);
}

static int exists(const char *name) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd >= 0)
    close(fd);
  return fd >= 0;
}

static void test_stale_removed_at_start(void **state) {
  (void)state;
  pid_t child = fork(); /* a pid that is surely dead once reaped */
  assert_true(child >= 0);
  if (child == 0)
    _exit(0);
  assert_int_equal(waitpid(child, NULL, 0), child);
  char old_dead[80], fresh_dead[80], old_live[80], old_half[80];
  long me = (long)getpid();
  snprintf(old_dead, sizeof old_dead, "/tdist-tdrunstale-olddead-%ld", me);
  snprintf(fresh_dead, sizeof fresh_dead, "/tdist-tdrunstale-freshdead-%ld", me);
  snprintf(old_live, sizeof old_live, "/tdist-tdrunstale-oldlive-%ld", me);
  snprintf(old_half, sizeof old_half, "/tdist-tdrunstale-oldhalf-%ld", me);
  const char *all[] = {old_dead, fresh_dead, old_live, old_half};
  for (int i = 0; i < 4; i++)
    shm_unlink(all[i]);
  make_region(old_dead, (int32_t)child, 120);
  make_region(fresh_dead, (int32_t)child, 0);
  make_region(old_live, (int32_t)me, 120);
  make_region(old_half, 0, 120);
  char *argv[] = {(char *)tdt_tdrun(), "-v", "-n", "1", "/bin/true", NULL};
  tdt_result res;
  tdt_run(argv, &res);
  int kept_fresh = exists(fresh_dead), kept_live = exists(old_live);
  int gone_dead = !exists(old_dead), gone_half = !exists(old_half);
  for (int i = 0; i < 4; i++)
    shm_unlink(all[i]);
  assert_int_equal(tdt_exit_code(&res), 0);
  assert_true(gone_dead);
  assert_true(gone_half);
  assert_true(kept_fresh);
  assert_true(kept_live);
  char want[300];
  snprintf(want, sizeof want, "tdrun: removed /dev/shm%s (stale: a tdist region whose creator, pid %ld, is gone)\n",
           old_dead, (long)child);
  /* Another tdrun started by a concurrent test may have removed it first
   * (then this one has nothing to say about it); it must be gone either way. */
  if (!strstr(res.err, want))
    print_message("%s removed by another tdrun before this one looked\n", old_dead);
  snprintf(want, sizeof want, "tdrun: removed /dev/shm%s (stale: a tdist region whose creator died before finishing "
           "it)\n", old_half);
  if (!strstr(res.err, want))
    print_message("%s removed by another tdrun before this one looked\n", old_half);
  assert_null(strstr(res.err, fresh_dead + 1));
  assert_null(strstr(res.err, old_live + 1));
  tdt_result_free(&res);
}

/* /dev/shm/<name> holding `len` bytes of `text`, last changed `age_s` ago. */
static void make_file(const char *name, const char *text, size_t len, int age_s) {
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, len), (ssize_t)len);
  age_and_close(fd, age_s);
}

static void test_foreign_files_kept(void **state) {
  (void)state;
  char notes[80], big[80], empty_job[80], empty_other[80];
  long me = (long)getpid();
  snprintf(notes, sizeof notes, "/tdist-user-notes-%ld.txt", me);
  snprintf(big, sizeof big, "/tdist-user-data-%ld", me);
  snprintf(empty_job, sizeof empty_job, "/tdist-%ld-00000000deadbeef", me); /* a tdrun job's name */
  snprintf(empty_other, sizeof empty_other, "/tdist-user-empty-%ld", me);
  const char *all[] = {notes, big, empty_job, empty_other};
  for (int i = 0; i < 4; i++)
    shm_unlink(all[i]);
  make_file(notes, "notes\n", 6, 86400);
  char data[4096];
  memset(data, 'x', sizeof data); /* long enough for a header, but not one */
  make_file(big, data, sizeof data, 86400);
  make_file(empty_job, "", 0, 120);
  make_file(empty_other, "", 0, 120);

  char doctor[512];
  snprintf(doctor, sizeof doctor, "%s/tdist", getenv("TD_BIN_DIR") ? getenv("TD_BIN_DIR") : ".");
  char *dargv[] = {doctor, "doctor", NULL};
  tdt_result dres;
  tdt_run(dargv, &dres); /* before tdrun removes anything */

  char *argv[] = {(char *)tdt_tdrun(), "-v", "-n", "1", "/bin/true", NULL};
  tdt_result res;
  tdt_run(argv, &res);
  int kept[4];
  for (int i = 0; i < 4; i++)
    kept[i] = exists(all[i]);
  for (int i = 0; i < 4; i++)
    shm_unlink(all[i]);
  assert_int_equal(tdt_exit_code(&res), 0);
  assert_true(kept[0] && kept[1] && kept[3]);
  assert_false(kept[2]);
  char want[300];
  for (int i = 0; i < 2; i++) {
    snprintf(want, sizeof want,
             "tdrun: left /dev/shm%s alone: named like a tdist region, but it has no region header\n", all[i]);
    if (!strstr(res.err, want))
      fail_msg("no '%s' in: %s", want, res.err);
  }
  snprintf(want, sizeof want, "removed /dev/shm%s (stale: a tdist region whose creator died before finishing it)\n",
           empty_job);
  if (!strstr(res.err, want))
    print_message("%s removed by another tdrun before this one looked\n", empty_job);
  for (int i = 0; i < 4; i++)
    if (i != 2) {
      snprintf(want, sizeof want, "removed /dev/shm%s", all[i]);
      assert_null(strstr(res.err, want));
    }
  /* doctor lists none of the foreign files as stale */
  assert_true(WIFEXITED(dres.status));
  assert_non_null(strstr(dres.out, "machine:")); /* doctor did run */
  for (int i = 0; i < 4; i++)
    if (i != 2 && strstr(dres.out, all[i] + 1))
      fail_msg("doctor lists %s: %s", all[i], dres.out);
  tdt_result_free(&dres);
  tdt_result_free(&res);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stale_removed_at_start),
      cmocka_unit_test(test_foreign_files_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
