/* SPDX-License-Identifier: Apache-2.0
 * Internal: the executor interface (executor layer). td_exec_* in exec.c
 * checks arguments, keeps the epoch and the trace, and calls a backend
 * through this small const table. A backend lives in src/exec/<name>/ and
 * fills one td__exec_backend; exec.c picks it by opts.backend.
 *
 * Adding a backend: define `const td__exec_backend td__exec_backend_<name>`
 * in src/exec/<name>/, and have src/exec/<name>/CMakeLists.txt add
 * `target_compile_definitions(tdist_obj PRIVATE TD_HAVE_<NAME>_EXEC)`
 * (exec.c refers to td__exec_backend_cuda only under TD_HAVE_CUDA_EXEC).
 * src/exec/CMakeLists.txt adds src/exec/cuda when TD_HAVE_CUDA is on. */
#ifndef TD_EXEC_BACKEND_H
#define TD_EXEC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/exec.h"

typedef struct td__exec_backend td__exec_backend;

/** The state every backend shares. Backends keep their own in `impl`. */
struct td_exec {
  const td_plan *plan;
  const td_schedule *sched; /* this rank's schedule */
  td_team *team;
  int rank, nranks;
  td_exec_opts opts; /* resolved: worker counts > 0 (cpu), timeout_ms > 0 */
  const td__exec_backend *backend;
  void **bound;   /* [nbuffers] caller pointers of INPUT/WEIGHT/OUTPUT; NULL = unbound */
  uint64_t epoch; /* launches started; the running launch has epoch `epoch` */
  int failed;     /* a run failed: only destroy and trace calls are allowed */
  /* trace of the most recent run (opts.trace): backends fill it in run() */
  td_trace_event *trace;
  size_t ntrace, trace_cap;
  int traced; /* a traced run has completed (possibly with an error) */
  void *impl;
};

struct td__exec_backend {
  const char *name;
  /** Collective. Called with the shared fields filled (opts resolved, bound
   * all NULL, epoch 0). Allocates executor-owned buffers and the signal words
   * (zeroed, then a team barrier so no peer raises into unzeroed memory) and
   * starts the workers. On error frees what it made and leaves impl NULL. */
  td_status (*create)(td_exec *exec);
  /** This rank's address of SYMM/LOCAL buffer `buffer` (index already checked). */
  td_status (*buffer)(td_exec *exec, int32_t buffer, void **out);
  /** One launch with epoch exec->epoch (already incremented); the launch
   * barrier (unless opts.skip_launch_barrier) is the backend's job, as it may
   * be a device-side barrier. With opts.trace, writes exec->trace/ntrace
   * (grow with td__exec_trace_reserve) before returning, even on error. */
  td_status (*run)(td_exec *exec);
  /** Collective: stops workers, frees buffers and signals and impl. */
  td_status (*destroy)(td_exec *exec);
};

extern const td__exec_backend td__exec_backend_cpu;
#ifdef TD_HAVE_CUDA_EXEC
extern const td__exec_backend td__exec_backend_cuda;
#endif

/** Makes room for `count` events in exec->trace (keeps contents). */
td_status td__exec_trace_reserve(td_exec *exec, size_t count);

/** Whether the plan passed td_plan_validate (schedule.c). */
int td__plan_is_validated(const td_plan *plan);

/** CLOCK_MONOTONIC in nanoseconds. */
int64_t td__now_ns(void);

#endif
