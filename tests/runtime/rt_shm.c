/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: the shm transport with forked processes (no launcher needed).
 * Worlds of 1..8 processes move data with signals, barrier and split teams;
 * nothing is left in /dev/shm; a dead job's leftover segment is replaced, a
 * live job's is refused; a rank that never starts is named at the deadline;
 * a rank whose process dies makes the others fail with TD_ERR_PEER_FAILED. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "runtime/rt_harness.h"
#include "transport/transport.h"

#define HAS(text) RT_CHECK(strstr(td_last_error(), (text)) != NULL)

static td_status work_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  int n = td_world_size(w), next = (rank + 1) % n, prev = (rank + n - 1) % n;
  RT_CHECK(strcmp(td_world_transport(w), n > 1 ? "shm" : "local") == 0);
  RT_CHECK(td_world_local_rank(w) == rank && td_world_local_size(w) == n);
  uint64_t *buf = NULL, *sig = NULL;
  RT_OK(td_symm_alloc(team, 64 * sizeof(uint64_t), 0, (void **)&buf));
  RT_OK(td_symm_alloc(team, 2 * sizeof(uint64_t), 0, (void **)&sig));
  sig[0] = sig[1] = 0;
  RT_OK(td_barrier_all(w));
  uint64_t local[64];
  for (uint64_t i = 1; i <= 200; i++) {
    RT_OK(td_signal_wait_until(team, &sig[1], TD_CMP_GE, i - 1, NULL));
    for (int k = 0; k < 64; k++)
      local[k] = i * 131u + (uint64_t)rank * 17u + (uint64_t)k;
    RT_OK(td_putmem_signal(team, buf, local, sizeof local, &sig[0], i, TD_SIGNAL_SET, next));
    RT_OK(td_signal_wait_until(team, &sig[0], TD_CMP_GE, i, NULL));
    for (int k = 0; k < 64; k++)
      RT_CHECK(buf[k] == i * 131u + (uint64_t)prev * 17u + (uint64_t)k);
    RT_OK(td_signal_op(team, &sig[1], i, TD_SIGNAL_SET, prev));
  }
  for (int i = 0; i < 1000; i++)
    RT_OK(td_team_sync(team));
  td_team *half = NULL;
  RT_OK(td_team_split(team, rank % 2, rank, &half));
  RT_OK(td_team_barrier(half));
  void *p = NULL;
  RT_OK(td_symm_alloc(half, 100, 0, &p));
  RT_OK(td_symm_free(half, p));
  RT_OK(td_team_destroy(half));
  RT_OK(td_barrier_all(w));
  RT_OK(td_symm_free(team, sig));
  RT_OK(td_symm_free(team, buf));
  return TD_OK;
}

/* Counts /dev/shm entries of this test process's job "<tag>": named
 * "tdist-rt-<tag>-<pid>", so a concurrent run of the same test (another
 * checkout's ctest on the same machine) does not count. */
static int leftovers(const char *tag) {
  char name[96];
  snprintf(name, sizeof name, "tdist-rt-%s-%ld", tag, (long)getpid());
  DIR *d = opendir("/dev/shm");
  int count = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    count += strcmp(e->d_name, name) == 0;
  if (d)
    closedir(d);
  return count;
}

static void test_worlds(void **state) {
  if (rt_launched())
    skip();
  static const int sizes[] = {1, 2, 3, 4, 8};
  for (int i = 0; i < 5; i++) {
    td_status st = rt_fork(sizes[i], "work", NULL, work_rank, NULL);
    if (st != TD_OK)
      fail_msg("shm world of %d: %s: %s", sizes[i], td_status_name(st), td_last_error());
  }
  assert_int_equal(leftovers("work"), 0);
}

/* Writes a region header as a job would have, under the name rt_fork will use. */
static void plant_segment(const char *tag, int32_t creator_pid, int world_size) {
  char name[128];
  snprintf(name, sizeof name, "/tdist-rt-%s-%ld", tag, (long)getpid());
  int fd = shm_open(name, O_CREAT | O_RDWR | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 4096), 0);
  td__region_header *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(h != MAP_FAILED);
  h->world_size = world_size;
  h->creator_pid = creator_pid;
  atomic_store(&h->magic, TD__REGION_MAGIC);
  munmap(h, 4096);
  close(fd);
}

static void test_stale_segment_replaced(void **state) {
  if (rt_launched())
    skip();
  pid_t dead = fork();
  if (dead == 0)
    _exit(0);
  waitpid(dead, NULL, 0);
  plant_segment("stale", (int32_t)dead, 3);
  td_status st = rt_fork(3, "stale", NULL, work_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  assert_int_equal(leftovers("stale"), 0);
}

static td_status never_rank(td_world *w, int rank, void *arg) { return RT_FAIL("rank %d should not start", rank); }

static void test_live_segment_refused(void **state) {
  if (rt_launched())
    skip();
  plant_segment("busy", (int32_t)getpid(), 2); /* a live creator: this test process */
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 300;
  td_status st = rt_fork(2, "busy", &o, never_rank, NULL);
  assert_int_equal(st, TD_ERR_BUSY);
  assert_non_null(strstr(td_last_error(), "rank 0: shm transport"));
  assert_non_null(strstr(td_last_error(), "belongs to a live job"));
  char name[128];
  snprintf(name, sizeof name, "/tdist-rt-busy-%ld", (long)getpid());
  shm_unlink(name);
}

static void test_missing_rank(void **state) {
  if (rt_launched())
    skip();
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 300;
  setenv("TD_ATTACH_TIMEOUT_MS", "300", 1); /* start-up has its own deadline */
  td_status st = rt_fork_ex(2, 3, "missing", &o, never_rank, NULL); /* rank 2 never starts */
  unsetenv("TD_ATTACH_TIMEOUT_MS");
  assert_int_equal(st, TD_ERR_TIMEOUT);
  assert_non_null(strstr(td_last_error(), "rank 0: shm transport: rank 0 waited 300 ms (TD_ATTACH_TIMEOUT_MS) for "
                                          "all 3 ranks"));
  assert_non_null(strstr(td_last_error(), "never arrived: rank 2"));
  assert_int_equal(leftovers("missing"), 0);
}

/* Rank 2's process exits without finalizing; the others' barrier fails fast. */
static td_status dying_rank(td_world *w, int rank, void *arg) {
  if (rank == 2)
    _exit(0);
  td_status st = td_barrier_all(w);
  RT_CHECK(st == TD_ERR_PEER_FAILED);
  HAS("td_barrier_all abandoned: rank 2 (pid");
  HAS("exited without td_world_finalize");
  _exit(0); /* success: skip the finalize barrier, which would fail the same way */
}

static void test_peer_death(void **state) {
  if (rt_launched())
    skip();
  td_status st = rt_fork(3, "death", NULL, dying_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
}

static void bigger_heap_on_rank_1(int rank) {
  if (rank == 1)
    setenv("TD_SYMM_HEAP_SIZE", "8M", 1);
}

static void test_heap_size_mismatch(void **state) {
  if (rt_launched())
    skip();
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 300;
  rt_child_setup = bigger_heap_on_rank_1;
  td_status st = rt_fork(2, "hsize", NULL, never_rank, NULL); /* 60 s deadline: must not be needed */
  rt_child_setup = NULL;
  assert_int_not_equal(st, TD_OK);
  assert_non_null(strstr(rt_fork_log, "1 2 shm transport: /tdist-rt-hsize-"));
  assert_non_null(strstr(rt_fork_log, "same TD_WORLD_SIZE and TD_SYMM_HEAP_SIZE"));
  assert_non_null(strstr(rt_fork_log, "0 2 shm transport: rank 0 stopped waiting"));
  assert_non_null(strstr(rt_fork_log, "rank 1 found it unusable (made for another world size or heap size"));
  assert_int_equal(leftovers("hsize"), 0);
}

static void two_rank_ones(int rank) {
  if (rank == 2)
    setenv("TD_RANK", "1", 1);
}

static void test_rank_taken(void **state) {
  if (rt_launched())
    skip();
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 300;
  rt_child_setup = two_rank_ones;
  setenv("TD_ATTACH_TIMEOUT_MS", "300", 1);
  td_status st = rt_fork(3, "taken", &o, never_rank, NULL);
  unsetenv("TD_ATTACH_TIMEOUT_MS");
  rt_child_setup = NULL;
  assert_int_not_equal(st, TD_OK);
  assert_non_null(strstr(rt_fork_log, "shm transport: rank 1 of /tdist-rt-taken-"));
  assert_non_null(strstr(rt_fork_log, "is already taken by pid"));
  assert_non_null(strstr(rt_fork_log, "never arrived: rank 2"));
  assert_int_equal(leftovers("taken"), 0);
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_worlds),
      cmocka_unit_test(test_stale_segment_replaced),
      cmocka_unit_test(test_live_segment_refused),
      cmocka_unit_test(test_missing_rank),
      cmocka_unit_test(test_peer_death),
      cmocka_unit_test(test_heap_size_mismatch),
      cmocka_unit_test(test_rank_taken),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
