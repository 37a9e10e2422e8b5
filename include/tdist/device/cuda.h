/* SPDX-License-Identifier: Apache-2.0
 * CUDA bodies of the device API declared in tdist/device.h (primitives
 * layer, device side; included by device.h under nvcc and NVRTC).
 *
 * Peers are reached with plain loads and stores through the context's peer
 * table (ranks sharing a GPU, or P2P/NVLink peers whose addresses were
 * resolved at setup, NCCL LSA pointers included), so a put is a copy loop and
 * readiness travels in 64-bit signal words written with st.release.sys /
 * red.release.sys.add and read with ld.acquire.sys. System scope is used for
 * every cross-rank signal because a peer may sit on another device; data
 * copies use 16-byte vectors when both ends are 16-byte aligned.
 *
 * Waits poll with a short back-off (__nanosleep once the word has been
 * polled a while, so waiting blocks leave memory bandwidth to the rest) and
 * read %globaltimer every 64 polls against the context's deadline. The
 * first wait to expire claims the diagnostic with an atomic on a device word
 * (atomics on mapped host memory are not guaranteed over PCIe), writes the
 * host-visible record with plain stores and a system fence, then traps or
 * returns (TD_DEV_RETURN_ON_TIMEOUT). Requires sm_70 or newer. */
#ifndef TDIST_DEVICE_CUDA_H
#define TDIST_DEVICE_CUDA_H

TD_DEVICE int td_dev_my_pe(const td_dev_ctx *ctx) { return ctx->rank; }
TD_DEVICE int td_dev_n_pes(const td_dev_ctx *ctx) { return ctx->n_pes; }

TD_DEVICE void *td_dev_symm_at(const td_dev_ctx *ctx, const void *ptr, int pe) {
#ifdef TD_DEV_CHECK_PE /* debug builds: a bad pe traps instead of writing anywhere */
  if (pe < 0 || pe >= ctx->n_pes)
    __trap();
#endif
  uintptr_t base = ctx->peer_base[pe];
  if (base == 0)
    return 0;
  return (void *)(base + ((uintptr_t)ptr - ctx->peer_base[ctx->rank]));
}

TD_DEVICE bool td_dev__cmp_holds(td_cmp cmp, uint64_t v, uint64_t value) {
  switch (cmp) {
  case TD_CMP_EQ: return v == value;
  case TD_CMP_NE: return v != value;
  case TD_CMP_GT: return v > value;
  case TD_CMP_GE: return v >= value;
  case TD_CMP_LT: return v < value;
  default: return v <= value;
  }
}

TD_DEVICE uint64_t td_dev__globaltimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
TD_DEVICE int td_dev__thread_index(void) {
  return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}
TD_DEVICE int td_dev__block_threads(void) { return (int)(blockDim.x * blockDim.y * blockDim.z); }
TD_DEVICE int td_dev__block_index(void) {
  return (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
}

/* ---- ordering ----------------------------------------------------------- */

TD_DEVICE uint64_t td_dev_ld_acquire(const uint64_t *p, td_dev_scope scope) {
  uint64_t v;
  if (scope == TD_SCOPE_BLOCK)
    asm volatile("ld.acquire.cta.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else if (scope == TD_SCOPE_GPU)
    asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
TD_DEVICE void td_dev_st_release(uint64_t *p, uint64_t v, td_dev_scope scope) {
  if (scope == TD_SCOPE_BLOCK)
    asm volatile("st.release.cta.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if (scope == TD_SCOPE_GPU)
    asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
TD_DEVICE void td_dev__red_add_release_sys(uint64_t *p, uint64_t v) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
TD_DEVICE void td_dev_fence(const td_dev_ctx *ctx) {
  (void)ctx;
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}
TD_DEVICE void td_dev_quiet(const td_dev_ctx *ctx) {
  (void)ctx;
  asm volatile("fence.sc.sys;" ::: "memory");
}

/* ---- copies ------------------------------------------------------------- */

/* Lane `lane` of `nlanes` copies its share of [src, src+bytes) to dst. */
TD_DEVICE void td_dev__copy(void *dst, const void *src, size_t bytes, int lane, int nlanes) {
  char *d = (char *)dst;
  const char *s = (const char *)src;
  size_t done = 0;
  if ((((uintptr_t)d | (uintptr_t)s) & 15) == 0) {
    const size_t nvec = bytes / 16, step = (size_t)nlanes;
    const uint4 *s4 = (const uint4 *)s;
    uint4 *d4 = (uint4 *)d;
    size_t i = (size_t)lane;
    /* Four loads in flight before the stores: the copy is latency-bound
     * otherwise (each store waits for its load). */
    for (; i + 3 * step < nvec; i += 4 * step) {
      const uint4 a = s4[i], b = s4[i + step], c = s4[i + 2 * step], e = s4[i + 3 * step];
      d4[i] = a;
      d4[i + step] = b;
      d4[i + 2 * step] = c;
      d4[i + 3 * step] = e;
    }
    for (; i < nvec; i += step)
      d4[i] = s4[i];
    done = nvec * 16;
  } else if ((((uintptr_t)d | (uintptr_t)s) & 7) == 0) {
    size_t nvec = bytes / 8;
    for (size_t i = (size_t)lane; i < nvec; i += (size_t)nlanes)
      ((uint64_t *)d)[i] = ((const uint64_t *)s)[i];
    done = nvec * 8;
  }
  for (size_t i = done + (size_t)lane; i < bytes; i += (size_t)nlanes)
    d[i] = s[i];
}

TD_DEVICE void td_dev_putmem(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                             int pe) {
  td_dev__copy(td_dev_symm_at(ctx, dest, pe), src, bytes, 0, 1);
}
TD_DEVICE void td_dev_putmem_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                  size_t bytes, int pe) {
  td_dev__copy(td_dev_symm_at(ctx, dest, pe), src, bytes, (int)(threadIdx.x & 31), 32);
  __syncwarp();
}
TD_DEVICE void td_dev_putmem_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                   size_t bytes, int pe) {
  td_dev__copy(td_dev_symm_at(ctx, dest, pe), src, bytes, td_dev__thread_index(),
               td_dev__block_threads());
  __syncthreads();
}
/* Stores to LSA peers are issued in order by the SM: the nbi forms are the
 * same stores without the closing barrier; td_dev_quiet completes them. */
TD_DEVICE void td_dev_putmem_nbi(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                                 int pe) {
  td_dev__copy(td_dev_symm_at(ctx, dest, pe), src, bytes, 0, 1);
}
TD_DEVICE void td_dev_putmem_nbi_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                      size_t bytes, int pe) {
  td_dev__copy(td_dev_symm_at(ctx, dest, pe), src, bytes, (int)(threadIdx.x & 31), 32);
}
TD_DEVICE void td_dev_putmem_nbi_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                       size_t bytes, int pe) {
  td_dev__copy(td_dev_symm_at(ctx, dest, pe), src, bytes, td_dev__thread_index(),
               td_dev__block_threads());
}

TD_DEVICE void td_dev_getmem(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                             int pe) {
  td_dev__copy(dest, td_dev_symm_at(ctx, src, pe), bytes, 0, 1);
}
TD_DEVICE void td_dev_getmem_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                  size_t bytes, int pe) {
  td_dev__copy(dest, td_dev_symm_at(ctx, src, pe), bytes, (int)(threadIdx.x & 31), 32);
  __syncwarp();
}
TD_DEVICE void td_dev_getmem_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                   size_t bytes, int pe) {
  td_dev__copy(dest, td_dev_symm_at(ctx, src, pe), bytes, td_dev__thread_index(),
               td_dev__block_threads());
  __syncthreads();
}
TD_DEVICE void td_dev_getmem_nbi(const td_dev_ctx *ctx, void *dest, const void *src, size_t bytes,
                                 int pe) {
  td_dev_getmem(ctx, dest, src, bytes, pe);
}
TD_DEVICE void td_dev_getmem_nbi_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                      size_t bytes, int pe) {
  td_dev__copy(dest, td_dev_symm_at(ctx, src, pe), bytes, (int)(threadIdx.x & 31), 32);
}
TD_DEVICE void td_dev_getmem_nbi_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                       size_t bytes, int pe) {
  td_dev__copy(dest, td_dev_symm_at(ctx, src, pe), bytes, td_dev__thread_index(),
               td_dev__block_threads());
}

/* ---- signals ------------------------------------------------------------ */

TD_DEVICE void td_dev_signal_op(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value,
                                td_sigop op, int pe) {
  uint64_t *p = (uint64_t *)td_dev_symm_at(ctx, sig, pe);
  if (op == TD_SIGNAL_ADD)
    td_dev__red_add_release_sys(p, value);
  else
    td_dev_st_release(p, value, TD_SCOPE_SYS);
}
TD_DEVICE void td_dev_notify(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value, td_sigop op,
                             int pe) {
  td_dev_fence(ctx);
  td_dev_signal_op(ctx, sig, value, op, pe);
}
/* The block barrier orders every thread's earlier stores before thread 0's
 * system fence, which the release signal then publishes (cumulativity). */
TD_DEVICE void td_dev_notify_block(const td_dev_ctx *ctx, uint64_t *sig, uint64_t value,
                                   td_sigop op, int pe) {
  __syncthreads();
  if (td_dev__thread_index() == 0)
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
  td_dev_putmem_warp(ctx, dest, src, bytes, pe);
  if ((threadIdx.x & 31) == 0)
    td_dev_notify(ctx, sig, value, op, pe);
  __syncwarp();
}
TD_DEVICE void td_dev_putmem_signal_block(const td_dev_ctx *ctx, void *dest, const void *src,
                                          size_t bytes, uint64_t *sig, uint64_t value,
                                          td_sigop op, int pe) {
  td_dev_putmem_block(ctx, dest, src, bytes, pe);
  if (td_dev__thread_index() == 0)
    td_dev_notify(ctx, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_nbi(const td_dev_ctx *ctx, void *dest, const void *src,
                                        size_t bytes, uint64_t *sig, uint64_t value, td_sigop op,
                                        int pe) {
  td_dev_putmem_signal(ctx, dest, src, bytes, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_nbi_warp(const td_dev_ctx *ctx, void *dest, const void *src,
                                             size_t bytes, uint64_t *sig, uint64_t value,
                                             td_sigop op, int pe) {
  td_dev_putmem_nbi_warp(ctx, dest, src, bytes, pe);
  __syncwarp();
  if ((threadIdx.x & 31) == 0)
    td_dev_notify(ctx, sig, value, op, pe);
}
TD_DEVICE void td_dev_putmem_signal_nbi_block(const td_dev_ctx *ctx, void *dest,
                                              const void *src, size_t bytes, uint64_t *sig,
                                              uint64_t value, td_sigop op, int pe) {
  td_dev_putmem_nbi_block(ctx, dest, src, bytes, pe);
  td_dev_notify_block(ctx, sig, value, op, pe);
}

TD_DEVICE uint64_t td_dev_signal_fetch(const td_dev_ctx *ctx, const uint64_t *sig) {
  (void)ctx;
  return td_dev_ld_acquire(sig, TD_SCOPE_SYS);
}

/* ---- waits -------------------------------------------------------------- */

/* Slow path of a wait whose deadline passed: claim and fill the record. It
 * takes the context's fields by value, not the context's address, so a
 * kernel's by-value td_dev_ctx parameter is not copied to local memory. */
static __device__ __noinline__ td_status td_dev__timeout(td_dev_diagnostic *diag, uint32_t *lock,
                                                         uint32_t flags, int rank, uintptr_t base,
                                                         uint64_t heap_size, const uint64_t *word,
                                                         td_cmp cmp, uint64_t value,
                                                         uint64_t observed, uint64_t waited_ns) {
  if (lock && atomicCAS(lock, 0u, 1u) == 0u) {
    volatile td_dev_diagnostic *d = diag;
    uintptr_t w = (uintptr_t)word;
    d->rank = rank;
    d->owner = rank;
    d->block = td_dev__block_index();
    d->thread = td_dev__thread_index();
    d->cmp = (uint32_t)cmp;
    d->offset = (w >= base && w < base + heap_size) ? (uint64_t)(w - base) : ~(uint64_t)0;
    d->expected = value;
    d->observed = observed;
    d->waited_ns = waited_ns;
    __threadfence_system();
    d->state = 2;
    __threadfence_system();
    if (!(flags & TD_DEV_RETURN_ON_TIMEOUT))
      __trap();
    return TD_ERR_TIMEOUT;
  }
  if (!(flags & TD_DEV_RETURN_ON_TIMEOUT))
    __trap();
  return TD_ERR_PEER_FAILED;
}

TD_DEVICE td_status td_dev__wait_word(const td_dev_ctx *ctx, const uint64_t *word, td_cmp cmp,
                                      uint64_t value, td_dev_scope scope) {
  uint64_t v = td_dev_ld_acquire(word, scope);
  if (td_dev__cmp_holds(cmp, v, value))
    return TD_OK;
  const uint64_t start = td_dev__globaltimer();
  for (unsigned int polls = 1;; polls++) {
    v = td_dev_ld_acquire(word, scope);
    if (td_dev__cmp_holds(cmp, v, value))
      return TD_OK;
    if ((polls & 63) == 0) {
      const uint64_t waited = td_dev__globaltimer() - start;
      if (waited > ctx->timeout_ns)
        return td_dev__timeout(ctx->diag, ctx->diag_lock, ctx->flags, ctx->rank,
                               ctx->peer_base[ctx->rank], ctx->heap_size, word, cmp, value, v,
                               waited);
      /* Another wait failed: in return mode stop too, so the kernel ends. */
      if ((ctx->flags & TD_DEV_RETURN_ON_TIMEOUT) && ctx->diag_lock &&
          *(volatile uint32_t *)ctx->diag_lock != 0)
        return TD_ERR_PEER_FAILED;
    }
    if (polls > 4096)
      __nanosleep(100);
  }
}

TD_DEVICE td_status td_dev_signal_wait_until(const td_dev_ctx *ctx, uint64_t *sig, td_cmp cmp,
                                             uint64_t value) {
  return td_dev__wait_word(ctx, sig, cmp, value, TD_SCOPE_SYS);
}

/* Thread 0 waits; the barrier then extends its acquire to the block. */
TD_DEVICE td_status td_dev_signal_wait_until_block(const td_dev_ctx *ctx, uint64_t *sig,
                                                   td_cmp cmp, uint64_t value) {
  __shared__ int td_dev__status;
  if (td_dev__thread_index() == 0)
    td_dev__status = (int)td_dev_signal_wait_until(ctx, sig, cmp, value);
  __syncthreads();
  td_status st = (td_status)td_dev__status;
  __syncthreads();
  return st;
}

TD_DEVICE td_status td_dev_wait_until_all(const td_dev_ctx *ctx, uint64_t *sigs, int n,
                                          td_cmp cmp, uint64_t value, td_dev_scope scope) {
  for (int i = 0; i < n; i++) {
    td_status st = td_dev__wait_word(ctx, &sigs[i], cmp, value, scope);
    if (st != TD_OK)
      return st;
  }
  return TD_OK;
}
TD_DEVICE td_status td_dev_wait_until_all_warp(const td_dev_ctx *ctx, uint64_t *sigs, int n,
                                               td_cmp cmp, uint64_t value, td_dev_scope scope) {
  int st = TD_OK;
  for (int i = (int)(threadIdx.x & 31); i < n && st == TD_OK; i += 32)
    st = (int)td_dev__wait_word(ctx, &sigs[i], cmp, value, scope);
  /* Any lane's failure is the warp's failure; __syncwarp orders the lanes'
   * acquires before the warp's later reads. */
  const int failed = __any_sync(0xffffffffu, st != TD_OK);
  __syncwarp();
  return failed ? (st != TD_OK ? (td_status)st : TD_ERR_PEER_FAILED) : TD_OK;
}
TD_DEVICE td_status td_dev_wait_until_all_block(const td_dev_ctx *ctx, uint64_t *sigs, int n,
                                                td_cmp cmp, uint64_t value, td_dev_scope scope) {
  int st = TD_OK;
  for (int i = td_dev__thread_index(); i < n && st == TD_OK; i += td_dev__block_threads())
    st = (int)td_dev__wait_word(ctx, &sigs[i], cmp, value, scope);
  /* Every thread learns of a failure; the one that saw it returns its own status. */
  const int failed = __syncthreads_or(st != TD_OK);
  return failed ? (st != TD_OK ? (td_status)st : TD_ERR_PEER_FAILED) : TD_OK;
}

/* ---- barrier ------------------------------------------------------------ */

/* Rank r's k-th barrier stores k into every peer's barrier_sig[r] and waits
 * until its own barrier_sig[q] >= k for every q: epochs grow, nothing resets. */
TD_DEVICE td_status td_dev_barrier_all_block(const td_dev_ctx *ctx) {
  __shared__ uint64_t td_dev__epoch;
  const int t = td_dev__thread_index(), nt = td_dev__block_threads();
  __syncthreads();
  if (t == 0) {
    td_dev_quiet(ctx);
    td_dev__epoch = *ctx->barrier_epoch + 1;
    *ctx->barrier_epoch = td_dev__epoch;
  }
  __syncthreads();
  const uint64_t e = td_dev__epoch;
  for (int p = t; p < ctx->n_pes; p += nt)
    td_dev_st_release((uint64_t *)td_dev_symm_at(ctx, &ctx->barrier_sig[ctx->rank], p), e,
                      TD_SCOPE_SYS);
  int st = TD_OK;
  for (int p = t; p < ctx->n_pes && st == TD_OK; p += nt)
    st = (int)td_dev__wait_word(ctx, &ctx->barrier_sig[p], TD_CMP_GE, e, TD_SCOPE_SYS);
  int failed = __syncthreads_or(st != TD_OK);
  return failed ? (st != TD_OK ? (td_status)st : TD_ERR_PEER_FAILED) : TD_OK;
}

#endif
