/* SPDX-License-Identifier: Apache-2.0
 * Plans: building the per-rank task tables that the compiler emits and the
 * executors run (executor layer). Appends copy their inputs; any change
 * after td_plan_validate clears the validated mark, so an executor never
 * runs a plan that changed since it was checked. Validation lives in
 * schedule_validate.c, the text form in schedule_text.c. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/schedule_internal.h"

const char *td__task_kind_name(td_task_kind kind) {
  static const char *names[TD_TASK_KIND_COUNT] = {"nop", "gemm", "copy", "reduce", "ewise", "rmsnorm"};
  return (unsigned)kind < TD_TASK_KIND_COUNT ? names[kind] : "invalid";
}

const char *td__worker_class_name(td_worker_class cls) {
  static const char *names[TD_WORKER_CLASS_COUNT] = {"compute", "comm", "copy_engine"};
  return (unsigned)cls < TD_WORKER_CLASS_COUNT ? names[cls] : "invalid";
}

const char *td__buffer_kind_name(td_buffer_kind kind) {
  static const char *names[TD_BUF_KIND_COUNT] = {"input", "weight", "output", "symm", "local"};
  return (unsigned)kind < TD_BUF_KIND_COUNT ? names[kind] : "invalid";
}

const char *td__ewise_op_name(td_ewise_op op) {
  static const char *names[TD_EW_OP_COUNT] = {"add", "mul", "gelu", "silu", "scale", "copy"};
  return (unsigned)op < TD_EW_OP_COUNT ? names[op] : "invalid";
}

td_status td_plan_create(int nranks, td_plan **out) {
  if (!out)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_create: out is NULL");
  if (nranks < 1 || nranks > 4096)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_create: nranks %d is out of range; allowed 1 to 4096",
                     nranks);
  td_plan *p = calloc(1, sizeof *p);
  if (p) {
    p->scheds = calloc((size_t)nranks, sizeof *p->scheds);
    p->caps = calloc((size_t)nranks, sizeof *p->caps);
  }
  if (!p || !p->scheds || !p->caps) {
    td_plan_destroy(p);
    return td__error(TD_ERR_NO_MEMORY, "td_plan_create: out of memory for %d schedules", nranks);
  }
  p->nranks = nranks;
  for (int r = 0; r < nranks; r++)
    p->scheds[r].rank = r;
  *out = p;
  return TD_OK;
}

void td_plan_destroy(td_plan *plan) {
  if (!plan)
    return;
  for (int r = 0; plan->scheds && r < plan->nranks; r++) {
    free(plan->scheds[r].tasks);
    free(plan->scheds[r].deps);
    free(plan->scheds[r].waits);
    free(plan->scheds[r].raises);
  }
  free(plan->scheds);
  free(plan->caps);
  free(plan->bufs);
  free(plan->signal_names);
  free(plan->totals);
  free(plan);
}

/* Grows *arr (elements of `size` bytes) so that it holds `need`; doubles. */
static int td__grow(void **arr, uint32_t *cap, uint64_t need, size_t size) {
  if (need <= *cap)
    return 1;
  if (need > UINT32_MAX / 2)
    return 0;
  uint32_t ncap = *cap ? *cap : 8;
  while (ncap < need)
    ncap *= 2;
  void *p = realloc(*arr, (size_t)ncap * size);
  if (!p)
    return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

td_status td_plan_add_buffer(td_plan *plan, const td_buffer_desc *desc, int32_t *index) {
  if (!plan || !desc || !index)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_buffer: plan, desc and index must not be NULL");
  if (memchr(desc->name, 0, sizeof desc->name) == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_buffer: name is not NUL-terminated within %zu bytes",
                     sizeof desc->name);
  if ((unsigned)desc->kind >= TD_BUF_KIND_COUNT)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_buffer: buffer '%s' has unknown kind %d", desc->name,
                     (int)desc->kind);
  if (td_dtype_size(desc->dtype) == 0)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_buffer: buffer '%s' has unknown dtype %d", desc->name,
                     (int)desc->dtype);
  if (desc->rows < 0 || desc->cols < 0 || (desc->cols > 0 && desc->rows > INT64_MAX / 16 / desc->cols))
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_buffer: buffer '%s' has shape %lld x %lld; rows and "
                     "cols must be >= 0 and the size must fit in memory", desc->name,
                     (long long)desc->rows, (long long)desc->cols);
  uint32_t cap = (uint32_t)plan->bufs_cap;
  if (plan->nbufs >= INT32_MAX / 4 || !td__grow((void **)&plan->bufs, &cap, (uint64_t)plan->nbufs + 1,
                                                sizeof *plan->bufs))
    return td__error(TD_ERR_NO_MEMORY, "td_plan_add_buffer: out of memory for buffer %d", plan->nbufs);
  plan->bufs_cap = (int32_t)cap;
  plan->bufs[plan->nbufs] = *desc;
  *index = plan->nbufs++;
  plan->validated = 0;
  plan->generation++;
  return TD_OK;
}

td_status td_plan_add_signal(td_plan *plan, const char *name, uint32_t *index) {
  if (!plan || !index)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_signal: plan and index must not be NULL");
  if (!name)
    name = "";
  if (strlen(name) >= TD__SIGNAL_NAME_MAX)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_signal: name '%s' is longer than %d characters", name,
                     TD__SIGNAL_NAME_MAX - 1);
  if (!td__grow((void **)&plan->signal_names, &plan->signals_cap, (uint64_t)plan->nsignals + 1,
                sizeof *plan->signal_names))
    return td__error(TD_ERR_NO_MEMORY, "td_plan_add_signal: out of memory for signal %u", plan->nsignals);
  memset(plan->signal_names[plan->nsignals], 0, TD__SIGNAL_NAME_MAX);
  strcpy(plan->signal_names[plan->nsignals], name);
  *index = plan->nsignals++;
  plan->validated = 0;
  plan->generation++;
  return TD_OK;
}

td_status td_plan_add_task(td_plan *plan, int rank, const td_task *task, const uint32_t *deps,
                           uint32_t ndeps, const td_wait *waits, uint32_t nwaits,
                           const td_raise *raises, uint32_t nraises, uint32_t *index) {
  if (!plan || !task || !index)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_task: plan, task and index must not be NULL");
  if (rank < 0 || rank >= plan->nranks)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_task: rank %d is out of range; the plan has %d ranks",
                     rank, plan->nranks);
  if ((ndeps && !deps) || (nwaits && !waits) || (nraises && !raises))
    return td__error(TD_ERR_INVALID_ARG, "td_plan_add_task: rank %d task '%.*s': a non-zero count with a NULL "
                     "array (deps %u, waits %u, raises %u)", rank, (int)sizeof task->label, task->label,
                     ndeps, nwaits, nraises);
  td_schedule *s = &plan->scheds[rank];
  td__sched_caps *c = &plan->caps[rank];
  if (!td__grow((void **)&s->tasks, &c->tasks, (uint64_t)s->ntasks + 1, sizeof *s->tasks) ||
      !td__grow((void **)&s->deps, &c->deps, (uint64_t)s->ndeps + ndeps, sizeof *s->deps) ||
      !td__grow((void **)&s->waits, &c->waits, (uint64_t)s->nwaits + nwaits, sizeof *s->waits) ||
      !td__grow((void **)&s->raises, &c->raises, (uint64_t)s->nraises + nraises, sizeof *s->raises))
    return td__error(TD_ERR_NO_MEMORY, "td_plan_add_task: out of memory for rank %d task %u", rank, s->ntasks);
  td_task t = *task;
  t.label[sizeof t.label - 1] = 0; /* labels are always terminated */
  t.dep_first = s->ndeps;
  t.dep_count = ndeps;
  t.wait_first = s->nwaits;
  t.wait_count = nwaits;
  t.raise_first = s->nraises;
  t.raise_count = nraises;
  if (ndeps)
    memcpy(s->deps + s->ndeps, deps, ndeps * sizeof *deps);
  if (nwaits)
    memcpy(s->waits + s->nwaits, waits, nwaits * sizeof *waits);
  if (nraises)
    memcpy(s->raises + s->nraises, raises, nraises * sizeof *raises);
  s->ndeps += ndeps;
  s->nwaits += nwaits;
  s->nraises += nraises;
  s->tasks[s->ntasks] = t;
  *index = s->ntasks++;
  plan->validated = 0;
  plan->generation++;
  return TD_OK;
}

int td_plan_nranks(const td_plan *plan) { return plan ? plan->nranks : 0; }

const td_schedule *td_plan_schedule(const td_plan *plan, int rank) {
  return plan && rank >= 0 && rank < plan->nranks ? &plan->scheds[rank] : NULL;
}

int32_t td_plan_nbuffers(const td_plan *plan) { return plan ? plan->nbufs : 0; }

const td_buffer_desc *td_plan_buffer(const td_plan *plan, int32_t index) {
  return plan && index >= 0 && index < plan->nbufs ? &plan->bufs[index] : NULL;
}

uint32_t td_plan_nsignals(const td_plan *plan) { return plan ? plan->nsignals : 0; }

const char *td_plan_signal_name(const td_plan *plan, uint32_t index) {
  return plan && index < plan->nsignals ? plan->signal_names[index] : NULL;
}

uint64_t td_plan_signal_total(const td_plan *plan, uint32_t signal, int rank) {
  if (!plan || !plan->validated || !plan->totals || signal >= plan->nsignals || rank < 0 ||
      rank >= plan->nranks)
    return 0;
  return plan->totals[(size_t)signal * (size_t)plan->nranks + (size_t)rank];
}

int td__plan_is_validated(const td_plan *plan) { return plan && plan->validated; }

uint64_t td__plan_generation(const td_plan *plan) { return plan ? plan->generation : 0; }

/* FNV-1a, 64-bit; fields one by one so padding and bytes after a name's NUL
 * never count. */
static uint64_t td__fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * UINT64_C(0x100000001b3);
  return h;
}

static uint64_t td__fnv_u64(uint64_t h, uint64_t v) { return td__fnv(h, &v, sizeof v); }

static uint64_t td__fnv_str(uint64_t h, const char *s, size_t cap) {
  size_t n = strnlen(s, cap);
  return td__fnv(td__fnv_u64(h, n), s, n);
}

static uint64_t td__fnv_view(uint64_t h, const td_view *v) {
  const int64_t f[6] = {v->buf, v->peer, v->row0, v->col0, v->rows, v->cols};
  for (int i = 0; i < 6; i++)
    h = td__fnv_u64(h, (uint64_t)f[i]);
  return h;
}

uint64_t td__plan_fingerprint(const td_plan *p) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  h = td__fnv_u64(h, (uint64_t)p->nranks);
  h = td__fnv_u64(h, (uint64_t)p->nbufs);
  for (int32_t b = 0; b < p->nbufs; b++) {
    const td_buffer_desc *d = &p->bufs[b];
    h = td__fnv_str(h, d->name, sizeof d->name);
    h = td__fnv_u64(td__fnv_u64(h, (uint64_t)d->kind), (uint64_t)d->dtype);
    h = td__fnv_u64(td__fnv_u64(h, (uint64_t)d->rows), (uint64_t)d->cols);
  }
  h = td__fnv_u64(h, p->nsignals);
  for (uint32_t i = 0; i < p->nsignals; i++)
    h = td__fnv_str(h, p->signal_names[i], TD__SIGNAL_NAME_MAX);
  for (int r = 0; r < p->nranks; r++) {
    const td_schedule *s = &p->scheds[r];
    h = td__fnv_u64(h, s->ntasks);
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      uint32_t alpha;
      memcpy(&alpha, &t->alpha, sizeof alpha);
      const uint64_t f[7] = {(uint64_t)t->kind, (uint64_t)t->worker, t->op, alpha, t->dep_count, t->wait_count,
                             t->raise_count};
      for (int k = 0; k < 7; k++)
        h = td__fnv_u64(h, f[k]);
      h = td__fnv_view(td__fnv_view(td__fnv_view(h, &t->a), &t->b), &t->c);
      h = td__fnv_str(h, t->label, sizeof t->label);
      for (uint32_t d = 0; d < t->dep_count; d++)
        h = td__fnv_u64(h, s->deps[t->dep_first + d]);
      for (uint32_t w = 0; w < t->wait_count; w++) {
        const td_wait *wt = &s->waits[t->wait_first + w];
        h = td__fnv_u64(td__fnv_u64(td__fnv_u64(h, wt->signal), (uint64_t)wt->cmp), wt->value);
      }
      for (uint32_t k = 0; k < t->raise_count; k++) {
        const td_raise *rs = &s->raises[t->raise_first + k];
        h = td__fnv_u64(td__fnv_u64(td__fnv_u64(h, rs->signal), (uint64_t)(int64_t)rs->peer), rs->value);
      }
    }
  }
  return h;
}
