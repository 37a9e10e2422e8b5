/* SPDX-License-Identifier: Apache-2.0
 * The backend-neutral executor front (executor layer): checks arguments,
 * resolves options, keeps the epoch and the bound caller buffers, and calls
 * the chosen backend through its td__exec_backend table (backend.h). The
 * trace calls live in src/trace/. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/backend.h"
#include "exec/schedule_internal.h"
#include "prim/prim_internal.h"

void td_exec_opts_init(td_exec_opts *opts) {
  if (opts)
    memset(opts, 0, sizeof *opts);
}

static const td__exec_backend *td__pick_backend(td_exec_backend b) {
  switch (b) {
  case TD_EXEC_CPU:
    return &td__exec_backend_cpu;
  case TD_EXEC_CUDA:
#ifdef TD_HAVE_CUDA_EXEC
    return &td__exec_backend_cuda;
#else
    return NULL;
#endif
  default:
    return NULL;
  }
}

/* What this rank alone can tell about its td_exec_create arguments. */
static td_status td__create_args(const td_plan *plan, td_team *team, td_exec **out, td_exec_opts *o,
                                 const td__exec_backend **be) {
  if (!plan || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: rank %d: plan and out must not be NULL",
                     td_team_rank(team));
  if ((unsigned)o->backend >= TD_EXEC_BACKEND_COUNT)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: unknown backend %d; allowed 0 (cpu), 1 (cuda)",
                     (int)o->backend);
  if (o->compute_workers < 0 || o->compute_workers > 1024 || o->comm_workers < 0 || o->comm_workers > 1024)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: worker counts compute %d, comm %d; allowed 0 "
                     "(automatic) to 1024", o->compute_workers, o->comm_workers);
  if (o->timeout_ms < 0)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: timeout_ms %d must be >= 0 (0 = the world's)",
                     o->timeout_ms);
  if (!td__plan_is_validated(plan))
    return td__error(TD_ERR_STATE, "td_exec_create: the plan has not passed td_plan_validate (or changed "
                     "since); validate it first");
  int nranks = td_team_size(team);
  if (td_plan_nranks(plan) != nranks)
    return td__error(TD_ERR_MISMATCH, "td_exec_create: the plan has %d ranks but the team has %d members",
                     td_plan_nranks(plan), nranks);
  *be = td__pick_backend(o->backend);
  if (!*be)
    return td__error(TD_ERR_UNSUPPORTED, "td_exec_create: backend 'cuda' is not in this build (configure "
                     "with -DTD_WITH_CUDA=ON on a machine with the CUDA toolkit); use the cpu backend");
  /* The GELU epilogue exists only in the cpu tiles; a cuda GEMM would drop it. */
  const td_schedule *sched = o->backend == TD_EXEC_CUDA ? td_plan_schedule(plan, td_team_rank(team)) : NULL;
  for (uint32_t i = 0; sched && i < sched->ntasks; i++)
    if (sched->tasks[i].kind == TD_TASK_GEMM && (sched->tasks[i].op & TD_GEMM_GELU))
      return td__error(TD_ERR_UNSUPPORTED, "td_exec_create: rank %d task %u '%s': the GEMM epilogue flag GELU "
                       "(16) runs only on the cpu backend; on cuda emit a separate gelu element-wise task",
                       td_team_rank(team), i, sched->tasks[i].label);
  return TD_OK;
}

/* Largest per-launch signal total of this rank's waits: it bounds the launches. */
static uint64_t td__launch_max(const td_plan *plan, int rank) {
  uint64_t tmax = 1;
  for (uint32_t s = 0; s < td_plan_nsignals(plan); s++) {
    uint64_t t = td_plan_signal_total(plan, s, rank);
    tmax = t > tmax ? t : tmax;
  }
  uint64_t m = (UINT64_C(1) << 63) / tmax;
  return m < TD_PLAN_LAUNCH_MAX ? TD_PLAN_LAUNCH_MAX : m;
}

td_status td_exec_create(const td_plan *plan, td_team *team, const td_exec_opts *opts, td_exec **out) {
  td__exec_set_create_cause(-1);
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: team must not be NULL");
  td_exec_opts o;
  td_exec_opts_init(&o);
  if (opts)
    o = *opts;
  const td__exec_backend *be = NULL;
  td_status mine = td__create_args(plan, team, out, &o, &be);
  if (mine == TD_OK)
    mine = td__exec_fault_check(td_team_rank(team), TD__EXEC_STEP_ARGS);
  td_exec *e = NULL;
  if (mine == TD_OK) {
    e = calloc(1, sizeof *e);
    if (!e || !(e->bound = calloc((size_t)td_plan_nbuffers(plan) + 1, sizeof *e->bound))) {
      free(e);
      e = NULL;
      mine = td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory");
    }
  }
  /* Every rank joins the exchange, also one whose own arguments are bad, so
   * that all fail at once with its status, naming it and its reason (and a
   * different plan on some rank is caught here, by its fingerprint, not by a
   * hang in the first run). */
  char why[1024];
  snprintf(why, sizeof why, "%s", mine != TD_OK ? td_last_error() : "");
  td__agree *ag = NULL;
  td_status st = td__agree_create(team, &ag);
  if (st == TD_OK) {
    if (mine != TD_OK)
      td__error(mine, "%s", why); /* td__agree_create may have rewritten the message */
    st = td__agree_create_step(ag, TD__AGREE_CREATE, mine, mine == TD_OK ? td__plan_fingerprint(plan) : 0,
                               td_world_timeout_ms(td_team_world(team)));
    if (st != TD_OK) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", td_last_error());
      td__agree_destroy(ag);
      td__error(st, "%s", msg);
    }
  }
  if (st != TD_OK) {
    if (e)
      free(e->bound);
    free(e);
    return st;
  }
  if (o.timeout_ms == 0)
    o.timeout_ms = td_world_timeout_ms(td_team_world(team));
  e->plan = plan;
  e->team = team;
  e->rank = td_team_rank(team);
  e->nranks = td_team_size(team);
  e->sched = td_plan_schedule(plan, e->rank);
  e->opts = o;
  e->backend = be;
  e->agree = ag;
  e->plan_gen = td__plan_generation(plan);
  e->launch_max = td__launch_max(plan, e->rank);
  /* The backend agrees on its own steps (td__agree_create_step after each
   * stretch of local work), so it returns the same error on every rank or
   * on none, naming the rank that failed and its reason. */
  st = be->create(e);
  if (st != TD_OK) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    td__agree_destroy(ag); /* its error is secondary: the first message stays */
    free(e->bound);
    free(e);
    return td__error(st, "%s", msg);
  }
  /* The executor keeps the team: td_team_destroy refuses until it is gone. */
  td__team_users_add(team, TD__TEAM_USER_EXECUTOR, 1);
  *out = e;
  return TD_OK;
}

static int td__caller_bound(td_buffer_kind k) {
  return k == TD_BUF_INPUT || k == TD_BUF_WEIGHT || k == TD_BUF_OUTPUT;
}

td_status td_exec_bind(td_exec *exec, int32_t buffer, void *ptr) {
  if (!exec)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_bind: exec is NULL");
  const td_buffer_desc *d = td_plan_buffer(exec->plan, buffer);
  if (!d)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_bind: buffer %d is out of range; the plan has %d buffers",
                     buffer, td_plan_nbuffers(exec->plan));
  if (!td__caller_bound(d->kind))
    return td__error(TD_ERR_INVALID_ARG, "td_exec_bind: buffer %d '%s' is %s, owned by the executor; use "
                     "td_exec_buffer to reach it", buffer, d->name, td__buffer_kind_name(d->kind));
  if (!ptr && d->rows * d->cols > 0)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_bind: NULL pointer for buffer %d '%s' of %lld x %lld", buffer,
                     d->name, (long long)d->rows, (long long)d->cols);
  exec->bound[buffer] = ptr;
  return TD_OK;
}

td_status td_exec_buffer(td_exec *exec, int32_t buffer, void **out) {
  if (!exec || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_buffer: exec and out must not be NULL");
  const td_buffer_desc *d = td_plan_buffer(exec->plan, buffer);
  if (!d)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_buffer: buffer %d is out of range; the plan has %d buffers",
                     buffer, td_plan_nbuffers(exec->plan));
  if (td__caller_bound(d->kind))
    return td__error(TD_ERR_INVALID_ARG, "td_exec_buffer: buffer %d '%s' is %s, bound by the caller with "
                     "td_exec_bind; only symm and local buffers are executor-owned", buffer, d->name,
                     td__buffer_kind_name(d->kind));
  return exec->backend->buffer(exec, buffer, out);
}

/* Every caller buffer this rank's schedule touches must be bound. */
static td_status td__check_bound(const td_exec *e) {
  const td_schedule *s = e->sched;
  for (uint32_t i = 0; i < s->ntasks; i++) {
    const td_task *t = &s->tasks[i];
    unsigned used = td__task_views_used(t);
    const td_view *v[3] = {&t->a, &t->b, &t->c};
    for (int w = 0; w < 3; w++) {
      if (!(used & (1u << w)))
        continue;
      const td_buffer_desc *d = td_plan_buffer(e->plan, v[w]->buf);
      if (td__caller_bound(d->kind) && !e->bound[v[w]->buf] && d->rows * d->cols > 0)
        return td__error(TD_ERR_STATE, "td_exec_run: rank %d: buffer %d '%s' (%s) is used by task %u '%s' but "
                         "not bound; call td_exec_bind first", e->rank, v[w]->buf, d->name,
                         td__buffer_kind_name(d->kind), i, t->label);
    }
  }
  return TD_OK;
}

td__exec_fault td__exec_test_fail_at;

td_status td__exec_fault_check(int rank, int step) {
  static const char *names[TD__EXEC_STEP_COUNT] = {
      "", "argument checks", "cpu: local preparation", "cpu: symmetric buffers and workers",
      "cuda: device and arena", "cuda: rank record", "cuda: peers, kernel and grid", "cuda: device tables",
      "run: readiness"};
  const td__exec_fault f = td__exec_test_fail_at;
  if (f.step != step || f.rank != rank || step <= 0 || step >= TD__EXEC_STEP_COUNT)
    return TD_OK;
  return td__error(f.status != TD_OK ? f.status : TD_ERR_INTERNAL, "rank %d: injected failure at step %d (%s)",
                   rank, step, names[step]);
}

/* What this rank alone can tell before a launch. */
static td_status td__run_ready(td_exec *e) {
  if (e->failed)
    return td__error(TD_ERR_STATE, "td_exec_run: rank %d: an earlier run of this executor failed; destroy it "
                     "(collectively) and create a new one", e->rank);
  if (td__plan_generation(e->plan) != e->plan_gen || !td__plan_is_validated(e->plan))
    return td__error(TD_ERR_STATE, "td_exec_run: rank %d: the plan changed after td_exec_create (an executor "
                     "runs the plan as it was at create); destroy the executor and create a new one for the "
                     "changed, validated plan", e->rank);
  if (e->epoch >= e->launch_max)
    return td__error(TD_ERR_STATE, "td_exec_run: rank %d: launch %" PRIu64 " would exceed this executor's "
                     "%" PRIu64 " launches (signal words would pass 2^63); destroy it and create a new one",
                     e->rank, e->epoch + 1, e->launch_max);
  TD_CHECK(td__exec_fault_check(e->rank, TD__EXEC_STEP_RUN));
  return td__check_bound(e);
}

td_status td_exec_run(td_exec *exec) {
  if (!exec)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_run: exec is NULL");
  td_status mine = td__run_ready(exec);
  if (!exec->opts.skip_launch_barrier) {
    /* The launch barrier carries each rank's readiness: no rank starts a task
     * unless every rank is ready, and all fail at once naming the rank that
     * is not (and why). A failure here starts nothing and leaves the
     * executor usable (unless it had failed before). */
    char why[1024];
    snprintf(why, sizeof why, "%s", mine != TD_OK ? td_last_error() : "");
    td__agree_result res;
    td_status st = td__agree_round(exec->agree, TD__AGREE_RUN, mine, why, 0, exec->opts.timeout_ms, &res);
    if (st != TD_OK) {
      if (res.bad_rank < 0 || res.other_op == TD__AGREE_DESTROY)
        exec->failed = 1; /* a peer left or is tearing down: nothing more can run */
      return st;
    }
  } else if (mine != TD_OK) {
    return mine;
  }
  exec->epoch++;
  exec->ntrace = 0;
  exec->traced = 0;
  td_status st = exec->backend->run(exec);
  if (exec->opts.trace)
    exec->traced = 1;
  if (st != TD_OK)
    exec->failed = 1;
  return st;
}

uint64_t td_exec_epoch(const td_exec *exec) { return exec ? exec->epoch : 0; }

td_status td_exec_destroy(td_exec *exec) {
  if (!exec)
    return TD_OK;
  /* Agree that every rank is destroying: a peer still in another call fails
   * it at once (it sees this rank's destroy) and then destroys too, so this
   * loops until all ranks are here or the deadline passes. */
  td_status st = TD_OK;
  /* A peer may still be finishing a failing run (up to twice opts.timeout_ms),
   * so destroy waits the world's deadline on top. */
  int64_t wait_ms = (int64_t)td_world_timeout_ms(td_team_world(exec->team)) + 2 * (int64_t)exec->opts.timeout_ms;
  for (;;) {
    td__agree_result res;
    st = td__agree_round(exec->agree, TD__AGREE_DESTROY, TD_OK, NULL, 0, wait_ms, &res);
    if (st == TD_OK || res.bad_rank < 0 || res.other_op == TD__AGREE_DESTROY)
      break;
  }
  td__team_users_add(exec->team, TD__TEAM_USER_EXECUTOR, -1); /* freed below on every path */
  if (st != TD_OK) {
    /* Peers are gone or stuck: free only what is this rank's alone. */
    exec->failed = 1;
    exec->abandon = 1;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    exec->backend->destroy(exec);
    td__agree_abandon(exec->agree);
    free(exec->trace);
    free(exec->bound);
    free(exec);
    return td__error(st, "td_exec_destroy: %s", msg);
  }
  st = exec->backend->destroy(exec);
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", st != TD_OK ? td_last_error() : "");
  td_status as = td__agree_destroy(exec->agree);
  free(exec->trace);
  free(exec->bound);
  free(exec);
  if (st != TD_OK)
    return td__error(st, "%s", msg); /* the first failure's message */
  return as;
}

td_status td__exec_trace_reserve(td_exec *exec, size_t count) {
  if (count <= exec->trace_cap)
    return TD_OK;
  td_trace_event *p = realloc(exec->trace, count * sizeof *p);
  if (!p)
    return td__error(TD_ERR_NO_MEMORY, "executor trace: out of memory for %zu events", count);
  exec->trace = p;
  exec->trace_cap = count;
  return TD_OK;
}
