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
 * (release, system scope), the stream (waiting on that word) copies and writes
 * ce_done[t] = epoch, and thread 0 waits for that before raising. No SM moves
 * the data.
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
      }
    }
    __syncthreads();
    if (!s_go)
      break;
    const unsigned int ti = s_task;
    const td_dev_task t = tasks[ti];
    td_run_tile(t);
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
