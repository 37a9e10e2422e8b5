/* SPDX-License-Identifier: Apache-2.0
 * One launch of the CUDA executor (executor layer, cuda backend): refresh the
 * device task table if the caller rebound a buffer, the launch barrier, one
 * persistent-kernel launch with the epoch as its only changing argument, the
 * hand-off of queue tasks as the kernel publishes them (handoff.c), then,
 * once a bounded wait saw the kernel finish, the diagnostic and the trace
 * read back together.
 *
 * A wait that passed its deadline on the device becomes TD_ERR_TIMEOUT with a
 * message naming the rank, the task (index, label, kind), and the signal
 * (name, expected and observed value) or the local dependency that never
 * finished. Trace times are %globaltimer values mapped onto CLOCK_MONOTONIC
 * (the GPU timer follows the host's wall clock; when it does not, events are
 * anchored at the launch instead). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"
#include "exec/cuda/device_stuck.h"
#include "exec/schedule_internal.h"
#include "tdist/rma.h"

static dim3 td__dim(int n) {
  dim3 d = {(unsigned)n, 1, 1};
  return d;
}

td_status td__cuda_exec_upload(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  const size_t nb = (size_t)td_plan_nbuffers(e->plan);
  if (cx->uploaded && memcmp(cx->bound_at_upload, e->bound, nb * sizeof(void *)) == 0)
    return TD_OK;
  td_dev_wait *waits = calloc((size_t)s->nwaits + 1, sizeof *waits);
  td_dev_raise *raises = calloc((size_t)s->nraises + 1, sizeof *raises);
  if (!waits || !raises) {
    free(waits);
    free(raises);
    return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: no memory for the task image", e->rank);
  }
  td_status st = td__cuda_image_tasks(cx, waits, raises);
  cudaError_t ce = cudaSuccess;
  if (st == TD_OK) {
    ce = cudaMemcpy((void *)(uintptr_t)cx->plan.tasks, cx->h_tasks, s->ntasks * sizeof(td_dev_task),
                    cudaMemcpyHostToDevice);
    if (ce == cudaSuccess)
      ce = cudaMemcpy((void *)(uintptr_t)cx->plan.waits, waits, s->nwaits * sizeof *waits,
                      cudaMemcpyHostToDevice);
    if (ce == cudaSuccess)
      ce = cudaMemcpy((void *)(uintptr_t)cx->plan.raises, raises, s->nraises * sizeof *raises,
                      cudaMemcpyHostToDevice);
    if (ce != cudaSuccess)
      st = td__cuda_fail(e, "cudaMemcpy (task table)", ce);
  }
  free(waits);
  free(raises);
  if (st != TD_OK)
    return st;
  memcpy(cx->bound_at_upload, e->bound, nb * sizeof(void *));
  cx->uploaded = 1;
  return TD_OK;
}

static td_status td__timeout_message(td__cuda_exec *cx, const td_dev_diag *d) {
  const td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  const uint32_t ti = d->task < s->ntasks ? d->task : 0;
  const td_task *t = &s->tasks[ti];
  if (d->what == 2)
    return td__error(TD_ERR_TIMEOUT,
                     "cuda executor: rank %d, launch %llu: copy-engine task %u '%s' was handed to the copy-engine "
                     "stream but did not finish within the deadline (%d ms)",
                     e->rank, (unsigned long long)e->epoch, d->task, t->label, e->opts.timeout_ms);
  if (d->what == 0) {
    const uint32_t di = d->index < s->ntasks ? d->index : 0;
    return td__error(TD_ERR_TIMEOUT,
                     "cuda executor: rank %d, launch %llu: task %u '%s' (%s, %s) waited past its deadline "
                     "(%d ms) for local dependency task %u '%s', which never finished (its last finished "
                     "launch is %llu)",
                     e->rank, (unsigned long long)e->epoch, d->task, t->label, td__task_kind_name(t->kind),
                     td__worker_class_name(t->worker), e->opts.timeout_ms, d->index, s->tasks[di].label,
                     (unsigned long long)d->observed);
  }
  return td__error(TD_ERR_TIMEOUT,
                   "cuda executor: rank %d, launch %llu: task %u '%s' (%s, %s) waited past its deadline (%d ms) "
                   "for signal %u '%s' (rank %d's copy) to be %s %llu; observed %llu",
                   e->rank, (unsigned long long)e->epoch, d->task, t->label, td__task_kind_name(t->kind),
                   td__worker_class_name(t->worker), e->opts.timeout_ms, d->index,
                   td_plan_signal_name(e->plan, d->index), e->rank, td_cmp_name((td_cmp)d->cmp),
                   (unsigned long long)d->expected, (unsigned long long)d->observed);
}

static int64_t td__clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static td_status td__collect_trace(td__cuda_exec *cx, int64_t t0, int64_t t1) {
  td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  TD_CHECK(td__exec_trace_reserve(e, s->ntasks));
  const int64_t offset = td__clock_ns(CLOCK_REALTIME) - td__clock_ns(CLOCK_MONOTONIC);
  int64_t first = INT64_MAX;
  for (uint32_t i = 0; i < s->ntasks; i++)
    if (cx->h_trace[i].start && (int64_t)cx->h_trace[i].start < first)
      first = (int64_t)cx->h_trace[i].start;
  int64_t shift = offset;
  if (first != INT64_MAX && (first - offset < t0 - 5000000000LL || first - offset > t1 + 5000000000LL))
    shift = first - t0; /* the GPU timer does not follow the wall clock here: anchor at the launch */
  size_t n = 0;
  for (uint32_t i = 0; i < s->ntasks; i++) {
    const td_dev_trace *r = &cx->h_trace[i];
    if (!r->start || !r->end)
      continue; /* not run (a failed launch) */
    td_trace_event *ev = &e->trace[n++];
    ev->start_ns = (int64_t)r->start - shift;
    ev->end_ns = (int64_t)r->end - shift;
    ev->task = i;
    ev->worker = (int32_t)r->block;
    ev->cls = s->tasks[i].worker;
    ev->kind = s->tasks[i].kind;
  }
  e->ntrace = n;
  return TD_OK;
}

static td_status td__run_launch(td_exec *e) {
  td__cuda_exec *cx = e->impl;
  const td_schedule *s = e->sched;
  cudaError_t ce = cudaSetDevice(cx->device);
  td_status up = ce == cudaSuccess ? td__cuda_exec_upload(cx) : td__cuda_fail(e, "cudaSetDevice", ce);
  if (!e->opts.skip_launch_barrier) {
    /* The launch barrier carries the upload's verdict: a rank whose upload
     * failed still joins it, and then no rank launches (peers fail at once,
     * naming it, instead of waiting on its signals until their deadline). */
    char why[1024];
    snprintf(why, sizeof why, "%s", up != TD_OK ? td_last_error() : "");
    td__agree_result res;
    up = td__agree_round(e->agree, TD__AGREE_RUN_UPLOAD, up, why, 0, e->opts.timeout_ms, &res);
  }
  TD_CHECK(up);
  /* Checked after the barrier, so no peer is left waiting in it: peers launch
   * and their device waits report this rank's missing signals. */
  if (cx->stuck || td__cuda_device_stuck(cx->device))
    return td__error(TD_ERR_STATE, "cuda executor: rank %d: GPU %d has earlier work that never finished (a host "
                     "wait passed its deadline); nothing more is launched on it: destroy the executor",
                     e->rank, cx->device);
  /* One deadline for every host wait of this run (launch + 2 x timeout + 2 s):
   * a failing run never outlasts what a peer's td_exec_destroy waits for it. */
  td__cuda_run_deadline_start(cx);
  cx->plan.epoch = e->epoch;
  const int grid = cx->nblocks[0] + cx->nblocks[1];
  if (e->opts.trace)
    ce = cudaMemsetAsync((void *)(uintptr_t)cx->plan.trace, 0, s->ntasks * sizeof(td_dev_trace), cx->stream);
  const int64_t t0 = td__clock_ns(CLOCK_MONOTONIC);
  if (ce == cudaSuccess && grid > 0) {
    void *args[] = {&cx->plan};
    ce = cudaLaunchKernel((const void *)cx->kernel, td__dim(grid), td__dim(cx->spec.threads), args, 0,
                          cx->stream);
  }
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "launch of the persistent kernel", ce);
  /* The queues' tasks are enqueued as the kernel publishes their go words,
   * so no stream waits for another rank (handoff.c). A failed enqueue only
   * costs the deadline: the proxies time out. */
  td_status ce_st = cx->ce_enabled || cx->kq_enabled ? td__cuda_handoff(cx) : TD_OK;
  /* Nothing is enqueued behind the persistent kernel: a copy stream-ordered
   * after it would park its hardware queue until the kernel ends (and a copy
   * into pageable memory would block this thread with no deadline). The
   * diagnostic and the trace are read once the bounded wait saw it finish. */
  td_dev_diag diag;
  memset(&diag, 0, sizeof diag);
  td_status wst = td__cuda_stream_wait(cx, cx->stream, "the persistent kernel");
  if (wst == TD_OK) {
    ce = cudaMemcpyAsync(&diag, (void *)(uintptr_t)cx->plan.diag, sizeof diag, cudaMemcpyDeviceToHost, cx->stream);
    if (ce == cudaSuccess && e->opts.trace)
      ce = cudaMemcpyAsync(cx->h_trace, (void *)(uintptr_t)cx->plan.trace, s->ntasks * sizeof(td_dev_trace),
                           cudaMemcpyDeviceToHost, cx->stream);
    wst = ce == cudaSuccess ? td__cuda_stream_wait(cx, cx->stream, "the diagnostic's read-back")
                            : td__cuda_fail(e, "cudaMemcpyAsync (diagnostic)", ce);
  }
  const int64_t t1 = td__clock_ns(CLOCK_MONOTONIC);
  td_status kq_st = TD_OK;
  if (cx->stuck)
    return wst; /* releasing the queues would wait on the same blocked hardware queues */
  if (wst != TD_OK || diag.failed || ce_st != TD_OK) {
    td__cuda_abort(cx); /* released queue kernels then skip their work and raise nothing */
    td__cuda_ce_release(cx); /* drain what was handed off (all of it ready to run) */
    td__cuda_kq_release(cx);
  } else {
    if (cx->ce_enabled && cx->nce > 0)
      wst = td__cuda_stream_wait(cx, cx->ce_stream, "the copy-engine queue");
    if (wst == TD_OK)
      kq_st = td__cuda_kq_sync(cx);
  }
  if (wst != TD_OK)
    return wst;
  if (ce_st != TD_OK)
    return ce_st;
  if (kq_st != TD_OK)
    return kq_st;
  /* The queue's finish kernels wrote trace ends after the copy above: read again. */
  if (e->opts.trace && cx->kq_enabled) {
    ce = cudaMemcpy(cx->h_trace, (void *)(uintptr_t)cx->plan.trace, s->ntasks * sizeof(td_dev_trace),
                    cudaMemcpyDeviceToHost);
    if (ce != cudaSuccess)
      return td__cuda_fail(e, "cudaMemcpy (trace)", ce);
    td__cuda_kq_trace(cx);
  }
  td_status st = TD_OK;
  if (e->opts.trace)
    st = td__collect_trace(cx, t0, t1);
  if (diag.failed)
    return td__timeout_message(cx, &diag);
  return st;
}

td_status td__cuda_run(td_exec *e) {
  td_status st = td__run_launch(e);
  td__cuda_run_deadline_end(e->impl);
  return st;
}

td_status td__cuda_exec_run_grid(td_exec *e) {
  td__cuda_exec *cx = e->impl;
  cudaError_t ce = cudaSetDevice(cx->device);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "cudaSetDevice", ce);
  TD_CHECK(td__cuda_exec_upload(cx));
  if (e->sched->ntasks == 0)
    return TD_OK;
  if (cx->stuck || td__cuda_device_stuck(cx->device))
    return td__error(TD_ERR_STATE, "cuda executor: rank %d: GPU %d has earlier work that never finished; the "
                     "tile grid kernel is not launched", e->rank, cx->device);
  void *tasks = (void *)(uintptr_t)cx->plan.tasks;
  void *args[] = {&tasks};
  ce = cudaLaunchKernel((const void *)cx->grid_kernel, td__dim((int)e->sched->ntasks),
                        td__dim(cx->spec.threads), args, 0, cx->stream);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "the tile grid kernel", ce);
  return td__cuda_stream_wait(cx, cx->stream, "the tile grid kernel");
}
