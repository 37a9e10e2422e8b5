/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's kernel queue (executor layer, cuda backend).
 *
 * When the compiler marks GEMM tasks TD_GEMM_QUEUE (coarse, whole-width row
 * blocks for the Hopper GEMM), every task that is not a copy-engine copy
 * runs as an ordinary kernel on one of two streams of this rank: compute-class
 * tasks on one, communication-class tasks (reductions) on the other, each in
 * schedule order. The persistent kernel stays the only thing that waits: its
 * few blocks check each task's dependencies and signals against their
 * deadlines and publish ce_go[t] = epoch; the host's hand-off loop
 * (handoff.c) sees that word and only then launches the task's kernel on the
 * stream, then td_kq_finish_kernel,
 * which raises the task's signals and writes done[t], so dependents wait on a
 * queue task as on a tile. Nothing that waits holds SMs for work not yet
 * enqueued, so a GEMM gets every multiprocessor no persistent block holds.
 *
 * A queue task's kernel is the Hopper GEMM (td__gemm_cuda_run_sms, bound
 * through a weak reference because tdist_gemm_cuda links tdist, not the
 * reverse) when it is linked, the GPU is cc 9.x and the views fit its layout
 * rules (contiguous rows, 16-byte aligned, K and N multiples of 8, no
 * transposed A, no accumulation, alpha 1); otherwise td_kq_tile_kernel runs
 * the ordinary tile over a grid of sub-tiles, so every task still runs.
 *
 * No stream waits for a go word (a parked wait could block a peer's work in a
 * shared hardware queue: handoff.c), so a failed launch (a deadline) leaves
 * only tasks whose inputs were ready. The host still sets the abort word
 * (td_dev_diag.abort, a synchronous copy: td__cuda_abort) before it drains the
 * streams, so kernels not yet started skip their tile work and finish kernels
 * raise no signal (peers must not proceed once this rank failed). A Hopper
 * GEMM already running still runs, but writes only this rank's C.
 *
 * Limits, checked before the kernel is generated (td__cuda_kq_decide): at most
 * TD__KQ_MAX_TASKS queue tasks per rank (each takes 3 entries of CUDA's
 * pending-launch queue, about 1k deep; when it is full cudaLaunchKernel blocks
 * the host with no deadline, e.g. behind a failed persistent kernel), every
 * task's sub-tile grid within INT32_MAX blocks, and td__cuda_stream_plan's
 * stream budget. Otherwise the tiles run on the persistent kernel. */
#include <cuda.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"
#include "exec/cuda/gemm_target.h"
#include "exec/gemm_queue_cfg.h"
#include "tdist/config.h"
#include "tile/cuda/gemm.h"

#pragma weak td__gemm_cuda_run_sms
#pragma weak td__gemm_cuda_grid

typedef CUresult (*td__attr_fn)(int *, CUdevice_attribute, CUdevice);

int td__cuda_kq_wanted(const td_schedule *s) {
  for (uint32_t i = 0; s && i < s->ntasks; i++)
    if (s->tasks[i].kind == TD_TASK_GEMM && (s->tasks[i].op & TD_GEMM_QUEUE))
      return 1;
  return 0;
}

/* Sub-tile shape of task kind/rows/cols on td_kq_tile_kernel: 128 x 128 for a
 * GEMM (the simple tile's block tile), 8 whole rows for an RMS norm, about 32K
 * elements of whole rows for the rest. Returns the block count. */
static long long td__kq_grid_shape(int kind, long long rows, long long cols, long long *sr, long long *sc) {
  if (rows < 1 || cols < 1)
    rows = cols = 1; /* a NOP or empty task: one block that returns */
  if (kind == TD_TASK_GEMM) {
    *sr = 128, *sc = 128;
  } else if (kind == TD_TASK_RMSNORM) {
    *sr = 8, *sc = cols;
  } else {
    *sc = cols < 32768 ? cols : 32768;
    *sr = 32768 / *sc > 0 ? 32768 / *sc : 1;
  }
  return ((rows + *sr - 1) / *sr) * ((cols + *sc - 1) / *sc);
}

int td__cuda_kq_limits(const td_schedule *s) {
  if (s->ntasks > TD__KQ_MAX_TASKS)
    return 1;
  for (uint32_t i = 0; i < s->ntasks; i++) {
    long long sr, sc;
    if (td__kq_grid_shape(s->tasks[i].kind, s->tasks[i].c.rows, s->tasks[i].c.cols, &sr, &sc) > INT32_MAX)
      return 2;
  }
  return 0;
}

td_status td__cuda_kq_decide(td__cuda_exec *cx) {
  cx->kq_enabled = 0;
  if (!td__cuda_kq_wanted(cx->exec->sched))
    return TD_OK;
  int64_t on = 1;
  TD_CHECK(td_config_int("TD_CUDA_GEMM_QUEUE", &on));
  if (!on)
    return TD_OK; /* the tiles run on the persistent kernel, however coarse */
  if (!cx->streams_kq_ok || td__cuda_kq_limits(cx->exec->sched) != 0)
    return TD_OK; /* too many streams on a GPU, tasks or blocks: the persistent kernel runs the tiles */
  td__attr_fn attr = (td__attr_fn)td__cuda_driver_entry("cuDeviceGetAttribute");
  cx->ce_write64 = td__cuda_driver_entry("cuStreamWriteValue64");
  int ok = 0;
  if (!attr || !cx->ce_write64 ||
      attr(&ok, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, (CUdevice)cx->device) != CUDA_SUCCESS)
    ok = 0;
  cx->kq_enabled = ok;
  return TD_OK;
}

/* Loads every kernel the queue may launch into the context now. Under CUDA's
 * lazy loading (the default since 12.x) a kernel's first launch loads its
 * module, and that load waits for the running kernels, among them the
 * persistent kernel, which waits for this kernel's done word: a deadlock
 * that only the deadline ends. So each Hopper GEMM configuration the plan
 * names (td__gemm_cuda_grid prepares it: cudaFuncSetAttribute loads it) and
 * the queue's JIT kernels are loaded here, before any launch. */
static void td__preload(td__cuda_exec *cx) {
  const td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  struct cudaFuncAttributes fa;
  int occ = 0;
  cudaFuncGetAttributes(&fa, (const void *)cx->kq_tile_kernel);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, (const void *)cx->kq_tile_kernel, cx->spec.threads, 0);
  cudaFuncGetAttributes(&fa, (const void *)cx->kq_finish_kernel);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, (const void *)cx->kq_finish_kernel, 32, 0);
  for (uint32_t i = 0; td__gemm_cuda_grid && cx->sm / 10 == 9 && i < s->ntasks; i++) {
    const td_task *t = &s->tasks[i];
    if (t->kind != TD_TASK_GEMM || !(t->op & TD_GEMM_QUEUE) || t->c.buf < 0 || t->a.buf < 0)
      continue;
    const td_buffer_desc *c = td_plan_buffer(e->plan, t->c.buf);
    if (c->dtype != TD_BF16 && c->dtype != TD_F16)
      continue;
    const int nk = (t->op & TD_GEMM_TRANS_B) != 0;
    td_gemm_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.m = (int)t->c.rows, pr.n = (int)t->c.cols, pr.k = (int)t->a.cols;
    pr.dtype = c->dtype;
    pr.b_layout = nk ? TD_GEMM_B_NK : TD_GEMM_B_KN;
    td__gemm_qcfg q;
    if (pr.m < 1 || pr.n < 1 || pr.k < 1 ||
        (td__gemm_qcfg_unpack(t->op, &q) != 1 && td__cuda_gemm_pick_compiled(c->dtype, nk, pr.m, pr.n, pr.k, &q)))
      continue;
    td_gemm_config g = {q.arch == 80 ? TD_GEMM_SM80 : TD_GEMM_SM90, q.bm, q.bn, q.bk, q.stages, q.cluster,
                        q.group_m, 1};
    td__gemm_cuda_grid(&pr, &g);
  }
  cudaGetLastError();
}

td_status td__cuda_kq_setup(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  if (!cx->kq_enabled)
    return TD_OK;
  int lo = 0, hi = 0;
  cudaDeviceGetStreamPriorityRange(&lo, &hi);
  for (int role = 0; role < 2; role++) {
    cudaError_t ce = cudaStreamCreateWithPriority(&cx->kq_stream[role], cudaStreamNonBlocking, role ? hi : lo);
    if (ce != cudaSuccess)
      return td__cuda_fail(e, "cudaStreamCreateWithPriority (kernel-queue stream)", ce);
    cx->kq_tasks[role] = calloc((size_t)s->ntasks + 1, sizeof *cx->kq_tasks[role]);
    if (!cx->kq_tasks[role])
      return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: no memory for the kernel queue", e->rank);
    cx->nkq[role] = 0;
  }
  for (uint32_t i = 0; i < s->ntasks; i++) {
    if (td__cuda_ce_eligible(cx, &s->tasks[i]))
      continue;
    const int role = s->tasks[i].worker == TD_WORKER_COMPUTE ? 0 : 1;
    cx->kq_tasks[role][cx->nkq[role]++] = i;
  }
  td__preload(cx);
  return TD_OK;
}

static int td__aligned16(td_dev_u64 p) { return p % 16 == 0; }

/* The Hopper GEMM problem and configuration for task d, or 0 when it does not apply. */
static int td__hopper_fits(const td__cuda_exec *cx, const td_dev_task *d, td_gemm_problem *pr,
                           td_gemm_config *cfg) {
  if (!td__gemm_cuda_run_sms || cx->sm / 10 != 9)
    return 0;
  if (d->kind != TD_TASK_GEMM || !(d->op & TD_GEMM_QUEUE) || (d->op & (TD_GEMM_TRANS_A | TD_GEMM_ACCUMULATE)) ||
      d->alpha != 1.0f)
    return 0;
  const td_dev_view *a = &d->a, *b = &d->b, *c = &d->c;
  if (a->dtype != c->dtype || b->dtype != c->dtype || (c->dtype != TD_BF16 && c->dtype != TD_F16))
    return 0;
  const int nk = (d->op & TD_GEMM_TRANS_B) != 0; /* b stored N x K */
  const td_dev_i64 m = c->rows, n = c->cols, k = a->cols;
  if (m < 1 || n < 1 || k < 1 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || k % 8 || n % 8)
    return 0;
  if (a->ld != a->cols || b->ld != b->cols || c->ld != c->cols)
    return 0; /* the Hopper GEMM takes dense rows (leading dimension = row length) */
  if (!td__aligned16(a->ptr) || !td__aligned16(b->ptr) || !td__aligned16(c->ptr))
    return 0;
  memset(pr, 0, sizeof *pr);
  pr->m = (int)m, pr->n = (int)n, pr->k = (int)k;
  pr->dtype = (td_dtype)c->dtype;
  pr->b_layout = nk ? TD_GEMM_B_NK : TD_GEMM_B_KN;
  pr->a = (const void *)(uintptr_t)a->ptr;
  pr->b = (const void *)(uintptr_t)b->ptr;
  pr->c = (void *)(uintptr_t)c->ptr;
  td__gemm_qcfg q;
  if (td__gemm_qcfg_unpack(d->op, &q) != 1 &&
      td__cuda_gemm_pick_compiled(pr->dtype, nk, pr->m, pr->n, pr->k, &q) != 0)
    return 0;
  td_gemm_config g = {q.arch == 80 ? TD_GEMM_SM80 : TD_GEMM_SM90, q.bm, q.bn, q.bk, q.stages, q.cluster,
                      q.group_m, 1};
  *cfg = g;
  return 1;
}

/* td_kq_tile_kernel over sub-tiles: 128 x 128 for a GEMM (the simple tile's
 * block tile), about 32K elements of whole rows for the rest. */
static td_status td__launch_grid(td__cuda_exec *cx, cudaStream_t stream, uint32_t ti, const td_dev_task *d) {
  long long sr, sc;
  const long long blocks = td__kq_grid_shape(d->kind, d->c.rows, d->c.cols, &sr, &sc);
  if (blocks > INT32_MAX) /* td__cuda_kq_decide refused the queue for this: a bug if reached */
    return td__error(TD_ERR_INTERNAL, "cuda executor: rank %d: task %u needs %lld blocks on the kernel queue",
                     cx->exec->rank, ti, blocks);
  void *tasks = (void *)(uintptr_t)cx->plan.tasks;
  void *diag = (void *)(uintptr_t)cx->plan.diag;
  void *args[] = {&tasks, &ti, &sr, &sc, &diag};
  dim3 g = {(unsigned)blocks, 1, 1}, b = {(unsigned)cx->spec.threads, 1, 1};
  cudaError_t ce = cudaLaunchKernel((const void *)cx->kq_tile_kernel, g, b, args, 0, stream);
  if (ce != cudaSuccess)
    return td__cuda_fail(cx->exec, "launch of td_kq_tile_kernel (kernel queue)", ce);
  cx->kq_grid++;
  return TD_OK;
}

td_status td__cuda_kq_enqueue_task(td__cuda_exec *cx, int role, uint32_t ti) {
  td_exec *e = cx->exec;
  cudaStream_t stream = cx->kq_stream[role];
  const td_dev_task *d = &cx->h_tasks[ti];
  td_gemm_problem pr;
  td_gemm_config cfg;
  int done = 0;
  if (d->kind != TD_TASK_NOP && td__hopper_fits(cx, d, &pr, &cfg)) {
    td_status st = td__gemm_cuda_run_sms(&pr, &cfg, cx->gemm_sms, (void *)stream);
    if (st == TD_ERR_CUDA)
      return st;
    done = st == TD_OK; /* a configuration not compiled in: the sub-tile grid instead */
    cx->kq_hopper += done;
  }
  if (!done && d->kind != TD_TASK_NOP)
    TD_CHECK(td__launch_grid(cx, stream, ti, d));
  void *args[] = {&cx->plan, &ti};
  dim3 one = {1, 1, 1}, warp = {32, 1, 1};
  cudaError_t ce = cudaLaunchKernel((const void *)cx->kq_finish_kernel, one, warp, args, 0, stream);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "launch of td_kq_finish_kernel (kernel queue)", ce);
  return TD_OK;
}

void td__cuda_abort(td__cuda_exec *cx) {
  if (!cx->kq_enabled && !cx->ce_enabled)
    return;
  const unsigned int one = 1;
  /* Synchronous: the abort word is in device memory before the host drains the queues. */
  cudaMemcpy((char *)(uintptr_t)cx->plan.diag + offsetof(td_dev_diag, abort), &one, sizeof one,
             cudaMemcpyHostToDevice);
  cudaGetLastError();
}

void td__cuda_kq_release(td__cuda_exec *cx) {
  if (!cx->kq_enabled)
    return;
  for (int role = 0; role < 2; role++)
    td__cuda_stream_wait_quiet(cx, cx->kq_stream[role]);
}

td_status td__cuda_kq_sync(td__cuda_exec *cx) {
  for (int role = 0; cx->kq_enabled && role < 2; role++)
    TD_CHECK(td__cuda_stream_wait(cx, cx->kq_stream[role], "a kernel-queue kernel"));
  return TD_OK;
}

void td__cuda_kq_trace(td__cuda_exec *cx) {
  for (int role = 0; cx->kq_enabled && role < 2; role++) {
    uint64_t prev_end = 0;
    for (uint32_t k = 0; k < cx->nkq[role]; k++) {
      td_dev_trace *r = &cx->h_trace[cx->kq_tasks[role][k]];
      if (!r->start || !r->end)
        continue;
      if (r->start < prev_end)
        r->start = prev_end;
      if (r->end < r->start)
        r->end = r->start;
      prev_end = r->end;
      r->block = (unsigned)(cx->nblocks[0] + cx->nblocks[1] + role); /* one virtual worker per queue */
    }
  }
}

void td__cuda_kq_free(td__cuda_exec *cx) {
  for (int role = 0; role < 2; role++) {
    if (cx->kq_stream[role])
      cudaStreamDestroy(cx->kq_stream[role]);
    cx->kq_stream[role] = NULL;
    free(cx->kq_tasks[role]);
    cx->kq_tasks[role] = NULL;
  }
}
