/* SPDX-License-Identifier: Apache-2.0
 * Internal: the CPU executor's state (executor layer, cpu backend), shared
 * by cpu_exec.c (create, buffers, worker pool, destroy) and cpu_worker.c
 * (the worker loop that pulls, waits, runs and raises).
 *
 * Per rank: two worker classes, compute and comm (copy-engine tasks go to
 * the comm workers). Each class has the list of its task indices in
 * schedule order and an atomic cursor; a worker takes the next index,
 * waits for the task's local dependencies (done stamps) and its signal
 * waits, runs the tile, raises, and stamps the task done with the epoch, so
 * nothing is cleared between runs. Workers persist across runs and sleep on
 * a condition variable between them. */
#ifndef TD_EXEC_CPU_INTERNAL_H
#define TD_EXEC_CPU_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "exec/backend.h"
#include "tile/tile.h"

enum { TD__CPU_QUEUES = 2 }; /* 0 = compute, 1 = comm + copy engine */

typedef struct td__cpu_exec td__cpu_exec;

typedef struct td__cpu_worker {
  td__cpu_exec *cx;
  int id;    /* trace tid: compute workers 0.., then comm workers */
  int queue; /* 0 or 1 */
  pthread_t thread;
  int started;
  td_tile_ctx tile;
  td_trace_event *events; /* this run's events (capacity: tasks of its queue) */
  size_t nevents;
} td__cpu_worker;

struct td__cpu_exec {
  td_exec *exec;
  const td__tile_table *tiles;
  /* buffers: local address of each executor-owned buffer, and of every
   * buffer's copy on every peer ([buf * nranks + peer], symm buffers only) */
  void **owned;
  char **peer_base;
  uint64_t *signals; /* symmetric, one word per plan signal */
  uint64_t *wait_total; /* [schedule wait index] per-launch total T of its signal here */
  /* task queues */
  uint32_t *queue[TD__CPU_QUEUES];
  uint32_t qlen[TD__CPU_QUEUES];
  _Atomic uint32_t cursor[TD__CPU_QUEUES];
  _Atomic uint64_t *done; /* [task] epoch in which it finished */
  /* workers */
  int nworkers;
  td__cpu_worker *workers;
  pthread_mutex_t mu;
  pthread_cond_t start_cv, idle_cv, progress_cv;
  uint64_t generation; /* bumped to start a run; guarded by mu */
  int active;          /* workers still in the current run; guarded by mu */
  int stopping;        /* guarded by mu */
  _Atomic int dep_waiters;
  _Atomic uint64_t progress; /* tasks finished, ever (local-dependency deadlines) */
  _Atomic int abort; /* a worker failed in this run */
  td_status first_status;
  char first_message[1024];
};

/** Body of every worker thread (cpu_worker.c). */
void *td__cpu_worker_main(void *arg);
/** Runs one launch (cpu_worker.c): the backend's run(). */
td_status td__cpu_run(td_exec *exec);

#endif
