/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench coll` when one rank process fails: the parent reaps ranks
 * as they end (waitpid(-1)), and on the first failure (a non-zero exit or a
 * signal) stops the others (SIGTERM, SIGKILL after a grace period), reaps
 * them all, removes the job's shared memory (/dev/shm/tdist-bench<pid>) and
 * names the rank that failed first (exit 1). It used to wait for rank 0,
 * then rank 1, ... in order, so a rank killed before it attached left the
 * others waiting for the attach deadline (a minute; with many ranks on few
 * cores far longer) and the shared memory behind. The failure is a rank
 * killed from here with SIGKILL (as the OOM killer does), during start-up
 * and mid-run; and a parent interrupted (SIGTERM) stops its ranks and
 * leaves nothing behind either. Also: a --ranks whose processes cannot fit
 * host memory is refused before any starts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_test_util.h"

enum { NRANKS = 4, MAX_KIDS = 64 };

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pause_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The children of `parent`, sorted by pid (fork order: rank order). */
static int children(pid_t parent, pid_t *out, int cap) {
  DIR *d = opendir("/proc");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
      continue;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
      continue;
    buf[len] = 0;
    const char *rp = strrchr(buf, ')'); /* after the command name: " S PPID ..." */
    char st;
    int ppid;
    if (rp && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 && ppid == parent && n < cap)
      out[n++] = (pid_t)atoi(e->d_name);
  }
  if (d)
    closedir(d);
  for (int i = 1; i < n; i++) /* insertion sort */
    for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
      pid_t t = out[j];
      out[j] = out[j - 1], out[j - 1] = t;
    }
  return n;
}

typedef struct bench {
  pid_t pid;
  int out_fd; /* its stdout and stderr */
  char shm[128];
} bench;

/* Starts `tdist bench coll --ranks 4 ...`, long enough (many sizes, many
 * iterations) that it is still running when the test acts. */
static void bench_start(bench *b) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  b->pid = fork();
  assert_true(b->pid >= 0);
  if (b->pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    setenv("TD_TIMEOUT_MS", "60000", 1); /* the deadlines a stuck rank would wait out */
    unsetenv("TD_ATTACH_TIMEOUT_MS");
    char nr[8];
    snprintf(nr, sizeof nr, "%d", NRANKS);
    execl(tdist_bin, tdist_bin, "bench", "coll", "--ranks", nr, "--no-mpi", "--min", "8", "--max", "4M", "--iters",
          "200", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  b->out_fd = fds[0];
  fcntl(b->out_fd, F_SETFL, O_NONBLOCK);
  snprintf(b->shm, sizeof b->shm, "/dev/shm/tdist-bench%ld", (long)b->pid);
}

/* Waits up to `limit` seconds for the bench to end; returns its wait status
 * (fails the test past the limit, after killing it), output in out. */
static int bench_wait(bench *b, double limit, char *out, size_t cap, int *saw_shm) {
  size_t used = 0;
  int status = 0;
  double t0 = now_s();
  for (;;) {
    ssize_t got = read(b->out_fd, out + used, cap - 1 - used);
    if (got > 0)
      used += (size_t)got;
    if (saw_shm && !access(b->shm, F_OK))
      *saw_shm = 1;
    pid_t w = waitpid(b->pid, &status, WNOHANG);
    if (w == b->pid)
      break;
    if (now_s() - t0 > limit) {
      kill(b->pid, SIGKILL);
      waitpid(b->pid, &status, 0);
      out[used] = 0;
      fprintf(stderr, "tdist bench coll still running after %.0f s; output:\n%s\n", limit, out);
      fail_msg("the bench did not end within %.0f s of a rank's failure", limit);
    }
    pause_ms(5);
  }
  ssize_t got;
  while (used < cap - 1 && (got = read(b->out_fd, out + used, cap - 1 - used)) > 0)
    used += (size_t)got;
  out[used] = 0;
  close(b->out_fd);
  fprintf(stderr, "bench ended after %.2f s, status 0x%x; output tail:\n%s\n", now_s() - t0, status,
          used > 1500 ? out + used - 1500 : out);
  return status;
}

/* Every listed rank process is gone (reaped by the bench: no zombie, no orphan). */
static void assert_gone(const pid_t *kids, int n) {
  for (int i = 0; i < n; i++) {
    errno = 0;
    int alive = kill(kids[i], 0) == 0;
    assert_false(alive);
  }
}

/* Waits (up to 20 s) for the bench to have `want` rank processes; returns them. */
static int wait_kids(pid_t parent, pid_t *kids, int want) {
  double t0 = now_s();
  int n = 0;
  while ((n = children(parent, kids, MAX_KIDS)) < want && now_s() - t0 < 20)
    ;
  assert_true(n >= want);
  return n;
}

static char out[1 << 18];

/* Rank 1 dies before it attaches: the others would wait a minute for it at
 * start-up, and rank 0 has made /dev/shm/tdist-bench<pid>, which nobody but
 * the parent removes then. Rank 1 is stopped as soon as it exists (before it
 * can attach), killed once the shared memory is there. */
static void test_rank_killed_at_start(void **state) {
  (void)state;
  bench b;
  bench_start(&b);
  pid_t kids[MAX_KIDS];
  wait_kids(b.pid, kids, 2);
  assert_int_equal(kill(kids[1], SIGSTOP), 0);
  double t0 = now_s();
  while (access(b.shm, F_OK) && now_s() - t0 < 20)
    pause_ms(1);
  int saw = !access(b.shm, F_OK);
  assert_true(saw);
  assert_int_equal(kill(kids[1], SIGKILL), 0);
  int status = bench_wait(&b, 15, out, sizeof out, NULL);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_non_null(strstr(out, "tdist bench coll: rank 1 of 4 failed first (it was killed by signal 9"));
  assert_non_null(strstr(out, "stopped the other ranks and removed the job's shared memory"));
  assert_int_equal(access(b.shm, F_OK), -1); /* nothing left in /dev/shm */
}

/* Rank 2 killed mid-run, once every rank has attached. */
static void test_rank_killed_mid_run(void **state) {
  (void)state;
  bench b;
  bench_start(&b);
  pid_t kids[MAX_KIDS];
  wait_kids(b.pid, kids, NRANKS);
  /* every rank has attached well within this (the whole bench takes seconds), and rank 0 has removed
   * the shared memory's name */
  double t0 = now_s();
  do
    pause_ms(50);
  while ((now_s() - t0 < 0.3 || !access(b.shm, F_OK)) && now_s() - t0 < 20);
  int n = children(b.pid, kids, MAX_KIDS);
  assert_int_equal(n, NRANKS); /* still running */
  assert_int_equal(kill(kids[2], SIGKILL), 0);
  int status = bench_wait(&b, 15, out, sizeof out, NULL);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_non_null(strstr(out, "tdist bench coll: rank 2 of 4 failed first (it was killed by signal 9"));
  assert_int_equal(access(b.shm, F_OK), -1);
  assert_gone(kids, n);
}

/* The parent itself interrupted during start-up: it stops its ranks, removes
 * the shared memory and dies of the signal. */
static void test_parent_interrupted(void **state) {
  (void)state;
  bench b;
  bench_start(&b);
  pid_t kids[MAX_KIDS];
  int n = wait_kids(b.pid, kids, NRANKS);
  pause_ms(20);
  n = children(b.pid, kids, MAX_KIDS);
  assert_int_equal(kill(b.pid, SIGTERM), 0);
  int status = bench_wait(&b, 15, out, sizeof out, NULL);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGTERM);
  assert_non_null(strstr(out, "tdist bench coll: interrupted ("));
  assert_int_equal(access(b.shm, F_OK), -1);
  assert_gone(kids, n);
}

/* More rank processes than host memory holds: refused before any starts (the
 * OOM killer took one of 256 ranks part way through before). */
static void test_ranks_memory(void **state) {
  (void)state;
  /* 8 ranks' buffers alone (2 x 1 MiB each) exceed 8 MiB, whatever a process takes at start in this build */
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env TD_RUN_HOST_MEMORY=8M '%s' bench coll --no-mpi --ranks 8 --max 1M 2>&1", tdist_bin);
  int rc = run_cmd(cmd, out, sizeof out);
  if (rc != 2)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "tdist bench coll: --ranks 8 needs about "));
  assert_non_null(strstr(out, "of host memory (8 rank processes x "));
  assert_non_null(strstr(out, "but TD_RUN_HOST_MEMORY allows 8388608 bytes (8.0 MiB); lower "));
  assert_null(strstr(out, "# all_gather")); /* nothing ran */
  /* with room for them, it runs */
  snprintf(cmd, sizeof cmd, "env TD_RUN_HOST_MEMORY=64G '%s' bench coll --no-mpi --ranks 2 --op all_reduce --min 8 "
           "--max 8 --iters 1 2>&1", tdist_bin);
  assert_int_equal(run_cmd(cmd, out, sizeof out), 0);
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  if (access("/dev/shm", W_OK)) {
    fprintf(stderr, "no writable /dev/shm: the shm transport cannot run here\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_killed_at_start),
      cmocka_unit_test(test_rank_killed_mid_run),
      cmocka_unit_test(test_parent_interrupted),
      cmocka_unit_test(test_ranks_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
