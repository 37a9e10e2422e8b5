/* SPDX-License-Identifier: Apache-2.0
 * The Hopper (sm_90a) GEMM tile kernel (tiles layer, cuda backend).
 *
 * C[M,N] = A[M,K] * B with 16-bit operands and fp32 accumulation, persistent
 * over the output tiles, warp-specialised:
 *   - warpgroup 0 is the producer: one thread walks the same tile sequence as
 *     the consumers and, stage by stage, issues TMA loads (cp.async.bulk.tensor)
 *     of a BM x 64 slice of A and a BN x 64 slice of B into a ring of STAGES
 *     shared-memory buffers, each guarded by a "full" and an "empty" mbarrier;
 *   - warpgroups 1..NC are consumers: each owns BM/NC rows of the tile and
 *     issues wgmma (m64nBNk16, both operands from shared memory through 128B
 *     swizzled descriptors), keeping one wgmma group in flight, releasing a
 *     stage as soon as the group that read it retired; then writes its rows
 *     of C straight from registers and runs the post-store hooks.
 * setmaxnreg moves registers from the producer (56) to the consumers (224). With
 * CLUSTER = 2, two CTAs on vertically adjacent tiles share the B slice through
 * TMA multicast. Hooks run off the critical path: a waiter warp checks the
 * signals of the next tiles ahead of the loads, a raiser warp raises each
 * finished tile's signals while the consumers go on (mbarrier hand-offs).
 * The hooks' scope (td_gemm_hooks.scope, gemm.h) picks GPU- or system-scope
 * acquires and releases; the memory-model argument is in
 * gemm_sm80_hooks.cuh and docs/architecture.md ("GEMM hooks").
 *
 * Tile configuration comes from template parameters, which the JIT sets from
 * -D values through td_gemm_sm90_jit_entry below; the benchmark and the
 * launcher instantiate a few with nvcc (gemm_sm90.cu). No host header is
 * included: NVRTC compiles this file as is. */
#ifndef TD_TILE_CUDA_GEMM_SM90_CUH
#define TD_TILE_CUDA_GEMM_SM90_CUH

#ifndef TD_JIT_CONCAT /* the JIT pastes the pieces in order instead */
#include "gemm_sm80_hooks.cuh"
#include "gemm_sm90_wgmma.cuh"
#endif

/* The 128-byte opaque CUtensorMap, declared here so that NVRTC needs no cuda.h. */
struct __align__(64) td__tensor_map {
  td__gemm_u64 opaque[16];
};

/* ---- small PTX wrappers: mbarriers, TMA, wgmma fences ---- */

__device__ __forceinline__ td__gemm_u32 td__smem_addr(const void *p) {
  return (td__gemm_u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void td__mbar_init(td__gemm_u32 bar, td__gemm_u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void td__mbar_expect_tx(td__gemm_u32 bar, td__gemm_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void td__mbar_arrive(td__gemm_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void td__mbar_wait(td__gemm_u32 bar, td__gemm_u32 parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

/* Non-blocking: has the phase of the given parity completed? */
__device__ __forceinline__ bool td__mbar_test(td__gemm_u32 bar, td__gemm_u32 parity) {
  td__gemm_u32 done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}

__device__ __forceinline__ void td__tma_load_2d(td__gemm_u32 dst, const td__tensor_map *map, td__gemm_u32 bar,
                                                int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"((td__gemm_u64)map), "r"(bar), "r"(x), "r"(y)
      : "memory");
}

/* The early wait's hand-off (EARLY_W3 in the kernel): warp 3 and the loader
 * warp meet at named barrier 6 (64 threads); returns the AND of every
 * thread's `ok` (the loader passes true, so it reads warp 3's verdict). Like
 * bar.sync, it orders the memory accesses of the threads it joins. */
__device__ __forceinline__ bool td__gemm_early_verdict(bool ok) {
  unsigned r;
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.and.pred p, 6, 64, q;\n"
               "selp.u32 %0, 1, 0, p;\n}"
               : "=r"(r)
               : "r"((unsigned)ok)
               : "memory");
  return r != 0;
}

__device__ __forceinline__ void td__wgmma_fence(void) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void td__wgmma_commit(void) {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void td__wgmma_wait(void) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accumulator reads or writes across the
 * asynchronous wgmma window (the registers change behind its back). */
template <int COUNT>
__device__ __forceinline__ void td__fence_regs(float *d) {
#pragma unroll
  for (int i = 0; i < COUNT; i++)
    asm volatile("" : "+f"(d[i])::"memory");
}

/* Shared-memory matrix descriptor, 128-byte swizzle. lbo/sbo in bytes. */
__device__ __forceinline__ td__gemm_u64 td__smem_desc(td__gemm_u32 addr, td__gemm_u32 lbo, td__gemm_u32 sbo) {
  return (td__gemm_u64)((addr & 0x3FFFF) >> 4) | ((td__gemm_u64)(lbo >> 4) << 16) |
         ((td__gemm_u64)(sbo >> 4) << 32) | (1ull << 62);
}

/* One k16 step for a 64-row slice: dispatch on BN and dtype at compile time. */
template <int BN, int DTYPE, int TRANS_B>
__device__ __forceinline__ void td__wgmma_step(float *d, td__gemm_u64 da, td__gemm_u64 db, int acc) {
#define TD__WGMMA_CASE(NN)                                       \
  if constexpr (BN == NN) {                                      \
    if constexpr (DTYPE == TD_GEMM_DT_BF16)                      \
      td__wgmma_m64n##NN##k16_bf16<TRANS_B>(d, da, db, acc);     \
    else                                                         \
      td__wgmma_m64n##NN##k16_f16<TRANS_B>(d, da, db, acc);      \
  }
  TD__WGMMA_CASE(16) TD__WGMMA_CASE(32) TD__WGMMA_CASE(64) TD__WGMMA_CASE(96)
  TD__WGMMA_CASE(128) TD__WGMMA_CASE(160) TD__WGMMA_CASE(192) TD__WGMMA_CASE(224)
  TD__WGMMA_CASE(256)
#undef TD__WGMMA_CASE
}

template <int BM, int BN, int STAGES>
struct td__gemm_sm90_shape {
  static constexpr int BK = 64;               /* one 128-byte swizzle row of 16-bit elements */
  static constexpr int NC = BM >= 128 ? 2 : 1; /* consumer warpgroups */
  static constexpr int WG_ROWS = BM / NC;      /* rows per consumer warpgroup */
  static constexpr int MI = WG_ROWS / 64;      /* m64 slices per consumer warpgroup */
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int THREADS = 128 * (NC + 1);
  /* mbarriers: full[STAGES], empty[STAGES], then the hook hand-offs
   * ready[2], ready_free[2], done[2], done_free[2] */
  static constexpr int NBARS = 2 * STAGES + 8;
  /* ring + mbarriers + 1024 for aligning the ring to the swizzle atom */
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + NBARS * 8 + 1024;
};

/* BCAST with the second half deferred: k-blocks into the next unit's main
 * loop before it is staged (about 8 us of the H200's 128x256 main loop: the
 * first half's stores of a whole wave drain in ~10 us at once), or half the
 * unit's k-blocks where it has fewer than twice as many. */
#define TD__BCAST_DEFER_KB 8
/* Paced BCAST (bcast_defer 2): k-blocks between two of a tile's 2P + 1 steps
 * in the next unit's main loop, td_gemm_hooks.bcast_pace_kb (0 = this
 * default: 3 of the H200's 128x256 k-blocks, ~2.4 us; with 8 destinations the
 * 16 steps after the epilogue's first take 48 k-blocks, 3/4 of a 64-k-block
 * unit). A unit with fewer k-blocks than gap x steps left (a split slice)
 * closes the gap to fit them (at least 1), so that the steps do not pile up
 * at its end or at the kernel's; what still does not fit, its epilogue issues
 * (or the next unit's, when a split slice skips its own). */
#define TD__BCAST_PACE_KB TD_GEMM_PACE_KB_DEFAULT
/* The XV bit of that kernel (a variant the registry compiles, not a measurement one). */
#define TD__XV_BCAST_DEFER 256

/* BCAST's staged columns: the whole tile where it fits beside the ring, else
 * half of it at a time (128x256 at 4 stages: 192 KiB of ring leave room for
 * 32 KiB, not 64), so the ring keeps its depth; the launcher's C maps use
 * this box width (gemm_sm90_registry.h, epi_cols). */
template <int BM, int BN, int STAGES>
struct td__gemm_sm90_bcast {
  static constexpr int COLS = td__gemm_sm90_shape<BM, BN, STAGES>::SMEM_BYTES + BM * BN * 2 <= 232448 ? BN : BN / 2;
};

__device__ __forceinline__ td__gemm_u32 td__cluster_rank(void) {
  td__gemm_u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ void td__cluster_sync(void) {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/* Arrive on the mbarrier at the same offset in CTA `rank` of the cluster. */
__device__ __forceinline__ void td__mbar_arrive_cluster(td__gemm_u32 bar, td__gemm_u32 rank) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(bar),
      "r"(rank)
      : "memory");
}

/* TMA load delivered to the same offset in every CTA of `mask` (and their mbarriers). */
__device__ __forceinline__ void td__tma_load_2d_multicast(td__gemm_u32 dst, const td__tensor_map *map,
                                                          td__gemm_u32 bar, int x, int y,
                                                          unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
      "l"((td__gemm_u64)map), "r"(bar), "r"(x), "r"(y), "h"(mask)
      : "memory");
}

/* The split tail (gemm.h, "Split tail"; KGATHER and GATHER): every consumer thread of the
 * CTA calls this after the last wgmma of its slice `part` of split tile
 * `tile` (workspace slot `slot`). It stores the thread's accumulators as
 * fp32 partials (L2 only: the reader is another SM), then one thread takes
 * the tile's ticket (the stores released by the block barrier, a gpu fence
 * and the relaxed add); the slice that draws the last one sets the counter
 * back to 0, sums every slice's partial, its own included, in slice order
 * into acc (acquired by the fence and the reducing barrier after its add)
 * and returns true: it runs the tile's epilogue. The others return false
 * and skip it. No thread waits on another CTA, so the blocks may run in any
 * order. Named barrier 4 over the consumer threads (1 is the raise's, 2 and
 * 3 BCAST's). Layout of a slot: float4 q of m64 slice x of consumer thread
 * ct at (x * BN/8 + q) * T + ct, so each warp's 16-byte stores and loads are
 * contiguous. */
template <int BN, int NC, int MI>
__device__ __forceinline__ bool td__gemm_split_fixup(float (*acc)[BN / 2], const td_gemm_hooks &h, int slot,
                                                     int part, int nsplit, int tile, int ct) {
  constexpr int Q = BN / 8, T = 128 * NC;
  constexpr long long SLOT = (long long)MI * Q * T; /* float4s per partial tile */
  float *ws = (float *)((char *)h.split_ws + TD_GEMM_SPLIT_CNT_BYTES);
#pragma unroll
  for (int x = 0; x < MI; x++) {
#pragma unroll
    for (int q = 0; q < Q; q++) {
      float *at = ws + ((long long)slot * SLOT + (long long)(x * Q + q) * T + ct) * 4;
      asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(at), "f"(acc[x][4 * q]),
                   "f"(acc[x][4 * q + 1]), "f"(acc[x][4 * q + 2]), "f"(acc[x][4 * q + 3])
                   : "memory");
    }
  }
  asm volatile("bar.sync 4, %0;" ::"n"(T) : "memory");
  td__gemm_u32 last = 0;
  if (ct == 0) {
    td__gemm_u32 *cnt = (td__gemm_u32 *)h.split_ws + tile, old;
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(cnt) : "memory");
    last = old == (td__gemm_u32)nsplit - 1;
    if (last) { /* every slice has arrived: nobody else touches the counter in this launch */
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(cnt) : "memory");
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
    }
  }
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, 4, %2, q;\n"
               "selp.u32 %0, 1, 0, p;\n}"
               : "=r"(last)
               : "r"(last), "n"(T)
               : "memory");
  if (!last)
    return false;
  /* The sum in slice order, ((p0 + p1) + p2) + ..., whichever slice won: the
   * winner's own partial is read back too (the same fp32 bits it stored), so
   * the tile's bits do not depend on which slice finished last. */
  const float *first = ws + (long long)(slot - part) * SLOT * 4 + (long long)ct * 4;
#pragma unroll
  for (int x = 0; x < MI; x++) {
#pragma unroll
    for (int q = 0; q < Q; q++) {
      const float *at = first + (long long)(x * Q + q) * T * 4;
      asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                   : "=f"(acc[x][4 * q]), "=f"(acc[x][4 * q + 1]), "=f"(acc[x][4 * q + 2]), "=f"(acc[x][4 * q + 3])
                   : "l"(at)
                   : "memory");
    }
  }
  for (int o = 1; o < nsplit; o++) {
#pragma unroll
    for (int x = 0; x < MI; x++) {
#pragma unroll
      for (int q = 0; q < Q; q++) {
        const float *at = first + ((long long)o * SLOT + (long long)(x * Q + q) * T) * 4;
        float v0, v1, v2, v3;
        asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(v0), "=f"(v1), "=f"(v2), "=f"(v3)
                     : "l"(at)
                     : "memory");
        acc[x][4 * q] += v0, acc[x][4 * q + 1] += v1, acc[x][4 * q + 2] += v2, acc[x][4 * q + 3] += v3;
      }
    }
  }
  return true;
}

/* Phases stamped by the measurement variant XV & 8 (see below), in the
 * order of one tile's life. */
enum {
  TD__XV_START = 0,    /* thread 0, first instruction */
  TD__XV_SYNCED,       /* thread 0, mbarriers initialised and the block synced */
  TD__XV_W_ISSUED,     /* the first tile's acquire issued (thread 0 before the set-up; XV & 16: the waiter) */
  TD__XV_W_SEEN,       /* its signals seen satisfied (the loader's vote; XV & 16: the waiter) */
  TD__XV_W_FENCED,     /* the proxy fence after it done (the loader; XV & 16: the waiter) */
  TD__XV_W_READY,      /* the first tile's ready arrived by the waiter */
  TD__XV_L_FIRST_B,    /* loader: first B load issued */
  TD__XV_L_FIRST_A,    /* loader: first A load issued */
  TD__XV_C_FIRST_FULL, /* consumer thread 0: first full stage seen */
  TD__XV_C_LAST_MMA,   /* consumer thread 0: last tile's last wgmma retired */
  TD__XV_C_STORED,     /* consumer thread 0: its epilogue stores issued */
  TD__XV_C_DONE,       /* consumer thread 0: done arrived (or the consumers' barrier passed) */
  TD__XV_R_SEEN,       /* raising thread: the last tile's stores known done */
  TD__XV_R_FENCED,     /* raising thread: release fence done */
  TD__XV_R_ADDED,      /* raising thread: adds issued */
  TD__XV_C_END,        /* consumer thread 0: last instruction */
  TD__XV_PHASES
};

/* One phase stamp (XV & 8 only): %globaltimer and %clock64, into the buffer
 * the measurement launcher passes as hooks.dst[0] (a PUSH field; no variant
 * has PUSH), TD__XV_PHASES pairs per block. Kernels with XV = 0 compile to
 * nothing here. */
template <int XV>
__device__ __forceinline__ void td__gemm_xv_stamp(const td_gemm_hooks &h, int phase) {
  if constexpr ((XV & 8) != 0) {
    td__gemm_u64 clk;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(clk));
    td__gemm_u64 *p = (td__gemm_u64 *)h.dst[0] + ((td__gemm_u64)blockIdx.x * TD__XV_PHASES + phase) * 2;
    p[0] = td__gemm_globaltimer();
    p[1] = clk;
  }
}

/* The kernel. B_KN = 1 reads B as [K,N] (MN-major wgmma operand, needs BN % 64
 * == 0: BN/64 TMA boxes of 64 columns per stage); 0 reads [N,K].
 * CLUSTER = 2 pairs CTAs on vertically adjacent tiles (same B columns): each
 * loads half of the B slice and multicasts it to both, which cuts the L2 -> SM
 * traffic by a third for 128x256 tiles; a stage is refilled only when the
 * consumers of both CTAs released it. The tile map for B then has a box of
 * BN/2 rows ([N,K]); for [K,N] each CTA loads every other 64-column box.
 *
 * Hooks on the critical path of a one-tile-per-CTA launch (M = 128: nothing
 * runs ahead of the first wait or after the last raise), and what is done
 * about them:
 *   - the first tile's signals are read by the waiter warp's very first
 *     instructions, before the mbarrier set-up and the block barrier, so the
 *     acquire's round trip overlaps the prologue; the later tiles' waits run
 *     up to two tiles ahead of the loads, off the critical path;
 *   - the CTA's last tile is raised by the consumers themselves (a named
 *     barrier over the consumer threads after their stores, then one fence
 *     and the adds), not handed to the raiser warp, which would have to wake
 *     up first; earlier tiles still go to the raiser warp so that the fence
 *     never holds a consumer back from its next tile.
 * XV: measurement variants for bench/gemm (gemm_bench --hook-variants,
 * --stamps); 0, the kernel every launcher uses, has none of them:
 *   XV & 8   phase stamps (td__gemm_xv_stamp);
 *   XV & 16  the first tile's wait starts after the block barrier, like the
 *            later ones (the hooks6 kernel);
 *   XV & 32  every tile, the last too, is raised by the raiser warp (the
 *            hooks6 kernel);
 *   XV & 64  the producer's warp index straight from threadIdx.x (the hooks6
 *            kernel's non-uniform loader loop, see below);
 *   XV & 128 the warpgroup index warp-uniform too (a candidate for every
 *            kernel, hooks or not);
 *   XV & 256 (TD__XV_BCAST_DEFER) BCAST's second half deferred into the next
 *            unit's main loop: a variant the registry compiles and the
 *            launcher picks for hooks.bcast_defer, not a measurement one;
 *   XV & 512 the warp-3 front (EARLY_W3 below): the first tile's signals
 *            read by the producer warpgroup's idle warp 3 outside the block
 *            barrier instead of by the loader warp. Measured at 64x64 (M =
 *            128): the wait's cost 0.42-0.54 us instead of 0.67-0.83 us, both
 *            hooks 1.15-1.28 us instead of 1.79 us. Not adopted: a gemm_bench
 *            run with it in every kernel stopped making progress at 128x256
 *            s4 / 128x224 s5 (not diagnosed; docs/perf.md, eighteenth
 *            session), so it stays a measurement variant until that is
 *            understood. */
/* A diagnostic build's switch (scripts/gpu-final-prep.sh with TD_FINAL_W3=1): 1 makes the warp-3 front the
 * default (XV 0) and XV 512 the acquire front, so the kernels every launcher uses can be tried with it. 0 in
 * every other build. */
#ifndef TD_GEMM_EARLY_W3_DEFAULT
#define TD_GEMM_EARLY_W3_DEFAULT 0
#endif

template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, int B_KN, unsigned HOOKS, int CLUSTER, int XV = 0>
__device__ __forceinline__ void td__gemm_sm90_body(const td__tensor_map &map_a,
                                                   const td__tensor_map &map_b, td__gemm_u16 *c, int m,
                                                   int n, int k, const td_gemm_hooks &hooks) {
  /* wgmma and setmaxnreg exist only on sm_90a; other passes of a multi-arch
   * build get an empty kernel that the launcher never selects there. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  typedef td__gemm_sm90_shape<BM, BN, STAGES> S;
  static_assert(BM == 64 || BM == 128 || BM == 256, "BM must be 64, 128 or 256");
  static_assert(BN % 16 == 0 && BN <= 256 && (BN <= 128 || BN % 32 == 0), "unsupported BN");
  static_assert(!B_KN || BN % (64 * CLUSTER) == 0, "B as [K,N] needs BN % (64 * CLUSTER) == 0");
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && BN % 16 == 0), "CLUSTER must be 1 or 2");
  static_assert(S::SMEM_BYTES <= 232448, "tile ring does not fit in shared memory");
  constexpr bool WAIT = (HOOKS & TD_GEMM_HOOK_WAIT) != 0, RAISE = (HOOKS & TD_GEMM_HOOK_RAISE) != 0;
  constexpr bool GATHER = (HOOKS & TD_GEMM_HOOK_GATHER) != 0, KGATHER = (HOOKS & TD_GEMM_HOOK_KGATHER) != 0;
  constexpr bool NSPLIT = (HOOKS & TD_GEMM_HOOK_NSPLIT) != 0;
  static_assert(!GATHER || HOOKS == TD_GEMM_HOOK_GATHER || HOOKS == (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT),
                "GATHER runs alone or with NSPLIT");
  /* a cluster's pair shares tn, so its column source: B's boxes multicast as in the plain kernel */
  static_assert(!NSPLIT || (GATHER && B_KN), "NSPLIT runs with GATHER, with B as [K,N]");
  constexpr bool BCAST = (HOOKS & TD_GEMM_HOOK_BCAST) != 0;
  /* launches that may split their last wave's tiles along K (gemm.h, "Split tail"): none of them waits or
   * raises per tile, so a tile finished by whichever slice drew the last ticket needs no signal order; a
   * cluster's pair shares its B slice per k-block, so a clustered GATHER never splits */
  constexpr bool SPLITS = KGATHER || (GATHER && CLUSTER == 1);
  static_assert(!KGATHER || ((HOOKS == TD_GEMM_HOOK_KGATHER || HOOKS == (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH) ||
                              HOOKS == (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST)) &&
                             B_KN && CLUSTER == 1),
                "KGATHER runs alone or with PUSH or BCAST routing its rows, with B as [K,N] and no cluster");
  static_assert(!BCAST || HOOKS == (TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_KGATHER),
                "BCAST stores every row to every destination through KGATHER's map table");
  /* BCAST: each consumer warpgroup stages its rows of the tile in shared
   * memory once, and TMA stores them to every destination while the
   * consumers go on with the next tile (stores from registers, n times
   * over, held the tensor cores idle: 0.3-0.5 TB/s, docs/perf.md) */
  constexpr int EPI_COLS = BCAST ? td__gemm_sm90_bcast<BM, BN, STAGES>::COLS : BN, HALVES = BN / EPI_COLS;
  constexpr int EPI_BYTES = BCAST ? BM * EPI_COLS * 2 : 0;
  constexpr int EPI_J = EPI_COLS / 32 > 0 ? EPI_COLS / 32 : 1; /* 32-column groups of a staged part (BN may be 16
                                                                * where nothing is staged: no zero-sized arrays) */
  static_assert(S::SMEM_BYTES + EPI_BYTES <= 232448, "tile ring and staged tile do not fit in shared memory");
  constexpr bool EARLY_WAIT = WAIT && (XV & 16) == 0;   /* first tile's acquire before the set-up */
  /* ... by the producer warpgroup's idle warp 3, outside the block barrier
   * (one CTA per cluster: a cluster barrier has no arrive-only form here);
   * a measurement variant for now (XV & 512, above) */
  constexpr bool EARLY_W3 = EARLY_WAIT && CLUSTER == 1 && (((XV & 512) != 0) != (TD_GEMM_EARLY_W3_DEFAULT != 0));
  constexpr bool INLINE_RAISE = RAISE && (XV & 32) == 0; /* last tile raised by the consumers */
  if (threadIdx.x == 0)
    td__gemm_xv_stamp<XV>(hooks, TD__XV_START);

  /* NSPLIT: n is one column source's width; its tiles follow source by source */
  const int tiles_m = (m + BM - 1) / BM, tpn = (n + BN - 1) / BN, tiles_n = NSPLIT ? tpn * hooks.n_src : tpn;
  const int rows_c = (tiles_m + CLUSTER - 1) / CLUSTER; /* tile rows of clusters */
  const int units = rows_c * tiles_n;
  /* The split tail (gemm.h; KGATHER and GATHER launches): tiles [dp_units, units) run as nsplit K-slices each, work units
   * dp_units.. in tile order, so that a tile's slices go to consecutive blocks (the same wave, or two
   * rounds of the grid where the plan splits two waves' tiles: nothing waits, so no order matters). The
   * launcher's plan always passes this check; a plan outside it (a hand-built hooks value: more tiles
   * than exist or than the counters hold, slices of no k-block, no workspace) runs unsplit. */
  const int nsplit = SPLITS && hooks.split_k > 1 && hooks.split_k <= (k + 63) / 64 && hooks.split_tail > 0 &&
                             hooks.split_tail <= units && hooks.split_tail <= TD_GEMM_SPLIT_CNT_BYTES / 4 &&
                             hooks.split_ws
                         ? hooks.split_k
                         : 1;
  const int dp_units = nsplit > 1 ? units - hooks.split_tail : units;
  const int work = dp_units + (units - dp_units) * nsplit;
  const int first_unit = blockIdx.x / CLUSTER, unit_step = gridDim.x / CLUSTER;
  const int group_c = GROUP_M / CLUSTER > 0 ? GROUP_M / CLUSTER : 1;
  const td__gemm_u32 crank = CLUSTER > 1 ? td__cluster_rank() : 0;

  /* The first tile's acquire, issued by the loader warp (warp 0) before
   * anything else, so that its round trip overlaps the mbarrier set-up, the
   * block barrier and the loader's own start: lane j reads signal j, for the
   * first 32 signals (no division, so it issues within a few instructions;
   * cold code is slow here: about 5 ns per instruction at kernel start on the
   * H200). The loader looks at the values when it reaches its first tile. An
   * acquire that reads a satisfying value synchronises with the writer's
   * release whenever it was issued: the barrier between changes nothing in
   * that argument. */
  td__gemm_u64 early_seen = 0;
  bool early_mine = false; /* this lane read a signal */
  /* EARLY_W3 (XV & 512): the acquire holds the warp that issues it until
   * the value returns (~0.5 us at kernel start), so warp 3, which has
   * nothing else to do, issues it: it arrives at the set-up barrier first (named barrier 5,
   * arrive-only) and hands the verdict to the loader through a reducing
   * barrier (6) once the values are in. Warp 0 issuing it held thread 0's
   * mbarrier set-up and with it the block barrier (0.67 us instead of 0.22
   * us) and the first B load; a relaxed load made an acquire by a fence
   * after the vote was slower still (that fence took ~0.8 us). Phase stamps
   * and timings: docs/perf.md, eighteenth session. */
  constexpr int EARLY_WARP = EARLY_W3 ? 3 : 0;
  if constexpr (EARLY_WAIT) {
    if ((int)threadIdx.x / 32 == EARLY_WARP) {
      const int el = (int)threadIdx.x % 32;
      if constexpr (EARLY_W3)
        asm volatile("bar.arrive 5, %0;" ::"n"(S::THREADS) : "memory");
      early_mine = (long long)el * hooks.wait_rows < m;
      if (early_mine)
        early_seen = td__gemm_load_acquire(hooks.wait_signals + el, (hooks.scope & TD_GEMM_SCOPE_WAIT_GPU) != 0);
      if (el == 0)
        td__gemm_xv_stamp<XV>(hooks, TD__XV_W_ISSUED);
    }
  }

  extern __shared__ unsigned char td__smem_raw[];
  const td__gemm_u32 base = td__smem_addr(td__smem_raw);
  const td__gemm_u32 ring = (base + 1023) & ~1023u;
  const td__gemm_u32 stg = ring + STAGES * S::STAGE_BYTES; /* BCAST: the staged tile (1024-aligned) */
  const td__gemm_u32 full = stg + EPI_BYTES, empty = full + 8 * STAGES;
  const td__gemm_u32 ready = empty + 8 * STAGES, ready_free = ready + 16;
  const td__gemm_u32 done = ready_free + 16, done_free = done + 16;
  const int nk = (k + S::BK - 1) / S::BK;
  /* work unit w: tile u, its k-blocks [kb0, kb1) and slice part (-1: the whole K) */
  auto unit_of = [&](int w, int &u, int &kb0, int &kb1, int &part) {
    if constexpr (SPLITS) {
      if (w >= dp_units) {
        const int p = w - dp_units, t = p / nsplit;
        part = p - t * nsplit;
        u = dp_units + t;
        kb0 = (int)((long long)part * nk / nsplit);
        kb1 = (int)((long long)(part + 1) * nk / nsplit);
        return;
      }
    }
    u = w, kb0 = 0, kb1 = nk, part = -1;
  };
  /* XV & 128: the warpgroup index through a shuffle (warp-uniform to ptxas,
   * so the consumers' descriptors stay in uniform registers); measured
   * before it is adopted, since it changes the kernel without hooks too. */
  const int wg = (XV & 128) != 0 ? __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0) : (int)threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      td__mbar_init(full + 8 * s, 1);                          /* the producer's expect_tx */
      td__mbar_init(empty + 8 * s, 4 * S::NC * CLUSTER);        /* each consumer warp of each CTA */
    }
    for (int i = 0; i < 2; i++) {
      td__mbar_init(ready + 8 * i, 1);
      td__mbar_init(ready_free + 8 * i, 1);
      td__mbar_init(done + 8 * i, 4 * S::NC);
      td__mbar_init(done_free + 8 * i, 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CLUSTER > 1)
    td__cluster_sync(); /* peers multicast into our ring only after our barriers exist */
  else if constexpr (EARLY_W3) {
    if ((int)threadIdx.x / 32 != EARLY_WARP) /* warp 3 arrived before its acquire */
      asm volatile("bar.sync 5, %0;" ::"n"(S::THREADS) : "memory");
  } else
    __syncthreads();
  if (threadIdx.x == 0)
    td__gemm_xv_stamp<XV>(hooks, TD__XV_SYNCED);
  if constexpr (EARLY_W3) {
    /* Warp 3's verdict on the first 32 signals, once every lane's acquire
     * returned. Each lane that read fences its view over to the async proxy
     * before the barrier the loader joins, after which the loader's lane 0
     * loads A with TMA: the writer-fence-then-barrier pattern of the
     * waiter's hand-off (bar.red orders its threads' memory accesses as
     * bar.sync does). Warp 3 touches no mbarrier, so it needs no set-up
     * barrier of its own. */
    if ((int)threadIdx.x / 32 == EARLY_WARP) {
      const bool ok = __all_sync(0xffffffffu, !early_mine || early_seen >= hooks.wait_value);
      if (ok && early_mine)
        asm volatile("fence.proxy.async.global;" ::: "memory");
      td__gemm_early_verdict(ok);
    }
  }

  if (wg == 0) {
    /* ---- producer warpgroup: warp 0 loads, warp 1 waits (WAIT), warp 2 raises (RAISE) ---- */
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
    /* The warp index through a shuffle from lane 0: ptxas then knows it is
     * warp-uniform. Computed from threadIdx.x alone, it made the loader's
     * loop non-uniform in every hooked instantiation (the raiser or waiter
     * branch beside it was enough): its indices went to ordinary registers
     * with a register-to-uniform move before each copy, and the main loop
     * ran ~20% slower per stage at M = 128 (phase stamps, docs/perf.md,
     * hooks7). */
    const int warp = (XV & 64) != 0 ? (int)threadIdx.x / 32 : __shfl_sync(0xffffffffu, (int)threadIdx.x / 32, 0);
    const int lane = threadIdx.x % 32;
    if (warp == 0) {
      /* The whole warp walks the loads (every lane waits on the same
       * barriers) and lane 0 issues them, so that the loop's control flow is
       * warp-uniform as well and its indices stay in uniform registers. */
      const bool leader = lane == 0;
      /* KGATHER: K per source (k fits an int, so does it); every source's A
       * and B maps are fenced over to the tensormap proxy by the thread that
       * issues the loads, once (the table does not change during a launch;
       * a copy wrote it before, and a later launch may rewrite it in place) */
      const int ksrc = KGATHER ? (int)hooks.k_src : 1;
      if constexpr (KGATHER) {
        if (leader)
          for (int j = 0; j * ksrc < k; j++) {
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                             (const td__tensor_map *)hooks.a_maps + j)
                         : "memory");
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                             (const td__tensor_map *)hooks.b_maps + j)
                         : "memory");
          }
        __syncwarp();
      }
      if constexpr (NSPLIT) { /* the column sources' B maps, as KGATHER's above */
        if (leader)
          for (int j = 0; j < hooks.n_src; j++) {
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                             (const td__tensor_map *)hooks.b_maps + j)
                         : "memory");
            if (hooks.map_fence == 1)
              asm volatile("prefetch.tensormap [%0];" ::"l"((const td__tensor_map *)hooks.b_maps + j) : "memory");
          }
        __syncwarp();
      }
      /* GATHER, map_fence 1: every source's A map fenced once here, as
       * KGATHER's (the table does not change during a launch), and its
       * descriptor fetched ahead of the first load that names it. Measured
       * slower than map_fence 0 (a fence before each tile's first load,
       * below) at three shapes: these fences and fetches delay the first
       * load, where a tile's fence waits behind the loads already in flight. */
      if constexpr (GATHER) {
        if (leader && hooks.map_fence == 1)
          for (long long j = 0; j <= (m - 1) / hooks.a_rows; j++) {
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                             (const td__tensor_map *)hooks.a_maps + j)
                         : "memory");
            asm volatile("prefetch.tensormap [%0];" ::"l"((const td__tensor_map *)hooks.a_maps + j) : "memory");
          }
        __syncwarp();
      }
      int stage = 0;
      td__gemm_u32 phase = 0;
      int i = 0;
      bool early_pending = EARLY_W3; /* warp 3's verdict not yet taken (it waits at barrier 6 until it is) */
      for (int w = first_unit; w < work; w += unit_step, i++) {
        int u, kb0, kb1, part;
        unit_of(w, u, kb0, kb1, part);
        if constexpr (SPLITS) { /* a split tile's k-range, warp-uniform (as js below) for the loads' loop */
          kb0 = __shfl_sync(0xffffffffu, kb0, 0);
          kb1 = __shfl_sync(0xffffffffu, kb1, 0);
        }
        int tc, tn;
        td__gemm_tile_coords(u, rows_c, tiles_n, group_c, &tc, &tn);
        const int tm = tc * CLUSTER + (int)crank;
        const td__gemm_u32 mask = (1u << CLUSTER) - 1;
        /* NSPLIT: column tile tn is source js's, at its column tile tl. Worked out once a tile, not in each
         * k-block's load_b (where ptxas left the division in the loop), and broadcast from lane 0 so that it
         * stays warp-uniform, as the TMA issue wants its operands. */
        int js = 0, tl = tn;
        if constexpr (NSPLIT) {
          js = __shfl_sync(0xffffffffu, tn / tpn, 0);
          tl = tn - js * tpn;
        }
        const td__tensor_map *const b_src = NSPLIT ? (const td__tensor_map *)hooks.b_maps + js : &map_b;
        /* GATHER: each GR-row part of the tile lies in one source (a_rows is
         * a multiple of GR, TD__GEMM_GATHER_ROWS: BM, or 128 for BM = 256,
         * whose halves may lie in two sources), read in place through that
         * source's map; the maps live in global memory, written by a copy
         * ordered before this launch. A part past the last source's rows
         * reads that source's map out of bounds: TMA fills it with zeros
         * and still counts its bytes. */
        constexpr int GR = TD__GEMM_GATHER_ROWS(BM), GP = BM / GR;
        long long src[GP];
        int arow[GP]; /* the part's first row in its source */
#pragma unroll
        for (int h = 0; h < GP; h++) {
          src[h] = 0;
          arow[h] = 0;
          if constexpr (GATHER) { /* warp-uniform, as js above */
            const long long s = ((long long)tm * BM + h * GR) / hooks.a_rows, last = (m - 1) / hooks.a_rows;
            src[h] = __shfl_sync(0xffffffffu, s < last ? s : last, 0);
            arow[h] = (int)((long long)tm * BM + h * GR - src[h] * hooks.a_rows);
            /* map_fence 0: the map was written through the generic proxy (a
             * copy into the table, which a later launch may rewrite at the
             * same address): visible to the tensormap proxy before TMA reads it */
            if (hooks.map_fence == 0 && leader && (h == 0 || src[h] != src[h - 1]))
              asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                               (const td__tensor_map *)hooks.a_maps + src[h])
                           : "memory");
          }
        }
        auto load_a = [&](int st, int kb) {
          if (leader) {
            if constexpr (GATHER) {
#pragma unroll
              for (int h = 0; h < GP; h++) /* a part's GR rows sit GR * BK elements on: the swizzle repeats every 8 */
                td__tma_load_2d(ring + st * S::STAGE_BYTES + h * GR * S::BK * 2,
                                (const td__tensor_map *)hooks.a_maps + src[h], full + 8 * st, kb * S::BK, arow[h]);
            }
            else if constexpr (KGATHER) { /* k-block kb lies in source ks, at its column kx - ks * k_src */
              const int kx = kb * S::BK, ks = kx / ksrc;
              td__tma_load_2d(ring + st * S::STAGE_BYTES, (const td__tensor_map *)hooks.a_maps + ks,
                              full + 8 * st, kx - ks * ksrc, tm * BM);
            } else
              td__tma_load_2d(ring + st * S::STAGE_BYTES, &map_a, full + 8 * st, kb * S::BK, tm * BM);
            if (i == 0 && kb == 0)
              td__gemm_xv_stamp<XV>(hooks, TD__XV_L_FIRST_A);
          }
        };
        auto load_b = [&](int st, int kb) {
          if (!leader)
            return;
          const td__gemm_u32 f = full + 8 * st, sb = ring + st * S::STAGE_BYTES + S::A_BYTES;
          if constexpr (B_KN) {
#pragma unroll
            for (int j = (int)crank; j < BN / 64; j += CLUSTER) {
              if constexpr (KGATHER) { /* the same source's K rows of B */
                const int kx = kb * S::BK, ks = kx / ksrc;
                td__tma_load_2d(sb + j * 64 * S::BK * 2, (const td__tensor_map *)hooks.b_maps + ks, f,
                                tn * BN + 64 * j, kx - ks * ksrc);
              } else if constexpr (NSPLIT) { /* column tile tn is source js's (above) */
                if constexpr (CLUSTER > 1) /* the pair's tile rows share tn, so js: each loads its boxes for both */
                  td__tma_load_2d_multicast(sb + j * 64 * S::BK * 2, b_src, f, tl * BN + 64 * j, kb * S::BK,
                                            (unsigned short)mask);
                else
                  td__tma_load_2d(sb + j * 64 * S::BK * 2, b_src, f, tl * BN + 64 * j, kb * S::BK);
              } else if constexpr (CLUSTER > 1)
                td__tma_load_2d_multicast(sb + j * 64 * S::BK * 2, &map_b, f, tn * BN + 64 * j,
                                          kb * S::BK, (unsigned short)mask);
              else
                td__tma_load_2d(sb + j * 64 * S::BK * 2, &map_b, f, tn * BN + 64 * j, kb * S::BK);
            }
          } else {
            if constexpr (CLUSTER > 1)
              td__tma_load_2d_multicast(sb + crank * (BN / CLUSTER) * 128, &map_b, f, kb * S::BK,
                                        tn * BN + (int)crank * (BN / CLUSTER), (unsigned short)mask);
            else
              td__tma_load_2d(sb, &map_b, f, kb * S::BK, tn * BN);
          }
          if (i == 0 && kb == 0)
            td__gemm_xv_stamp<XV>(hooks, TD__XV_L_FIRST_B);
        };
        auto claim = [&](int st, td__gemm_u32 ph) { /* wait for the slot, announce its bytes */
          td__mbar_wait(empty + 8 * st, ph ^ 1);
          if (leader)
            td__mbar_expect_tx(full + 8 * st, S::STAGE_BYTES);
        };
        int kb = kb0; /* 0 unless a split tile's slice (KGATHER or GATHER), which never WAITs */
        if constexpr (WAIT) {
          /* B (the weights) never waits: while the tile's A rows are not known
           * to be ready, claim stages and start only their B loads, so a signal
           * check in progress hides behind B traffic; once ready (usually at
           * once: the first tile's signals were read before the set-up, and
           * the waiter warp checks the later tiles' up to two tiles ahead),
           * issue the A loads owed and go on.
           * (Prefetching A's first slices into L2 before the B loads made a
           * one-tile-per-CTA launch 1.5 us slower on the H200, 2026-11-29:
           * the prefetches queue in front of B in the TMA unit.) */
          const int pre = nk < STAGES ? nk : STAGES;
          int st = stage, claimed = 0;
          td__gemm_u32 ph = phase;
          auto claim_b = [&]() {
            claim(st, ph);
            load_b(st, claimed++);
            if (++st == STAGES) {
              st = 0;
              ph ^= 1;
            }
          };
          /* The first tile: settled at once when its rows lie under the
           * first 32 signals and every signal read before the set-up was
           * satisfied. Each lane that acquired then fences its view over to
           * the async proxy (TMA) before the warp barrier, after which lane 0
           * loads A: the writer-fence-then-barrier pattern of the waiter's
           * hand-off. Otherwise the waiter's check decides, as for any tile
           * (the waiter checks the first tile in any case, off this path, so
           * that the hand-off's phases stay in step). */
          bool settled = false;
          if constexpr (EARLY_W3) {
            if (i == 0) {
              const long long r1 = (long long)tm * BM + BM < m ? (long long)tm * BM + BM : m;
              /* B does not depend on the signals: its first stages go out
               * while warp 3's acquire is in flight */
              while (claimed < (pre < 2 ? pre : 2))
                claim_b();
              const bool ok = td__gemm_early_verdict(true);
              early_pending = false;
              settled = r1 <= 32 * hooks.wait_rows && ok;
              if (leader) {
                td__gemm_xv_stamp<XV>(hooks, TD__XV_W_SEEN);
                td__gemm_xv_stamp<XV>(hooks, TD__XV_W_FENCED);
              }
            }
          } else if constexpr (EARLY_WAIT) {
            if (i == 0) {
              const long long r1 = (long long)tm * BM + BM < m ? (long long)tm * BM + BM : m;
              settled = r1 <= 32 * hooks.wait_rows &&
                        __all_sync(0xffffffffu, !early_mine || early_seen >= hooks.wait_value);
              if (leader)
                td__gemm_xv_stamp<XV>(hooks, TD__XV_W_SEEN);
              if (settled) {
                asm volatile("fence.proxy.async.global;" ::: "memory");
                __syncwarp();
              }
              if (leader)
                td__gemm_xv_stamp<XV>(hooks, TD__XV_W_FENCED);
            }
          }
          if (!settled) {
            const td__gemm_u32 rb = ready + 8 * (i & 1), rp = (i >> 1) & 1;
            bool ok = __all_sync(0xffffffffu, td__mbar_test(rb, rp));
            while (!ok && claimed < pre) {
              claim_b();
              ok = __all_sync(0xffffffffu, td__mbar_test(rb, rp));
            }
            if (!ok)
              td__mbar_wait(rb, rp);
          }
          if (leader)
            td__mbar_arrive(ready_free + 8 * (i & 1));
          for (; kb < claimed; kb++) {
            load_a(stage, kb);
            if (++stage == STAGES) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
        for (; kb < kb1; kb++) {
          claim(stage, phase);
          load_a(stage, kb);
          load_b(stage, kb);
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
      if (early_pending) /* a block with no tile still meets warp 3 */
        td__gemm_early_verdict(true);
    } else if (WAIT && warp == 1) {
      /* Runs up to two tiles ahead of the loads, so satisfied waits cost them nothing. */
      int waits_on = 1, i = 0;
      for (int u = first_unit; u < units; u += unit_step, i++) {
        int tc, tn;
        td__gemm_tile_coords(u, rows_c, tiles_n, group_c, &tc, &tn);
        const long long r0 = (long long)(tc * CLUSTER + (int)crank) * BM;
        const long long r1 = r0 + BM < m ? r0 + BM : m;
        td__mbar_wait(ready_free + 8 * (i & 1), ((i >> 1) + 1) & 1);
        if (waits_on && r0 < r1) {
          if (!EARLY_WAIT && i == 0 && lane == 0)
            td__gemm_xv_stamp<XV>(hooks, TD__XV_W_ISSUED);
          if (td__gemm_wait_rows(hooks, r0, r1))
            waits_on = 0; /* recorded; the host reports it: stop waiting */
          if (!EARLY_WAIT && i == 0 && lane == 0)
            td__gemm_xv_stamp<XV>(hooks, TD__XV_W_SEEN);
        }
        /* The loader reads these rows with TMA, through the async proxy: each
         * lane that acquired fences its view over to that proxy before the
         * hand-off (the writer-fence-then-barrier pattern), so the loader
         * itself, with loads in flight, never waits on a proxy fence. */
        asm volatile("fence.proxy.async.global;" ::: "memory");
        if (!EARLY_WAIT && i == 0 && lane == 0)
          td__gemm_xv_stamp<XV>(hooks, TD__XV_W_FENCED);
        __syncwarp();
        if (lane == 0) {
          td__mbar_arrive(ready + 8 * (i & 1));
          if (i == 0)
            td__gemm_xv_stamp<XV>(hooks, TD__XV_W_READY);
        }
      }
    } else if (RAISE && warp == 2 && lane == 0) {
      /* Raises each finished tile's signals off the consumers' path; with
       * INLINE_RAISE the CTA's last tile is the consumers' own. */
      int i = 0;
      for (int u = first_unit; u < units; u += unit_step, i++) {
        if (INLINE_RAISE && u + unit_step >= units)
          break;
        int tc, tn;
        td__gemm_tile_coords(u, rows_c, tiles_n, group_c, &tc, &tn);
        const long long r0 = (long long)(tc * CLUSTER + (int)crank) * BM;
        const long long r1 = r0 + BM < m ? r0 + BM : m;
        td__mbar_wait(done + 8 * (i & 1), (i >> 1) & 1);
        td__gemm_xv_stamp<XV>(hooks, TD__XV_R_SEEN);
        if (r0 < r1) {
          td__gemm_raise_fence(hooks);
          td__gemm_xv_stamp<XV>(hooks, TD__XV_R_FENCED);
          td__gemm_raise_adds<HOOKS>(hooks, r0, r1);
          td__gemm_xv_stamp<XV>(hooks, TD__XV_R_ADDED);
        }
        td__mbar_arrive(done_free + 8 * (i & 1));
      }
    }
  } else {
    /* ---- consumers ---- */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    const int cw = wg - 1;                  /* consumer index */
    const int tid = threadIdx.x - 128 * wg; /* 0..127 inside the warpgroup */
    const int warp = tid / 32, lane = tid % 32;
    const bool stamper = cw == 0 && tid == 0;
    float acc[S::MI][BN / 2];
    int stage = 0;
    td__gemm_u32 phase = 0;
    const bool vec = (n % 2) == 0;
    bool maps_fenced = false; /* BCAST: this block's first epilogue fences the C maps (not unit 0: a split
                               * tile's slice that did not draw the last ticket runs none) */
    /* ---- BCAST's staging: a half (or the whole) of this warpgroup's rows, packed and transposed into the
     * layout of the staged rows, then stored to shared memory and TMA-stored to every destination ---- */
    const td__gemm_u32 mine = stg + (td__gemm_u32)(cw * S::WG_ROWS * EPI_COLS * 2);
    const int bar = 2 + cw; /* named barriers 2.. (1 is the raise's, 4 the split tail's), one per warpgroup */
    auto bcast_pack = [&](const float (*ac)[BN / 2], int hv, td__gemm_u32 (*out)[2][EPI_J][4]) {
#pragma unroll
      for (int x = 0; x < S::MI; x++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
          for (int j = 0; j < EPI_COLS / 32; j++) {
            const float *a4 = &ac[x][16 * (hv * (EPI_COLS / 32) + j) + 2 * h];
            td__gemm_quad_transpose(td__gemm_pack2<DTYPE>(a4[0], a4[1]), td__gemm_pack2<DTYPE>(a4[4], a4[5]),
                                    td__gemm_pack2<DTYPE>(a4[8], a4[9]), td__gemm_pack2<DTYPE>(a4[12], a4[13]),
                                    out[x][h][j]);
          }
    };
    /* the staged rows are free (the caller waited for the previous stores' reads and synced) */
    auto bcast_stage = [&](const td__gemm_u32 (*pk)[2][EPI_J][4]) {
#pragma unroll
      for (int x = 0; x < S::MI; x++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const int rl = x * 64 + warp * 16 + lane / 4 + 8 * h; /* row inside this warpgroup's part */
#pragma unroll
          for (int j = 0; j < EPI_COLS / 32; j++) {
            const td__gemm_u32 at = mine + (td__gemm_u32)((rl * EPI_COLS + 32 * j + 8 * (lane & 3)) * 2);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(at), "r"(pk[x][h][j][0]),
                         "r"(pk[x][h][j][1]), "r"(pk[x][h][j][2]), "r"(pk[x][h][j][3])
                         : "memory");
          }
        }
      /* every writer's rows visible to the async proxy before one thread stores them */
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
    };
    /* the staged rows to destinations [o0, o1), one bulk group (TMA clips rows >= M, columns >= N) */
    auto bcast_issue = [&](int o0, int o1, int row0, int col0) {
      if (tid == 0) {
        if (!maps_fenced) /* the table was written by a copy before the launch: every map, once */
          for (int o = 0; o < hooks.bcast_peers; o++)
            asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(
                             (const td__tensor_map *)hooks.c_maps + o)
                         : "memory");
        for (int o = o0; o < o1; o++) {
          const td__tensor_map *cm = (const td__tensor_map *)hooks.c_maps + o;
          if (hooks.bcast_hint) { /* the copies are not read again here: first out of L2 */
            td__gemm_u64 pol;
            asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
            asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%2, %3}], "
                         "[%1], %4;" ::"l"((td__gemm_u64)cm),
                         "r"(mine), "r"(col0), "r"(row0), "l"(pol)
                         : "memory");
          } else {
            asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                             (td__gemm_u64)cm),
                         "r"(mine), "r"(col0), "r"(row0)
                         : "memory");
          }
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      }
      maps_fenced = true;
    };
    /* BCAST with half the tile staged, deferred (hooks.bcast_defer 1): the second half waits in registers,
     * packed, and is staged and stored up to TD__BCAST_DEFER_KB k-blocks into the next unit's main loop (or after
     * the last unit), when the first half's stores have long read shared memory, so no epilogue waits on
     * the stores of a wave whose every block stores at once.
     * Paced (hooks.bcast_defer 2): the tile's 2 x P copies are not issued at once but one at a time, every
     * hooks.bcast_pace_kb (TD__BCAST_PACE_KB) k-blocks of the next unit's main loop (the first half's P copies, then the second half
     * staged, then its P copies): the blocks of a wave finish their tiles together, and a wave's whole
     * output at once (8 copies of 132 tiles: 66 MiB) queues behind the next tiles' first loads. */
    constexpr bool defer = BCAST && HALVES == 2 && (XV & TD__XV_BCAST_DEFER) != 0;
    const bool pace = defer && hooks.bcast_defer == 2;
    td__gemm_u32 held[S::MI][2][EPI_J][4]; /* no registers where unused (the compiler drops it) */
    bool pend = false;
    int pend_row0 = 0, pend_col0 = 0;
    auto bcast_flush = [&]() {
      if (tid == 0)
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
      bcast_stage(held);
      bcast_issue(0, hooks.bcast_peers, pend_row0, pend_col0);
      pend = false;
    };
    /* paced: step s of the pending tile's 2P + 1 (s < P: first half's copy s; P: the second half staged;
     * P < s: its copy s - P - 1); pstep < 0: none pending. Every step's condition is uniform over the
     * warpgroup (the staging step's barrier joins its 128 threads). */
    int pstep = -1;
    auto pace_step = [&]() {
      const int np = hooks.bcast_peers;
      if (pstep < np) {
        bcast_issue(pstep, pstep + 1, pend_row0, pend_col0 - EPI_COLS);
      } else if (pstep == np) {
        if (tid == 0)
          asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
        bcast_stage(held);
        pend = false;
      } else {
        bcast_issue(pstep - np - 1, pstep - np, pend_row0, pend_col0);
      }
      pstep = pstep == 2 * np ? -1 : pstep + 1;
    };
    const int pace_kb = hooks.bcast_pace_kb > 0 ? hooks.bcast_pace_kb : TD__BCAST_PACE_KB;
    int i = 0;

    for (int w = first_unit; w < work; w += unit_step, i++) {
      int u, kb0, kb1, part;
      unit_of(w, u, kb0, kb1, part);
      int tc, tn;
      td__gemm_tile_coords(u, rows_c, tiles_n, group_c, &tc, &tn);
      const int tm = tc * CLUSTER + (int)crank;
      const bool raise_here = INLINE_RAISE && w + unit_step >= work; /* the CTA's last tile */
      /* NSPLIT: the tile's column source, its C and the tile's column there */
      const int js = NSPLIT ? tn / tpn : 0, tl = tn - js * tpn;
      td__gemm_u16 *const cc = NSPLIT ? (td__gemm_u16 *)hooks.dst[js] : c;
      int prev = -1;
      int gap = pace_kb; /* paced: this unit's k-blocks between two steps, closed to fit the steps left */
      if constexpr (defer)
        if (pstep >= 0) {
          const int left = 2 * hooks.bcast_peers + 1 - pstep, fit = (kb1 - kb0) / left;
          if (fit < gap)
            gap = fit > 0 ? fit : 1;
        }
      for (int kb = kb0; kb < kb1; kb++) {
        td__mbar_wait(full + 8 * stage, phase);
        if (i == 0 && kb == 0 && stamper)
          td__gemm_xv_stamp<XV>(hooks, TD__XV_C_FIRST_FULL);
        const td__gemm_u32 sa = ring + stage * S::STAGE_BYTES + cw * S::WG_ROWS * 128;
        const td__gemm_u32 sb = ring + stage * S::STAGE_BYTES + S::A_BYTES;
#pragma unroll
        for (int x = 0; x < S::MI; x++)
          td__fence_regs<BN / 2>(acc[x]);
        td__wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < S::BK / 16; kk++) {
          td__gemm_u64 db = B_KN ? td__smem_desc(sb + kk * 16 * 128, 64 * S::BK * 2, 1024)
                            : td__smem_desc(sb + kk * 32, 16, 1024);
#pragma unroll
          for (int x = 0; x < S::MI; x++) {
            td__gemm_u64 da = td__smem_desc(sa + x * 64 * 128 + kk * 32, 16, 1024);
            td__wgmma_step<BN, DTYPE, B_KN>(acc[x], da, db, kb != kb0 || kk != 0);
          }
        }
        td__wgmma_commit();
#pragma unroll
        for (int x = 0; x < S::MI; x++)
          td__fence_regs<BN / 2>(acc[x]);
        /* The group before this one has retired: its stage may be refilled. */
        td__wgmma_wait<1>();
        if (prev >= 0 && lane == 0) {
#pragma unroll
          for (int r = 0; r < CLUSTER; r++) {
            if constexpr (CLUSTER > 1)
              td__mbar_arrive_cluster(empty + 8 * prev, (td__gemm_u32)r);
            else
              td__mbar_arrive(empty + 8 * prev);
          }
        }
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
        if constexpr (defer) {
          if (pstep >= 0) {
            if ((kb - kb0) % gap == gap - 1)
              pace_step();
          } else if (pend && kb == kb0 + ((kb1 - kb0) / 2 < TD__BCAST_DEFER_KB ? (kb1 - kb0) / 2 : TD__BCAST_DEFER_KB))
            bcast_flush(); /* the previous tile's second half, while this unit's wgmma runs (a short unit,
                            * such as a split slice: half-way, so its own epilogue does not wait on it) */
        }
      }
      td__wgmma_wait<0>();
#pragma unroll
      for (int x = 0; x < S::MI; x++)
        td__fence_regs<BN / 2>(acc[x]);
      if (stamper)
        td__gemm_xv_stamp<XV>(hooks, TD__XV_C_LAST_MMA);
      if (prev >= 0 && lane == 0) {
#pragma unroll
        for (int r = 0; r < CLUSTER; r++) {
          if constexpr (CLUSTER > 1)
            td__mbar_arrive_cluster(empty + 8 * prev, (td__gemm_u32)r);
          else
            td__mbar_arrive(empty + 8 * prev);
        }
      }
      if constexpr (SPLITS) /* a slice of a split tile: the last one to finish runs the epilogue */
        if (part >= 0 && !td__gemm_split_fixup<BN, S::NC, S::MI>(acc, hooks, w - dp_units, part, nsplit,
                                                                 u - dp_units, cw * 128 + tid))
          continue;
      if constexpr (RAISE) /* the raiser has finished with this hand-off slot's last use */
        if (!raise_here)
          td__mbar_wait(done_free + 8 * (i & 1), ((i >> 1) + 1) & 1);

      /* ---- epilogue: registers -> C (or a peer's buffer); BCAST: -> staged tile -> every destination ---- */
      if constexpr (BCAST) {
        if constexpr (defer)
          while (pstep >= 0) /* a unit too short for the previous tile's steps: the rest now */
            pace_step();
#pragma unroll
        for (int hv = 0; hv < HALVES; hv++) { /* the staged columns [hv * EPI_COLS, (hv + 1) * EPI_COLS) */
          if constexpr (defer) {
            if (hv == 1) { /* held in registers; staged during the next unit's main loop */
              bcast_pack(acc, 1, held);
              pend = true, pend_row0 = tm * BM + cw * S::WG_ROWS, pend_col0 = tn * BN + EPI_COLS;
              break;
            }
          }
          /* the previous stores have read the staged rows before they are overwritten (with half
           * the tile staged and not deferred, the first half's stores are waited for here, inside
           * the epilogue) */
          if (tid == 0 && (i > 0 || hv > 0))
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
          asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
          td__gemm_u32 part[S::MI][2][EPI_J][4];
          bcast_pack(acc, hv, part);
          bcast_stage(part);
          const int row0 = tm * BM + cw * S::WG_ROWS, col0 = tn * BN + hv * EPI_COLS;
          if (pace) { /* paced (hv == 0 here): the first copy now, the other steps in the next main loop */
            bcast_issue(0, 1, row0, col0);
            pstep = 1;
          } else {
            bcast_issue(0, hooks.bcast_peers, row0, col0);
          }
        }
      } else {
#pragma unroll
      for (int x = 0; x < S::MI; x++) {
        long long r0 = (long long)tm * BM + cw * S::WG_ROWS + x * 64 + warp * 16 + lane / 4;
        int col0 = tl * BN + (lane % 4) * 2;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          long long r = r0 + 8 * h;
          if constexpr ((HOOKS & TD_GEMM_HOOK_ACCUMULATE) == 0 && BN % 32 == 0) {
            /* 16-byte stores after a transpose inside each quad of lanes */
            const bool valid = r < m;
            td__gemm_u16 *rowp = valid ? td__gemm_out_row<DTYPE, HOOKS>(cc, hooks, n, r) : cc;
            const bool v16 = (n % 8) == 0 && ((unsigned long long)rowp & 15ull) == 0;
#pragma unroll
            for (int jj = 0; jj < BN / 32; jj++) {
              const float *a4 = &acc[x][16 * jj + 2 * h];
              td__gemm_put_quad<DTYPE>(rowp, tl * BN + 32 * jj, n, valid, v16,
                                       td__gemm_pack2<DTYPE>(a4[0], a4[1]),
                                       td__gemm_pack2<DTYPE>(a4[4], a4[5]),
                                       td__gemm_pack2<DTYPE>(a4[8], a4[9]),
                                       td__gemm_pack2<DTYPE>(a4[12], a4[13]));
            }
          } else if (r < m) {
            td__gemm_u16 *rowp = td__gemm_out_row<DTYPE, HOOKS>(cc, hooks, n, r);
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
              td__gemm_put2<DTYPE, HOOKS>(rowp, col0 + 8 * j, n, vec, acc[x][4 * j + 2 * h],
                                          acc[x][4 * j + 2 * h + 1]);
          }
        }
      }
      }
      if (stamper)
        td__gemm_xv_stamp<XV>(hooks, TD__XV_C_STORED);
      if constexpr (RAISE) {
        if (raise_here) {
          /* The last tile: every consumer thread's stores, then a named
           * barrier over the consumer threads (CTA-scope ordering, as
           * bar.sync orders the memory accesses of the threads it joins),
           * then one thread's cumulative fence and relaxed adds: the same
           * release argument as the hand-off below, with no warp to wake. */
          /* The signal range is worked out while the stores drain (the
           * fence waits for them anyway), not after the fence. */
          const long long t0 = (long long)tm * BM, t1 = t0 + BM < m ? t0 + BM : m;
          td__gemm_u64 *first_signal = 0;
          long long signals = 0;
          if constexpr ((HOOKS & TD_GEMM_HOOK_PUSH) == 0)
            if (stamper && t0 < t1) {
              first_signal = hooks.raise_signals[0] + t0 / hooks.raise_rows;
              signals = (t1 - 1) / hooks.raise_rows - t0 / hooks.raise_rows + 1;
            }
          asm volatile("bar.sync 1, %0;" ::"n"(128 * S::NC) : "memory");
          if (stamper) {
            td__gemm_xv_stamp<XV>(hooks, TD__XV_C_DONE);
            td__gemm_xv_stamp<XV>(hooks, TD__XV_R_SEEN);
            if (t0 < t1) {
              td__gemm_raise_fence(hooks);
              td__gemm_xv_stamp<XV>(hooks, TD__XV_R_FENCED);
              if constexpr ((HOOKS & TD_GEMM_HOOK_PUSH) == 0)
                td__gemm_raise_span(hooks, first_signal, signals);
              else
                td__gemm_raise_adds<HOOKS>(hooks, t0, t1);
              td__gemm_xv_stamp<XV>(hooks, TD__XV_R_ADDED);
            }
          }
        } else {
          /* The warp's stores, then one release-arrive per warp; the raiser acquires it. */
          __syncwarp();
          if (lane == 0)
            td__mbar_arrive(done + 8 * (i & 1));
          if (stamper)
            td__gemm_xv_stamp<XV>(hooks, TD__XV_C_DONE);
        }
      }
    }
    if constexpr (defer) {
      while (pstep >= 0) /* the last unit's paced steps */
        pace_step();
      if (pend) /* the last unit's deferred half */
        bcast_flush();
    }
    if constexpr (BCAST) /* the staged rows are the CTA's: every store is done before it leaves */
      if (tid == 0)
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    if (stamper)
      td__gemm_xv_stamp<XV>(hooks, TD__XV_C_END);
  }
  if constexpr (CLUSTER > 1)
    td__cluster_sync(); /* no CTA leaves while its peer may still write into its ring */
#endif
}

/* The kernel as the nvcc-built launcher instantiates it. Launch with
 * S::THREADS threads, S::SMEM_BYTES dynamic shared memory, at most one block
 * per multiprocessor (the grid is persistent), cluster dimension CLUSTER. */
template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, int B_KN, unsigned HOOKS, int CLUSTER, int XV = 0>
__global__ void __launch_bounds__(td__gemm_sm90_shape<BM, BN, STAGES>::THREADS, 1)
    td__gemm_sm90_kernel(const __grid_constant__ td__tensor_map map_a,
                         const __grid_constant__ td__tensor_map map_b, td__gemm_u16 *c, int m, int n,
                         int k, const __grid_constant__ td_gemm_hooks hooks) {
  td__gemm_sm90_body<BM, BN, STAGES, GROUP_M, DTYPE, B_KN, HOOKS, CLUSTER, XV>(map_a, map_b, c, m, n,
                                                                           k, hooks);
}

/* The JIT's entry point: one configuration per compiled module, chosen with
 * -DTD_GEMM_BM=.. -DTD_GEMM_BN=.. -DTD_GEMM_STAGES=.. -DTD_GEMM_GROUP_M=..
 * -DTD_GEMM_DTYPE=.. -DTD_GEMM_B_KN=.. -DTD_GEMM_HOOKS=.. -DTD_GEMM_CLUSTER=..
 * and an unmangled name. The launcher must use a matching cluster dimension
 * and the B box of gemm_sm90_launch.cu. */
#if defined(TD_GEMM_BM) && defined(TD_GEMM_BN)
#ifndef TD_GEMM_STAGES
#define TD_GEMM_STAGES 4
#endif
#ifndef TD_GEMM_GROUP_M
#define TD_GEMM_GROUP_M 8
#endif
#ifndef TD_GEMM_DTYPE
#define TD_GEMM_DTYPE TD_GEMM_DT_BF16
#endif
#ifndef TD_GEMM_B_KN
#define TD_GEMM_B_KN 0
#endif
#ifndef TD_GEMM_HOOKS
#define TD_GEMM_HOOKS 0u
#endif
#ifndef TD_GEMM_CLUSTER
#define TD_GEMM_CLUSTER 1
#endif
extern "C" __global__ void __launch_bounds__(
    td__gemm_sm90_shape<TD_GEMM_BM, TD_GEMM_BN, TD_GEMM_STAGES>::THREADS, 1)
    td_gemm_sm90(const __grid_constant__ td__tensor_map map_a,
                 const __grid_constant__ td__tensor_map map_b, td__gemm_u16 *c, int m, int n, int k,
                 const __grid_constant__ td_gemm_hooks hooks) {
  td__gemm_sm90_body<TD_GEMM_BM, TD_GEMM_BN, TD_GEMM_STAGES, TD_GEMM_GROUP_M, TD_GEMM_DTYPE,
                     TD_GEMM_B_KN, TD_GEMM_HOOKS, TD_GEMM_CLUSTER>(map_a, map_b, c, m, n, k, hooks);
}
#endif

#endif
