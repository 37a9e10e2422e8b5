/* SPDX-License-Identifier: Apache-2.0
 * The rank processes of `tdist bench coll` (tools layer): start, watch,
 * stop and reap them (bench_coll_ranks.c); bench_coll.c is the benchmark. */
#ifndef TD_TOOLS_BENCH_COLL_RANKS_H
#define TD_TOOLS_BENCH_COLL_RANKS_H

/* A rank's exit status when it failed because a peer did (TD_ERR_PEER_FAILED:
 * a peer died or abandoned a step), so that the parent names the cause, not
 * the first consequence it happens to reap; a rank's own failure exits 1. */
enum { BC_EXIT_PEER = 3 };

typedef struct bc_launch {
  int ranks;          /* rank processes, 1.. */
  const char *exe;    /* the executable every rank runs (this one) */
  char *const *argv;  /* its arguments, argv[0] first, NULL-terminated */
  const char *job;    /* TD_JOB_ID: the shared memory is /dev/shm/tdist-<job> */
  const char *heap;   /* TD_SYMM_HEAP_SIZE of every rank */
} bc_launch;

/** Starts l->ranks processes of l->exe with TD_RANK, TD_LOCAL_RANK,
 * TD_WORLD_SIZE, TD_LOCAL_WORLD_SIZE, TD_JOB_ID, TD_SYMM_HEAP_SIZE and
 * TD_TRANSPORT=shm set, calls on_line(line, arg) for every line rank 0
 * writes to stdout (without its newline), and returns once every rank has
 * been reaped and the job's shared memory removed: 0 when all exited with
 * status 0; 1 after saying on stderr which rank failed first and how (the
 * others stopped), or what could not be started. A SIGINT, SIGTERM or SIGHUP
 * meanwhile stops the ranks, then ends this process by that signal. Not
 * thread-safe (signal handlers, waitpid(-1): the caller has no other child). */
int bc_launch_ranks(const bc_launch *l, void (*on_line)(const char *line, void *arg), void *arg);

#endif
