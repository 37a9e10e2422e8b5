/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: start-up of an shm world without tdrun to clean up. A rank 0
 * killed after creating the job's shared memory (or while creating it): the
 * joiner removes the segment and says its creator died (unless another live process claimed
 * its removal, which joiners and rank 0 then leave to it). A rank killed after attaching: the
 * others stop at once and remove the name. Start-up has its own deadline
 * (TD_ATTACH_TIMEOUT_MS), not TD_TIMEOUT_MS. A heap larger than /dev/shm's
 * free space is refused naming both numbers. A torchrun-style start without
 * TORCHELASTIC_RUN_ID / MASTER_PORT says those variables were missing. Runs
 * only outside a launcher (it sets the launcher's variables itself). */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/stat.h>

#include "runtime/rt_harness.h"
#include "transport/transport.h"

static const char *const vars[] = {"TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE", "TD_JOB_ID",
                                   "TD_ATTACH_TIMEOUT_MS", "TD_SYMM_HEAP_SIZE", "TD_TIMEOUT_MS", "RANK",
                                   "WORLD_SIZE", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TD_LAUNCHER"};

static int clear_env(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
  return 0;
}

static void set_rank(int rank, int size, const char *job) {
  char buf[16];
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("TD_RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", size);
  setenv("TD_WORLD_SIZE", buf, 1);
  setenv("TD_JOB_ID", job, 1);
  setenv("TD_SYMM_HEAP_SIZE", "1M", 1);
}

static int shm_exists(const char *job) {
  char path[256];
  snprintf(path, sizeof path, "/dev/shm/tdist-%s", job);
  return access(path, F_OK) == 0;
}

/* Whether the job's segment exists and its creator has written its header. */
static int shm_ready(const char *job) {
  char name[96];
  snprintf(name, sizeof name, "/tdist-%s", job);
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0)
    return 0;
  struct stat st;
  int ready = 0;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(td__region_header)) {
    td__region_header *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
    if (h != MAP_FAILED) {
      ready = atomic_load(&h->magic) == TD__REGION_MAGIC;
      munmap(h, sizeof *h);
    }
  }
  close(fd);
  return ready;
}

/* Forks a rank that runs td_world_init (then idles); waits until its segment is made. */
static pid_t start_rank(int rank, int size, const char *job, int wait_for_segment) {
  pid_t pid = fork();
  if (pid == 0) {
    set_rank(rank, size, job);
    setenv("TD_ATTACH_TIMEOUT_MS", "20000", 1);
    td_world *w = NULL;
    td_world_init(NULL, &w);
    _exit(0);
  }
  for (int i = 0; wait_for_segment && i < 20000 && !shm_ready(job); i++)
    usleep(1000);
  return pid;
}

static void kill_rank(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

static void test_dead_creator_removed(void **state) {
  (void)state;
  char job[64];
  snprintf(job, sizeof job, "rt-deadc-%ld", (long)getpid());
  pid_t creator = start_rank(0, 2, job, 1);
  assert_true(shm_exists(job));
  kill_rank(creator);
  set_rank(1, 2, job);
  setenv("TD_ATTACH_TIMEOUT_MS", "300", 1);
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  assert_int_equal(st, TD_ERR_TIMEOUT);
  char want[96];
  snprintf(want, sizeof want, "its creator (rank 0, pid %d) had died", (int)creator);
  if (!strstr(td_last_error(), want) || !strstr(td_last_error(), "removed it"))
    fail_msg("message: %s", td_last_error());
  assert_false(shm_exists(job));
  clear_env(NULL);
}

static void test_half_made_segment_removed(void **state) {
  (void)state;
  /* A creator that died between creating the object and writing its header. */
  char job[64], name[96];
  snprintf(job, sizeof job, "rt-halfc-%ld", (long)getpid());
  snprintf(name, sizeof name, "/tdist-%s", job);
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 1 << 20), 0);
  close(fd);
  set_rank(1, 2, job);
  setenv("TD_ATTACH_TIMEOUT_MS", "1500", 1); /* the joiner waits 1 s before calling it dead */
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  assert_int_equal(st, TD_ERR_TIMEOUT);
  if (!strstr(td_last_error(), "that its creator never finished making") || !strstr(td_last_error(), "removed it"))
    fail_msg("message: %s", td_last_error());
  assert_false(shm_exists(job));
  clear_env(NULL);
}

/* A dead job's leftover whose removal a live process has claimed (unlinked = -pid: a joiner about to remove
 * it) is left to that process, by joiners and by a rank 0 that would replace it: had both removed it by name,
 * one could remove the new job's object created meanwhile under it (rt_shm's test_stale_segment_replaced
 * timed out so now and then). Once the claimer is gone, the next one takes the claim over. */
static void plant_claimed(const char *job, int32_t creator, int32_t claimer) {
  char name[96];
  snprintf(name, sizeof name, "/tdist-%s", job);
  int fd = shm_open(name, O_CREAT | O_RDWR | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 4096), 0);
  td__region_header *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(h != MAP_FAILED);
  h->world_size = 2;
  h->creator_pid = creator;
  h->region_bytes = 4096;
  atomic_store(&h->unlinked, -claimer);
  atomic_store(&h->magic, TD__REGION_MAGIC);
  munmap(h, 4096);
  close(fd);
}

static void test_claimed_leftover_left_to_claimer(void **state) {
  (void)state;
  char job[64];
  snprintf(job, sizeof job, "rt-claim-%ld", (long)getpid());
  pid_t dead = fork();
  if (dead == 0)
    _exit(0);
  waitpid(dead, NULL, 0);
  pid_t claimer = fork();
  if (claimer == 0) {
    pause();
    _exit(0);
  }
  /* a joiner: says its creator died, leaves the object to the claimer */
  plant_claimed(job, (int32_t)dead, (int32_t)claimer);
  set_rank(1, 2, job);
  setenv("TD_ATTACH_TIMEOUT_MS", "300", 1);
  td_world *w = NULL;
  if (td_world_init(NULL, &w) != TD_ERR_TIMEOUT || !strstr(td_last_error(), "had died") || !shm_exists(job)) {
    kill_rank(claimer);
    fail_msg("joiner: %s (object %s)", td_last_error(), shm_exists(job) ? "kept" : "removed");
  }
  /* rank 0: waits for the claimer to remove it, to its deadline */
  set_rank(0, 2, job);
  td_status st = td_world_init(NULL, &w);
  kill_rank(claimer); /* whatever happened: no process left behind */
  assert_int_equal(st, TD_ERR_TIMEOUT);
  if (!strstr(td_last_error(), "stayed in use past the deadline"))
    fail_msg("message: %s", td_last_error());
  assert_true(shm_exists(job));
  /* the claimer gone: rank 0 takes the claim over and replaces the object (then waits for rank 1, which
   * never comes, and removes the name) */
  assert_int_equal(td_world_init(NULL, &w), TD_ERR_TIMEOUT);
  if (!strstr(td_last_error(), "for all 2 ranks to attach") || !strstr(td_last_error(), "never arrived: rank 1"))
    fail_msg("message: %s", td_last_error());
  assert_false(shm_exists(job));
  /* and a joiner takes over a dead claimer's claim too */
  plant_claimed(job, (int32_t)dead, (int32_t)claimer);
  set_rank(1, 2, job);
  assert_int_equal(td_world_init(NULL, &w), TD_ERR_TIMEOUT);
  if (!strstr(td_last_error(), "had died") || !strstr(td_last_error(), "removed it"))
    fail_msg("message: %s", td_last_error());
  assert_false(shm_exists(job));
  clear_env(NULL);
}

static void test_rank_dies_after_attach(void **state) {
  (void)state;
  char job[64];
  snprintf(job, sizeof job, "rt-deadj-%ld", (long)getpid());
  pid_t creator = start_rank(0, 3, job, 1);
  pid_t joiner = start_rank(1, 3, job, 0);
  /* Wait until rank 1 has attached (the region header counts attached ranks). */
  char name[96];
  snprintf(name, sizeof name, "/tdist-%s", job);
  int fd = shm_open(name, O_RDONLY, 0);
  assert_true(fd >= 0);
  td__region_header *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  assert_true(h != MAP_FAILED);
  for (int i = 0; i < 20000 && atomic_load(&h->attached) < 2; i++)
    usleep(1000);
  assert_int_equal(atomic_load(&h->attached), 2);
  munmap(h, sizeof *h);
  kill_rank(joiner);
  /* Rank 0 must stop well before its 20 s deadline: it exits, and the name is gone. */
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 10000 && (got = waitpid(creator, &status, WNOHANG)) == 0; i++)
    usleep(1000);
  if (got == 0)
    kill_rank(creator);
  assert_int_equal(got, creator);
  assert_false(shm_exists(job));
}

static td_status quick_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  (void)arg;
  return td_barrier_all(w);
}

static void late_rank_2(int rank) {
  if (rank == 2)
    usleep(700000); /* longer than TD_TIMEOUT_MS below: start-up must not use it */
}

static void test_attach_deadline_separate(void **state) {
  (void)state;
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 500;
  rt_child_setup = late_rank_2;
  td_status st = rt_fork(3, "late", &o, quick_rank, NULL);
  rt_child_setup = NULL;
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  /* A malformed value is refused like every variable of the table. */
  setenv("TD_RANK", "0", 1);
  setenv("TD_WORLD_SIZE", "2", 1);
  setenv("TD_ATTACH_TIMEOUT_MS", "0", 1);
  td_world *w = NULL;
  assert_int_equal(td_world_init(NULL, &w), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "TD_ATTACH_TIMEOUT_MS='0' is out of range; allowed 1 to"));
  clear_env(NULL);
}

static void test_heap_larger_than_dev_shm(void **state) {
  (void)state;
  set_rank(0, 2, "rt-space");
  setenv("TD_SYMM_HEAP_SIZE", "1024G", 1); /* 2 TiB for two ranks: more than any /dev/shm here */
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  assert_int_equal(st, TD_ERR_NO_MEMORY);
  if (!strstr(td_last_error(), "the job's shared memory needs 219902") ||
      !strstr(td_last_error(), "bytes free; lower TD_SYMM_HEAP_SIZE"))
    fail_msg("message: %s", td_last_error());
  assert_false(shm_exists("rt-space"));
  clear_env(NULL);
}

/* Address space this process has mapped (VmSize), in bytes; 0 if unknown. */
static unsigned long long vm_size(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (f) {
    if (fscanf(f, "%llu", &pages) != 1)
      pages = 0;
    fclose(f);
  }
  return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* Rank 1 limited to 64 MiB more address space than it has: it cannot map the
 * 2 x 128 MiB region (sparse: this costs no memory). Relative to the current
 * size, so it also works under ASan/TSan, whose shadow is already mapped. */
static void limit_address_space(int rank) {
  if (rank != 1)
    return;
  struct rlimit rl;
  getrlimit(RLIMIT_AS, &rl);
  rl.rlim_cur = (rlim_t)(vm_size() + (64ull << 20));
  setrlimit(RLIMIT_AS, &rl);
}

static td_status never_runs(td_world *w, int rank, void *arg) {
  (void)w;
  (void)rank;
  (void)arg;
  return TD_OK;
}

static void test_rank_cannot_map(void **state) {
  (void)state;
  if (vm_size() == 0)
    skip();
  /* The deadline is far away: both ranks must fail at once, each with the
   * real reason, not at the deadline naming a rank that "never arrived". */
  setenv("TD_ATTACH_TIMEOUT_MS", "60000", 1);
  setenv("TD_SYMM_HEAP_SIZE", "128M", 1);
  rt_child_setup = limit_address_space;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  td_status st = rt_fork(2, "nomap", NULL, never_runs, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  rt_child_setup = NULL;
  clear_env(NULL);
  assert_int_not_equal(st, TD_OK);
  /* rt_fork_log holds every failing rank's line ("RANK STATUS MESSAGE"). */
  const char *log = rt_fork_log;
  if (!strstr(log, "rank 1 cannot map /tdist-") || !strstr(log, "Cannot allocate memory") ||
      !strstr(log, "lower TD_SYMM_HEAP_SIZE or raise") || strstr(log, "never arrived") ||
      !strstr(log, "rank 0 stopped waiting") || !strstr(log, "rank 1 found it unusable"))
    fail_msg("messages: %s", log);
  /* Not a timing assertion: 60 s would mean the refusal was not seen at all. */
  assert_true(t1.tv_sec - t0.tv_sec < 50);
}

static void test_torchrun_without_job_id(void **state) {
  (void)state;
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("TD_SYMM_HEAP_SIZE", "1M", 1);
  setenv("TD_ATTACH_TIMEOUT_MS", "200", 1);
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  assert_int_equal(st, TD_ERR_TIMEOUT);
  if (!strstr(td_last_error(), "neither TORCHELASTIC_RUN_ID nor MASTER_PORT is set") ||
      !strstr(td_last_error(), "job id is the parent's pid"))
    fail_msg("message: %s", td_last_error());
  clear_env(NULL);
}

int main(void) {
  if (rt_launched())
    return 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_dead_creator_removed, clear_env),
      cmocka_unit_test_setup(test_half_made_segment_removed, clear_env),
      cmocka_unit_test_setup(test_claimed_leftover_left_to_claimer, clear_env),
      cmocka_unit_test_setup(test_rank_dies_after_attach, clear_env),
      cmocka_unit_test_setup(test_attach_deadline_separate, clear_env),
      cmocka_unit_test_setup(test_heap_larger_than_dev_shm, clear_env),
      cmocka_unit_test_setup(test_torchrun_without_job_id, clear_env),
      cmocka_unit_test_setup(test_rank_cannot_map, clear_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
