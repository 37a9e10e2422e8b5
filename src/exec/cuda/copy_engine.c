/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's copy-engine queue (executor layer, cuda backend).
 *
 * Copy-engine tasks move their bytes with cudaMemcpy2DAsync on a
 * high-priority stream of their own, so no SM spends time on them (lesson 4
 * of DESIGN.md). Readiness crosses between that stream and the persistent
 * kernel through two words per task:
 *   kernel  -> host    ce_go[t] = epoch   (the task's waits held; st.release.sys
 *                      into mapped host memory); the host's hand-off loop
 *                      (handoff.c) sees it and only then enqueues the copy,
 *   stream  -> kernel  ce_done[t] = epoch (cuStreamWriteValue64 after the copy)
 * and the communication block that pulled the task raises its signals once
 * ce_done holds. All deadlines therefore stay in the kernel. The stream never
 * waits on a go word (an earlier version parked cuStreamWaitValue64 there,
 * which could block a peer's copy sharing the hardware queue: handoff.c says
 * how), so a failed launch leaves only ready copies to drain. The driver
 * entry points come through the runtime
 * (cudaGetDriverEntryPointByVersion), so libtdist needs no link to libcuda and
 * loads on machines without a GPU. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"
#include "tdist/config.h"

typedef CUresult (*td__write64_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
typedef CUresult (*td__attr_fn)(int *, CUdevice_attribute, CUdevice);

/* Copy-engine class, or (with the kernel queue, where no SM should copy) any
 * communication-class copy. */
static int td__ce_candidate(const td__cuda_exec *cx, const td_task *t) {
  return t->kind == TD_TASK_COPY &&
         (t->worker == TD_WORKER_COPY_ENGINE || (cx->kq_enabled && t->worker == TD_WORKER_COMM));
}

int td__cuda_ce_eligible(const td__cuda_exec *cx, const td_task *t) {
  if (!cx->ce_enabled || !td__ce_candidate(cx, t))
    return 0;
  const td_buffer_desc *a = td_plan_buffer(cx->exec->plan, t->a.buf);
  const td_buffer_desc *c = td_plan_buffer(cx->exec->plan, t->c.buf);
  return a && c && a->dtype == c->dtype && t->c.rows > 0 && t->c.cols > 0;
}

void *td__cuda_driver_entry(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return fn;
}

td_status td__cuda_ce_setup(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  cx->ce_enabled = 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->ntasks; i++)
    n += s->tasks[i].worker == TD_WORKER_COPY_ENGINE || td__ce_candidate(cx, &s->tasks[i]);
  if (n == 0)
    return TD_OK;
  td__attr_fn attr = (td__attr_fn)td__cuda_driver_entry("cuDeviceGetAttribute");
  cx->ce_write64 = td__cuda_driver_entry("cuStreamWriteValue64");
  int ok = 0;
  if (attr && cx->ce_write64 &&
      attr(&ok, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, (CUdevice)cx->device) != CUDA_SUCCESS)
    ok = 0;
  int64_t off = 0;
  TD_CHECK(td_config_int("TD_CUDA_NO_COPY_ENGINE", &off));
  if (!ok || !cx->ce_write64 || off || !cx->streams_ce_ok || n > TD__KQ_MAX_TASKS)
    return TD_OK; /* communication blocks run the copies instead (see td__cuda_stream_plan) */
  int lo = 0, hi = 0;
  cudaDeviceGetStreamPriorityRange(&lo, &hi);
  cudaError_t ce = cudaStreamCreateWithPriority(&cx->ce_stream, cudaStreamNonBlocking, hi);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "cudaStreamCreateWithPriority (copy-engine stream)", ce);
  cx->ce_enabled = 1;
  cx->ce_tasks = calloc(n, sizeof *cx->ce_tasks);
  if (!cx->ce_tasks)
    return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: no memory for the copy-engine queue", e->rank);
  cx->nce = 0;
  for (uint32_t i = 0; i < s->ntasks; i++)
    if (td__cuda_ce_eligible(cx, &s->tasks[i]))
      cx->ce_tasks[cx->nce++] = i;
  return TD_OK;
}

td_status td__cuda_ce_enqueue_task(td__cuda_exec *cx, uint32_t t) {
  td_exec *e = cx->exec;
  td__write64_fn write64 = (td__write64_fn)cx->ce_write64;
  const td_dev_task *d = &cx->h_tasks[t];
  const size_t esz = td_dtype_size((td_dtype)d->c.dtype);
  cudaError_t ce = cudaMemcpy2DAsync((void *)(uintptr_t)d->c.ptr, (size_t)d->c.ld * esz,
                                     (const void *)(uintptr_t)d->a.ptr, (size_t)d->a.ld * esz,
                                     (size_t)d->c.cols * esz, (size_t)d->c.rows, cudaMemcpyDeviceToDevice,
                                     cx->ce_stream);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "cudaMemcpy2DAsync (copy-engine task)", ce);
  CUresult r = write64((CUstream)cx->ce_stream, (CUdeviceptr)(cx->plan.ce_done + 8u * t), e->epoch,
                       CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS)
    return td__error(TD_ERR_CUDA, "cuda executor: rank %d: cuStreamWriteValue64 for copy-engine task %u "
                     "failed (CUresult %d)", e->rank, t, (int)r);
  return TD_OK;
}

void td__cuda_ce_release(td__cuda_exec *cx) {
  if (!cx->ce_enabled || cx->nce == 0)
    return;
  td__cuda_stream_wait_quiet(cx, cx->ce_stream);
}

void td__cuda_ce_free(td__cuda_exec *cx) {
  if (cx->ce_stream)
    cudaStreamDestroy(cx->ce_stream);
  cx->ce_stream = NULL;
  free(cx->ce_tasks);
  cx->ce_tasks = NULL;
}
