/* SPDX-License-Identifier: Apache-2.0
 * Test harness of the runtime tests: runs a rank function on every rank of a
 * world, so one test program covers three ways of running:
 *  - as a local world (threads), for each size in rt_sizes (default 1,2,3,4,8,
 *    or only N with `--local N`);
 *  - as one rank of a launched job (tdrun / mpirun set TD_RANK or
 *    OMPI_COMM_WORLD_RANK): this process is one rank of an shm world;
 *  - as an shm world of forked processes (rt_fork), to test processes even
 *    where no launcher is built.
 * Rank functions must not call cmocka asserts (they run on other threads or
 * processes): they return TD_OK or RT_FAIL(...)'s status, whose message the
 * main thread prints. */
#ifndef TD_RT_HARNESS_H
#define TD_RT_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "tdist/rma.h"
#include "tdist/symm.h"
#include "tdist/world.h"

typedef td_status (*rt_fn)(td_world *w, int rank, void *arg);

/* Called in each forked child of rt_fork before td_world_init (e.g. to give
 * one rank a different environment); NULL = nothing. */
static void (*rt_child_setup)(int rank);
/* Every failing child's line ("RANK STATUS MESSAGE") of the last rt_fork. */
static char rt_fork_log[16384];

static int rt_sizes[8] = {1, 2, 3, 4, 8};
static int rt_nsizes = 5;

/* A failed check inside a rank function: message with file and line. */
#define RT_FAIL(...) td__error(TD_ERR_CHECK_FAILED, __VA_ARGS__)
#define RT_CHECK(cond)                                                                   \
  do {                                                                                   \
    if (!(cond))                                                                         \
      return RT_FAIL("%s:%d: rank check failed: %s", __FILE__, __LINE__, #cond);         \
  } while (0)
#define RT_OK(expr)                                                                      \
  do {                                                                                   \
    td_status rt_st_ = (expr);                                                           \
    if (rt_st_ != TD_OK) {                                                               \
      td__error_prefix("%s:%d: %s -> %s: ", __FILE__, __LINE__, #expr, td_status_name(rt_st_)); \
      return rt_st_;                                                                     \
    }                                                                                    \
  } while (0)

/* Whether a launcher started this process as one rank of a job. */
static inline int rt_launched(void) { return getenv("TD_RANK") || getenv("OMPI_COMM_WORLD_RANK") || getenv("RANK"); }

/* Parses `--local N` (only that size) from the command line. */
static inline void rt_parse_args(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--local") == 0) {
      rt_sizes[0] = atoi(argv[i + 1]);
      rt_nsizes = 1;
    }
}

/* Runs fn as this process's rank of a launched world. */
static inline td_status rt_run_launched(const td_world_opts *opts, rt_fn fn, void *arg) {
  td_world *w = NULL;
  td_status st = td_world_init(opts, &w);
  if (st != TD_OK)
    return st;
  st = fn(w, td_world_rank(w), arg);
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", td_last_error());
  td_status fst = td_world_finalize(w);
  if (st != TD_OK)
    return td__error(st, "%s", msg);
  return fst;
}

/* Runs fn on n ranks: a local world, or (launched) this process's world. */
static inline td_status rt_run(int n, const td_world_opts *opts, rt_fn fn, void *arg) {
  if (rt_launched())
    return rt_run_launched(opts, fn, arg);
  return td_local_world_run(n, opts, fn, arg);
}

/* Runs fn on every size of rt_sizes (local) or once (launched); asserts TD_OK. */
static inline void rt_run_all(const td_world_opts *opts, rt_fn fn, void *arg) {
  for (int i = 0; i < (rt_launched() ? 1 : rt_nsizes); i++) {
    td_status st = rt_run(rt_sizes[i], opts, fn, arg);
    if (st != TD_OK)
      fail_msg("world of %d: %s: %s", rt_launched() ? -1 : rt_sizes[i], td_status_name(st), td_last_error());
  }
}

/* Runs fn as an shm world of n forked processes. Returns TD_OK if all
 * returned TD_OK; else the status of the lowest failing rank, whose message
 * (sent through a pipe) becomes this thread's message. `job` names the job. */
static inline td_status rt_fork_ex(int n, int world_size, const char *job, const td_world_opts *opts, rt_fn fn,
                                   void *arg) {
  int fds[2];
  if (pipe(fds) != 0)
    return RT_FAIL("pipe failed");
  pid_t pids[64];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      close(fds[0]);
      char buf[32];
      snprintf(buf, sizeof buf, "%d", r);
      setenv("TD_RANK", buf, 1);
      setenv("TD_LOCAL_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%d", world_size);
      setenv("TD_WORLD_SIZE", buf, 1);
      setenv("TD_LOCAL_WORLD_SIZE", buf, 1);
      char id[128];
      snprintf(id, sizeof id, "rt-%s-%ld", job, (long)getppid());
      setenv("TD_JOB_ID", id, 1);
      if (rt_child_setup)
        rt_child_setup(r);
      td_status st = rt_run_launched(opts, fn, arg);
      if (st != TD_OK) {
        char msg[2200];
        int len = snprintf(msg, sizeof msg, "%d %d %s\n", r, (int)st, td_last_error());
        if (write(fds[1], msg, (size_t)(len < (int)sizeof msg ? len : (int)sizeof msg - 1)) < 0)
          _exit(2);
      }
      _exit(st == TD_OK ? 0 : 1);
    }
  }
  close(fds[1]);
  int wstatus[64];
  for (int r = 0; r < n; r++)
    if (waitpid(pids[r], &wstatus[r], 0) != pids[r])
      wstatus[r] = 0;
  char all[16384];
  size_t len = 0;
  ssize_t got;
  while (len < sizeof all - 1 && (got = read(fds[0], all + len, sizeof all - 1 - len)) > 0)
    len += (size_t)got;
  all[len] = '\0';
  close(fds[0]);
  memcpy(rt_fork_log, all, len + 1);
  /* A rank that died by a signal or exited non-zero without a message is the
   * root cause the others' PEER_FAILED messages point at: report it first. */
  for (int r = 0; r < n; r++) {
    if (WIFSIGNALED(wstatus[r]))
      return td__error(TD_ERR_PEER_FAILED, "rank %d (pid %d) was killed by signal %d (%s); messages of the others: %s",
                       r, (int)pids[r], WTERMSIG(wstatus[r]), strsignal(WTERMSIG(wstatus[r])), len ? all : "none");
    if (WIFEXITED(wstatus[r]) && WEXITSTATUS(wstatus[r]) != 0 && WEXITSTATUS(wstatus[r]) != 1)
      return td__error(TD_ERR_PEER_FAILED, "rank %d (pid %d) exited with status %d; messages of the others: %s", r,
                       (int)pids[r], WEXITSTATUS(wstatus[r]), len ? all : "none");
  }
  if (!len)
    return TD_OK;
  int best = 1 << 30, best_st = 0;
  const char *best_msg = "";
  for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
    int r = 0, s = 0, off = 0;
    if (sscanf(line, "%d %d %n", &r, &s, &off) >= 2 && r < best) {
      best = r;
      best_st = s;
      best_msg = line + off;
    }
  }
  return td__error((td_status)best_st, "rank %d: %s", best, best_msg);
}

static inline td_status rt_fork(int n, const char *job, const td_world_opts *opts, rt_fn fn, void *arg) {
  return rt_fork_ex(n, n, job, opts, fn, arg);
}

#endif
