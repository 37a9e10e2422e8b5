/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's device task image (executor layer, cuda backend): turns
 * this rank's symbolic schedule into the flat tables the persistent kernel
 * reads (device_abi.h), with every view, wait and raise resolved to a plain
 * device address -- own arena, a peer's arena, a private LOCAL buffer, or a
 * caller-bound buffer. Rebuilt only when the caller rebinds a buffer, so
 * repeated launches cost one small kernel argument (the epoch). */
#include <string.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"
#include "exec/schedule_internal.h"

/* The kernel and this file must agree on the layout byte for byte. */
_Static_assert(sizeof(td_dev_view) == 40, "td_dev_view layout");
_Static_assert(sizeof(td_dev_task) == 160, "td_dev_task layout");
_Static_assert(sizeof(td_dev_wait) == 32, "td_dev_wait layout");
_Static_assert(sizeof(td_dev_raise) == 16, "td_dev_raise layout");
_Static_assert(sizeof(td_dev_diag) == 40, "td_dev_diag layout");
_Static_assert(sizeof(td_dev_trace) == 24, "td_dev_trace layout");

/* Device address of element (0, 0) of buffer b's copy on `peer` (TD_PEER_SELF = own). */
static uint64_t td__buffer_addr(const td__cuda_exec *cx, int32_t b, int32_t peer) {
  const td_exec *e = cx->exec;
  const td_buffer_desc *d = td_plan_buffer(e->plan, b);
  switch (d->kind) {
  case TD_BUF_SYMM: {
    const int owner = peer == TD_PEER_SELF ? e->rank : peer;
    return cx->peer_base[owner] + cx->buf_off[b];
  }
  case TD_BUF_LOCAL:
    return (uint64_t)(uintptr_t)cx->local[b];
  default:
    return (uint64_t)(uintptr_t)e->bound[b];
  }
}

static td_status td__view(const td__cuda_exec *cx, uint32_t ti, const td_view *v, int used,
                          td_dev_view *out) {
  memset(out, 0, sizeof *out);
  if (!used || v->buf < 0)
    return TD_OK;
  const td_buffer_desc *d = td_plan_buffer(cx->exec->plan, v->buf);
  const size_t esz = td_dtype_size(d->dtype);
  uint64_t base = td__buffer_addr(cx, v->buf, v->peer);
  if (!base && d->rows * d->cols > 0 && v->rows * v->cols > 0)
    return td__error(TD_ERR_INTERNAL, "cuda executor: rank %d task %u: buffer %d '%s' has no device address",
                     cx->exec->rank, ti, v->buf, d->name);
  out->ptr = base + (uint64_t)((v->row0 * d->cols + v->col0) * (int64_t)esz);
  out->ld = d->cols;
  out->rows = v->rows;
  out->cols = v->cols;
  out->dtype = (int)d->dtype;
  return TD_OK;
}

td_status td__cuda_image_tasks(td__cuda_exec *cx, td_dev_wait *waits, td_dev_raise *raises) {
  const td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  for (uint32_t i = 0; i < s->ntasks; i++) {
    const td_task *t = &s->tasks[i];
    td_dev_task *d = &cx->h_tasks[i];
    memset(d, 0, sizeof *d);
    d->kind = (int)t->kind;
    d->worker = td__cuda_ce_eligible(cx, t) ? TD_DEV_WORKER_CE_PROXY
                : cx->kq_enabled              ? TD_DEV_WORKER_KQ_PROXY
                                              : (int)t->worker;
    d->op = t->op;
    d->alpha = t->alpha;
    d->dep_first = t->dep_first;
    d->dep_count = t->dep_count;
    d->wait_first = t->wait_first;
    d->wait_count = t->wait_count;
    d->raise_first = t->raise_first;
    d->raise_count = t->raise_count;
    const unsigned used = td__task_views_used(t);
    TD_CHECK(td__view(cx, i, &t->a, used & 1u, &d->a));
    TD_CHECK(td__view(cx, i, &t->b, used & 2u, &d->b));
    TD_CHECK(td__view(cx, i, &t->c, used & 4u, &d->c));
  }
  /* Signal words sit at the start of every arena: word k at offset 8k. */
  for (uint32_t k = 0; k < s->nwaits; k++) {
    const td_wait *w = &s->waits[k];
    waits[k].sig = cx->peer_base[e->rank] + 8u * w->signal;
    waits[k].total = td_plan_signal_total(e->plan, w->signal, e->rank);
    waits[k].value = w->value;
    waits[k].cmp = (int)w->cmp;
    waits[k].signal = w->signal;
  }
  for (uint32_t k = 0; k < s->nraises; k++) {
    const td_raise *r = &s->raises[k];
    const int owner = r->peer == TD_PEER_SELF ? e->rank : r->peer;
    raises[k].sig = cx->peer_base[owner] + 8u * r->signal;
    raises[k].value = r->value;
  }
  return TD_OK;
}
