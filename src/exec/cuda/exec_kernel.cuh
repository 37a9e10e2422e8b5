/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's persistent kernel (executor layer, cuda backend),
 * embedded as text after device_abi.h and the tiles, compiled by NVRTC.
 *
 * One launch per rank and epoch. Blocks [0, nblocks[0]) are compute blocks,
 * the rest communication blocks; each role pulls task indices from its list in
 * schedule order through a monotonic counter (no reset between launches: in
 * epoch e the counter starts at (e-1) * (nlist + nblocks), since every block
 * takes one index past the end before it leaves). For each task, thread 0
 * waits for its local dependencies (done[d] == epoch, written with release
 * after the task's raises) and its signal waits (acquire loads of this rank's
 * signal words), each against a %globaltimer deadline; the whole block runs
 * the tile; thread 0 then makes the block's writes visible system-wide, raises
 * the signals (atomic adds on the owners' words) and marks the task done.
 *
 * Copy-engine tasks marked TD_DEV_WORKER_CE_PROXY are pulled by the
 * communication blocks like any other task, but their bytes move on the host's
 * copy-engine stream: after the waits, thread 0 publishes ce_go[t] = epoch
 * (release, system scope, into mapped host memory), the host's hand-off loop
 * sees it and enqueues the copy and a write of ce_done[t] = epoch on the
 * copy-engine stream, and thread 0 waits for that before raising. No SM moves
 * the data, and no stream waits on a go word.
 *
 * Kernel-queue tasks (TD_DEV_WORKER_KQ_PROXY, kernel_queue.c) are handed off
 * the same way but not waited for: thread 0 publishes ce_go[t] = epoch and the
 * block pulls its next task at once. The host then enqueues, on its queue's stream, the
 * task's kernel (the Hopper GEMM, or td_kq_tile_kernel over a grid of
 * sub-tiles) and then td_kq_finish_kernel, which raises the task's signals
 * and marks it done, so dependents wait on it exactly as on a tile. Built
 * with TD_EXEC_QUEUE (every task runs on a queue), this kernel holds no tile
 * code at all: it is small, and its few blocks only orchestrate.
 *
 * A wait that passes its deadline records a diagnostic (task, dependency or
 * signal, expected and observed values) and sets diag->failed; every other
 * waiting block sees the flag and leaves, so a stuck schedule ends within one
 * deadline and the host reports which task was stuck. */

__device__ __forceinline__ td_dev_u64 td_globaltimer(void) {
  td_dev_u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ td_dev_u64 td_ld_acquire_sys(const td_dev_u64 *p) {
  td_dev_u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ td_dev_u64 td_ld_acquire_gpu(const td_dev_u64 *p) {
  td_dev_u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void td_st_release_gpu(td_dev_u64 *p, td_dev_u64 v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void td_st_release_sys(td_dev_u64 *p, td_dev_u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void td_red_add_release_sys(td_dev_u64 *p, td_dev_u64 v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* td_cmp codes: eq, ne, gt, ge, lt, le. */
__device__ __forceinline__ bool td_cmp_holds(int cmp, td_dev_u64 x, td_dev_u64 v) {
  switch (cmp) {
  case 0: return x == v;
  case 1: return x != v;
  case 2: return x > v;
  case 3: return x >= v;
  case 4: return x < v;
  default: return x <= v;
  }
}

/* Records the first timeout of this launch; later ones only see `failed`. */
__device__ void td_diag_record(td_dev_diag *diag, unsigned int task, unsigned int what, unsigned int index,
                               td_dev_u64 expected, td_dev_u64 observed, int cmp) {
  if (atomicCAS(&diag->failed, 0u, 2u) == 0u) {
    diag->task = task;
    diag->what = what;
    diag->index = index;
    diag->expected = expected;
    diag->observed = observed;
    diag->cmp = (unsigned int)cmp;
    __threadfence();
    atomicExch(&diag->failed, 1u);
  }
}

/* Thread 0 only. Returns false when the launch must stop (timeout here or elsewhere). */
__device__ bool td_task_wait(const td_dev_plan &p, unsigned int ti, const td_dev_task &t) {
  td_dev_diag *diag = (td_dev_diag *)p.diag;
  const td_dev_u64 *done = (const td_dev_u64 *)p.done;
  const unsigned int *deps = (const unsigned int *)p.deps;
  const td_dev_wait *waits = (const td_dev_wait *)p.waits;
  const td_dev_u64 t0 = td_globaltimer();
  for (unsigned int k = 0; k < t.dep_count; k++) {
    const unsigned int d = deps[t.dep_first + k];
    unsigned int spins = 0;
    td_dev_u64 seen;
    while ((seen = td_ld_acquire_gpu(&done[d])) < p.epoch) {
      if ((++spins & 63u) == 0) {
        if (*(volatile unsigned int *)&diag->failed)
          return false;
        /* Twice the deadline: a dependency stuck on a signal reports that signal first. */
        if (td_globaltimer() - t0 > 2 * p.timeout_ns) {
          td_diag_record(diag, ti, 0u, d, p.epoch, seen, 3);
          return false;
        }
      }
      __nanosleep(64);
    }
  }
  for (unsigned int k = 0; k < t.wait_count; k++) {
    const td_dev_wait w = waits[t.wait_first + k];
    const td_dev_u64 want = (p.epoch - 1) * w.total + w.value;
    unsigned int spins = 0;
    td_dev_u64 seen;
    while (!td_cmp_holds(w.cmp, seen = td_ld_acquire_sys((const td_dev_u64 *)w.sig), want)) {
      if ((++spins & 63u) == 0) {
        if (*(volatile unsigned int *)&diag->failed)
          return false;
        if (td_globaltimer() - t0 > p.timeout_ns) {
          td_diag_record(diag, ti, 1u, w.signal, want, seen, w.cmp);
          return false;
        }
      }
      __nanosleep(64);
    }
  }
  return true;
}

/* Thread 0, CE proxy only: hand the task to the copy engine and wait for it. */
__device__ bool td_task_copy_engine(const td_dev_plan &p, unsigned int ti) {
  td_dev_diag *diag = (td_dev_diag *)p.diag;
  td_st_release_sys((td_dev_u64 *)p.ce_go + ti, p.epoch);
  const td_dev_u64 *done = (const td_dev_u64 *)p.ce_done + ti;
  const td_dev_u64 t0 = td_globaltimer();
  unsigned int spins = 0;
  td_dev_u64 seen;
  while ((seen = td_ld_acquire_sys(done)) < p.epoch) {
    if ((++spins & 63u) == 0) {
      if (*(volatile unsigned int *)&diag->failed)
        return false;
      if (td_globaltimer() - t0 > p.timeout_ns) {
        td_diag_record(diag, ti, 2u, ti, p.epoch, seen, 3);
        return false;
      }
    }
    __nanosleep(128);
  }
  return true;
}

__device__ void td_run_tile(const td_dev_task &t) {
  if (t.worker == TD_DEV_WORKER_CE_PROXY)
    return; /* the copy engine moved the bytes */
  switch (t.kind) {
#ifdef TD_HAS_GEMM
  case 1: td_tile_gemm(t); break;
#endif
#ifdef TD_HAS_COPY
  case 2: td_tile_copy(t); break;
#endif
#ifdef TD_HAS_REDUCE
  case 3: td_tile_reduce(t); break;
#endif
#ifdef TD_HAS_EWISE
  case 4: td_tile_ewise(t); break;
#endif
#ifdef TD_HAS_RMSNORM
  case 5: td_tile_rmsnorm(t); break;
#endif
  default: break; /* TD_TASK_NOP: waits and raises only */
  }
}

extern "C" __global__ void __launch_bounds__(TD_THREADS) td_exec_kernel(const td_dev_plan p) {
  __shared__ unsigned int s_task;
  __shared__ int s_go;
  const int role = blockIdx.x < p.nblocks[0] ? 0 : 1;
  const unsigned int n = p.nlist[role];
  const unsigned int *list = (const unsigned int *)p.list[role];
  td_dev_u64 *cursor = (td_dev_u64 *)p.cursor + role;
  const td_dev_u64 base = (p.epoch - 1) * (td_dev_u64)(n + p.nblocks[role]);
  const td_dev_task *tasks = (const td_dev_task *)p.tasks;
  const td_dev_raise *raises = (const td_dev_raise *)p.raises;
  td_dev_trace *trace = (td_dev_trace *)p.trace;
  for (;;) {
    if (threadIdx.x == 0) {
      const td_dev_u64 slot = atomicAdd(cursor, 1ull) - base;
      s_task = slot < n ? list[slot] : 0xffffffffu;
      s_go = 0;
      if (s_task != 0xffffffffu) {
        s_go = td_task_wait(p, s_task, tasks[s_task]) ? 1 : 0;
        if (s_go && trace)
          trace[s_task].start = td_globaltimer();
        if (s_go && tasks[s_task].worker == TD_DEV_WORKER_CE_PROXY)
          s_go = td_task_copy_engine(p, s_task) ? 1 : 0;
        if (s_go && tasks[s_task].worker == TD_DEV_WORKER_KQ_PROXY) {
          td_st_release_sys((td_dev_u64 *)p.ce_go + s_task, p.epoch);
          s_go = 2; /* handed off: the queue raises and marks it done */
        }
      }
    }
    __syncthreads();
    if (!s_go)
      break;
    if (s_go == 2) {
      __syncthreads(); /* as at the end of an iteration: s_task/s_go are rewritten next */
      continue;
    }
    const unsigned int ti = s_task;
    const td_dev_task t = tasks[ti];
#ifndef TD_EXEC_QUEUE
    td_run_tile(t);
#endif
    __syncthreads(); /* every thread's tile writes happen before thread 0's release */
    if (threadIdx.x == 0) {
      __threadfence_system();
      for (unsigned int k = 0; k < t.raise_count; k++) {
        const td_dev_raise r = raises[t.raise_first + k];
        td_red_add_release_sys((td_dev_u64 *)r.sig, r.value);
      }
      td_st_release_gpu((td_dev_u64 *)p.done + ti, p.epoch);
      if (trace) {
        trace[ti].end = td_globaltimer();
        trace[ti].block = blockIdx.x;
      }
    }
    /* s_task/s_go are rewritten next iteration only after this barrier. */
    __syncthreads();
  }
}

/* The same tiles launched as an ordinary grid, one block per task: the
 * baseline the executor's overhead is measured against (bench/), and a way to
 * test a tile without the persistent loop. */
extern "C" __global__ void __launch_bounds__(TD_THREADS) td_tile_grid_kernel(const td_dev_task *tasks) {
  td_run_tile(tasks[blockIdx.x]);
}

/* Kernel queue: one task of the schedule over a grid of sub-tiles, block b
 * taking sub-tile (b / ncols, b % ncols) of sub_rows x sub_cols output
 * elements. Each block narrows the views to its part (the rows of A and the
 * columns of B a GEMM sub-tile needs; the same window of every operand of an
 * element-wise, copy or reduce task; whole rows of an RMS norm, whose weight
 * row is shared) and runs the ordinary tile on it. No waits: the queue's
 * stream starts it only after the persistent kernel published ce_go. */
__device__ __forceinline__ void td_kq_narrow(td_dev_view &v, td_dev_i64 r0, td_dev_i64 c0, td_dev_i64 rows,
                                             td_dev_i64 cols) {
  v.ptr = (td_dev_u64)td_elem(v, r0, c0);
  v.rows = rows;
  v.cols = cols;
}

extern "C" __global__ void __launch_bounds__(TD_THREADS)
    td_kq_tile_kernel(const td_dev_task *tasks, unsigned int ti, long long sub_rows, long long sub_cols,
                      const td_dev_diag *diag) {
  if (*(volatile const unsigned int *)&diag->abort)
    return; /* released after a failed launch: inputs may be incomplete, write nothing (peers included) */
  td_dev_task t = tasks[ti];
  const td_dev_i64 ncols = (t.c.cols + sub_cols - 1) / sub_cols;
  const td_dev_i64 r0 = (td_dev_i64)(blockIdx.x / ncols) * sub_rows, c0 = (td_dev_i64)(blockIdx.x % ncols) * sub_cols;
  if (r0 >= t.c.rows || c0 >= t.c.cols)
    return;
  const td_dev_i64 rows = t.c.rows - r0 < sub_rows ? t.c.rows - r0 : sub_rows;
  const td_dev_i64 cols = t.c.cols - c0 < sub_cols ? t.c.cols - c0 : sub_cols;
  switch (t.kind) {
  case 1: /* GEMM: op(a) rows r0.., op(b) cols c0.., all of K */
    if (t.op & 1u)
      td_kq_narrow(t.a, 0, r0, t.a.rows, rows);
    else
      td_kq_narrow(t.a, r0, 0, rows, t.a.cols);
    if (t.op & 2u)
      td_kq_narrow(t.b, c0, 0, cols, t.b.cols);
    else
      td_kq_narrow(t.b, 0, c0, t.b.rows, cols);
    break;
  case 5: /* RMSNORM: whole rows (sub_cols covers them); b is the shared weight row */
    td_kq_narrow(t.a, r0, 0, rows, t.a.cols);
    break;
  default: /* COPY, REDUCE, EWISE: the same window of every operand */
    td_kq_narrow(t.a, r0, c0, rows, cols);
    if (t.kind == 4 && (t.op == 0u || t.op == 1u)) /* binary add/mul */
      td_kq_narrow(t.b, r0, c0, rows, cols);
    break;
  }
  td_kq_narrow(t.c, r0, c0, rows, cols);
  t.worker = 0;
  td_run_tile(t);
}

/* Kernel queue: after task ti's kernel on the same stream, make its writes
 * visible system-wide, raise its signals and mark it done (stream order puts
 * this after every block of that kernel). One thread. After a failed launch
 * the host sets diag->abort before it releases the queue: the task's inputs
 * may be incomplete, so it raises nothing (a peer would proceed on garbage
 * and succeed while this rank fails) and only marks itself done. */
extern "C" __global__ void td_kq_finish_kernel(const td_dev_plan p, unsigned int ti) {
  if (threadIdx.x != 0)
    return;
  const td_dev_task *tasks = (const td_dev_task *)p.tasks;
  const td_dev_raise *raises = (const td_dev_raise *)p.raises;
  const unsigned int first = tasks[ti].raise_first;
  const unsigned int count = *(volatile const unsigned int *)&((const td_dev_diag *)p.diag)->abort
                                 ? 0u : tasks[ti].raise_count;
  __threadfence_system();
  for (unsigned int k = 0; k < count; k++) {
    const td_dev_raise r = raises[first + k];
    td_red_add_release_sys((td_dev_u64 *)r.sig, r.value);
  }
  td_st_release_gpu((td_dev_u64 *)p.done + ti, p.epoch);
  if (p.trace) {
    td_dev_trace *trace = (td_dev_trace *)p.trace;
    trace[ti].end = td_globaltimer();
    trace[ti].block = 0xffffffffu; /* the kernel queue, not a persistent block */
  }
}
