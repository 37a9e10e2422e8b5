/* SPDX-License-Identifier: Apache-2.0
 * Internal: the CUDA executor backend's state (executor layer, cuda backend),
 * shared by its setup (cuda_exec.c), its device task image (image.c) and its
 * launch path (cuda_run.c).
 *
 * Memory: each rank owns one device *arena* (cudaMalloc) laid out the same on
 * every rank: the plan's signal words first, then its TD_BUF_SYMM buffers, so
 * a peer's copy of anything is peer_base[peer] + the same offset. Ranks learn
 * each other's arena through a small record on the host symmetric heap: ranks
 * of this process use the address as is (UVA, peer access enabled across
 * devices); ranks of other processes open a CUDA IPC handle. TD_BUF_LOCAL
 * buffers are private allocations. The persistent kernel then sees only plain
 * device addresses, whatever the transport. */
#ifndef TD_EXEC_CUDA_CUDA_EXEC_H
#define TD_EXEC_CUDA_CUDA_EXEC_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "exec/backend.h"
#include "exec/cuda/codegen.h"
#include "exec/cuda/device_abi.h"

/* Published by every rank on the host symmetric heap during create. */
typedef struct td__cuda_rank_rec {
  int32_t pid;
  int32_t device;
  int32_t nblocks; /* persistent blocks this rank launches (second phase) */
  int32_t ipc_ok;  /* `ipc` is valid */
  char bus_id[32];   /* PCI bus id of the rank's GPU: ranks sharing a GPU compare equal */
  uint64_t arena;    /* device address of the arena in the owner's process */
  cudaIpcMemHandle_t ipc;
} td__cuda_rank_rec;

typedef struct td__cuda_exec {
  td_exec *exec;
  int device, sm, nsm, ranks_on_gpu, occupancy;
  char arch[16];
  cudaStream_t stream;
  int own_stream;
  cudaLibrary_t lib;
  cudaKernel_t kernel, grid_kernel;
  td__cuda_spec spec;
  int nblocks[2]; /* compute, communication */
  /* memory */
  char *arena;             /* this rank's arena */
  size_t arena_size;
  size_t *buf_off;         /* [nbuffers]: SYMM offset in the arena; unused otherwise */
  void **local;            /* [nbuffers]: LOCAL allocations */
  uint64_t *peer_base;     /* [nranks]: each rank's arena, addressable here */
  int *peer_opened;        /* [nranks]: opened through IPC (close at destroy) */
  td__cuda_rank_rec *rec;  /* host symmetric record */
  /* device tables: one allocation, offsets into it in `plan` */
  char *tables;
  size_t tables_size;
  td_dev_plan plan;
  td_dev_task *h_tasks;    /* host copy of the task table, rebuilt when bindings change */
  void **bound_at_upload;  /* [nbuffers]: exec->bound when the table was last uploaded */
  int uploaded;
  td_dev_trace *h_trace;   /* [ntasks] */
  /* copy-engine queue (copy_engine.c) */
  int stuck;               /* a host wait hit its deadline: GPU work may never finish; destroy waits no more */
  int64_t deadline_at_ms;  /* CLOCK_MONOTONIC ms every host wait of the running launch ends by; 0 outside one */
  int max_ranks_per_gpu;   /* most ranks on any one GPU of the team (the same on every rank) */
  int streams_kq_ok, streams_ce_ok; /* td__cuda_stream_plan's verdict for max_ranks_per_gpu */
  int ce_enabled;          /* stream memory operations usable: CE copies go to ce_stream */
  cudaStream_t ce_stream;
  uint32_t *ce_tasks;      /* indices of CE proxy tasks, schedule order */
  uint64_t *go_host;       /* [ntasks] go words (td_dev_plan.ce_go) in mapped pinned memory; NULL without queues */
  uint32_t nce;
  void *ce_write64; /* driver entry point cuStreamWriteValue64 (a copy's done word) */
  /* kernel queue (kernel_queue.c) */
  int kq_enabled;          /* every non-copy-engine task runs on kq_stream[its role] */
  cudaStream_t kq_stream[2]; /* compute, communication */
  uint32_t *kq_tasks[2];   /* task indices per role, schedule order */
  uint32_t nkq[2];
  cudaKernel_t kq_tile_kernel, kq_finish_kernel;
  int gemm_sms;            /* SMs a queue GEMM may fill: those no persistent block of this GPU holds */
  uint32_t kq_hopper, kq_grid; /* GEMMs launched on the Hopper GEMM / as sub-tile grids (last launch) */
} td__cuda_exec;

/** Whether the schedule asks for the kernel queue: a GEMM task carries
 * TD_GEMM_QUEUE (the compiler sets it for cuda when the Hopper GEMM is there). */
int td__cuda_kq_wanted(const td_schedule *s);

/** Most tasks of one rank's schedule the kernel queue takes: each takes 3
 * entries of CUDA's pending-launch queue (about 1k deep), and a full one
 * blocks cudaLaunchKernel with no deadline. */
#define TD__KQ_MAX_TASKS 256

/** Whether the queue can take schedule `s`: 0 yes; 1 more than
 * TD__KQ_MAX_TASKS tasks; 2 a task's sub-tile grid would need more than
 * INT32_MAX blocks. Pure. */
int td__cuda_kq_limits(const td_schedule *s);

/** Decides the kernel queue before the kernel is generated: wanted by the
 * schedule, not turned off (TD_CUDA_GEMM_QUEUE=0), within the stream budget
 * (streams_kq_ok) and td__cuda_kq_limits, and stream memory operations
 * available. Sets kq_enabled and resolves ce_write64.
 * Errors: TD_ERR_INVALID_ARG (bad TD_CUDA_GEMM_QUEUE). */
td_status td__cuda_kq_decide(td__cuda_exec *cx);

/** Creates the queue's streams and lists (after the copy-engine setup, which
 * takes the copies). Errors: TD_ERR_CUDA, TD_ERR_NO_MEMORY. */
td_status td__cuda_kq_setup(td__cuda_exec *cx);

/** Enqueues kernel-queue task `ti` of role `role` (0 compute, 1
 * communication) on kq_stream[role]: its kernel, then td_kq_finish_kernel.
 * Called by the hand-off loop once the task's go word is published, so
 * nothing waits in the stream. Errors: TD_ERR_CUDA, TD_ERR_INTERNAL. */
td_status td__cuda_kq_enqueue_task(td__cuda_exec *cx, int role, uint32_t ti);

/** After a failed launch, before either release: sets the abort word
 * (td_dev_diag.abort) with a synchronous copy, so queue kernels released next
 * skip their work and raises. Never fails (a failure there is a CUDA error
 * the run already reports). */
void td__cuda_abort(td__cuda_exec *cx);

/** After a failed launch (td__cuda_abort first): waits quietly for the
 * queue's streams (the run's message stays). Only tasks whose go word was
 * published were enqueued, so they drain by themselves. */
void td__cuda_kq_release(td__cuda_exec *cx);

/** Waits for the queue's streams after a good launch. Errors: TD_ERR_CUDA. */
td_status td__cuda_kq_sync(td__cuda_exec *cx);

/** Trace fix-up: a queue task's record starts when it was handed off; it
 * cannot start before the previous task of its stream ended. */
void td__cuda_kq_trace(td__cuda_exec *cx);

void td__cuda_kq_free(td__cuda_exec *cx);

/** A driver entry point through the runtime (NULL when unavailable), so
 * libtdist needs no link to libcuda. */
void *td__cuda_driver_entry(const char *name);

/** Whether task `t` runs on the copy-engine queue: class COPY_ENGINE (or
 * COMM when the kernel queue is enabled), kind COPY, same dtype on both sides
 * (a byte copy), and the queue is enabled. */
int td__cuda_ce_eligible(const td__cuda_exec *cx, const td_task *t);

/** Resolves the stream memory operations and, when the device supports them,
 * enables the queue: a high-priority non-blocking stream and the list of
 * eligible tasks. Without support, CE tasks run on communication blocks.
 * Errors: TD_ERR_CUDA, TD_ERR_NO_MEMORY. */
td_status td__cuda_ce_setup(td__cuda_exec *cx);

/** Enqueues copy-engine task `t` on ce_stream: its 2-D copy, then
 * ce_done[t] = epoch (cuStreamWriteValue64). Called by the hand-off loop once
 * the task's go word is published. Errors: TD_ERR_CUDA. */
td_status td__cuda_ce_enqueue_task(td__cuda_exec *cx, uint32_t t);

/** After a failed launch (td__cuda_abort first): waits quietly for the
 * copy-engine stream. Only copies whose go word was published (their inputs
 * complete) were enqueued; their signals are raised by the persistent kernel,
 * which has stopped, so no peer is told anything more. */
void td__cuda_ce_release(td__cuda_exec *cx);

/** Index past the longest run of tasks[next..n) whose go word go[tasks[i]]
 * has reached `epoch` (a word still holding an earlier launch's epoch is not
 * ready), i.e. how far a stream may be enqueued in schedule order. Pure
 * (acquire loads; go may be written concurrently by the GPU). */
uint32_t td__cuda_handoff_ready(const uint64_t *go, uint64_t epoch, const uint32_t *tasks, uint32_t n,
                                uint32_t next);

/** The hand-off loop (handoff.c), right after the persistent kernel's launch:
 * enqueues each copy-engine and kernel-queue task once the kernel publishes
 * its go word, in schedule order per stream, until all are enqueued, the
 * kernel finished, or the run's host deadline passed. No stream ever waits
 * for another rank's progress. Errors: TD_ERR_CUDA (an enqueue failed: the
 * kernel's deadline then ends the launch). */
td_status td__cuda_handoff(td__cuda_exec *cx);

void td__cuda_ce_free(td__cuda_exec *cx);

/** Resolves every task view, wait and raise of this rank's schedule into
 * h_tasks and the wait/raise arrays at `waits`/`raises` (host memory, sized by
 * the schedule). Errors: TD_ERR_INTERNAL (a view names a buffer with no
 * address: a bug, validation should have refused it). */
td_status td__cuda_image_tasks(td__cuda_exec *cx, td_dev_wait *waits, td_dev_raise *raises);

/** Launches td_tile_grid_kernel over every task of the schedule, one block
 * per task, ignoring dependencies and signals, and waits for it: the baseline
 * that executor overhead is measured against. Needs the task table uploaded
 * (one td_exec_run, or td__cuda_exec_upload). Errors: TD_ERR_CUDA. */
td_status td__cuda_exec_run_grid(td_exec *exec);

/** Rebuilds and uploads the task table if the bindings changed since the
 * last upload. Errors: TD_ERR_CUDA, TD_ERR_INTERNAL. */
td_status td__cuda_exec_upload(td__cuda_exec *cx);

/** Waits for stream `s` under a host deadline (twice the executor's
 * timeout plus 2 s): TD_OK when its work finished; TD_ERR_CUDA (naming
 * `what`) when it failed; TD_ERR_TIMEOUT, with the likely cause (streams
 * blocked in CUDA's hardware queues) and its remedy, when it did not finish,
 * which also marks the executor stuck; TD_ERR_STATE once stuck
 * (stream_wait.c). */
td_status td__cuda_stream_wait(td__cuda_exec *cx, cudaStream_t s, const char *what);

/** The host deadline of td__cuda_stream_wait, in milliseconds. */
int64_t td__cuda_host_deadline_ms(const td__cuda_exec *cx);

/** Starts one run's host deadline: from now on every td__cuda_stream_wait
 * (and the quiet one) ends by now + td__cuda_host_deadline_ms, however many
 * waits the run makes; td__cuda_run_deadline_end goes back to a fresh
 * deadline per wait (destroy, the grid baseline). */
void td__cuda_run_deadline_start(td__cuda_exec *cx);
void td__cuda_run_deadline_end(td__cuda_exec *cx);

/** td__cuda_stream_wait for release paths: the same deadline (and marks the
 * executor and device stuck on timeout) but sets no error message, so the
 * run's first error stays the thread's message; returns nothing. */
void td__cuda_stream_wait_quiet(td__cuda_exec *cx, cudaStream_t s);

/** CUDA_DEVICE_MAX_CONNECTIONS as CUDA reads it: 8 when unset or not a
 * positive number, at most 32. */
int td__cuda_max_connections(void);

/* Hardware queues kept free of executor streams (the legacy default stream,
 * streams of libraries and earlier executors); see td__cuda_stream_plan. */
#define TD__CUDA_STREAM_RESERVE 2

/** Whether the kernel queue (*kq_ok) and the copy-engine queue (*ce_ok) may
 * be used when `ranks_per_gpu` ranks share a GPU with `connections` hardware
 * queues: each rank uses up to 4 streams (persistent kernel, copy engine, two
 * queue streams), and more streams than hardware queues can deadlock (a
 * parked stream waiting in front of a peer's kernel). The queue needs 4 per
 * rank, the copy engine 2, and TD__CUDA_STREAM_RESERVE queues stay spare (an
 * exact fit aliased on the H200). Pure: callers pass the most ranks on any GPU
 * of the team, so every rank decides alike. */
void td__cuda_stream_plan(int ranks_per_gpu, int connections, int *kq_ok, int *ce_ok);

/** Formats a CUDA error as TD_ERR_CUDA naming the call and the rank. */
td_status td__cuda_fail(const td_exec *e, const char *what, cudaError_t err);

#endif
