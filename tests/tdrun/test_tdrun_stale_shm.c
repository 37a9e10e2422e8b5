/* SPDX-License-Identifier: Apache-2.0
 * tdrun removes, when it starts, other jobs' /dev/shm/tdist-* leftovers that
 * no job can use: unchanged for over a minute and with a dead creator or
 * never initialised. A fresh dead-creator region (the transport and its tests
 * deal with those) and a live creator's region are kept. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tdrun/tdrun_test_util.h"
#include "transport/transport.h"

/* /dev/shm/<name>: a region header with creator `pid` (0: never initialised), last changed `age_s` ago. */
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
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age_s;
  t[1] = t[0];
  assert_int_equal(futimens(fd, t), 0);
  close(fd);
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
  char want[160];
  snprintf(want, sizeof want, "tdrun: removed /dev/shm%s (stale: its creator is gone)\n", old_dead);
  /* Another tdrun started by a concurrent test may have removed it first
   * (then this one has nothing to say about it); it must be gone either way. */
  if (!strstr(res.err, want))
    print_message("%s removed by another tdrun before this one looked\n", old_dead);
  else
    assert_non_null(strstr(res.err, "(stale: its creator is gone)\n"));
  assert_null(strstr(res.err, fresh_dead + 1));
  assert_null(strstr(res.err, old_live + 1));
  tdt_result_free(&res);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stale_removed_at_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
