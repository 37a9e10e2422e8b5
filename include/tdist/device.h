/* SPDX-License-Identifier: Apache-2.0
 * Device primitives: one OpenSHMEM-style API for CPU tile code and CUDA
 * kernels (primitives layer, device side).
 *
 * A td_dev_ctx is a small plain value built once on the host (from a td_team
 * for CPU tiles, from a CUDA local world or an NCCL transport for kernels) and
 * passed by value into kernels and tile functions. It carries the team rank and
 * size, the base address of every LSA peer's symmetric heap, a signal area for
 * the block barrier, the deadline of every wait and a host-visible diagnostic
 * buffer. The functions below take a pointer to it as first argument.
 *
 * Naming: every device function is `td_dev_<openshmem name>[_nbi][_warp|_block]`
 * so nothing collides with the host API of rma.h (td_putmem, td_quiet, ...).
 * Thread forms are called by one thread; _warp forms by all 32 lanes of a warp
 * with the same arguments; _block forms by every thread of the block with the
 * same arguments. On the CPU a "block" is one worker thread, so warp and block
 * forms equal the thread form.
 *
 * The bodies live in tdist/device/cpu.h (C11-style atomics on the host
 * symmetric heap; GCC/Clang __atomic builtins so C++ can include it too) and
 * tdist/device/cuda.h (PTX: ld.acquire / st.release / red.release /
 * fence.acq_rel at cta, gpu or sys scope, %globaltimer deadlines). Which one
 * is used depends on the compiler: nvcc and NVRTC see the CUDA bodies
 * (TD_DEVICE = __device__ inline), a C compiler the CPU ones
 * (TD_DEVICE = static inline). Under NVRTC this header includes no system
 * header (it defines the few fixed-width types it needs), so JIT-compiled
 * kernels can include it as is.
 *
 * Memory model (docs/architecture.md, "Device primitives", has the long form):
 *  - Puts and gets are plain loads/stores through td_dev_symm_at: a blocking
 *    put returns when the source may be reused; its data is *visible* to the
 *    peer only after a release (putmem_signal's signal, td_dev_notify,
 *    td_dev_signal_op after td_dev_fence, td_dev_quiet, a barrier).
 *  - _nbi forms may also be completed by td_dev_quiet; on LSA peers they are
 *    the same stores as the blocking forms.
 *  - Signal updates (signal_op, the signal of putmem_signal, notify, barrier)
 *    are release operations at system scope; signal waits are acquire at
 *    system scope: after td_dev_signal_wait_until returns, every write the
 *    signalling thread (or, for _warp/_block forms, its warp or block) made
 *    before the signal is visible to the waiting thread. _block waits end with
 *    a block barrier so the whole block may then read the data.
 *  - td_dev_ld_acquire / td_dev_st_release give the same pairing at the scope
 *    asked for: TD_SCOPE_BLOCK (threads of one block), TD_SCOPE_GPU (every
 *    block on one device, i.e. ranks sharing a GPU), TD_SCOPE_SYS (other
 *    devices and the host).
 *  - td_dev_fence orders this thread's earlier puts before its later puts and
 *    signals (to every peer); td_dev_quiet makes them all complete and visible
 *    system-wide.
 *
 * Deadlines: every wait has the context's deadline (timeout_ns, from
 * TD_TIMEOUT_MS). On expiry the first failing wait writes a
 * td_dev_diagnostic (rank, signal owner and heap offset, comparison, expected
 * and observed value, block and thread) and then, on the GPU, traps (which
 * ends the CUDA context: run such kernels where that is acceptable) unless
 * the context has TD_DEV_RETURN_ON_TIMEOUT, in which case the wait returns
 * TD_ERR_TIMEOUT and later waits of other blocks return TD_ERR_PEER_FAILED.
 * On the CPU a wait always returns TD_ERR_TIMEOUT with the thread's last-error
 * message set. The host turns a diagnostic into a status and a message with
 * td_dev_diagnostic_status(). */
#ifndef TDIST_DEVICE_H
#define TDIST_DEVICE_H

#if defined(__CUDACC_RTC__)
/* NVRTC has no system headers: the fixed-width types this API uses, with the
 * same widths as on the LP64 host. Define TD_DEV_HAVE_STDINT before including
 * this header if your JIT source already defines them. */
#ifndef TD_DEV_HAVE_STDINT
typedef unsigned long uint64_t;
typedef long int64_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned long uintptr_t;
#endif
/* rma.h cannot be compiled by NVRTC; the two enums the device API needs, with
 * the same names and values. */
typedef enum td_sigop { TD_SIGNAL_SET = 0, TD_SIGNAL_ADD = 1 } td_sigop;
typedef enum td_cmp {
  TD_CMP_EQ = 0,
  TD_CMP_NE = 1,
  TD_CMP_GT = 2,
  TD_CMP_GE = 3,
  TD_CMP_LT = 4,
  TD_CMP_LE = 5
} td_cmp;
/* status.h declares host functions, which NVRTC refuses: the statuses a
 * device wait returns, with status.h's values (its guard is set so a later
 * include is skipped). */
#ifndef TDIST_STATUS_H
#define TDIST_STATUS_H
typedef enum td_status { TD_OK = 0, TD_ERR_TIMEOUT = 30, TD_ERR_PEER_FAILED = 31 } td_status;
#endif
#else
#include <stddef.h>
#include <stdint.h>

#include "tdist/rma.h"
#include "tdist/status.h"
#endif

#if defined(__CUDACC__)
#define TD_DEVICE static __device__ __forceinline__
#else
#define TD_DEVICE static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Most team members a device context can address (its peer table is inline
 * so kernels need no extra load to find a peer). */
#define TD_DEV_MAX_PEERS 64

/** Memory scope of td_dev_ld_acquire / td_dev_st_release / td_dev_wait_until_all. */
typedef enum td_dev_scope {
  TD_SCOPE_BLOCK = 0, /* threads of one thread block (PTX .cta) */
  TD_SCOPE_GPU = 1,   /* all threads of one device, all ranks sharing it (PTX .gpu) */
  TD_SCOPE_SYS = 2,   /* other devices and the host (PTX .sys) */
} td_dev_scope;

/** td_dev_ctx.flags bits. */
#define TD_DEV_CTX_CUDA 0x1u                 /* pointers are device addresses */
#define TD_DEV_RETURN_ON_TIMEOUT 0x2u        /* GPU: a timed-out wait returns instead of trapping */

/** What the first wait that passed its deadline saw. Lives in host-visible
 * memory (pinned, mapped for the GPU). `state` is 0 while nothing failed and
 * 2 once the record is complete (TD_DEV_DIAG_BAD_PE, CPU: a call named a pe
 * outside the team; owner = that pe, expected = n_pes). Offsets are bytes
 * from the start of the owner's symmetric heap; UINT64_MAX when the word was
 * not in a heap. */
#define TD_DEV_DIAG_BAD_PE 3u
typedef struct td_dev_diagnostic {
  uint32_t state;
  int32_t rank;      /* team rank that waited */
  int32_t owner;     /* team rank whose heap holds the word (the waiter for signals) */
  int32_t block;     /* GPU: linear block index; CPU: ctx->worker */
  int32_t thread;    /* GPU: linear thread index in the block; CPU: 0 */
  uint32_t cmp;      /* td_cmp */
  uint64_t offset;   /* heap offset of the word */
  uint64_t expected; /* value the comparison needed */
  uint64_t observed; /* value last read */
  uint64_t waited_ns;
} td_dev_diagnostic;

/** The device context. Build it with td_dev_ctx_cpu() (CPU tiles),
 * td_cuda_local_ctx() (tdist/device/cuda_local.h) or td_nccl_ctx()
 * (tdist/device/nccl.h); copy it freely; it stays valid while the object it
 * came from lives. Fields are read by the inline bodies; treat them as
 * read-only except `worker`, which a CPU executor may set per thread. */
typedef struct td_dev_ctx {
  int32_t rank;                 /* this rank's number in the team */
  int32_t n_pes;                /* team size, at most TD_DEV_MAX_PEERS */
  int32_t world_rank;           /* this rank in the world the team belongs to */
  int32_t worker;               /* CPU: worker number used in diagnostics */
  uint32_t flags;               /* TD_DEV_* bits */
  uint32_t pad0;
  uint64_t heap_size;           /* bytes of each rank's symmetric heap */
  uint64_t timeout_ns;          /* deadline of each wait */
  td_dev_diagnostic *diag;      /* host-visible diagnostic record */
  uint32_t *diag_lock;          /* claims the record (device memory on the GPU) */
  uint64_t *barrier_sig;        /* symmetric, n_pes words: barrier epochs received */
  uint64_t *barrier_epoch;      /* this rank's barrier count (not symmetric) */
  void *host;                   /* CPU: the td_team (waits sleep, signals wake); GPU: NULL */
  uintptr_t peer_base[TD_DEV_MAX_PEERS]; /* heap base of each team rank; 0: not an LSA peer */
} td_dev_ctx;

/* ---------------------------------------------------------------------------
 * Device API (declarations for reading; bodies in device/cpu.h, device/cuda.h).
 * pe is a team rank. dest (put) and src (get) are *this rank's* symmetric
 * addresses; the functions translate them to the peer's copy. bytes may be 0.
 * On the GPU arguments are not range-checked (a bad pe or address is
 * undefined behaviour) unless TD_DEV_CHECK_PE is defined before including
 * this header: then a pe outside 0..n_pes-1 traps. On the CPU the check is
 * always on and cheap: a put, get or signal with such a pe writes nothing and
 * records the diagnostic (td_dev_cpu_bad_pe; td_dev_diagnostic_status gives
 * TD_ERR_INVALID_ARG), td_dev_symm_at returns NULL, and a negative count to
 * td_dev_wait_until_all* returns TD_ERR_INVALID_ARG. Addresses are not
 * checked.
 *
 * int   td_dev_my_pe(const td_dev_ctx *ctx);
 * int   td_dev_n_pes(const td_dev_ctx *ctx);
 * void *td_dev_symm_at(const td_dev_ctx *ctx, const void *ptr, int pe);
 *       Peer pe's copy of symmetric address ptr; NULL when pe is not an LSA peer.
 *
 * void td_dev_putmem[_nbi][_warp|_block](const td_dev_ctx *ctx, void *dest,
 *                                        const void *src, size_t bytes, int pe);
 * void td_dev_getmem[_nbi][_warp|_block](const td_dev_ctx *ctx, void *dest,
 *                                        const void *src, size_t bytes, int pe);
 * void td_dev_putmem_signal[_nbi][_warp|_block](const td_dev_ctx *ctx, void *dest,
 *        const void *src, size_t bytes, uint64_t *sig, uint64_t value, td_sigop op, int pe);
 *       Put, then (after the warp/block's stores) one release update of pe's
 *       copy of sig.
 * void td_dev_signal_op(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value,
 *                       td_sigop op, int pe);
 *       Release update (set or atomic add) of pe's copy of sig; orders this
 *       thread's earlier writes only. td_dev_notify[_block] first makes the
 *       whole block's earlier writes visible (fence), so use it after plain
 *       stores through td_dev_symm_at.
 * void td_dev_notify[_block](const td_dev_ctx *ctx, uint64_t *sig, uint64_t value,
 *                            td_sigop op, int pe);
 * uint64_t td_dev_signal_fetch(const td_dev_ctx *ctx, const uint64_t *sig);
 *       Acquire read of this rank's copy of sig.
 * td_status td_dev_signal_wait_until[_block](const td_dev_ctx *ctx, uint64_t *sig,
 *                                           td_cmp cmp, uint64_t value);
 *       Waits until this rank's sig compares to value (acquire, system scope).
 *       TD_OK, or on deadline expiry: CPU TD_ERR_TIMEOUT (message set) or
 *       TD_ERR_PEER_FAILED; GPU trap, or TD_ERR_TIMEOUT / TD_ERR_PEER_FAILED
 *       with TD_DEV_RETURN_ON_TIMEOUT.
 * td_status td_dev_wait_until_all[_warp|_block](const td_dev_ctx *ctx, uint64_t *sigs,
 *                                      int n, td_cmp cmp, uint64_t value, td_dev_scope scope);
 *       Triton-distributed's wait(ptrs, n, scope, acquire): waits until every
 *       one of the n contiguous words sigs[0..n) compares to value; the lanes
 *       of the warp/block share the words. Errors as signal_wait_until.
 * uint64_t td_dev_ld_acquire(const uint64_t *p, td_dev_scope scope);
 * void     td_dev_st_release(uint64_t *p, uint64_t v, td_dev_scope scope);
 * void td_dev_fence(const td_dev_ctx *ctx);
 * void td_dev_quiet(const td_dev_ctx *ctx);
 * td_status td_dev_barrier_all_block(const td_dev_ctx *ctx);
 *       Quiet, then barrier over all team ranks. Called by every thread of
 *       exactly one block per rank at a time (all ranks' blocks must be
 *       resident at once on the GPU). Epoch-based: needs no reset. Errors as
 *       signal_wait_until.
 * ------------------------------------------------------------------------- */

#if !defined(__CUDACC__)
/* ---- Host side (C only): contexts for CPU tile code ---------------------- */

/** Builds the device context of the calling rank of `team` for CPU tile code.
 * Collective over the team the first time it is called for that team (it
 * allocates the barrier's signal area, n_pes words, on the symmetric heap);
 * later calls on the same team return the same context without communicating.
 * Resources go with the team (td_team_destroy / td_world_finalize).
 * Errors: TD_ERR_INVALID_ARG (NULL argument), TD_ERR_UNSUPPORTED (team larger
 * than TD_DEV_MAX_PEERS: names the size), TD_ERR_NO_MEMORY,
 * TD_ERR_HEAP_EXHAUSTED, TD_ERR_TIMEOUT (a member never called). *out is
 * written only on success. One thread per rank, like every team call. */
td_status td_dev_ctx_cpu(td_team *team, td_dev_ctx *out);

/** Called by the CPU bodies when a wait's fast check fails: waits through the
 * runtime (spin, yield, futex sleep) with the context's deadline. On expiry
 * fills the context's diagnostic (first failure only) and returns
 * TD_ERR_TIMEOUT with a message naming rank, worker, the word's owner and
 * offset, comparison, expected and observed values; TD_ERR_PEER_FAILED when a
 * rank of the world failed meanwhile. Thread-safe per rank (several workers of
 * one rank may wait at once). */
td_status td_dev_cpu_wait(const td_dev_ctx *ctx, const uint64_t *word, td_cmp cmp,
                          uint64_t value);
/** Rings team rank pe's doorbell after a signal so a sleeping waiter looks again. */
void td_dev_cpu_wake(const td_dev_ctx *ctx, int pe);
/** Body of td_dev_barrier_all_block on the CPU. */
td_status td_dev_cpu_barrier(const td_dev_ctx *ctx);
/** Called by the CPU bodies of put/get/signal calls whose pe is outside
 * 0..n_pes-1 (or not mapped): the call writes nothing, and this records the
 * context's diagnostic (state TD_DEV_DIAG_BAD_PE, first failure only; owner
 * = the bad pe) and sets the thread's last-error message naming `fn` and pe.
 * td_dev_diagnostic_status() then reports TD_ERR_INVALID_ARG. */
void td_dev_cpu_bad_pe(const td_dev_ctx *ctx, const char *fn, int pe);
/** TD_ERR_INVALID_ARG for a negative count given to td_dev_wait_until_all*. */
td_status td_dev_cpu_bad_count(const td_dev_ctx *ctx, int n);
#endif

#if !defined(__CUDACC_RTC__)
/** Turns a diagnostic record into a status: TD_OK when d is NULL or nothing
 * failed; otherwise TD_ERR_TIMEOUT with the calling thread's message set to
 * e.g. "rank 1 (block 3, thread 0): device wait timed out after 200 ms on the
 * signal at heap offset 0x40 of rank 1: needed value ge 5, observed 4".
 * Host only; thread-safe. */
td_status td_dev_diagnostic_status(const td_dev_diagnostic *d);
#endif

#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#include "tdist/device/cuda.h"
#else
#include "tdist/device/cpu.h"
#endif

#endif
