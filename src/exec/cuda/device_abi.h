/* SPDX-License-Identifier: Apache-2.0
 * Internal: the memory layout the CUDA executor's host side writes and its
 * JIT-compiled persistent kernel reads (executor layer, cuda backend).
 *
 * This one file is compiled twice: by the host C compiler (backend.c, image.c)
 * and, embedded as text, by NVRTC at the top of every generated kernel. It
 * therefore uses only types both accept and no headers. Every field is 4 or 8
 * bytes and structs are padded by hand to multiples of 8, so the host and the
 * device agree on offsets without packing pragmas; image.c checks the sizes.
 *
 * Layout rules: pointers travel as 64-bit integers (device addresses, already
 * resolved to the right rank's copy at bind time); views carry their element
 * stride; signal values are relative to the launch epoch (schedule.h). */
#ifndef TD_EXEC_CUDA_DEVICE_ABI_H
#define TD_EXEC_CUDA_DEVICE_ABI_H

typedef unsigned long long td_dev_u64;
typedef long long td_dev_i64;

/* A 2-D window of device memory: rows x cols elements of dtype (td_dtype
 * codes), row stride `ld` elements; `ptr` already points at (row0, col0). */
typedef struct td_dev_view {
  td_dev_u64 ptr;
  td_dev_i64 ld;
  td_dev_i64 rows, cols;
  int dtype;
  int pad0;
} td_dev_view; /* 40 bytes */

/* td_dev_task.worker of a copy-engine task the host queue runs: the kernel
 * only waits for its inputs, hands it to the copy engine and raises after. */
#define TD_DEV_WORKER_CE_PROXY 3
/* td_dev_task.worker of a task the host's kernel queue runs (kernel_queue.c):
 * the kernel only waits for its inputs and publishes ce_go[t] = epoch; the
 * queue's stream launches the task's kernel and then td_kq_finish_kernel,
 * which raises its signals and marks it done. No block waits for it. */
#define TD_DEV_WORKER_KQ_PROXY 4

typedef struct td_dev_task {
  int kind;   /* td_task_kind */
  int worker; /* td_worker_class, or TD_DEV_WORKER_CE_PROXY */
  unsigned int op;
  float alpha;
  unsigned int dep_first, dep_count;
  unsigned int wait_first, wait_count;
  unsigned int raise_first, raise_count;
  td_dev_view a, b, c;
} td_dev_task; /* 40 + 120 = 160 bytes */

/* Wait for this rank's word at `sig` to compare (cmp: td_cmp code) with
 * (epoch - 1) * total + value. */
typedef struct td_dev_wait {
  td_dev_u64 sig;
  td_dev_u64 total;
  td_dev_u64 value;
  int cmp;
  unsigned int signal; /* plan signal index, for the diagnostic */
} td_dev_wait; /* 32 bytes */

/* Atomic add of `value` to the word at `sig` (a peer's copy, or ours). */
typedef struct td_dev_raise {
  td_dev_u64 sig;
  td_dev_u64 value;
} td_dev_raise; /* 16 bytes */

/* Written by the first block whose wait passes its deadline. */
typedef struct td_dev_diag {
  unsigned int failed;  /* 0, or 1 once a wait timed out (all blocks then stop) */
  unsigned int task;    /* task index in the schedule */
  unsigned int what;    /* 0: local dependency, 1: signal wait, 2: copy engine never finished */
  unsigned int index;   /* dependency's task index, or the wait's plan signal index */
  td_dev_u64 expected;  /* absolute value the wait needed (signal), or the epoch (dependency) */
  td_dev_u64 observed;  /* last value read */
  unsigned int cmp;     /* td_cmp of a signal wait */
  unsigned int abort;   /* set by the host (before it releases the queues after a failed launch): queue
                           kernels then skip their work and raises, so no peer sees unfinished data */
} td_dev_diag; /* 40 bytes */

/* Trace record of one task: %globaltimer at start (after its waits) and end
 * (after its raises), and the block that ran it. */
typedef struct td_dev_trace {
  td_dev_u64 start, end;
  unsigned int block;
  unsigned int pad0;
} td_dev_trace; /* 24 bytes */

/* The one kernel argument. Role lists hold task indices in schedule order:
 * compute blocks pull from list[0], communication blocks from list[1]. */
typedef struct td_dev_plan {
  td_dev_u64 tasks, deps, waits, raises;  /* td_dev_task*, unsigned int*, td_dev_wait*, td_dev_raise* */
  td_dev_u64 list[2];                     /* unsigned int* per role */
  td_dev_u64 cursor;                      /* td_dev_u64[2]: monotonic pull counters per role */
  td_dev_u64 done;                        /* td_dev_u64[ntasks]: epoch in which each task finished */
  td_dev_u64 diag;                        /* td_dev_diag* */
  td_dev_u64 trace;                       /* td_dev_trace*[ntasks] or 0 */
  td_dev_u64 ce_go;                       /* td_dev_u64[ntasks]: epoch a CE or KQ proxy's inputs are ready
                                             (mapped host memory, polled by the host's hand-off loop) */
  td_dev_u64 ce_done;                     /* td_dev_u64[ntasks]: epoch the copy engine finished it */
  td_dev_u64 epoch;                       /* this launch: 1, 2, ... */
  td_dev_u64 timeout_ns;                  /* deadline of each wait */
  unsigned int nlist[2];                  /* tasks per role */
  unsigned int nblocks[2];                /* blocks per role: blocks [0, nblocks[0]) compute */
} td_dev_plan;

#endif
