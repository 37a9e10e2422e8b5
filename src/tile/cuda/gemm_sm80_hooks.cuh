/* SPDX-License-Identifier: Apache-2.0
 * Device side of the GEMM tile hooks (tiles layer, cuda backend), shared by the
 * sm_80 and sm_90a kernels: waiting on the signals that cover a tile's A rows,
 * writing one pair of output elements (store / push to a peer / accumulate),
 * and raising the signals of a finished tile. Also the 16-bit element types
 * the kernels use. NVRTC-compatible: includes only gemm.h, no host headers.
 *
 * Every helper here is called behind `if constexpr (HOOKS & flag)`, so a
 * kernel compiled without a hook contains none of its code. */
#ifndef TD_TILE_CUDA_GEMM_SM80_HOOKS_CUH
#define TD_TILE_CUDA_GEMM_SM80_HOOKS_CUH

#ifndef TD_JIT_CONCAT /* the JIT pastes the pieces in order instead */
#include "gemm.h"
#endif

typedef unsigned int td__gemm_u32;
typedef unsigned short td__gemm_u16;

/* Round-to-nearest-even float -> bf16 / fp16 bits, packed in pairs. Written
 * with PTX so that no cuda_bf16.h (absent under NVRTC without the toolkit's
 * include path) is needed. */
template <int DTYPE>
__device__ __forceinline__ td__gemm_u32 td__gemm_pack2(float lo, float hi) {
  td__gemm_u32 r;
  if constexpr (DTYPE == TD_GEMM_DT_BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/* Grouped tile order: tile t walks GROUP_M tile rows down a column of tiles,
 * then moves one column right, so a wave of blocks reuses A and B in L2. */
__device__ __forceinline__ void td__gemm_tile_coords(int t, int tiles_m, int tiles_n, int group_m,
                                                     int *tm, int *tn) {
  int per_group = group_m * tiles_n;
  int group = t / per_group;
  int first_m = group * group_m;
  int rows = tiles_m - first_m < group_m ? tiles_m - first_m : group_m;
  int in_group = t - group * per_group;
  *tm = first_m + in_group % rows;
  *tn = in_group / rows;
}

__device__ __forceinline__ td__gemm_u64 td__gemm_globaltimer(void) {
  td__gemm_u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* `gpu`: acquire at GPU scope (TD_GEMM_SCOPE_WAIT_GPU: every writer is on this
 * GPU), else at system scope. A branch on a kernel parameter: uniform. */
__device__ __forceinline__ td__gemm_u64 td__gemm_load_acquire(const td__gemm_u64 *p, bool gpu) {
  td__gemm_u64 v;
  if (gpu)
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* Waits until every signal covering rows [row0, row_end) reaches wait_value.
 * Called by all 32 lanes of one warp: each lane polls its own signals, so a
 * tile covering many signals costs about one load latency, not one per
 * signal. Returns (in every lane) 0 when satisfied, 1 after recording a
 * timeout in h.diag (the caller then stops waiting for the rest of the
 * launch: the host turns the record into TD_ERR_TIMEOUT). */
__device__ __forceinline__ int td__gemm_wait_rows(const td_gemm_hooks &h, long long row0,
                                                  long long row_end) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const long long first = row0 / h.wait_rows, last = (row_end - 1) / h.wait_rows;
  const td__gemm_u64 start = td__gemm_globaltimer();
  const bool gpu = (h.scope & TD_GEMM_SCOPE_WAIT_GPU) != 0;
  for (long long base = first; base <= last; base += 32) {
    const long long i = base + lane;
    const bool mine = i <= last;
    td__gemm_u64 seen = 0;
    for (;;) {
      bool ok = true;
      if (mine) {
        seen = td__gemm_load_acquire(h.wait_signals + i, gpu);
        ok = seen >= h.wait_value;
      }
      if (__all_sync(full, ok))
        break;
      int late = lane == 0 && td__gemm_globaltimer() - start > h.timeout_ns;
      if (__shfl_sync(full, late, 0)) {
        unsigned pending = __ballot_sync(full, !ok);
        if (lane == __ffs(pending) - 1 && h.diag &&
            atomicCAS(h.diag + TD_GEMM_DIAG_FLAG, 0ull, 1ull) == 0ull) {
          h.diag[TD_GEMM_DIAG_SIGNAL] = (td__gemm_u64)i;
          h.diag[TD_GEMM_DIAG_OBSERVED] = seen;
          h.diag[TD_GEMM_DIAG_EXPECTED] = h.wait_value;
          h.diag[TD_GEMM_DIAG_ROW] = (td__gemm_u64)row0;
          __threadfence_system();
        }
        __syncwarp();
        return 1;
      }
      __nanosleep(64);
    }
  }
  __syncwarp(); /* every lane's acquire precedes what lane 0 does next */
  return 0;
}

/* Where output row `row` goes: C, or the owning peer's buffer under PUSH
 * (gemm.h: the split, rows_per_peer each, or td_chunk_range's when
 * push_long_peers > 0). */
template <int DTYPE, unsigned HOOKS>
__device__ __forceinline__ td__gemm_u16 *td__gemm_out_row(td__gemm_u16 *c, const td_gemm_hooks &h, int n,
                                                     long long row) {
  if constexpr ((HOOKS & TD_GEMM_HOOK_PUSH) != 0) {
    const long long rpp = h.rows_per_peer, longs = h.push_long_peers * rpp;
    long long peer, local;
    if (h.push_long_peers == 0 || row < longs) {
      peer = row / rpp;
      local = row - peer * rpp;
    } else { /* past the long peers every peer owns rpp - 1 >= 1 rows (the launcher checked) */
      const long long q = (row - longs) / (rpp - 1);
      peer = h.push_long_peers + q;
      local = row - longs - q * (rpp - 1);
    }
    return (td__gemm_u16 *)h.dst[peer] + local * (long long)n;
  } else {
    return c + row * (long long)n;
  }
}

/* Adds bf16 values (lo into the element at p, hi into the next when `two`)
 * with a compare-and-swap loop on the 32-bit word(s) holding them: sm_80 has
 * no bf16 reduction instruction. */
__device__ __forceinline__ void td__gemm_cas_add_bf16(td__gemm_u16 *p, float lo, float hi, bool two) {
  for (int e = 0; e < (two ? 2 : 1); e++) {
    td__gemm_u16 *q = p + e;
    float add = e ? hi : lo;
    td__gemm_u32 *word = (td__gemm_u32 *)((unsigned long long)q & ~3ull);
    int shift = ((unsigned long long)q & 2ull) ? 16 : 0;
    td__gemm_u32 old = *word, assumed;
    do {
      assumed = old;
      float cur = __uint_as_float(((assumed >> shift) & 0xffffu) << 16);
      td__gemm_u32 sum = td__gemm_pack2<TD_GEMM_DT_BF16>(cur + add, 0.f) & 0xffffu;
      td__gemm_u32 next = (assumed & ~(0xffffu << shift)) | (sum << shift);
      old = atomicCAS(word, assumed, next);
    } while (old != assumed);
  }
}

/* Writes elements (col, col+1) of one output row; col+1 may be past N. `vec`
 * says the pair is 4-byte aligned (N even), so one 32-bit store suffices. */
template <int DTYPE, unsigned HOOKS>
__device__ __forceinline__ void td__gemm_put2(td__gemm_u16 *rowp, int col, int n, bool vec, float v0,
                                              float v1) {
  if (col >= n)
    return;
  td__gemm_u32 packed = td__gemm_pack2<DTYPE>(v0, v1);
  if constexpr ((HOOKS & TD_GEMM_HOOK_ACCUMULATE) != 0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    if constexpr (DTYPE == TD_GEMM_DT_BF16) {
      td__gemm_cas_add_bf16(rowp + col, v0, v1, col + 1 < n);
      return;
    }
#endif
    if (vec && col + 1 < n) {
      if constexpr (DTYPE == TD_GEMM_DT_BF16)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
        asm volatile("red.global.add.noftz.bf16x2 [%0], %1;" ::"l"(rowp + col), "r"(packed) : "memory");
#else
        ;
#endif
      else
        asm volatile("red.global.add.noftz.f16x2 [%0], %1;" ::"l"(rowp + col), "r"(packed) : "memory");
    } else {
      td__gemm_u16 lo = (td__gemm_u16)(packed & 0xffff), hi = (td__gemm_u16)(packed >> 16);
      if constexpr (DTYPE == TD_GEMM_DT_BF16) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
        asm volatile("red.global.add.noftz.bf16 [%0], %1;" ::"l"(rowp + col), "h"(lo) : "memory");
        if (col + 1 < n)
          asm volatile("red.global.add.noftz.bf16 [%0], %1;" ::"l"(rowp + col + 1), "h"(hi) : "memory");
#endif
      } else {
        asm volatile("red.global.add.noftz.f16 [%0], %1;" ::"l"(rowp + col), "h"(lo) : "memory");
        if (col + 1 < n)
          asm volatile("red.global.add.noftz.f16 [%0], %1;" ::"l"(rowp + col + 1), "h"(hi) : "memory");
      }
    }
  } else {
    if (vec && col + 1 < n) {
      *(td__gemm_u32 *)(rowp + col) = packed;
    } else {
      rowp[col] = (td__gemm_u16)(packed & 0xffff);
      if (col + 1 < n)
        rowp[col + 1] = (td__gemm_u16)(packed >> 16);
    }
  }
}

/* Stores one row's 32-column group held by a quad of lanes in the mma/wgmma
 * accumulator layout: lane q of the quad holds, for n8 blocks b = 0..3, the
 * packed pair at columns 8b + 2q (p0..p3). A 4x4 transpose inside the quad
 * (shuffles) gives lane q the 8 consecutive columns of block q, written as one
 * 16-byte store: a quarter of the store instructions of pair-wise stores, and
 * whole 32-byte sectors. Every lane of the warp must call it (the shuffles);
 * `valid` says this lane's row exists, `v16` that the row pointer is 16-byte
 * aligned and N % 8 == 0; otherwise the elements go one by one. */
/* The 4x4 transpose inside a quad of lanes that td__gemm_put_quad stores
 * after: lane q ends with the 8 consecutive columns of n8 block q (o[0..3]).
 * Every lane of the warp must call it. */
__device__ __forceinline__ void td__gemm_quad_transpose(td__gemm_u32 p0, td__gemm_u32 p1, td__gemm_u32 p2,
                                                        td__gemm_u32 p3, td__gemm_u32 o[4]) {
  const int lane = threadIdx.x % 32, q = lane & 3;
  o[0] = o[1] = o[2] = o[3] = 0;
#pragma unroll
  for (int r = 0; r < 4; r++) {
    const int si = (q - r) & 3, di = (q + r) & 3;
    const td__gemm_u32 send = si == 0 ? p0 : si == 1 ? p1 : si == 2 ? p2 : p3;
    const td__gemm_u32 got = __shfl_sync(0xffffffffu, send, (lane & ~3) | di);
    o[0] = di == 0 ? got : o[0];
    o[1] = di == 1 ? got : o[1];
    o[2] = di == 2 ? got : o[2];
    o[3] = di == 3 ? got : o[3];
  }
}

template <int DTYPE>
__device__ __forceinline__ void td__gemm_put_quad(td__gemm_u16 *rowp, int col0, int n, bool valid,
                                                  bool v16, td__gemm_u32 p0, td__gemm_u32 p1, td__gemm_u32 p2,
                                                  td__gemm_u32 p3) {
  const int q = (threadIdx.x % 32) & 3;
  td__gemm_u32 t[4];
  td__gemm_quad_transpose(p0, p1, p2, p3, t);
  const td__gemm_u32 o0 = t[0], o1 = t[1], o2 = t[2], o3 = t[3];
  const int col = col0 + 8 * q;
  if (!valid || col >= n)
    return;
  if (v16 && col + 8 <= n) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(rowp + col), "r"(o0), "r"(o1),
                 "r"(o2), "r"(o3)
                 : "memory");
  } else {
    const td__gemm_u32 o[4] = {o0, o1, o2, o3};
#pragma unroll
    for (int e = 0; e < 4; e++) {
      if (col + 2 * e < n)
        rowp[col + 2 * e] = (td__gemm_u16)(o[e] & 0xffff);
      if (col + 2 * e + 1 < n)
        rowp[col + 2 * e + 1] = (td__gemm_u16)(o[e] >> 16);
    }
  }
}

/* The release fence in front of a tile's adds, at the raise's scope. */
__device__ __forceinline__ void td__gemm_raise_fence(const td_gemm_hooks &h) {
  if ((h.scope & TD_GEMM_SCOPE_RAISE_GPU) != 0)
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
  else
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* Adds raise_value to `count` consecutive signals from `first`, relaxed at
 * the raise's scope (after td__gemm_raise_fence). */
__device__ __forceinline__ void td__gemm_raise_span(const td_gemm_hooks &h, td__gemm_u64 *first,
                                                    long long count) {
  const bool gpu = (h.scope & TD_GEMM_SCOPE_RAISE_GPU) != 0;
  for (long long s = 0; s < count; s++) {
    if (gpu)
      asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(first + s), "l"(h.raise_value) : "memory");
    else
      asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(first + s), "l"(h.raise_value) : "memory");
  }
}

/* The adds of a tile covering rows [row0, row_end), relaxed at the raise's
 * scope: td__gemm_raise_fence before them already orders the tile's stores
 * before every add (fence + relaxed = release), so a tile that covers several
 * signals pays for one fence, not one each. */
template <unsigned HOOKS>
__device__ __forceinline__ void td__gemm_raise_adds(const td_gemm_hooks &h, long long row0,
                                                    long long row_end) {
  long long r = row0;
  while (r < row_end) {
    long long peer = 0, local = r, span_end = row_end;
    if constexpr ((HOOKS & TD_GEMM_HOOK_PUSH) != 0) {
      peer = r / h.rows_per_peer;
      local = r - peer * h.rows_per_peer;
      long long peer_end = (peer + 1) * h.rows_per_peer;
      span_end = row_end < peer_end ? row_end : peer_end;
    }
    long long s0 = local / h.raise_rows, s1 = (local + (span_end - r) - 1) / h.raise_rows;
    td__gemm_raise_span(h, h.raise_signals[peer] + s0, s1 - s0 + 1);
    r = span_end;
  }
}

/* Raises the signals covering rows [row0, row_end) of a finished tile. Called
 * by one thread after a barrier (or mbarrier hand-off) that follows every
 * thread's stores. Memory model: the barrier makes those stores happen before
 * this thread's fence (CTA-scope release/acquire); the acquire-release fence
 * is cumulative, so it orders them before the relaxed adds at the fence's
 * scope (fence + relaxed = release), and a consumer whose acquire reads an
 * add sees the rows. The scope is the consumers' (TD_GEMM_SCOPE_RAISE_GPU: all
 * on this GPU); on the H200 the GPU scope saved only 0.1-0.3 us per
 * one-tile-per-CTA launch (docs/perf.md, hooks6). Lighter than fence.sc. */
template <unsigned HOOKS>
__device__ __forceinline__ void td__gemm_raise_rows(const td_gemm_hooks &h, long long row0,
                                                    long long row_end) {
  td__gemm_raise_fence(h);
  td__gemm_raise_adds<HOOKS>(h, row0, row_end);
}

#endif
