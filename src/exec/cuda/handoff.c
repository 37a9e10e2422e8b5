/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's host hand-off loop (executor layer, cuda backend): while
 * the persistent kernel runs, the launching thread watches the go words the
 * kernel publishes (ce_go[t] = epoch once task t's waits held) and only then
 * enqueues that task's work: a copy-engine copy and its done write on the
 * copy-engine stream (copy_engine.c), or a kernel-queue task's kernel and its
 * finish kernel on its role's stream (kernel_queue.c).
 *
 * Why not let the streams wait (cuStreamWaitValue64 on the go word, enqueued
 * up front)? A parked stream wait blocks the CUDA hardware queue it sits in,
 * and CUDA maps the streams of every rank sharing a GPU onto one pool of
 * queues (CUDA_DEVICE_MAX_CONNECTIONS) as it likes. A wait whose go word
 * depends on a peer's signal (rank 2's GEMM waiting for rank 1's gather) then
 * holds up whatever else shares its queue, e.g. rank 1's copy that raises that
 * very signal: a cycle only the deadline ends (exec_gemm_queue_test on the
 * H200, bf16 4 ranks M = 3, 2026-11-29, with 16 streams on 32 queues). Here no
 * stream ever waits for another rank: everything enqueued is ready to run,
 * and the only stream-ordered waits left are a copy's done write behind its
 * copy and a finish kernel behind its task's kernel, which end by themselves.
 * Nothing is enqueued behind the persistent kernel either (cuda_run.c reads
 * the diagnostic once the kernel has finished).
 *
 * The go words live in mapped, pinned host memory, so polling them costs no
 * CUDA call. Each stream's tasks are enqueued in schedule order, as the
 * kernel's blocks publish them; a task whose go word never comes (its waits
 * timed out) is never enqueued, so a failed launch leaves nothing queued to
 * release. The loop ends when every task is enqueued, when the persistent
 * kernel finished (one last pass first), or at the run's host deadline
 * (td__cuda_stream_wait reports it). */
#include <sched.h>
#include <time.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"

uint32_t td__cuda_handoff_ready(const uint64_t *go, uint64_t epoch, const uint32_t *tasks, uint32_t n,
                                uint32_t next) {
  while (next < n && __atomic_load_n(&go[tasks[next]], __ATOMIC_ACQUIRE) >= epoch)
    next++;
  return next;
}

static int64_t td__ms_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* One pass over the three streams: enqueues every task whose go word (and
 * every earlier one of its stream) is published. *left counts what remains. */
static td_status td__handoff_pass(td__cuda_exec *cx, uint32_t next[3], uint32_t *left, int *progressed) {
  const uint64_t epoch = cx->exec->epoch;
  const uint32_t *list[3] = {cx->ce_tasks, cx->kq_tasks[0], cx->kq_tasks[1]};
  const uint32_t n[3] = {cx->ce_enabled ? cx->nce : 0, cx->kq_enabled ? cx->nkq[0] : 0,
                         cx->kq_enabled ? cx->nkq[1] : 0};
  *left = 0;
  for (int q = 0; q < 3; q++) {
    const uint32_t to = td__cuda_handoff_ready(cx->go_host, epoch, list[q], n[q], next[q]);
    for (; next[q] < to; next[q]++) {
      *progressed = 1;
      if (q == 0)
        TD_CHECK(td__cuda_ce_enqueue_task(cx, list[q][next[q]]));
      else
        TD_CHECK(td__cuda_kq_enqueue_task(cx, q - 1, list[q][next[q]]));
    }
    *left += n[q] - next[q];
  }
  return TD_OK;
}

td_status td__cuda_handoff(td__cuda_exec *cx) {
  uint32_t next[3] = {0, 0, 0}, left = 0;
  unsigned idle = 0;
  cx->kq_hopper = cx->kq_grid = 0;
  if (!cx->go_host)
    return TD_OK;
  for (;;) {
    int progressed = 0;
    TD_CHECK(td__handoff_pass(cx, next, &left, &progressed));
    if (left == 0)
      return TD_OK;
    const cudaError_t q = cudaStreamQuery(cx->stream);
    if (q != cudaErrorNotReady) {
      /* Finished (or failed): every go word it published is visible now. */
      cudaGetLastError();
      return td__handoff_pass(cx, next, &left, &progressed);
    }
    if (cx->deadline_at_ms > 0 && td__ms_now() > cx->deadline_at_ms)
      return TD_OK; /* td__cuda_stream_wait reports the stuck kernel */
    if (progressed) {
      idle = 0;
    } else if (++idle < 4096) {
      sched_yield(); /* a go word usually follows within microseconds */
    } else {
      struct timespec ns = {0, 20000};
      nanosleep(&ns, NULL);
    }
  }
}
