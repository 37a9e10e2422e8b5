/* SPDX-License-Identifier: Apache-2.0
 * The backend-neutral executor front (executor layer): checks arguments,
 * resolves options, keeps the epoch and the bound caller buffers, and calls
 * the chosen backend through its td__exec_backend table (backend.h). The
 * trace calls live in src/trace/. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/backend.h"
#include "exec/schedule_internal.h"

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

td_status td_exec_create(const td_plan *plan, td_team *team, const td_exec_opts *opts, td_exec **out) {
  if (!plan || !team || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: plan, team and out must not be NULL");
  td_exec_opts o;
  td_exec_opts_init(&o);
  if (opts)
    o = *opts;
  if ((unsigned)o.backend >= TD_EXEC_BACKEND_COUNT)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: unknown backend %d; allowed 0 (cpu), 1 (cuda)",
                     (int)o.backend);
  if (o.compute_workers < 0 || o.compute_workers > 1024 || o.comm_workers < 0 || o.comm_workers > 1024)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: worker counts compute %d, comm %d; allowed 0 "
                     "(automatic) to 1024", o.compute_workers, o.comm_workers);
  if (o.timeout_ms < 0)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_create: timeout_ms %d must be >= 0 (0 = the world's)",
                     o.timeout_ms);
  if (!td__plan_is_validated(plan))
    return td__error(TD_ERR_STATE, "td_exec_create: the plan has not passed td_plan_validate (or changed "
                     "since); validate it first");
  int nranks = td_team_size(team);
  if (td_plan_nranks(plan) != nranks)
    return td__error(TD_ERR_MISMATCH, "td_exec_create: the plan has %d ranks but the team has %d members",
                     td_plan_nranks(plan), nranks);
  const td__exec_backend *be = td__pick_backend(o.backend);
  if (!be)
    return td__error(TD_ERR_UNSUPPORTED, "td_exec_create: backend 'cuda' is not in this build (configure "
                     "with -DTD_WITH_CUDA=ON on a machine with the CUDA toolkit); use the cpu backend");
  if (o.timeout_ms == 0)
    o.timeout_ms = td_world_timeout_ms(td_team_world(team));
  td_exec *e = calloc(1, sizeof *e);
  if (!e || !(e->bound = calloc((size_t)td_plan_nbuffers(plan) + 1, sizeof *e->bound))) {
    free(e);
    return td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory");
  }
  e->plan = plan;
  e->team = team;
  e->rank = td_team_rank(team);
  e->nranks = nranks;
  e->sched = td_plan_schedule(plan, e->rank);
  e->opts = o;
  e->backend = be;
  td_status st = be->create(e);
  if (st != TD_OK) {
    free(e->bound);
    free(e);
    return st;
  }
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

td_status td_exec_run(td_exec *exec) {
  if (!exec)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_run: exec is NULL");
  if (exec->failed)
    return td__error(TD_ERR_STATE, "td_exec_run: rank %d: an earlier run of this executor failed; destroy it "
                     "(collectively) and create a new one", exec->rank);
  TD_CHECK(td__check_bound(exec));
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
  td_status st = exec->backend->destroy(exec);
  free(exec->trace);
  free(exec->bound);
  free(exec);
  return st;
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
