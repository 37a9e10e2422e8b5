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
typedef struct td__agree td__agree;

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
  td__agree *agree;    /* verdict exchange of the collective calls (exec_agree.c) */
  uint64_t plan_gen;   /* the plan's generation at create; a change makes runs fail */
  uint64_t launch_max; /* launches allowed before a signal word could pass 2^63 */
  int abandon;         /* destroy without collectives: peers are gone or stuck */
  void *impl;
};

struct td__exec_backend {
  const char *name;
  /** Collective. Called with the shared fields filled (opts resolved, bound
   * all NULL, epoch 0, agree ready). Allocates executor-owned buffers and the
   * signal words (zeroed, then a team barrier or exchange round so no peer
   * raises into unzeroed memory) and starts the workers. Should agree
   * (td__agree_round) on its local steps so it fails on every rank or none.
   * On error frees what it made and leaves impl NULL. */
  td_status (*create)(td_exec *exec);
  /** This rank's address of SYMM/LOCAL buffer `buffer` (index already checked). */
  td_status (*buffer)(td_exec *exec, int32_t buffer, void **out);
  /** One launch with epoch exec->epoch (already incremented). exec.c has
   * already run the launch barrier (the readiness exchange, unless
   * opts.skip_launch_barrier); a backend may add a device-side one. With opts.trace, writes exec->trace/ntrace
   * (grow with td__exec_trace_reserve) before returning, even on error. */
  td_status (*run)(td_exec *exec);
  /** Collective: stops workers, frees buffers and signals and impl. With
   * exec->abandon set (peers gone), frees only this rank's private state and
   * makes no collective call. Returns the first failure (its message kept). */
  td_status (*destroy)(td_exec *exec);
};

extern const td__exec_backend td__exec_backend_cpu;
#ifdef TD_HAVE_CUDA_EXEC
extern const td__exec_backend td__exec_backend_cuda;
#endif

/** Collective calls exchanged by td__agree (messages name them). The
 * CREATE_* rounds are the agreement points of td_exec_create's steps. */
enum {
  TD__AGREE_CREATE = 0, TD__AGREE_CREATE_ALLOC = 1, TD__AGREE_CREATE_WORKERS = 2, TD__AGREE_RUN = 3,
  TD__AGREE_TRACE = 4, TD__AGREE_TRACE_FILE = 5, TD__AGREE_DESTROY = 6, TD__AGREE_CREATE_DEVICE = 7,
  TD__AGREE_CREATE_RECORDS = 8, TD__AGREE_CREATE_KERNEL = 9, TD__AGREE_CREATE_TABLES = 10,
  TD__AGREE_RUN_UPLOAD = 11
};

/** Characters of a rank's message that one round carries to its peers. */
enum { TD__AGREE_MSG = 1000 };

typedef struct td__agree_result {
  int bad_rank;     /* first rank that disagreed; -1 when all agreed */
  int other_op;     /* its call when it was in another one */
  td_status status; /* its status when it failed */
  /* Set whenever every rank posted this call and one or more failed (also
   * when this rank did): the rank whose failure is the likely cause (the
   * lowest rank with an originating status, see td__status_secondary; else
   * the lowest failing rank), its status and message. failed_rank is -1
   * when no rank posted a failure (or the round itself did not complete). */
  int failed_rank;
  td_status failed_status;
  char failed_msg[TD__AGREE_MSG];
} td__agree_result;

/** One rank's post in one round (exec_agree.c); the block holds [2][ranks]. */
typedef struct td__agree_slot {
  uint64_t round; /* set last, with release */
  int32_t op;     /* td__agree_op */
  int32_t status; /* td_status of the posting rank */
  uint64_t fingerprint;
  char msg[TD__AGREE_MSG]; /* NUL-terminated; read only when status != TD_OK */
} td__agree_slot;

/** Bytes of the symmetric block td__agree_create allocates for nranks ranks
 * (what heap-size checks count for every executor). Inline: the compiler's
 * figures need it without linking the runtime. */
static inline size_t td__agree_block_bytes(int nranks) {
  return 2 * (size_t)(nranks > 0 ? nranks : 1) * sizeof(td__agree_slot);
}
/** Collective: allocates the exchange's symmetric block on the team. */
td_status td__agree_create(td_team *team, td__agree **out);
/** Collective: frees it. NULL is allowed. */
td_status td__agree_destroy(td__agree *a);
/** Frees only this rank's part (peers unreachable: the block is left to the team). */
void td__agree_abandon(td__agree *a);
/** Collective, one round: posts this rank's call `op`, status `mine` with
 * message `msg` (used when mine != TD_OK) and `fingerprint`, waits (at most
 * timeout_ms) for every rank's post, and returns TD_OK only when all ranks
 * are in call `op`, all posted TD_OK and all fingerprints are equal.
 * Otherwise: this rank's own status and message when it failed; for a
 * failed peer TD_ERR_PEER_FAILED naming it and its message; TD_ERR_STATE
 * for a peer in another call; TD_ERR_MISMATCH for different fingerprints;
 * TD_ERR_TIMEOUT / TD_ERR_PEER_FAILED from the wait (also from waiting, in
 * the same deadline, for a peer's post of the previous round, which must be
 * seen before this round overwrites its slot in that peer). *res says who. */
td_status td__agree_round(td__agree *a, int op, td_status mine, const char *msg, uint64_t fingerprint,
                    int64_t timeout_ms, td__agree_result *res);

/** Collective, one agreement point of td_exec_create (exec.c and every
 * backend's create use it after each stretch of rank-local work, before the
 * next collective call): posts `mine` with td_last_error() as its message
 * (when mine != TD_OK) and `fingerprint`, as td__agree_round. When one or
 * more ranks posted a failure, every rank returns the same status, that of
 * the cause rank C (td__agree_result.failed_rank), with the message
 * "td_exec_create: rank C failed to create the executor: <C's message>"
 * (peers insert "rank R: " after the call name; other failing ranks are
 * listed, and a failing rank other than C adds its own message). So no rank
 * leaves the sequence of collective calls early: all ranks stop after the
 * same round, with the same collective state to free. Otherwise
 * td__agree_round's errors (deadline, a peer gone, another call, different
 * fingerprints). */
td_status td__agree_create_step(td__agree *a, int op, td_status mine, uint64_t fingerprint, int64_t timeout_ms);

/** After td_exec_create failed on the calling thread: the team rank whose
 * failure the agreement carried to every rank (the calling rank itself when
 * it was the cause), or -1 when none was carried (e.g. a deadline, or the
 * plans differ). Lets a gatherer of per-rank failures (td_program_run) tell
 * the cause from its consequences without reading messages. Thread-local. */
int td__exec_create_cause(void);
/** Sets it (td_exec_create: -1 at entry; td__agree_create_step: the cause). */
void td__exec_set_create_cause(int rank);

/** Nonzero for statuses that usually follow from another rank's failure
 * rather than cause one: 2 for TD_ERR_PEER_FAILED, TD_ERR_MISMATCH and TD_ERR_STATE
 * (a peer in another call), 1 for TD_ERR_TIMEOUT (a wait for a peer), 0 for
 * the others (an originating failure). Gatherers of per-rank failures pick
 * the lowest class as the cause. */
int td__status_secondary(td_status st);

/** Test-only fault injection (internal, for tests/exec): while
 * td__exec_test_fail_at.step is nonzero, team rank td__exec_test_fail_at.rank
 * fails that step of td_exec_create / td_exec_run with .status and a
 * message naming the step ("injected failure at step N (<name>)"). Set it
 * only while no executor call runs (before the ranks start); zero it after.
 * Not an interface: no environment variable or option reaches it. */
enum {
  TD__EXEC_STEP_ARGS = 1,         /* exec.c: argument checks, before the first round */
  TD__EXEC_STEP_CPU_PREPARE = 2,  /* cpu: queues, workers, local buffers */
  TD__EXEC_STEP_CPU_START = 3,    /* cpu: symm buffers resolved, workers started */
  TD__EXEC_STEP_CUDA_DEVICE = 4,  /* cuda: device chosen, arena allocated */
  TD__EXEC_STEP_CUDA_RECORD = 5,  /* cuda: this rank's record filled */
  TD__EXEC_STEP_CUDA_KERNEL = 6,  /* cuda: peers opened, kernel compiled and loaded, blocks chosen */
  TD__EXEC_STEP_CUDA_TABLES = 7,  /* cuda: queues, device tables, stream, device synchronised */
  TD__EXEC_STEP_RUN = 8,          /* exec.c: td_exec_run's readiness, before the launch round */
  TD__EXEC_STEP_COUNT = 9
};
typedef struct td__exec_fault {
  int step; /* TD__EXEC_STEP_*; 0 = off */
  int rank; /* team rank that fails */
  td_status status;
} td__exec_fault;
extern td__exec_fault td__exec_test_fail_at;
/** TD_OK, or the injected failure when `step` of team rank `rank` is the
 * one td__exec_test_fail_at names. */
td_status td__exec_fault_check(int rank, int step);

/** Makes room for `count` events in exec->trace (keeps contents). */
td_status td__exec_trace_reserve(td_exec *exec, size_t count);

/** Whether the plan passed td_plan_validate (schedule.c). */
int td__plan_is_validated(const td_plan *plan);

/** CLOCK_MONOTONIC in nanoseconds. */
int64_t td__now_ns(void);

#endif
