/* SPDX-License-Identifier: Apache-2.0
 * The CPU executor's setup and teardown (executor layer, cpu backend):
 * allocates the plan's executor-owned buffers (symm ones collectively on the
 * symmetric heap, zeroed) and its signal words, resolves peer addresses once
 * so tiles get plain pointers, splits the schedule into per-class queues, and
 * starts the persistent worker pool.
 *
 * Worker counts: opts, else TD_CPU_COMPUTE_WORKERS / TD_CPU_COMM_WORKERS,
 * else compute = max(1, online cores / ranks on this host) and comm = 1, so
 * 4 ranks on 2 cores get 1 + 1 threads each and one rank on 16 cores gets
 * 16 + 1. A class never gets more workers than it has tasks (an empty class
 * gets none). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "exec/cpu/cpu_internal.h"
#include "exec/schedule_internal.h"
#include "tdist/config.h"
#include "tdist/symm.h"

static td_status td__workers_wanted(td_exec *e, int cls, int *out) {
  int n = cls == 0 ? e->opts.compute_workers : e->opts.comm_workers;
  if (n == 0) {
    int64_t v = 0;
    TD_CHECK(td_config_int(cls == 0 ? "TD_CPU_COMPUTE_WORKERS" : "TD_CPU_COMM_WORKERS", &v));
    n = (int)v;
  }
  if (n == 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int local = td_world_local_size(td_team_world(e->team));
    if (cores < 1)
      cores = 1;
    if (local < 1)
      local = 1;
    n = cls == 0 ? (int)(cores / local > 1 ? cores / local : 1) : 1;
  }
  *out = n;
  return TD_OK;
}

/* Frees the buffers; returns the first failure of a collective free (its
 * message kept: later failures do not overwrite it). With exec->abandon (the
 * peers are gone), symmetric blocks are left to the team and only private
 * memory is freed. */
static td_status td__free_buffers(td__cpu_exec *cx) {
  td_exec *e = cx->exec;
  int32_t nb = td_plan_nbuffers(e->plan);
  td_status first = TD_OK;
  char msg[1024] = "";
  /* Collective frees in the reverse order of allocation, same on all ranks. */
  if (cx->signals && !e->abandon) {
    first = td_symm_free(e->team, cx->signals);
    if (first != TD_OK)
      snprintf(msg, sizeof msg, "%s", td_last_error());
  }
  for (int32_t b = nb - 1; cx->owned && b >= 0; b--) {
    const td_buffer_desc *d = td_plan_buffer(e->plan, b);
    if (!cx->owned[b])
      continue;
    if (d->kind == TD_BUF_SYMM) {
      if (e->abandon)
        continue;
      td_status st = td_symm_free(e->team, cx->owned[b]);
      if (st != TD_OK && first == TD_OK) {
        first = st;
        snprintf(msg, sizeof msg, "%s", td_last_error());
      }
    } else {
      free(cx->owned[b]);
    }
  }
  free(cx->owned);
  free(cx->peer_base);
  cx->owned = NULL, cx->peer_base = NULL, cx->signals = NULL;
  if (first != TD_OK)
    return td__error(first, "td_exec_destroy: rank %d: freeing the executor's symmetric buffers: %s", e->rank,
                     msg);
  return TD_OK;
}

/* This rank's private buffers and the tables (before any collective call). */
static td_status td__alloc_local(td__cpu_exec *cx) {
  td_exec *e = cx->exec;
  int32_t nb = td_plan_nbuffers(e->plan);
  cx->owned = calloc((size_t)nb + 1, sizeof *cx->owned);
  cx->peer_base = calloc((size_t)nb * (size_t)e->nranks + 1, sizeof *cx->peer_base);
  if (!cx->owned || !cx->peer_base)
    return td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory for the buffer table");
  for (int32_t b = 0; b < nb; b++) {
    const td_buffer_desc *d = td_plan_buffer(e->plan, b);
    size_t bytes = (size_t)(d->rows * d->cols) * td_dtype_size(d->dtype);
    if (d->kind == TD_BUF_LOCAL) {
      cx->owned[b] = aligned_alloc(64, (bytes + 63) & ~(size_t)63 ? (bytes + 63) & ~(size_t)63 : 64);
      if (!cx->owned[b])
        return td__error(TD_ERR_NO_MEMORY, "td_exec_create: rank %d: out of memory for local buffer %d '%s' "
                         "(%zu bytes)", e->rank, b, d->name, bytes);
      memset(cx->owned[b], 0, bytes);
    }
  }
  return TD_OK;
}

/* The symmetric buffers and signal words (collective, same order on every
 * rank). The caller's next exchange round is the barrier after which peers
 * may write into them. td_symm_alloc agrees within itself, so a failure
 * stops every rank at the same buffer; nothing rank-local runs between two
 * allocations (the peer addresses are resolved afterwards), so no rank
 * skips an allocation its peers make. */
static td_status td__alloc_symm(td__cpu_exec *cx) {
  td_exec *e = cx->exec;
  int32_t nb = td_plan_nbuffers(e->plan);
  for (int32_t b = 0; b < nb; b++) {
    const td_buffer_desc *d = td_plan_buffer(e->plan, b);
    size_t bytes = (size_t)(d->rows * d->cols) * td_dtype_size(d->dtype);
    if (d->kind == TD_BUF_SYMM) {
      td_status st = td_symm_alloc(e->team, bytes, 64, &cx->owned[b]);
      if (st != TD_OK) {
        td__error_prefix("td_exec_create: rank %d: symm buffer %d '%s' (%zu bytes): ", e->rank, b, d->name,
                         bytes);
        return st;
      }
      memset(cx->owned[b], 0, bytes);
    }
  }
  uint32_t ns = td_plan_nsignals(e->plan);
  void *sig = NULL;
  td_status st = td_symm_alloc(e->team, (size_t)(ns ? ns : 1) * sizeof(uint64_t), 64, &sig);
  if (st != TD_OK) {
    td__error_prefix("td_exec_create: rank %d: %u signal words: ", e->rank, ns);
    return st;
  }
  cx->signals = sig;
  for (uint32_t s = 0; s < (ns ? ns : 1); s++)
    atomic_store_explicit((_Atomic uint64_t *)&cx->signals[s], 0, memory_order_relaxed);
  return TD_OK;
}

/* Every peer's address of every symm buffer (rank-local, after the allocations). */
static td_status td__resolve_peers(td__cpu_exec *cx) {
  td_exec *e = cx->exec;
  for (int32_t b = 0; b < td_plan_nbuffers(e->plan); b++) {
    if (td_plan_buffer(e->plan, b)->kind != TD_BUF_SYMM)
      continue;
    for (int p = 0; p < e->nranks; p++) {
      void *peer = NULL;
      TD_CHECK(td_symm_at(e->team, cx->owned[b], p, &peer));
      cx->peer_base[(size_t)b * (size_t)e->nranks + (size_t)p] = peer;
    }
  }
  return TD_OK;
}

static td_status td__build_queues(td__cpu_exec *cx) {
  const td_schedule *s = cx->exec->sched;
  for (int q = 0; q < TD__CPU_QUEUES; q++)
    if (!(cx->queue[q] = malloc(((size_t)s->ntasks + 1) * sizeof(uint32_t))))
      return td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory for %u tasks", s->ntasks);
  for (uint32_t i = 0; i < s->ntasks; i++) {
    int q = s->tasks[i].worker == TD_WORKER_COMPUTE ? 0 : 1;
    cx->queue[q][cx->qlen[q]++] = i;
  }
  cx->done = calloc((size_t)s->ntasks + 1, sizeof *cx->done);
  cx->wait_total = calloc((size_t)s->nwaits + 1, sizeof *cx->wait_total);
  if (!cx->done || !cx->wait_total)
    return td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory for %u tasks", s->ntasks);
  for (uint32_t w = 0; w < s->nwaits; w++)
    cx->wait_total[w] = td_plan_signal_total(cx->exec->plan, s->waits[w].signal, cx->exec->rank);
  return TD_OK;
}

static void td__stop_workers(td__cpu_exec *cx) {
  pthread_mutex_lock(&cx->mu);
  cx->stopping = 1;
  pthread_cond_broadcast(&cx->start_cv);
  pthread_mutex_unlock(&cx->mu);
  for (int w = 0; w < cx->nworkers; w++) {
    if (cx->workers[w].started)
      pthread_join(cx->workers[w].thread, NULL);
    td__tile_ctx_free(&cx->workers[w].tile);
    free(cx->workers[w].events);
  }
  free(cx->workers);
  cx->workers = NULL;
  cx->nworkers = 0;
}

/* Worker counts per class (after the queues are built). */
static td_status td__resolve_workers(td__cpu_exec *cx, int want[TD__CPU_QUEUES]) {
  for (int q = 0; q < TD__CPU_QUEUES; q++) {
    TD_CHECK(td__workers_wanted(cx->exec, q, &want[q]));
    if ((uint32_t)want[q] > cx->qlen[q])
      want[q] = (int)cx->qlen[q];
  }
  return TD_OK;
}

/* Worker records and trace space (local; threads start later). */
static td_status td__alloc_workers(td__cpu_exec *cx, const int want[TD__CPU_QUEUES]) {
  td_exec *e = cx->exec;
  int n = want[0] + want[1];
  cx->workers = calloc((size_t)n + 1, sizeof *cx->workers);
  if (!cx->workers)
    return td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory for %d workers", n);
  cx->nworkers = n;
  for (int w = 0; w < n; w++) {
    td__cpu_worker *wk = &cx->workers[w];
    wk->cx = cx;
    wk->id = w;
    wk->queue = w < want[0] ? 0 : 1;
    if (e->opts.trace && !(wk->events = malloc(((size_t)cx->qlen[wk->queue] + 1) * sizeof *wk->events)))
      return td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory for trace events");
  }
  /* Publish the counts so that td_exec_* callers and traces agree. */
  e->opts.compute_workers = want[0];
  e->opts.comm_workers = want[1];
  return TD_OK;
}

static td_status td__start_workers(td__cpu_exec *cx) {
  td_exec *e = cx->exec;
  int n = cx->nworkers;
  for (int w = 0; w < n; w++) {
    int rc = pthread_create(&cx->workers[w].thread, NULL, td__cpu_worker_main, &cx->workers[w]);
    if (rc != 0)
      return td__error(TD_ERR_SYSTEM, "td_exec_create: rank %d: starting worker %d of %d failed (error %d)",
                       e->rank, w, n, rc);
    cx->workers[w].started = 1;
  }
  return TD_OK;
}

static td_status td__cpu_free(td__cpu_exec *cx) {
  if (cx->workers)
    td__stop_workers(cx);
  td_status st = td__free_buffers(cx);
  for (int q = 0; q < TD__CPU_QUEUES; q++)
    free(cx->queue[q]);
  free((void *)cx->done);
  free(cx->wait_total);
  pthread_mutex_destroy(&cx->mu);
  pthread_cond_destroy(&cx->start_cv);
  pthread_cond_destroy(&cx->idle_cv);
  pthread_cond_destroy(&cx->progress_cv);
  free(cx);
  return st;
}

/* One agreement point of create; a failure on any rank fails all alike. */
static td_status td__create_agree(td_exec *e, int op, td_status mine) {
  return td__agree_create_step(e->agree, op, mine, 0, e->opts.timeout_ms);
}

static td_status td__cpu_create(td_exec *e) {
  td__cpu_exec *cx = calloc(1, sizeof *cx);
  td_status st = cx ? TD_OK : td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory");
  if (cx) {
    cx->exec = e;
    cx->tiles = &td__tile_cpu;
    pthread_mutex_init(&cx->mu, NULL);
    pthread_cond_init(&cx->start_cv, NULL);
    pthread_cond_init(&cx->idle_cv, NULL);
    pthread_condattr_t attr; /* local-dependency deadlines are CLOCK_MONOTONIC */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cx->progress_cv, &attr);
    pthread_condattr_destroy(&attr);
    td__tile_cpu_blas_single_thread();
  }
  /* What can fail on one rank alone (configuration, memory) is settled
   * first, and the ranks agree on it before the collective allocation, so a
   * rank that fails here makes every rank fail at once, naming it. */
  int want[TD__CPU_QUEUES] = {0, 0};
  if (st == TD_OK)
    st = td__build_queues(cx);
  if (st == TD_OK)
    st = td__resolve_workers(cx, want);
  if (st == TD_OK)
    st = td__alloc_local(cx);
  if (st == TD_OK)
    st = td__alloc_workers(cx, want);
  if (st == TD_OK)
    st = td__exec_fault_check(e->rank, TD__EXEC_STEP_CPU_PREPARE);
  st = td__create_agree(e, TD__AGREE_CREATE_ALLOC, st);
  if (st != TD_OK) {
    if (cx)
      td__cpu_free(cx); /* nothing symmetric allocated yet */
    return st;
  }
  /* Collective allocation, then the threads; the ranks agree on both (the
   * round is also the barrier after which peers may write our buffers). */
  st = td__alloc_symm(cx);
  if (st == TD_OK)
    st = td__resolve_peers(cx);
  if (st == TD_OK)
    st = td__start_workers(cx);
  if (st == TD_OK)
    st = td__exec_fault_check(e->rank, TD__EXEC_STEP_CPU_START);
  td_status ag = td__create_agree(e, TD__AGREE_CREATE_WORKERS, st);
  if (ag != TD_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", td_last_error()); /* names the failing rank and its reason */
    td__cpu_free(cx); /* collective frees; their errors are secondary */
    return td__error(ag, "%s", msg);
  }
  e->impl = cx;
  return TD_OK;
}

static td_status td__cpu_buffer(td_exec *e, int32_t buffer, void **out) {
  td__cpu_exec *cx = e->impl;
  *out = cx->owned[buffer];
  return TD_OK;
}

static td_status td__cpu_destroy(td_exec *e) {
  td__cpu_exec *cx = e->impl;
  if (!cx)
    return TD_OK;
  td__stop_workers(cx);
  /* exec.c's destroy exchange was the barrier: no peer runs tasks any more. */
  td_status st = td__cpu_free(cx);
  e->impl = NULL;
  return st;
}

const td__exec_backend td__exec_backend_cpu = {
    .name = "cpu",
    .create = td__cpu_create,
    .buffer = td__cpu_buffer,
    .run = td__cpu_run,
    .destroy = td__cpu_destroy,
};
