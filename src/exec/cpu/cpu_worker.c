/* SPDX-License-Identifier: Apache-2.0
 * The CPU executor's run loop (executor layer, cpu backend): what every
 * persistent worker does in each launch, and td__cpu_run, which starts a
 * launch and waits for it.
 *
 * A worker takes its class's next task index from an atomic cursor (so each
 * class runs in schedule order), then:
 *  1. waits for each local dependency's done stamp to equal this epoch
 *     (spin briefly, then sleep on the pool's progress condition variable;
 *     a failed sibling wakes it at once; see td__wait_dep for its deadline);
 *  2. waits for each signal: (sig, cmp, v) becomes sig cmp (e-1)*T + v with T
 *     the plan's per-launch total for this rank (schedule.h), through the
 *     runtime's deadline wait td__wait_u64, which sleeps on the rank's
 *     doorbell and gives up with a diagnostic naming the task and signal;
 *  3. runs the tile on plain pointers (peer copies resolved at create);
 *  4. raises: td_signal_op ADD on the target rank's copy (release, so the
 *     tile's stores, also those into a peer's buffer, are visible to whoever
 *     acquires the signal);
 *  5. stamps the task done with the epoch (release) and wakes dependants.
 * On the first failure a worker records the status and message, sets the
 * abort flag and wakes its siblings; they stop taking tasks and those asleep
 * on a local dependency return at once. A sibling inside a signal wait
 * returns when the signal arrives, a peer is marked failed, or its own
 * deadline passes, so a failed run ends within one deadline. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "exec/cpu/cpu_internal.h"
#include "exec/schedule_internal.h"
#include "prim/prim_impl.h"
#include "tdist/rma.h"

enum { TD__DEP_SPINS = 256 };
#define TD__WAIT_SLICE_NS INT64_C(50000000) /* signal waits check the abort flag this often */

static void td__fail(td__cpu_exec *cx, td_status st, int aborted) {
  pthread_mutex_lock(&cx->mu);
  if (!aborted && cx->first_status == TD_OK) {
    cx->first_status = st;
    snprintf(cx->first_message, sizeof cx->first_message, "%s", td_last_error());
  }
  atomic_store(&cx->abort, 1);
  pthread_cond_broadcast(&cx->progress_cv);
  pthread_mutex_unlock(&cx->mu);
}

/* Deadline of `ms` milliseconds from now, as a CLOCK_MONOTONIC timespec. */
static struct timespec td__deadline_in(int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + ms * 1000000;
  ts.tv_sec = (time_t)(ns / 1000000000);
  ts.tv_nsec = (long)(ns % 1000000000);
  return ts;
}

/* A local dependency of a validated plan can only stay unfinished because
 * some task upstream is in a signal wait, which has its own deadline and
 * reports the real cause. So this wait gives up only after twice the
 * deadline passes with no task of this rank finishing: the upstream
 * diagnostic always comes first, and slow but live progress never trips it. */
static td_status td__wait_dep(td__cpu_exec *cx, uint32_t task, uint32_t dep, uint64_t epoch, int *aborted) {
  _Atomic uint64_t *d = &cx->done[dep];
  for (int i = 0; i < TD__DEP_SPINS; i++) {
    if (atomic_load_explicit(d, memory_order_acquire) == epoch)
      return TD_OK;
    if (atomic_load_explicit(&cx->abort, memory_order_relaxed))
      return *aborted = 1, TD_ERR_PEER_FAILED;
  }
  td_exec *e = cx->exec;
  int64_t window_ms = 2 * (int64_t)e->opts.timeout_ms;
  struct timespec ts = td__deadline_in(window_ms);
  uint64_t progress = atomic_load(&cx->progress);
  td_status st = TD_OK;
  pthread_mutex_lock(&cx->mu);
  atomic_fetch_add(&cx->dep_waiters, 1);
  while (atomic_load(d) != epoch) {
    if (atomic_load(&cx->abort)) {
      *aborted = 1, st = TD_ERR_PEER_FAILED;
      break;
    }
    if (pthread_cond_timedwait(&cx->progress_cv, &cx->mu, &ts) != 0 && atomic_load(d) != epoch) {
      uint64_t now = atomic_load(&cx->progress);
      if (now != progress) { /* something finished: a fresh window */
        progress = now;
        ts = td__deadline_in(window_ms);
        continue;
      }
      const td_task *t = &e->sched->tasks[task];
      st = td__error(TD_ERR_TIMEOUT, "rank %d: task %u '%s' timed out: no task of this rank finished for %lld "
                     "ms while it waited for its local dependency task %u '%s' (launch %" PRIu64 ")", e->rank,
                     task, t->label, (long long)window_ms, dep, e->sched->tasks[dep].label, epoch);
      break;
    }
  }
  atomic_fetch_sub(&cx->dep_waiters, 1);
  pthread_mutex_unlock(&cx->mu);
  return st;
}

/* Signal waits use the executor's deadline (opts.timeout_ms, resolved at
 * create), in slices so that a failed sibling ends the wait at once. */
static td_status td__wait_signal(td__cpu_exec *cx, uint32_t task, uint32_t windex, uint64_t epoch, int *aborted) {
  td_exec *e = cx->exec;
  const td_wait *w = &e->sched->waits[windex];
  uint64_t base = (epoch - 1) * cx->wait_total[windex];
  uint64_t target = base + w->value;
  _Atomic uint64_t *sig = (_Atomic uint64_t *)&cx->signals[w->signal];
  uint64_t v = atomic_load_explicit(sig, memory_order_acquire);
  if (w->cmp == TD_CMP_EQ ? v == target : v >= target)
    return TD_OK;
  td_world *world = td_team_world(e->team);
  int64_t deadline = td__now_ns() + (int64_t)e->opts.timeout_ms * 1000000;
  td_status st;
  for (;;) {
    if (atomic_load_explicit(&cx->abort, memory_order_relaxed))
      return *aborted = 1, TD_ERR_PEER_FAILED;
    int64_t slice = td__now_ns() + TD__WAIT_SLICE_NS;
    st = td__wait_raw(world, sig, w->cmp, target, slice < deadline ? slice : deadline, &v);
    if (st != TD_ERR_TIMEOUT || td__now_ns() >= deadline)
      break;
  }
  if (st == TD_OK)
    return TD_OK;
  const td_task *t = &e->sched->tasks[task];
  char what[192];
  snprintf(what, sizeof what, "task %u '%s' (signal %u '%s', launch %" PRIu64 ")", task, t->label, w->signal,
           td_plan_signal_name(e->plan, w->signal), epoch);
  if (st == TD_ERR_PEER_FAILED)
    return td__peer_failed_error(world, what);
  v = atomic_load_explicit(sig, memory_order_acquire);
  return td__error(TD_ERR_TIMEOUT, "rank %d: task %u '%s' timed out after %d ms waiting for signal %u '%s' "
                   "(launch %" PRIu64 "): expected %s %" PRIu64 " (%" PRIu64 " + %" PRIu64 "), observed %" PRIu64
                   " on rank %d's copy", e->rank, task, t->label, e->opts.timeout_ms, w->signal,
                   td_plan_signal_name(e->plan, w->signal), epoch, td_cmp_name(w->cmp), target, base, w->value, v,
                   e->rank);
}

static void td__mat(td__cpu_exec *cx, const td_view *v, td_tile_mat *m) {
  td_exec *e = cx->exec;
  const td_buffer_desc *d = td_plan_buffer(e->plan, v->buf);
  char *base;
  if (d->kind == TD_BUF_SYMM)
    base = cx->peer_base[(size_t)v->buf * (size_t)e->nranks + (size_t)(v->peer == TD_PEER_SELF ? e->rank : v->peer)];
  else if (d->kind == TD_BUF_LOCAL)
    base = cx->owned[v->buf];
  else
    base = e->bound[v->buf];
  m->ptr = base ? base + (size_t)(v->row0 * d->cols + v->col0) * td_dtype_size(d->dtype) : NULL;
  m->dtype = d->dtype;
  m->rows = v->rows;
  m->cols = v->cols;
  m->ld = d->cols;
}

static td_status td__run_task(td__cpu_worker *wk, uint32_t i, uint64_t epoch, int *aborted) {
  td__cpu_exec *cx = wk->cx;
  td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  const td_task *t = &s->tasks[i];
  for (uint32_t d = 0; d < t->dep_count; d++)
    TD_CHECK(td__wait_dep(cx, i, s->deps[t->dep_first + d], epoch, aborted));
  for (uint32_t w = 0; w < t->wait_count; w++)
    TD_CHECK(td__wait_signal(cx, i, t->wait_first + w, epoch, aborted));
  int64_t t0 = e->opts.trace ? td__now_ns() : 0;
  td_tile_fn fn = cx->tiles->fn[t->kind];
  if (fn) {
    td_tile_args args;
    memset(&args, 0, sizeof args);
    args.op = t->op;
    args.alpha = t->alpha;
    unsigned used = td__task_views_used(t);
    if (used & 1)
      td__mat(cx, &t->a, &args.a);
    if (used & 2)
      td__mat(cx, &t->b, &args.b);
    if (used & 4)
      td__mat(cx, &t->c, &args.c);
    td_status st = fn(&wk->tile, &args);
    if (st != TD_OK) {
      td__error_prefix("rank %d: task %u '%s': ", e->rank, i, t->label);
      return st;
    }
  }
  for (uint32_t k = 0; k < t->raise_count; k++) {
    const td_raise *r = &s->raises[t->raise_first + k];
    td_status st = td_signal_op(e->team, &cx->signals[r->signal], r->value, TD_SIGNAL_ADD,
                                r->peer == TD_PEER_SELF ? e->rank : r->peer);
    if (st != TD_OK) {
      td__error_prefix("rank %d: task %u '%s' raising signal '%s': ", e->rank, i, t->label,
                       td_plan_signal_name(e->plan, r->signal));
      return st;
    }
  }
  if (e->opts.trace) {
    td_trace_event *ev = &wk->events[wk->nevents++];
    ev->start_ns = t0;
    ev->end_ns = td__now_ns();
    ev->task = i;
    ev->worker = wk->id;
    ev->cls = t->worker;
    ev->kind = t->kind;
  }
  atomic_store(&cx->done[i], epoch);
  atomic_fetch_add_explicit(&cx->progress, 1, memory_order_relaxed);
  if (atomic_load(&cx->dep_waiters) > 0) {
    pthread_mutex_lock(&cx->mu);
    pthread_cond_broadcast(&cx->progress_cv);
    pthread_mutex_unlock(&cx->mu);
  }
  return TD_OK;
}

void *td__cpu_worker_main(void *arg) {
  td__cpu_worker *wk = arg;
  td__cpu_exec *cx = wk->cx;
  uint64_t seen = 0;
  for (;;) {
    pthread_mutex_lock(&cx->mu);
    while (!cx->stopping && cx->generation == seen)
      pthread_cond_wait(&cx->start_cv, &cx->mu);
    if (cx->stopping) {
      pthread_mutex_unlock(&cx->mu);
      return NULL;
    }
    seen = cx->generation;
    uint64_t epoch = cx->exec->epoch;
    pthread_mutex_unlock(&cx->mu);
    wk->nevents = 0;
    int q = wk->queue;
    while (!atomic_load_explicit(&cx->abort, memory_order_relaxed)) {
      uint32_t k = atomic_fetch_add_explicit(&cx->cursor[q], 1, memory_order_relaxed);
      if (k >= cx->qlen[q])
        break;
      int aborted = 0;
      td_status st = td__run_task(wk, cx->queue[q][k], epoch, &aborted);
      if (st != TD_OK) {
        td__fail(cx, st, aborted);
        break;
      }
    }
    pthread_mutex_lock(&cx->mu);
    if (--cx->active == 0)
      pthread_cond_signal(&cx->idle_cv);
    pthread_mutex_unlock(&cx->mu);
  }
}

td_status td__cpu_run(td_exec *e) {
  td__cpu_exec *cx = e->impl;
  /* The launch barrier is exec.c's readiness exchange (td__agree). */
  td__tile_cpu_blas_single_thread();
  pthread_mutex_lock(&cx->mu);
  for (int q = 0; q < TD__CPU_QUEUES; q++)
    atomic_store_explicit(&cx->cursor[q], 0, memory_order_relaxed);
  atomic_store(&cx->abort, 0);
  cx->first_status = TD_OK;
  cx->first_message[0] = 0;
  cx->active = cx->nworkers;
  cx->generation++;
  pthread_cond_broadcast(&cx->start_cv);
  while (cx->active > 0)
    pthread_cond_wait(&cx->idle_cv, &cx->mu);
  td_status st = cx->first_status;
  pthread_mutex_unlock(&cx->mu);
  if (e->opts.trace) {
    size_t n = 0;
    for (int w = 0; w < cx->nworkers; w++)
      n += cx->workers[w].nevents;
    td_status ts = td__exec_trace_reserve(e, n + 1);
    if (ts != TD_OK && st == TD_OK)
      return ts;
    e->ntrace = 0;
    for (int w = 0; ts == TD_OK && w < cx->nworkers; w++) {
      memcpy(e->trace + e->ntrace, cx->workers[w].events, cx->workers[w].nevents * sizeof *e->trace);
      e->ntrace += cx->workers[w].nevents;
    }
  }
  if (st != TD_OK)
    return td__error(st, "%s", cx->first_message);
  return TD_OK;
}
