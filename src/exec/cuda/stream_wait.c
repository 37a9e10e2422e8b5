/* SPDX-License-Identifier: Apache-2.0
 * Host waits on the CUDA executor's streams with a deadline (executor layer,
 * cuda backend).
 *
 * Every wait inside the persistent kernel has a %globaltimer deadline, so a
 * launch normally ends by itself, with a diagnostic. What those deadlines
 * cannot catch is GPU work that never starts: ranks sharing one GPU park
 * streams in cuStreamWaitValue64, and when more streams exist than CUDA's
 * hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) a waiting stream
 * can sit in front of the persistent kernel of a peer in the same queue (seen
 * on the H200 with 4 ranks, 2026-11-29). A bare cudaStreamSynchronize then
 * blocks forever; this wait turns it into TD_ERR_TIMEOUT naming the likely
 * cause and its remedy, and marks the executor stuck, so that destroy does
 * not wait on the same work again. */
#include <sched.h>
#include <time.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"

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

td_status td__cuda_stream_wait(td__cuda_exec *cx, cudaStream_t s, const char *what) {
  if (cx->stuck)
    return td__error(TD_ERR_STATE, "cuda executor: rank %d: earlier GPU work never finished; the executor can "
                     "only be destroyed", cx->exec->rank);
  const int64_t limit = td__cuda_host_deadline_ms(cx), t0 = td__now_ms();
  unsigned polls = 0;
  for (;;) {
    cudaError_t ce = cudaStreamQuery(s);
    if (ce == cudaSuccess)
      return TD_OK;
    if (ce != cudaErrorNotReady)
      return td__cuda_fail(cx->exec, what, ce);
    if (td__now_ms() - t0 > limit) {
      cx->stuck = 1;
      return td__error(TD_ERR_TIMEOUT,
                       "cuda executor: rank %d: %s did not finish within %lld ms and its device deadline "
                       "never reported, so the work probably never started: streams of ranks sharing a GPU "
                       "can block each other in CUDA's hardware queues; set CUDA_DEVICE_MAX_CONNECTIONS=32 "
                       "(before the process's first CUDA call, as the tdist CLI does) or run fewer ranks per "
                       "GPU",
                       cx->exec->rank, what, (long long)limit);
    }
    if (++polls > 64) { /* spin briefly (short launches), then give the core away */
      struct timespec ns = {0, 50000};
      nanosleep(&ns, NULL);
    } else {
      sched_yield();
    }
  }
}
