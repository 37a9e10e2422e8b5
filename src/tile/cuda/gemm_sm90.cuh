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
 * setmaxnreg moves registers from the producer (40) to the consumers.
 *
 * Tile configuration comes from template parameters, which the JIT sets from
 * -D values through td_gemm_sm90_jit_entry below; the benchmark and the
 * launcher instantiate a few with nvcc (gemm_sm90.cu). No host header is
 * included: NVRTC compiles this file as is. */
#ifndef TD_TILE_CUDA_GEMM_SM90_CUH
#define TD_TILE_CUDA_GEMM_SM90_CUH

#include "gemm_sm80_hooks.cuh"
#include "gemm_sm90_wgmma.cuh"

/* The 128-byte opaque CUtensorMap, declared here so that NVRTC needs no cuda.h. */
struct __align__(64) td__tensor_map {
  td__u64 opaque[16];
};

/* ---- small PTX wrappers: mbarriers, TMA, wgmma fences ---- */

__device__ __forceinline__ td__u32 td__smem_addr(const void *p) {
  return (td__u32)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void td__mbar_init(td__u32 bar, td__u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void td__mbar_expect_tx(td__u32 bar, td__u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void td__mbar_arrive(td__u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void td__mbar_wait(td__u32 bar, td__u32 parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void td__tma_load_2d(td__u32 dst, const td__tensor_map *map, td__u32 bar,
                                                int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"((td__u64)map), "r"(bar), "r"(x), "r"(y)
      : "memory");
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
__device__ __forceinline__ td__u64 td__smem_desc(td__u32 addr, td__u32 lbo, td__u32 sbo) {
  return (td__u64)((addr & 0x3FFFF) >> 4) | ((td__u64)(lbo >> 4) << 16) |
         ((td__u64)(sbo >> 4) << 32) | (1ull << 62);
}

/* One k16 step for a 64-row slice: dispatch on BN and dtype at compile time. */
template <int BN, int DTYPE, int TRANS_B>
__device__ __forceinline__ void td__wgmma_step(float *d, td__u64 da, td__u64 db, int acc) {
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
  /* ring + 2 mbarriers per stage + 1024 for aligning the ring to the swizzle atom */
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;
};

/* The kernel. B_KN = 1 reads B as [K,N] (MN-major wgmma operand, needs BN % 64
 * == 0, four TMA boxes of 64 columns per stage); 0 reads [N,K]. */
template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, int B_KN, unsigned HOOKS>
__device__ __forceinline__ void td__gemm_sm90_body(const td__tensor_map &map_a,
                                                   const td__tensor_map &map_b, td__u16 *c, int m,
                                                   int n, int k, const td_gemm_hooks &hooks) {
  /* wgmma and setmaxnreg exist only on sm_90a; other passes of a multi-arch
   * build get an empty kernel that the launcher never selects there. */
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  typedef td__gemm_sm90_shape<BM, BN, STAGES> S;
  static_assert(BM == 64 || BM == 128 || BM == 256, "BM must be 64, 128 or 256");
  static_assert(BN % 16 == 0 && BN <= 256 && (BN <= 128 || BN % 32 == 0), "unsupported BN");
  static_assert(!B_KN || BN % 64 == 0, "B as [K,N] needs BN % 64 == 0");
  static_assert(S::SMEM_BYTES <= 232448, "tile ring does not fit in shared memory");

  extern __shared__ unsigned char td__smem_raw[];
  td__u32 base = td__smem_addr(td__smem_raw);
  td__u32 ring = (base + 1023) & ~1023u;
  td__u32 bars = ring + STAGES * S::STAGE_BYTES; /* full[STAGES], then empty[STAGES] */

  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n;
  const int nk = (k + S::BK - 1) / S::BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      td__mbar_init(bars + 8 * s, 1);                       /* the producer's expect_tx */
      td__mbar_init(bars + 8 * (STAGES + s), 4 * S::NC);     /* one arrive per consumer warp */
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    /* ---- producer ---- */
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      int stage = 0;
      td__u32 phase = 0;
      int waits_on = 1;
      (void)waits_on;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        td__gemm_tile_coords(t, tiles_m, tiles_n, GROUP_M, &tm, &tn);
        if constexpr ((HOOKS & TD_GEMM_HOOK_WAIT) != 0) {
          long long r0 = (long long)tm * BM, r1 = r0 + BM < m ? r0 + BM : m;
          if (waits_on && td__gemm_wait_rows(hooks, r0, r1))
            waits_on = 0;
          /* TMA reads through the async proxy: order it after the acquire. */
          asm volatile("fence.proxy.async.global;" ::: "memory");
        }
        for (int kb = 0; kb < nk; kb++) {
          td__mbar_wait(bars + 8 * (STAGES + stage), phase ^ 1);
          td__u32 full = bars + 8 * stage;
          td__u32 sa = ring + stage * S::STAGE_BYTES, sb = sa + S::A_BYTES;
          td__mbar_expect_tx(full, S::STAGE_BYTES);
          td__tma_load_2d(sa, &map_a, full, kb * S::BK, tm * BM);
          if constexpr (B_KN) {
#pragma unroll
            for (int j = 0; j < BN / 64; j++)
              td__tma_load_2d(sb + j * 64 * S::BK * 2, &map_b, full, tn * BN + 64 * j, kb * S::BK);
          } else {
            td__tma_load_2d(sb, &map_b, full, kb * S::BK, tn * BN);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    /* ---- consumers ---- */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int cw = wg - 1;                 /* consumer index */
    const int tid = threadIdx.x - 128 * wg; /* 0..127 inside the warpgroup */
    const int warp = tid / 32, lane = tid % 32;
    float acc[S::MI][BN / 2];
    int stage = 0;
    td__u32 phase = 0;
    const bool vec = (n % 2) == 0;

    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      td__gemm_tile_coords(t, tiles_m, tiles_n, GROUP_M, &tm, &tn);
      int prev = -1;
      for (int kb = 0; kb < nk; kb++) {
        td__mbar_wait(bars + 8 * stage, phase);
        td__u32 sa = ring + stage * S::STAGE_BYTES + cw * S::WG_ROWS * 128;
        td__u32 sb = ring + stage * S::STAGE_BYTES + S::A_BYTES;
#pragma unroll
        for (int i = 0; i < S::MI; i++)
          td__fence_regs<BN / 2>(acc[i]);
        td__wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < S::BK / 16; kk++) {
          td__u64 db = B_KN ? td__smem_desc(sb + kk * 16 * 128, 64 * S::BK * 2, 1024)
                            : td__smem_desc(sb + kk * 32, 16, 1024);
#pragma unroll
          for (int i = 0; i < S::MI; i++) {
            td__u64 da = td__smem_desc(sa + i * 64 * 128 + kk * 32, 16, 1024);
            td__wgmma_step<BN, DTYPE, B_KN>(acc[i], da, db, (kb | kk) != 0);
          }
        }
        td__wgmma_commit();
#pragma unroll
        for (int i = 0; i < S::MI; i++)
          td__fence_regs<BN / 2>(acc[i]);
        /* The group before this one has retired: its stage may be refilled. */
        td__wgmma_wait<1>();
        if (prev >= 0 && lane == 0)
          td__mbar_arrive(bars + 8 * (STAGES + prev));
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      td__wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < S::MI; i++)
        td__fence_regs<BN / 2>(acc[i]);
      if (prev >= 0 && lane == 0)
        td__mbar_arrive(bars + 8 * (STAGES + prev));

      /* ---- epilogue: registers -> C (or a peer's buffer), then hooks ---- */
#pragma unroll
      for (int i = 0; i < S::MI; i++) {
        long long r0 = (long long)tm * BM + cw * S::WG_ROWS + i * 64 + warp * 16 + lane / 4;
        int col0 = tn * BN + (lane % 4) * 2;
#pragma unroll
        for (int h = 0; h < 2; h++) {
          long long r = r0 + 8 * h;
          if (r < m) {
            td__u16 *rowp = td__gemm_out_row<DTYPE, HOOKS>(c, hooks, n, r);
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
              td__gemm_put2<DTYPE, HOOKS>(rowp, col0 + 8 * j, n, vec, acc[i][4 * j + 2 * h],
                                          acc[i][4 * j + 2 * h + 1]);
          }
        }
      }
      if constexpr ((HOOKS & TD_GEMM_HOOK_RAISE) != 0) {
        /* Every consumer thread's stores, then one release per covered signal. */
        asm volatile("bar.sync 1, %0;" ::"n"(128 * S::NC) : "memory");
        if (threadIdx.x == 128) {
          long long r0 = (long long)tm * BM, r1 = r0 + BM < m ? r0 + BM : m;
          td__gemm_raise_rows<HOOKS>(hooks, r0, r1);
        }
      }
    }
  }
#endif
}

/* The kernel as the nvcc-built launcher instantiates it. Launch with
 * S::THREADS threads, S::SMEM_BYTES dynamic shared memory, at most one block
 * per multiprocessor (the grid is persistent). */
template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, int B_KN, unsigned HOOKS>
__global__ void __launch_bounds__(td__gemm_sm90_shape<BM, BN, STAGES>::THREADS, 1)
    td__gemm_sm90_kernel(const __grid_constant__ td__tensor_map map_a,
                         const __grid_constant__ td__tensor_map map_b, td__u16 *c, int m, int n,
                         int k, const __grid_constant__ td_gemm_hooks hooks) {
  td__gemm_sm90_body<BM, BN, STAGES, GROUP_M, DTYPE, B_KN, HOOKS>(map_a, map_b, c, m, n, k, hooks);
}

/* The JIT's entry point: one configuration per compiled module, chosen with
 * -DTD_GEMM_BM=.. -DTD_GEMM_BN=.. -DTD_GEMM_STAGES=.. -DTD_GEMM_GROUP_M=..
 * -DTD_GEMM_DTYPE=.. -DTD_GEMM_B_KN=.. -DTD_GEMM_HOOKS=.. and an unmangled name. */
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
extern "C" __global__ void __launch_bounds__(
    td__gemm_sm90_shape<TD_GEMM_BM, TD_GEMM_BN, TD_GEMM_STAGES>::THREADS, 1)
    td_gemm_sm90(const __grid_constant__ td__tensor_map map_a,
                 const __grid_constant__ td__tensor_map map_b, td__u16 *c, int m, int n, int k,
                 const __grid_constant__ td_gemm_hooks hooks) {
  td__gemm_sm90_body<TD_GEMM_BM, TD_GEMM_BN, TD_GEMM_STAGES, TD_GEMM_GROUP_M, TD_GEMM_DTYPE,
                     TD_GEMM_B_KN, TD_GEMM_HOOKS>(map_a, map_b, c, m, n, k, hooks);
}
#endif

#endif
