/* SPDX-License-Identifier: Apache-2.0
 * Host waits on the CUDA executor's streams with a deadline (executor layer,
 * cuda backend).
 *
 * Every wait inside the persistent kernel has a %globaltimer deadline, so a
 * launch normally ends by itself, with a diagnostic. What those deadlines
 * cannot catch is GPU work that never starts or never ends: a persistent
 * kernel that cannot become resident, or (before the host hand-off,
 * handoff.c) a stream parked in cuStreamWaitValue64 in front of a peer's work
 * in the same hardware queue (seen on the H200 with 4 ranks, 2026-11-29). A
 * bare cudaStreamSynchronize then
 * blocks forever; this wait turns it into TD_ERR_TIMEOUT naming the likely
 * cause and its remedy, and marks the executor stuck, so that destroy does
 * not wait on the same work again, and the device stuck (device_stuck.h),
 * so that no executor of this process synchronises that device again.
 * Within one run every host wait shares one deadline (launch + twice the
 * executor's timeout + 2 s), so a failing run never outlasts what a peer's
 * td_exec_destroy waits for it. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"
#include "exec/cuda/device_stuck.h"

#define TD__MAX_DEVICES 256

static atomic_int td__stuck_dev[TD__MAX_DEVICES];
static atomic_int td__stuck_any; /* an ordinal out of range was marked */

int td__cuda_device_stuck(int dev) {
  if (atomic_load(&td__stuck_any))
    return 1;
  return dev >= 0 && dev < TD__MAX_DEVICES && atomic_load(&td__stuck_dev[dev]);
}

void td__cuda_mark_device_stuck(int dev) {
  if (dev >= 0 && dev < TD__MAX_DEVICES)
    atomic_store(&td__stuck_dev[dev], 1);
  else
    atomic_store(&td__stuck_any, 1);
}

int td__cuda_max_connections(void) {
  const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  char *end = NULL;
  long n = v && *v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || n < 1)
    return 8; /* CUDA's default (and what it uses for a value it cannot read) */
  return n > 32 ? 32 : (int)n; /* CUDA caps it at 32 */
}

void td__cuda_stream_plan(int ranks_per_gpu, int connections, int *kq_ok, int *ce_ok) {
  /* Streams per rank: the persistent kernel's, the copy engine's, the two of
   * the kernel queue. Turn off the queue, then the copy engine, until every
   * stream of every rank on the GPU can have a hardware queue of its own with
   * TD__CUDA_STREAM_RESERVE queues to spare. An exact fit is not enough: the
   * legacy default stream (every synchronous cudaMemcpy) and any stream
   * the process makes meanwhile (a GEMM library's, an earlier executor's)
   * take queues from the same pool, so with exactly as many streams as queues
   * two of them alias. Seen on the H200: 4 ranks x 2 streams on the default 8
   * queues stalled exec_random_test, and 8 ranks x 4 streams on 32 queues
   * stalled exec_gemm_queue_test, both until killed (2026-11-29). */
  const int r = ranks_per_gpu > 0 ? ranks_per_gpu : 1;
  *kq_ok = r * 4 + TD__CUDA_STREAM_RESERVE <= connections;
  *ce_ok = r * 2 + TD__CUDA_STREAM_RESERVE <= connections;
}

static int64_t td__now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int64_t td__cuda_host_deadline_ms(const td__cuda_exec *cx) {
  /* past the device's own deadline with room to spare: normally the kernel
   * reports first, with the better message */
  return 2 * (int64_t)cx->exec->opts.timeout_ms + 2000;
}

void td__cuda_run_deadline_start(td__cuda_exec *cx) { cx->deadline_at_ms = td__now_ms() + td__cuda_host_deadline_ms(cx); }

void td__cuda_run_deadline_end(td__cuda_exec *cx) { cx->deadline_at_ms = 0; }

/* Streams this rank uses on its GPU. */
static int td__streams_per_rank(const td__cuda_exec *cx) { return 1 + (cx->ce_enabled ? 1 : 0) + (cx->kq_enabled ? 2 : 0); }

/* 0: finished; 1: failed (*err set); 2: deadline passed (marks stuck). No message. */
static int td__wait_core(td__cuda_exec *cx, cudaStream_t s, int64_t *waited, cudaError_t *err) {
  const int64_t t0 = td__now_ms();
  const int64_t until = cx->deadline_at_ms > 0 ? cx->deadline_at_ms : t0 + td__cuda_host_deadline_ms(cx);
  unsigned polls = 0;
  for (;;) {
    cudaError_t ce = cudaStreamQuery(s);
    if (ce == cudaSuccess)
      return 0;
    if (ce != cudaErrorNotReady) {
      *err = ce;
      return 1;
    }
    const int64_t now = td__now_ms();
    if (now > until) {
      cx->stuck = 1;
      td__cuda_mark_device_stuck(cx->device);
      *waited = now - t0;
      return 2;
    }
    if (++polls > 64) { /* spin briefly (short launches), then give the core away */
      struct timespec ns = {0, 50000};
      nanosleep(&ns, NULL);
    } else {
      sched_yield();
    }
  }
}

td_status td__cuda_stream_wait(td__cuda_exec *cx, cudaStream_t s, const char *what) {
  if (cx->stuck)
    return td__error(TD_ERR_STATE, "cuda executor: rank %d: earlier GPU work never finished; the executor can "
                     "only be destroyed", cx->exec->rank);
  int64_t waited = 0;
  cudaError_t err = cudaSuccess;
  const int r = td__wait_core(cx, s, &waited, &err);
  if (r == 0)
    return TD_OK;
  if (r == 1)
    return td__cuda_fail(cx->exec, what, err);
  const int conns = td__cuda_max_connections(), streams = cx->ranks_on_gpu * td__streams_per_rank(cx);
  return td__error(TD_ERR_TIMEOUT,
                   "cuda executor: rank %d: %s did not finish within %lld ms and its device deadline never "
                   "reported, so the work probably never started: streams of ranks sharing a GPU can block "
                   "each other in CUDA's hardware queues (here %d ranks x %d streams = %d streams on GPU %d, "
                   "CUDA_DEVICE_MAX_CONNECTIONS=%d); %s",
                   cx->exec->rank, what, (long long)waited, cx->ranks_on_gpu, td__streams_per_rank(cx), streams,
                   cx->device, conns,
                   conns >= 32 ? "it is already at its maximum (32): run fewer ranks per GPU"
                               : "set CUDA_DEVICE_MAX_CONNECTIONS=32 (before the process's first CUDA call, as "
                                 "the tdist CLI does) or run fewer ranks per GPU");
}

void td__cuda_stream_wait_quiet(td__cuda_exec *cx, cudaStream_t s) {
  if (cx->stuck)
    return;
  int64_t waited = 0;
  cudaError_t err = cudaSuccess;
  td__wait_core(cx, s, &waited, &err);
  cudaGetLastError(); /* a failure here belongs to the run's error, already reported */
}
