/* SPDX-License-Identifier: Apache-2.0
 * Schedules: the per-rank task tables the compiler emits and the executors run.
 *
 * A plan holds one schedule per rank of a team. A schedule is an ordered
 * table of tasks. Each task is one core tile (GEMM tile, elementwise tile,
 * reduce tile) or one chunk of data movement (copy/put to a peer), run by a
 * worker of one class (compute, communication, copy engine). Before a task
 * runs, its local dependencies (earlier-finished tasks of the same rank) must
 * be done and its signal waits satisfied; after it runs, it raises its
 * signals (atomic add on a rank's copy of a signal word). Buffers are
 * symbolic and bound at launch.
 *
 * Signals need no reset: each launch of a plan has an epoch e = 1, 2, ...
 * Every raise is an ADD, and the plan knows, per signal and rank, the total
 * added per launch (T). A wait (sig, GE, v) in launch e waits for
 * sig >= (e-1)*T + v; (sig, EQ, v) for sig == (e-1)*T + v.
 * Signal words are 64-bit and never wrap: td_plan_validate refuses a plan
 * whose T exceeds TD_SIGNAL_TOTAL_MAX (2^23) for any signal and rank, so
 * launches 1 .. TD_PLAN_LAUNCH_MAX (2^40) stay at or below 2^63; td_exec_run
 * refuses launch 2^40 + 1 with TD_ERR_STATE (create a new executor).
 *
 * Layout version TD_SCHEDULE_VERSION; the text dump starts with it and
 * td_plan_parse refuses other versions.
 *
 * Thread-safety: a plan is immutable once validated; building it is single-threaded. */
#ifndef TDIST_SCHEDULE_H
#define TDIST_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tdist/rma.h"
#include "tdist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TD_SCHEDULE_VERSION 1
/** Largest per-launch total T of one signal on one rank (see above). */
#define TD_SIGNAL_TOTAL_MAX (UINT64_C(1) << 23)
/** Launches one executor may run before its signal words could pass 2^63. */
#define TD_PLAN_LAUNCH_MAX (UINT64_C(1) << 40)

typedef enum td_task_kind {
  TD_TASK_NOP = 0,   /* only waits and raises */
  TD_TASK_GEMM = 1,  /* c (+)= alpha * op(a) * op(b); flags: TD_GEMM_* */
  TD_TASK_COPY = 2,  /* c = a (element-wise copy of a rows x cols view; c may be a peer's) */
  TD_TASK_REDUCE = 3, /* c = c <op> a, op in `op` (td_red_op); c or a may be a peer's */
  TD_TASK_EWISE = 4, /* c = f(a) or f(a, b); f in `op` (td_ewise_op), alpha for scale */
  TD_TASK_RMSNORM = 5, /* c = a / rms(a row) * b (b: 1 x cols weight); alpha = epsilon */
  TD_TASK_KIND_COUNT
} td_task_kind;

typedef enum td_ewise_op {
  TD_EW_ADD = 0, TD_EW_MUL = 1, TD_EW_GELU = 2, TD_EW_SILU = 3, TD_EW_SCALE = 4, TD_EW_COPY = 5,
  TD_EW_OP_COUNT
} td_ewise_op;

enum {
  TD_GEMM_TRANS_A = 1,    /* a view is K x M (stored), used as its transpose */
  TD_GEMM_TRANS_B = 2,    /* b view is N x K (stored), used as its transpose */
  TD_GEMM_ACCUMULATE = 4, /* c += product instead of c = product */
  /* Hint: run the whole task as one GEMM kernel on the backend's kernel queue
   * (cuda: the Hopper GEMM launched on a stream of its own, see
   * src/exec/cuda/kernel_queue.c); backends without one run it as usual.
   * Bits TD_GEMM_CFG_SHIFT.. then carry its tile configuration, packed as
   * src/exec/gemm_queue_cfg.h describes (0 = the backend's default). Only
   * with this flag may those bits be non-zero. Added in layout version 1
   * without a version change: the text form is unchanged and a reader that
   * predates the flag refuses it in td_plan_validate. */
  TD_GEMM_QUEUE = 8,
  /* Epilogue: c = gelu(result), TD_EW_GELU's tanh form, before the one rounding
   * into c's dtype (the cpu compiler fuses matmul -> gelu into it). cpu
   * backend only: td_exec_create refuses it on cuda. */
  TD_GEMM_GELU = 16,
};
/** First bit of a TD_GEMM_QUEUE task's packed tile configuration in td_task.op. */
#define TD_GEMM_CFG_SHIFT 8

typedef enum td_worker_class {
  TD_WORKER_COMPUTE = 0,
  TD_WORKER_COMM = 1,
  TD_WORKER_COPY_ENGINE = 2, /* CUDA: host-issued copy + stream signal; CPU: run by a comm worker */
  TD_WORKER_CLASS_COUNT
} td_worker_class;

typedef enum td_buffer_kind {
  TD_BUF_INPUT = 0,   /* bound by the caller, read-only */
  TD_BUF_WEIGHT = 1,  /* bound by the caller, read-only */
  TD_BUF_OUTPUT = 2,  /* bound by the caller */
  TD_BUF_SYMM = 3,    /* symmetric scratch, allocated by the executor; peers may read/write it */
  TD_BUF_LOCAL = 4,   /* private scratch, allocated by the executor */
  TD_BUF_KIND_COUNT
} td_buffer_kind;

/** A symbolic buffer: a row-major rows x cols matrix of dtype. Same table on every rank. */
typedef struct td_buffer_desc {
  char name[32];
  td_buffer_kind kind;
  td_dtype dtype;
  int64_t rows, cols; /* elements */
} td_buffer_desc;

#define TD_PEER_SELF (-1)

/** A 2-D window of a buffer: rows x cols elements starting at (row0, col0).
 * `peer` is TD_PEER_SELF or the team rank whose copy of a TD_BUF_SYMM buffer
 * is meant. The row stride is the buffer's cols. */
typedef struct td_view {
  int32_t buf;  /* index into the plan's buffer table; -1 = unused */
  int32_t peer; /* TD_PEER_SELF or team rank */
  int64_t row0, col0, rows, cols;
} td_view;

typedef struct td_wait {
  uint32_t signal; /* index into the plan's signal table */
  td_cmp cmp;      /* TD_CMP_GE or TD_CMP_EQ */
  uint64_t value;  /* relative to the epoch base (see above) */
} td_wait;

typedef struct td_raise {
  uint32_t signal;
  int32_t peer;   /* team rank whose copy is raised; TD_PEER_SELF = own */
  uint64_t value; /* added */
} td_raise;

typedef struct td_task {
  td_task_kind kind;
  td_worker_class worker;
  uint32_t op;    /* td_red_op / td_ewise_op / TD_GEMM_* flags */
  float alpha;    /* GEMM/scale factor; rmsnorm epsilon */
  td_view a, b, c;
  uint32_t dep_first, dep_count;     /* into schedule->deps: task indices of this rank */
  uint32_t wait_first, wait_count;   /* into schedule->waits */
  uint32_t raise_first, raise_count; /* into schedule->raises */
  char label[24];                    /* for traces and explain, e.g. "gemm m0 n3" */
} td_task;

/** One rank's schedule. Arrays are owned by the plan. */
typedef struct td_schedule {
  int rank;
  uint32_t ntasks, ndeps, nwaits, nraises;
  td_task *tasks;
  uint32_t *deps;
  td_wait *waits;
  td_raise *raises;
} td_schedule;

typedef struct td_plan td_plan;

/** Creates an empty plan for `nranks` ranks. Errors: TD_ERR_INVALID_ARG, TD_ERR_NO_MEMORY. */
td_status td_plan_create(int nranks, td_plan **out);
void td_plan_destroy(td_plan *plan);

/** Adds a buffer to the table shared by all ranks; writes its index.
 * Errors: TD_ERR_INVALID_ARG (NULL argument, name not NUL-terminated, unknown
 * kind or dtype, negative or oversized shape), TD_ERR_NO_MEMORY. */
td_status td_plan_add_buffer(td_plan *plan, const td_buffer_desc *desc, int32_t *index);
/** Adds a signal word (one per rank, symmetric); writes its index. `name` for
 * diagnostics (NULL = ""; at most 31 characters). Errors: TD_ERR_INVALID_ARG,
 * TD_ERR_NO_MEMORY. */
td_status td_plan_add_signal(td_plan *plan, const char *name, uint32_t *index);

/** Appends a task to rank's schedule with its dependencies (task indices already
 * appended to that rank), waits and raises (copied; the task's *_first and
 * *_count fields are ignored and set from the arrays). Writes the task's index.
 * Contents are checked by td_plan_validate, not here. Errors:
 * TD_ERR_INVALID_ARG (NULL plan/task/index, rank out of range, a non-zero count
 * with a NULL array), TD_ERR_NO_MEMORY. Any change after validation clears the
 * validated mark: validate again before creating an executor. */
td_status td_plan_add_task(td_plan *plan, int rank, const td_task *task, const uint32_t *deps,
                           uint32_t ndeps, const td_wait *waits, uint32_t nwaits,
                           const td_raise *raises, uint32_t nraises, uint32_t *index);

/** Checks the plan before any launch: every view names a known buffer and lies
 * inside it (and is shaped right for its task kind), peer views only on
 * TD_BUF_SYMM buffers, dependencies point to earlier tasks, every waited
 * signal can be reached by the raises of all ranks (the total added per launch
 * covers the waited value), no dependency/wait cycle across ranks. Errors:
 * TD_ERR_SCHEDULE with a message naming the rank, task index and label, and
 * the fault; also for a signal total above TD_SIGNAL_TOTAL_MAX and for GEMM
 * sizes or row strides above INT32_MAX (BLAS int). Computes the per-launch
 * signal totals. */
td_status td_plan_validate(td_plan *plan);

int td_plan_nranks(const td_plan *plan);
const td_schedule *td_plan_schedule(const td_plan *plan, int rank);
int32_t td_plan_nbuffers(const td_plan *plan);
const td_buffer_desc *td_plan_buffer(const td_plan *plan, int32_t index);
uint32_t td_plan_nsignals(const td_plan *plan);
const char *td_plan_signal_name(const td_plan *plan, uint32_t index);
/** Total added to `signal` on `rank` per launch (valid after validate). */
uint64_t td_plan_signal_total(const td_plan *plan, uint32_t signal, int rank);

/** Writes the plan as text (versioned; round-trips through td_plan_parse).
 * Errors: TD_ERR_INVALID_ARG, TD_ERR_SYSTEM (write failed). */
td_status td_plan_dump(const td_plan *plan, FILE *out);
/** Reads a plan from text written by td_plan_dump. Errors: TD_ERR_PARSE with line:col. */
td_status td_plan_parse(const char *text, td_plan **out);

#ifdef __cplusplus
}
#endif
#endif
