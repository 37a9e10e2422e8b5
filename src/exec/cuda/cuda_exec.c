/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's setup and teardown (executor layer, cuda backend):
 * picks this rank's GPU, generates and JIT-compiles the persistent kernel for
 * the schedule (through the disk cache), allocates the device arena and
 * exchanges arenas with the peers, sizes the grid so the persistent kernels of
 * all ranks sharing one GPU are co-resident (refusing clearly when they cannot
 * be), and lays out the device tables.
 *
 * Block counts: opts.compute_workers / comm_workers, else from the GPU: the
 * blocks that fit at once (SMs x blocks per SM) divided by the ranks on this
 * GPU; one communication block when the schedule has communication or
 * copy-engine tasks (more with more such tasks, up to an eighth of the share),
 * the rest compute. A role never gets more blocks than tasks. Copy-engine
 * tasks are pulled by the communication blocks, which hand their bytes to the
 * copy-engine queue (copy_engine.c) when the device supports stream memory
 * operations, and copy them on the SMs otherwise. With the kernel queue
 * (kernel_queue.c) one block per role suffices: they only hand tasks off.
 *
 * Streams: each rank uses up to four (persistent kernel, copy engine, two
 * kernel-queue streams). When the most ranks on any GPU of the team times
 * that exceeds CUDA_DEVICE_MAX_CONNECTIONS (8 when unset), parked streams can
 * block peers' kernels in CUDA's shared hardware queues, so the kernel queue
 * is turned off, then the copy engine; the count comes from the exchanged
 * records, so every rank decides alike (td__cuda_stream_plan). The kernel is
 * therefore generated after the exchange.
 *
 * A device marked stuck (device_stuck.h: some executor's host wait on it
 * passed its deadline) is never synchronised again: creates on it fail, and
 * teardown leaves its device memory to the process's exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "exec/cuda/cuda_exec.h"
#include "exec/cuda/device_stuck.h"
#include "jit/jit.h"
#include "tdist/config.h"
#include "tdist/rma.h"
#include "tdist/symm.h"

#define TD__ALIGN(x, a) (((x) + (a)-1) / (a) * (a))

td_status td__cuda_fail(const td_exec *e, const char *what, cudaError_t err) {
  return td__error(TD_ERR_CUDA, "cuda executor: rank %d: %s failed: %s (%s)", e ? e->rank : -1, what,
                   cudaGetErrorName(err), cudaGetErrorString(err));
}
#define TD__CU(e, call)                                 \
  do {                                                  \
    cudaError_t td__ce_ = (call);                       \
    if (td__ce_ != cudaSuccess)                         \
      return td__cuda_fail((e), #call, td__ce_);        \
  } while (0)

static td_status td__pick_device(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess || count == 0)
    return td__error(TD_ERR_UNSUPPORTED,
                     "cuda executor: rank %d: no usable CUDA device (%s); use the cpu backend", e->rank,
                     ce != cudaSuccess ? cudaGetErrorString(ce) : "device count is 0");
  int64_t dev = -1;
  const char *env = getenv("TD_CUDA_DEVICE");
  if (env && *env)
    TD_CHECK(td_config_int("TD_CUDA_DEVICE", &dev));
  else
    dev = td_world_local_rank(td_team_world(e->team)) % count;
  if (dev >= count)
    return td__error(TD_ERR_INVALID_ARG, "cuda executor: rank %d: TD_CUDA_DEVICE=%lld but only %d devices",
                     e->rank, (long long)dev, count);
  cx->device = (int)dev;
  TD__CU(e, cudaSetDevice(cx->device));
  int major = 0, minor = 0;
  TD__CU(e, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, cx->device));
  TD__CU(e, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, cx->device));
  TD__CU(e, cudaDeviceGetAttribute(&cx->nsm, cudaDevAttrMultiProcessorCount, cx->device));
  if (major < 7)
    return td__error(TD_ERR_UNSUPPORTED, "cuda executor: rank %d: GPU sm_%d%d is older than sm_70", e->rank,
                     major, minor);
  cx->sm = major * 10 + minor;
  /* Hopper and later get their arch-specific variant (sm_90a) as the fast GEMM does. */
  snprintf(cx->arch, sizeof cx->arch, "sm_%d%s", cx->sm, cx->sm >= 90 ? "a" : "");
  return TD_OK;
}

static td_status td__compile(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  td__cuda_spec_for_schedule(e->sched, cx->sm, &cx->spec);
  TD_CHECK(td__cuda_kq_decide(cx));
  cx->spec.queue = cx->kq_enabled;
  char *src = NULL;
  TD_CHECK(td__cuda_codegen(&cx->spec, &src));
  td__jit_image img = {0};
  td_status st = td__jit_get(src, "td_exec.cu", cx->arch, NULL, 0, &img);
  free(src);
  if (st != TD_OK) {
    td__error_prefix("cuda executor: rank %d: ", e->rank);
    return st;
  }
  cudaError_t ce = cudaLibraryLoadData(&cx->lib, img.data, NULL, NULL, 0, NULL, NULL, 0);
  td__jit_image_free(&img);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "cudaLibraryLoadData (JIT executor image)", ce);
  TD__CU(e, cudaLibraryGetKernel(&cx->kernel, cx->lib, "td_exec_kernel"));
  TD__CU(e, cudaLibraryGetKernel(&cx->grid_kernel, cx->lib, "td_tile_grid_kernel"));
  TD__CU(e, cudaLibraryGetKernel(&cx->kq_tile_kernel, cx->lib, "td_kq_tile_kernel"));
  TD__CU(e, cudaLibraryGetKernel(&cx->kq_finish_kernel, cx->lib, "td_kq_finish_kernel"));
  TD__CU(e, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cx->occupancy, (const void *)cx->kernel,
                                                           cx->spec.threads, 0));
  return TD_OK;
}

/* Phase 1 of the exchange: every rank publishes its GPU and arena in its
 * record (cx->rec, already allocated); the next agreement round is the
 * barrier after which peers read it. */
static td_status td__publish_record(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  memset(cx->rec, 0, sizeof *cx->rec);
  cx->rec->pid = (int32_t)getpid();
  cx->rec->device = cx->device;
  TD__CU(e, cudaDeviceGetPCIBusId(cx->rec->bus_id, sizeof cx->rec->bus_id, cx->device));
  cx->rec->arena = (uint64_t)(uintptr_t)cx->arena;
  /* Only ranks of other processes need the handle; where IPC is unavailable
   * (some containers), those ranks fail below with a message instead. */
  cx->rec->ipc_ok = cudaIpcGetMemHandle(&cx->rec->ipc, cx->arena) == cudaSuccess;
  cudaGetLastError();
  return TD_OK;
}

/* Reads every rank's record (after the round that follows the publishing):
 * peer arenas reachable here, and the stream budget. */
static td_status td__read_records(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  cx->ranks_on_gpu = 0;
  cx->max_ranks_per_gpu = 0;
  for (int p = 0; p < e->nranks; p++) {
    const td__cuda_rank_rec *r = td_symm_ptr(e->team, cx->rec, p);
    if (!r)
      return td_last_error()[0] ? TD_ERR_INVALID_ARG : TD_ERR_INTERNAL;
    if (strcmp(r->bus_id, cx->rec->bus_id) == 0)
      cx->ranks_on_gpu++;
    int on_its_gpu = 0; /* the most ranks on any one GPU: the same on every rank */
    for (int q = 0; q < e->nranks; q++) {
      const td__cuda_rank_rec *o = td_symm_ptr(e->team, cx->rec, q);
      on_its_gpu += o && strcmp(o->bus_id, r->bus_id) == 0;
    }
    if (on_its_gpu > cx->max_ranks_per_gpu)
      cx->max_ranks_per_gpu = on_its_gpu;
    if (p == e->rank) {
      cx->peer_base[p] = r->arena;
    } else if (r->pid == cx->rec->pid) {
      /* Same process: the address is valid here (UVA); reach another GPU through peer access. */
      if (r->device != cx->device) {
        cudaError_t ce = cudaDeviceEnablePeerAccess(r->device, 0);
        if (ce != cudaSuccess && ce != cudaErrorPeerAccessAlreadyEnabled)
          return td__cuda_fail(e, "cudaDeviceEnablePeerAccess", ce);
        cudaGetLastError();
      }
      cx->peer_base[p] = r->arena;
    } else {
      void *ptr = NULL;
      if (!r->ipc_ok)
        return td__error(TD_ERR_UNSUPPORTED, "cuda executor: rank %d: rank %d runs in another process and "
                         "could not export its device memory (CUDA IPC unavailable); run the ranks as "
                         "threads of one process (local transport)", e->rank, p);
      TD__CU(e, cudaIpcOpenMemHandle(&ptr, r->ipc, cudaIpcMemLazyEnablePeerAccess));
      cx->peer_base[p] = (uint64_t)(uintptr_t)ptr;
      cx->peer_opened[p] = 1;
    }
  }
  td__cuda_stream_plan(cx->max_ranks_per_gpu, td__cuda_max_connections(), &cx->streams_kq_ok, &cx->streams_ce_ok);
  return TD_OK;
}

/* Counts per class; copy-engine tasks go to the communication role. */
static void td__count_roles(const td_schedule *s, uint32_t n[2]) {
  n[0] = n[1] = 0;
  for (uint32_t i = 0; i < s->ntasks; i++)
    n[s->tasks[i].worker == TD_WORKER_COMPUTE ? 0 : 1]++;
}

/* Phase 2: choose this rank's blocks and publish the count in its record
 * (peers read it after the next agreement round, in td__check_grid). */
static void td__choose_blocks(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  uint32_t n[2];
  td__count_roles(e->sched, n);
  const int fit = cx->nsm * cx->occupancy;
  const int share = fit / (cx->ranks_on_gpu > 0 ? cx->ranks_on_gpu : 1);
  int comm = e->opts.comm_workers, comp = e->opts.compute_workers;
  if (cx->kq_enabled) {
    /* Every task's work runs on the queues; these blocks only check waits and
     * hand tasks off, and each SM one of them holds is an SM the GEMMs lose. */
    if (comm == 0)
      comm = 1;
    if (comp == 0)
      comp = 1;
  }
  if (comm == 0) {
    comm = n[1] == 0 ? 0 : 1 + (int)(n[1] / 64);
    if (comm > share / 8 && share / 8 >= 1)
      comm = share / 8;
  }
  if (comp == 0)
    comp = share - comm;
  if (comm > (int)n[1])
    comm = (int)n[1];
  if (comp > (int)n[0])
    comp = (int)n[0];
  if (n[0] > 0 && comp < 1)
    comp = 1;
  if (n[1] > 0 && comm < 1)
    comm = 1;
  cx->nblocks[0] = comp;
  cx->nblocks[1] = comm;
  cx->rec->nblocks = comp + comm;
}

/* Phase 2, after the round: check that all ranks on the GPU fit together. */
static td_status td__check_grid(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  const int fit = cx->nsm * cx->occupancy;
  int total = 0;
  for (int p = 0; p < e->nranks; p++) {
    const td__cuda_rank_rec *r = td_symm_ptr(e->team, cx->rec, p);
    if (r && strcmp(r->bus_id, cx->rec->bus_id) == 0)
      total += r->nblocks;
  }
  /* Queue GEMMs fill the SMs no persistent block holds (a GEMM block needs a whole SM). */
  cx->gemm_sms = cx->nsm - total > cx->nsm / 4 ? cx->nsm - total : cx->nsm / 4;
  if (cx->gemm_sms < 1)
    cx->gemm_sms = 1;
  /* Every rank computed the same total, so all refuse together. */
  if (total > fit)
    return td__error(TD_ERR_UNSUPPORTED,
                     "cuda executor: rank %d: the persistent kernels of the %d ranks sharing GPU %s need %d "
                     "blocks of %d threads at once, but only %d fit (%d SMs x %d); lower compute_workers / "
                     "comm_workers or use fewer ranks per GPU",
                     e->rank, cx->ranks_on_gpu, cx->rec->bus_id, total, cx->spec.threads, fit, cx->nsm,
                     cx->occupancy);
  return TD_OK;
}

/* Device tables in one allocation; `plan` gets their addresses. */
static td_status td__alloc_tables(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  const td_schedule *s = e->sched;
  uint32_t n[2];
  td__count_roles(s, n);
  size_t off = 0, o_tasks, o_deps, o_waits, o_raises, o_list0, o_list1, o_cursor, o_done, o_diag, o_trace,
         o_ce_go, o_ce_done;
#define TD__PLACE(var, bytes) (var = off, off = TD__ALIGN(off + (bytes), 16))
  TD__PLACE(o_tasks, (size_t)s->ntasks * sizeof(td_dev_task));
  TD__PLACE(o_deps, (size_t)s->ndeps * 4);
  TD__PLACE(o_waits, (size_t)s->nwaits * sizeof(td_dev_wait));
  TD__PLACE(o_raises, (size_t)s->nraises * sizeof(td_dev_raise));
  TD__PLACE(o_list0, (size_t)n[0] * 4);
  TD__PLACE(o_list1, (size_t)n[1] * 4);
  TD__PLACE(o_cursor, 16);
  TD__PLACE(o_done, (size_t)s->ntasks * 8);
  TD__PLACE(o_diag, sizeof(td_dev_diag));
  TD__PLACE(o_trace, (size_t)s->ntasks * sizeof(td_dev_trace));
  TD__PLACE(o_ce_go, (size_t)s->ntasks * 8);
  TD__PLACE(o_ce_done, (size_t)s->ntasks * 8);
#undef TD__PLACE
  cx->tables_size = off;
  TD__CU(e, cudaMalloc((void **)&cx->tables, off));
  TD__CU(e, cudaMemset(cx->tables, 0, off)); /* cursors, done epochs and diag start at 0, once */
  const uint64_t b = (uint64_t)(uintptr_t)cx->tables;
  td_dev_plan *p = &cx->plan;
  memset(p, 0, sizeof *p);
  p->tasks = b + o_tasks, p->deps = b + o_deps, p->waits = b + o_waits, p->raises = b + o_raises;
  p->list[0] = b + o_list0, p->list[1] = b + o_list1;
  p->cursor = b + o_cursor, p->done = b + o_done, p->diag = b + o_diag;
  p->trace = e->opts.trace ? b + o_trace : 0;
  p->ce_go = b + o_ce_go, p->ce_done = b + o_ce_done;
  if (cx->ce_enabled || cx->kq_enabled) {
    /* The go words go to mapped host memory: the hand-off loop (handoff.c)
     * polls them without a CUDA call. Epochs only grow, so zero once. */
    void *dptr = NULL;
    TD__CU(e, cudaHostAlloc((void **)&cx->go_host, ((size_t)s->ntasks + 1) * 8,
                            cudaHostAllocMapped | cudaHostAllocPortable));
    memset(cx->go_host, 0, ((size_t)s->ntasks + 1) * 8);
    TD__CU(e, cudaHostGetDevicePointer(&dptr, cx->go_host, 0));
    p->ce_go = (uint64_t)(uintptr_t)dptr;
  }
  p->nlist[0] = n[0], p->nlist[1] = n[1];
  p->nblocks[0] = (unsigned)cx->nblocks[0], p->nblocks[1] = (unsigned)cx->nblocks[1];
  p->timeout_ns = (uint64_t)e->opts.timeout_ms * 1000000u;
  /* The static parts: dependency indices and the role lists, in schedule order. */
  uint32_t *lists = malloc(((size_t)n[0] + n[1] + 1) * 4);
  if (!lists)
    return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: no memory for the role lists", e->rank);
  uint32_t k0 = 0, k1 = n[0];
  for (uint32_t i = 0; i < s->ntasks; i++)
    lists[s->tasks[i].worker == TD_WORKER_COMPUTE ? k0++ : k1++] = i;
  cudaError_t ce = cudaMemcpy(cx->tables + o_list0, lists, (size_t)n[0] * 4, cudaMemcpyHostToDevice);
  if (ce == cudaSuccess)
    ce = cudaMemcpy(cx->tables + o_list1, lists + n[0], (size_t)n[1] * 4, cudaMemcpyHostToDevice);
  free(lists);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "cudaMemcpy (role lists)", ce);
  TD__CU(e, cudaMemcpy(cx->tables + o_deps, s->deps, (size_t)s->ndeps * 4, cudaMemcpyHostToDevice));
  cx->h_tasks = calloc((size_t)s->ntasks + 1, sizeof *cx->h_tasks);
  cx->h_trace = calloc((size_t)s->ntasks + 1, sizeof *cx->h_trace);
  cx->bound_at_upload = calloc((size_t)td_plan_nbuffers(e->plan) + 1, sizeof(void *));
  if (!cx->h_tasks || !cx->h_trace || !cx->bound_at_upload)
    return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: no memory for the task table", e->rank);
  return TD_OK;
}

static td_status td__alloc_memory(td__cuda_exec *cx) {
  td_exec *e = cx->exec;
  const int32_t nb = td_plan_nbuffers(e->plan);
  cx->buf_off = calloc((size_t)nb + 1, sizeof *cx->buf_off);
  cx->local = calloc((size_t)nb + 1, sizeof *cx->local);
  cx->peer_base = calloc((size_t)e->nranks, sizeof *cx->peer_base);
  cx->peer_opened = calloc((size_t)e->nranks, sizeof *cx->peer_opened);
  if (!cx->buf_off || !cx->local || !cx->peer_base || !cx->peer_opened)
    return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: no memory for the buffer table", e->rank);
  size_t off = TD__ALIGN((size_t)td_plan_nsignals(e->plan) * 8, 256);
  for (int32_t b = 0; b < nb; b++) {
    const td_buffer_desc *d = td_plan_buffer(e->plan, b);
    const size_t bytes = (size_t)(d->rows * d->cols) * td_dtype_size(d->dtype);
    if (d->kind == TD_BUF_SYMM) {
      cx->buf_off[b] = off;
      off = TD__ALIGN(off + bytes, 256);
    } else if (d->kind == TD_BUF_LOCAL) {
      TD__CU(e, cudaMalloc(&cx->local[b], bytes ? bytes : 256));
      TD__CU(e, cudaMemset(cx->local[b], 0, bytes ? bytes : 256));
    }
  }
  cx->arena_size = off > 0 ? off : 256;
  cudaError_t ce = cudaMalloc((void **)&cx->arena, cx->arena_size);
  if (ce == cudaErrorMemoryAllocation)
    return td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: cannot allocate the %zu-byte device arena "
                     "(signals and symm buffers)", e->rank, cx->arena_size);
  if (ce != cudaSuccess)
    return td__cuda_fail(e, "cudaMalloc (arena)", ce);
  TD__CU(e, cudaMemset(cx->arena, 0, cx->arena_size)); /* signal words and symm buffers start zeroed */
  return TD_OK;
}

/* With the device stuck, only host memory is freed: cudaFree, cudaLibraryUnload
 * and cudaIpcCloseMemHandle synchronise the device and would wait forever for
 * the stuck work (the device memory is left to the process's exit). */
static void td__free_all(td__cuda_exec *cx) {
  if (!cx)
    return;
  td_exec *e = cx->exec;
  if (td__cuda_device_stuck(cx->device))
    goto host;
  if (cx->stream && cx->own_stream)
    cudaStreamDestroy(cx->stream);
  td__cuda_ce_free(cx);
  td__cuda_kq_free(cx);
  for (int p = 0; cx->peer_opened && p < e->nranks; p++)
    if (cx->peer_opened[p])
      cudaIpcCloseMemHandle((void *)(uintptr_t)cx->peer_base[p]);
  for (int32_t b = 0; cx->local && b < td_plan_nbuffers(e->plan); b++)
    cudaFree(cx->local[b]);
  cudaFree(cx->arena);
  cudaFree(cx->tables);
  if (cx->go_host)
    cudaFreeHost(cx->go_host);
  if (cx->lib)
    cudaLibraryUnload(cx->lib);
host:
  if (td__cuda_device_stuck(cx->device)) {
    free(cx->ce_tasks);
    free(cx->kq_tasks[0]);
    free(cx->kq_tasks[1]);
  }
  free(cx->buf_off);
  free(cx->local);
  free(cx->peer_base);
  free(cx->peer_opened);
  free(cx->h_tasks);
  free(cx->h_trace);
  free(cx->bound_at_upload);
  free(cx);
}

/* One agreement point of create. Its deadline is the world's, as the team
 * barriers' it replaced: the round after the kernel waits for the slowest
 * rank's JIT compile, which opts.timeout_ms (a run's waits) does not bound. */
static td_status td__create_agree(td_exec *e, int op, td_status mine) {
  return td__agree_create_step(e->agree, op, mine, 0, td_world_timeout_ms(td_team_world(e->team)));
}

/* Frees what create made (the record collectively: every rank has it or
 * none, as all stop after the same round) and returns `st` with the message
 * it came with (teardown errors are secondary). */
static td_status td__create_failed(td_exec *e, td__cuda_exec *cx, td_status st) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", td_last_error());
  if (cx && cx->rec)
    td_symm_free(e->team, cx->rec);
  td__free_all(cx);
  return td__error(st, "%s", msg);
}

/* Rank-local work runs in stretches; each ends in an agreement round
 * (td__agree_create_step) that carries its verdict, so a rank whose device,
 * record, kernel compile or tables failed still takes part, and every rank
 * stops after the same round with that rank's status and reason. The rounds
 * also serve as the barriers: after the record round every record is
 * readable, after the kernel round every block count, and after the last one
 * every rank's signal words are zeroed (no peer raises into them before). */
static td_status td__cuda_create(td_exec *e) {
  td__cuda_exec *cx = calloc(1, sizeof *cx);
  td_status st = cx ? TD_OK : td__error(TD_ERR_NO_MEMORY, "cuda executor: rank %d: out of memory", e->rank);
  if (cx)
    cx->exec = e;
  if (st == TD_OK)
    st = td__pick_device(cx);
  if (st == TD_OK && td__cuda_device_stuck(cx->device))
    st = td__error(TD_ERR_STATE, "cuda executor: rank %d: GPU %d has work of an earlier executor of this process "
                   "that never finished (a host wait passed its deadline), so nothing on it can be synchronised "
                   "any more; restart the process (and see that error's remedy)", e->rank, cx->device);
  if (st == TD_OK)
    st = td__alloc_memory(cx);
  if (st == TD_OK)
    st = td__exec_fault_check(e->rank, TD__EXEC_STEP_CUDA_DEVICE);
  st = td__create_agree(e, TD__AGREE_CREATE_DEVICE, st);
  if (st != TD_OK)
    return td__create_failed(e, cx, st);
  /* A checked collective allocation: it fails on every rank or on none. */
  st = td_symm_alloc(e->team, sizeof *cx->rec, 64, (void **)&cx->rec);
  if (st != TD_OK)
    return td__create_failed(e, cx, st);
  st = td__publish_record(cx);
  if (st == TD_OK)
    st = td__exec_fault_check(e->rank, TD__EXEC_STEP_CUDA_RECORD);
  st = td__create_agree(e, TD__AGREE_CREATE_RECORDS, st);
  if (st != TD_OK)
    return td__create_failed(e, cx, st);
  st = td__read_records(cx);
  if (st == TD_OK)
    st = td__compile(cx); /* after the exchange: the stream count decides the kernel queue */
  if (st == TD_OK)
    td__choose_blocks(cx);
  if (st == TD_OK)
    st = td__exec_fault_check(e->rank, TD__EXEC_STEP_CUDA_KERNEL);
  st = td__create_agree(e, TD__AGREE_CREATE_KERNEL, st);
  if (st != TD_OK)
    return td__create_failed(e, cx, st);
  st = td__check_grid(cx); /* every rank computes the same total, so all refuse together */
  if (st == TD_OK)
    st = td__cuda_ce_setup(cx);
  if (st == TD_OK)
    st = td__cuda_kq_setup(cx);
  if (st == TD_OK)
    st = td__alloc_tables(cx);
  if (st == TD_OK) {
    if (e->opts.cuda_stream) {
      cx->stream = (cudaStream_t)e->opts.cuda_stream;
    } else {
      cudaError_t ce = cudaStreamCreateWithFlags(&cx->stream, cudaStreamNonBlocking);
      if (ce != cudaSuccess)
        st = td__cuda_fail(e, "cudaStreamCreateWithFlags", ce);
      cx->own_stream = 1;
    }
  }
  if (st == TD_OK) {
    /* No peer may raise into this rank's signals before they are zeroed:
     * the device work is finished before the last round. */
    if (td__cuda_device_stuck(cx->device)) { /* marked meanwhile by another executor of this process */
      st = td__error(TD_ERR_STATE, "cuda executor: rank %d: GPU %d got work that never finished (another "
                     "executor's host wait passed its deadline) while this executor was created; its device "
                     "memory is left to the process's exit", e->rank, cx->device);
    } else {
      cudaError_t ce = cudaDeviceSynchronize();
      if (ce != cudaSuccess)
        st = td__cuda_fail(e, "cudaDeviceSynchronize", ce);
    }
  }
  if (st == TD_OK)
    st = td__exec_fault_check(e->rank, TD__EXEC_STEP_CUDA_TABLES);
  st = td__create_agree(e, TD__AGREE_CREATE_TABLES, st);
  if (st != TD_OK)
    return td__create_failed(e, cx, st);
  e->impl = cx;
  return TD_OK;
}

static td_status td__cuda_buffer(td_exec *e, int32_t buffer, void **out) {
  td__cuda_exec *cx = e->impl;
  const td_buffer_desc *d = td_plan_buffer(e->plan, buffer);
  *out = d->kind == TD_BUF_SYMM ? (void *)(cx->arena + cx->buf_off[buffer]) : cx->local[buffer];
  return TD_OK;
}

/* With e->abandon (peers gone or stuck) no collective call is made: the
 * record is left to the team, as cpu_exec.c does. With the device stuck (this
 * executor's work or another's never finished), device memory is left to the
 * process's exit (td__free_all) and destroy says so. */
static td_status td__cuda_destroy(td_exec *e) {
  td__cuda_exec *cx = e->impl;
  if (!cx)
    return TD_OK;
  cudaSetDevice(cx->device);
  td__cuda_stream_wait_quiet(cx, cx->stream); /* marks it stuck when the work never ends */
  td_status st = TD_OK;
  if (!e->abandon) {
    /* No peer may still read or raise into this arena when it is freed. */
    st = td_team_barrier(e->team);
    if (cx->rec) {
      td_status st2 = td_symm_free(e->team, cx->rec);
      if (st == TD_OK)
        st = st2;
    }
  }
  const int stuck = cx->stuck, dev_stuck = td__cuda_device_stuck(cx->device);
  const int rank = e->rank, dev = cx->device;
  td__free_all(cx);
  e->impl = NULL;
  if (st != TD_OK)
    return st;
  if (stuck)
    return td__error(TD_ERR_TIMEOUT, "cuda executor: rank %d: destroyed with GPU work that never finished; its "
                     "device memory is left to the process's exit", rank);
  if (dev_stuck)
    return td__error(TD_ERR_STATE, "cuda executor: rank %d: GPU %d holds work of another executor of this process "
                     "that never finished, and freeing device memory would wait for it forever; this executor's "
                     "device memory is left to the process's exit", rank, dev);
  return TD_OK;
}

td_status td__cuda_run(td_exec *e); /* cuda_run.c */

const td__exec_backend td__exec_backend_cuda = {
    .name = "cuda",
    .create = td__cuda_create,
    .buffer = td__cuda_buffer,
    .run = td__cuda_run,
    .destroy = td__cuda_destroy,
};
