/* SPDX-License-Identifier: Apache-2.0
 * CPU bodies of the device API declared in tdist/device.h (primitives layer,
 * device side; included by device.h, not on its own).
 *
 * CPU tile code runs on worker threads of a rank whose symmetric heap, and
 * every peer's, is mapped in this process (local and shm transports), so a
 * put is a memcpy into the peer's copy and a signal is an atomic on it. The
 * atomics are the GCC/Clang __atomic builtins, which have the C11 memory
 * orders and also compile as C++. Scopes collapse: every CPU acquire/release
 * is system-wide. Warp and block forms equal the thread form (a CPU "block"
 * is one worker thread). Waits check once inline and otherwise go through
 * td_dev_cpu_wait, which sleeps so that 8 ranks progress on 2 cores. */
#ifndef TDIST_DEVICE_CPU_H
#define TDIST_DEVICE_CPU_H

#include <string.h>

TD_DEVICE int td_dev_my_pe(const td_dev_ctx *ctx) { return ctx->rank; }
TD_DEVICE int td_dev_n_pes(const td_dev_ctx *ctx) { return ctx->n_pes; }

TD_DEVICE void *td_dev_symm_at(const td_dev_ctx *ctx, const void *ptr, int pe) {
  if (pe < 0 || pe >= ctx->n_pes) /* cheap on the CPU; see device.h */
    return NULL;
  uintptr_t base = ctx->peer_base[pe];
  if (base == 0)
    return NULL;
  return (void *)(base + ((uintptr_t)ptr - ctx->peer_base[ctx->rank]));
}

TD_DEVICE int td_dev__cmp_holds(td_cmp cmp, uint64_t v, uint64_t value) {
  switch (cmp) {
  case TD_CMP_EQ: return v == value;
  case TD_CMP_NE: return v != value;
  case TD_CMP_GT: return v > value;
  case TD_CMP_GE: return v >= value;
  case TD_CMP_LT: return v < value;
  case TD_CMP_LE: return v <= value;
  }
  return 0;
}

/* ---- ordering ----------------------------------------------------------- */

TD_DEVICE uint64_t td_dev_ld_acquire(const uint64_t *p, td_dev_scope scope) {
  (void)scope;
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
TD_DEVICE void td_dev_st_release(uint64_t *p, uint64_t v, td_dev_scope scope) {
  (void)scope;
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
TD_DEVICE void td_dev_fence(const td_dev_ctx *ctx) {
  (void)ctx;
  __atomic_thread_fence(__ATOMIC_RELEASE);
}
TD_DEVICE void td_dev_quiet(const td_dev_ctx *ctx) {
  (void)ctx;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* ---- put / get (memcpy is complete on return: nbi = blocking) ----------- */

TD_DEVICE void td_dev_putmem(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                             int pe) {
  void *to = td_dev_symm_at(ctx, dest, pe);
  if (to == NULL)
    td_dev_cpu_bad_pe(ctx, "td_dev_putmem", pe);
  else if (bytes)
    memcpy(to, src, bytes);
}
TD_DEVICE void td_dev_getmem(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                             int pe) {
  const void *from = td_dev_symm_at(ctx, src, pe);
  if (from == NULL)
    td_dev_cpu_bad_pe(ctx, "td_dev_getmem", pe);
  else if (bytes)
    memcpy(dest, from, bytes);
}
TD_DEVICE void td_dev_putmem_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                  size_t bytes, int pe) {
  td_dev_putmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_putmem_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                   size_t bytes, int pe) {
  td_dev_putmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_putmem_nbi(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                                 int pe) {
  td_dev_putmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_putmem_nbi_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                      size_t bytes, int pe) {
  td_dev_putmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_putmem_nbi_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                       size_t bytes, int pe) {
  td_dev_putmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_getmem_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                  size_t bytes, int pe) {
  td_dev_getmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_getmem_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                   size_t bytes, int pe) {
  td_dev_getmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_getmem_nbi(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                                 int pe) {
  td_dev_getmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_getmem_nbi_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                      size_t bytes, int pe) {
  td_dev_getmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_getmem_nbi_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                       size_t bytes, int pe) {
  td_dev_getmem(ctx, dest, src, bytes, pe);
}

/* ---- signals ------------------------------------------------------------ */

TD_DEVICE void td_dev_signal_op(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value,
                                td_sigop op, int pe) {
  uint64_t *p = (uint64_t *)td_dev_symm_at(ctx, sig, pe);
  if (p == NULL) {
    td_dev_cpu_bad_pe(ctx, "td_dev_signal_op", pe);
    return;
  }
  if (op == TD_SIGNAL_ADD)
    __atomic_fetch_add(p, value, __ATOMIC_RELEASE);
  else
    __atomic_store_n(p, value, __ATOMIC_RELEASE);
  td_dev_cpu_wake(ctx, pe);
}
TD_DEVICE void td_dev_notify(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value, td_sigop op,
                             int pe) {
  td_dev_fence(ctx);
  td_dev_signal_op(ctx, sig, value, op, pe);
}
TD_DEVICE void td_dev_notify_block(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value,
                                   td_sigop op, int pe) {
  td_dev_notify(ctx, sig, value, op, pe);
}

TD_DEVICE void td_dev_putmem_signal(const td_dev_ctx *ctx, void *dest, const void *src,
                                    size_t bytes, uint64_t *sig, uint64_t value, td_sigop op,
                                    int pe) {
  td_dev_putmem(ctx, dest, src, bytes, pe);
  td_dev_signal_op(ctx, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                         size_t bytes, uint64_t *sig, uint64_t value,
                                         td_sigop op, int pe) {
  td_dev_putmem_signal(ctx, dest, src, bytes, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                          size_t bytes, uint64_t *sig, uint64_t value,
                                          td_sigop op, int pe) {
  td_dev_putmem_signal(ctx, dest, src, bytes, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_nbi(const td_dev_ctx *ctx, void *dest, const void *src,
                                        size_t bytes, uint64_t *sig, uint64_t value, td_sigop op,
                                        int pe) {
  td_dev_putmem_signal(ctx, dest, src, bytes, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_nbi_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                             size_t bytes, uint64_t *sig, uint64_t value,
                                             td_sigop op, int pe) {
  td_dev_putmem_signal(ctx, dest, src, bytes, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_nbi_block(const td_dev_ctx *ctx, void *dest,
                                              const void *src, size_t bytes, uint64_t *sig,
                                              uint64_t value, td_sigop op, int pe) {
  td_dev_putmem_signal(ctx, dest, src, bytes, sig, value, op, pe);
}

TD_DEVICE uint64_t td_dev_signal_fetch(const td_dev_ctx *ctx, const uint64_t *sig) {
  (void)ctx;
  return __atomic_load_n(sig, __ATOMIC_ACQUIRE);
}

TD_DEVICE td_status td_dev_signal_wait_until(const td_dev_ctx *ctx, uint64_t *sig, td_cmp cmp,
                                             uint64_t value) {
  if (td_dev__cmp_holds(cmp, __atomic_load_n(sig, __ATOMIC_ACQUIRE), value))
    return TD_OK;
  return td_dev_cpu_wait(ctx, sig, cmp, value);
}
TD_DEVICE td_status td_dev_signal_wait_until_block(const td_dev_ctx *ctx, uint64_t *sig,
                                                   td_cmp cmp, uint64_t value) {
  return td_dev_signal_wait_until(ctx, sig, cmp, value);
}

TD_DEVICE td_status td_dev_wait_until_all(const td_dev_ctx *ctx, uint64_t *sigs, int n,
                                          td_cmp cmp, uint64_t value, td_dev_scope scope) {
  (void)scope;
  if (n < 0)
    return td_dev_cpu_bad_count(ctx, n);
  for (int i = 0; i < n; i++) {
    td_status st = td_dev_signal_wait_until(ctx, &sigs[i], cmp, value);
    if (st != TD_OK)
      return st;
  }
  return TD_OK;
}
TD_DEVICE td_status td_dev_wait_until_all_warp(const td_dev_ctx *ctx, uint64_t *sigs, int n,
                                               td_cmp cmp, uint64_t value, td_dev_scope scope) {
  return td_dev_wait_until_all(ctx, sigs, n, cmp, value, scope);
}
TD_DEVICE td_status td_dev_wait_until_all_block(const td_dev_ctx *ctx, uint64_t *sigs, int n,
                                                td_cmp cmp, uint64_t value, td_dev_scope scope) {
  return td_dev_wait_until_all(ctx, sigs, n, cmp, value, scope);
}

TD_DEVICE td_status td_dev_barrier_all_block(const td_dev_ctx *ctx) {
  return td_dev_cpu_barrier(ctx);
}

#endif
