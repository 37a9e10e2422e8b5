/* SPDX-License-Identifier: Apache-2.0
 * Executors: the persistent loop ("megakernel") that runs a validated plan's
 * schedule for this rank, on CPU worker threads or on a CUDA device.
 *
 * Lifecycle (same on every backend):
 *   td_exec_create   collective over the team; allocates the plan's
 *                    TD_BUF_SYMM buffers on the symmetric heap, its
 *                    TD_BUF_LOCAL buffers privately, and one symmetric 64-bit
 *                    word per plan signal (zeroed); starts the workers.
 *   td_exec_bind     points TD_BUF_INPUT / TD_BUF_WEIGHT / TD_BUF_OUTPUT
 *                    buffers at caller memory (host memory on cpu, device
 *                    memory on cuda); may be called again between runs.
 *   td_exec_buffer   address of an executor-owned (SYMM or LOCAL) buffer, e.g.
 *                    to fill a symmetric input before a run.
 *   td_exec_run      one launch of this rank's schedule; blocks until every
 *                    task of this rank has finished. Launch e (1, 2, ...) uses
 *                    epoch e: waits compare against (e-1)*T + v (schedule.h),
 *                    so no signal is ever reset between launches. Peers'
 *                    writes into this rank's symmetric buffers are complete
 *                    at return only where this rank's schedule waited for
 *                    them (or after a team barrier).
 *   td_exec_destroy  collective; stops the workers, frees everything.
 *
 * Launch barrier: unless opts.skip_launch_barrier is set, every td_exec_run
 * starts with a team barrier, so no rank writes a peer's symmetric buffer for
 * launch e+1 while that peer still reads it in launch e. Set it only when the
 * plan itself guards reuse across launches (double buffers, epoch waits).
 * The barrier carries each rank's readiness (buffers bound, plan unchanged,
 * no earlier failure): no rank starts a task unless all are ready, and every
 * rank fails at once naming the rank that is not and why. Without the
 * barrier a rank that is not ready fails alone and its peers' waits fail
 * (TD_ERR_TIMEOUT / TD_ERR_PEER_FAILED).
 *
 * Collective calls (create, run, trace_write, destroy) exchange their
 * verdicts: a rank whose own arguments or state are bad still joins, and
 * every rank fails together (it with its own status and message, its peers
 * with TD_ERR_PEER_FAILED naming it and its message, unless stated below:
 * td_exec_create gives every rank the failing rank's own status).
 *
 * Backends: `cpu` is always built; `cuda` only with TD_WITH_CUDA (otherwise
 * td_exec_create returns TD_ERR_UNSUPPORTED).
 *
 * Thread-safety: one td_exec is used by one thread at a time (the thread
 * playing its rank). Different ranks' executors run concurrently. */
#ifndef TDIST_EXEC_H
#define TDIST_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/schedule.h"
#include "tdist/status.h"
#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_exec_backend {
  TD_EXEC_CPU = 0,  /* worker threads of this process; tiles from src/tile/cpu */
  TD_EXEC_CUDA = 1, /* persistent kernel + copy-engine queue on this rank's GPU */
  TD_EXEC_BACKEND_COUNT
} td_exec_backend;

/** Executor options. Initialise with td_exec_opts_init(); 0 means "default". */
typedef struct td_exec_opts {
  td_exec_backend backend;
  /* CPU: threads per class per rank; 0 = TD_CPU_COMPUTE_WORKERS /
   * TD_CPU_COMM_WORKERS, else from the core count and the ranks on this host
   * (compute: max(1, cores / local ranks); comm: 1).
   * CUDA: persistent blocks per class; 0 = backend's choice. */
  int compute_workers;
  int comm_workers;
  int trace;               /* nonzero: record every task's start and end (see below) */
  int timeout_ms;          /* deadline of every wait of the executor's calls (launch
                            * exchange, signal waits; local-dependency waits give up after
                            * twice it without progress, so the stuck signal wait is reported
                            * first); 0 = the world's (TD_TIMEOUT_MS). td_exec_destroy waits
                            * the world's deadline plus twice this for peers still running */
  int skip_launch_barrier; /* see "Launch barrier" above */
  void *cuda_stream;       /* CUDA: cudaStream_t to launch on; NULL = the backend's own */
} td_exec_opts;

typedef struct td_exec td_exec;

/** Fills *opts with defaults: cpu backend, automatic worker counts, no trace. */
void td_exec_opts_init(td_exec_opts *opts);

/** Collective over `team` (every member passes an equal plan): creates this
 * rank's executor for `plan`, which must have passed td_plan_validate and must
 * outlive the executor. opts NULL = defaults.
 * Errors: TD_ERR_INVALID_ARG (NULL plan/team/out, worker count < 0 or over
 * 1024, unknown backend), TD_ERR_STATE (plan not validated), TD_ERR_MISMATCH
 * (plan's rank count differs from the team size; or the ranks pass different
 * plans: compared by a fingerprint of buffers, signals and every rank's
 * schedule, every rank fails naming the ranks), TD_ERR_UNSUPPORTED (backend
 * not built; or a GEMM task with the cpu-only TD_GEMM_GELU epilogue on cuda),
 * TD_ERR_HEAP_EXHAUSTED, TD_ERR_NO_MEMORY, TD_ERR_SYSTEM (thread
 * creation failed), TD_ERR_CUDA (cuda: a CUDA call, the JIT compile or the
 * module load failed), TD_ERR_TIMEOUT / TD_ERR_PEER_FAILED (a rank did not
 * reach an agreement point in time, or its process died). Ranks agree on
 * the outcome after every step of creation: it fails on every rank or on
 * none. When a step fails on some rank R, every rank returns R's status
 * (not TD_ERR_PEER_FAILED) with the message "td_exec_create: rank R failed
 * to create the executor: <R's own message>" (a peer inserts "rank P: "
 * after the call's name; other ranks that failed too are listed, and each
 * adds its own reason). R is the lowest failing rank whose status is not
 * TD_ERR_TIMEOUT / TD_ERR_PEER_FAILED / TD_ERR_MISMATCH / TD_ERR_STATE, else
 * the lowest failing rank.
 * *out written only on success. NULL team: fails locally (nothing to join).
 * The team must outlive the executor: td_team_destroy refuses (TD_ERR_STATE)
 * while it exists. */
td_status td_exec_create(const td_plan *plan, td_team *team, const td_exec_opts *opts,
                         td_exec **out);

/** Points caller buffer `buffer` (INPUT, WEIGHT or OUTPUT) at `ptr`, which must
 * hold the buffer's rows*cols elements (row-major, row stride = cols) and stay
 * valid through every run that uses it. Errors: TD_ERR_INVALID_ARG (index out
 * of range, NULL ptr for a non-empty buffer, buffer is SYMM/LOCAL: those are
 * executor-owned). */
td_status td_exec_bind(td_exec *exec, int32_t buffer, void *ptr);

/** Writes the address of executor-owned buffer `buffer` (SYMM or LOCAL) to *out
 * (this rank's copy; host memory on cpu, device memory on cuda). Errors:
 * TD_ERR_INVALID_ARG (index out of range, buffer is caller-bound). */
td_status td_exec_buffer(td_exec *exec, int32_t buffer, void **out);

/** Runs one launch of this rank's schedule (see the file comment). Every rank
 * of the team must call it the same number of times.
 * Errors: TD_ERR_STATE (a caller buffer used by the schedule is not bound:
 * names it; the plan changed after create; launch TD_PLAN_LAUNCH_MAX + 1; an
 * earlier run failed; a peer is in another executor call such as destroy),
 * TD_ERR_PEER_FAILED (a peer was not ready for the launch: names it and its
 * reason; or it left), TD_ERR_TIMEOUT (a wait passed opts.timeout_ms: the
 * message names the rank, the task index and label, the signal name, the
 * expected and the observed value, or the local dependency that never
 * finished), TD_ERR_CUDA. A launch refused by the readiness exchange starts
 * nothing and leaves the executor usable (bind, then run again); after any
 * other error it is unusable except for destroy and the trace calls. */
td_status td_exec_run(td_exec *exec);

/** Number of launches started so far (the epoch of the last run). */
uint64_t td_exec_epoch(const td_exec *exec);

/** Trace of the most recent run (with opts.trace). Times are CLOCK_MONOTONIC
 * nanoseconds (on cuda converted from %globaltimer to the host clock). */
typedef struct td_trace_event {
  int64_t start_ns, end_ns;
  uint32_t task;        /* index in this rank's schedule */
  int32_t worker;       /* worker id: compute workers first, then comm workers */
  td_worker_class cls;  /* class of the task */
  td_task_kind kind;
} td_trace_event;

/** Per-rank totals of the most recent traced run. comm_hidden_ns is the
 * communication time that overlaps at least one compute task's interval
 * (union of intervals); hidden_share = comm_hidden_ns / comm_ns (0 when
 * there is no communication). Comm = tasks of class COMM or COPY_ENGINE. */
typedef struct td_trace_summary {
  int rank;
  uint32_t ntasks;
  int64_t wall_ns;       /* first start to last end */
  int64_t compute_ns;    /* sum of compute task durations */
  int64_t comm_ns;       /* sum of comm task durations */
  int64_t comm_hidden_ns;
  double hidden_share;
} td_trace_summary;

/** This rank's events of the most recent run, valid until the next run or
 * destroy. Errors: TD_ERR_STATE (tracing off or no run yet). */
td_status td_exec_trace_events(const td_exec *exec, const td_trace_event **events, size_t *count);

/** Computes this rank's summary of the most recent run. Errors: as above. */
td_status td_exec_trace_summary(const td_exec *exec, td_trace_summary *out);

/** Collective over the team: gathers every rank's events of the most recent
 * run and team rank 0 writes one Chrome trace JSON file at `path` (opens in
 * Perfetto / chrome://tracing: pid = rank, tid = worker, one complete event
 * per task named by its label, args: task index, kind, class). Other ranks
 * ignore `path` (may be NULL). Every rank returns the same status: a rank's
 * argument or state error, or rank 0's file error, reaches all ranks (the
 * message names the rank). Errors: TD_ERR_INVALID_ARG (NULL exec; NULL path
 * on rank 0), TD_ERR_STATE (tracing off or no run yet, on any rank),
 * TD_ERR_SYSTEM (file could not be written: names it), TD_ERR_NO_MEMORY,
 * TD_ERR_HEAP_EXHAUSTED, TD_ERR_TIMEOUT, TD_ERR_PEER_FAILED. */
td_status td_exec_trace_write(td_exec *exec, const char *path);

/** Collective over the team: stops the workers and frees the executor's
 * buffers and signals. A peer still in another executor call fails that call
 * at once (TD_ERR_STATE) and is waited for. NULL is allowed. Errors:
 * TD_ERR_TIMEOUT (a member never called: symmetric memory is then left to
 * the team), TD_ERR_PEER_FAILED, and any failure of the collective frees
 * (the first one's message). The handle is freed even on error. */
td_status td_exec_destroy(td_exec *exec);

#ifdef __cplusplus
}
#endif
#endif
