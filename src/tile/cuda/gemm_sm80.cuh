/* SPDX-License-Identifier: Apache-2.0
 * The sm_80 GEMM tile kernel (tiles layer, cuda backend), for A100/H800/L20
 * class GPUs and as the portable CUDA path: C[M,N] = A[M,K] * B with 16-bit
 * operands, fp32 accumulation through mma.sync m16n8k16, operands staged by
 * cp.async (16-byte pieces, zero-filled past the edges) into a STAGES-deep
 * ring of padded shared-memory tiles and read with ldmatrix (.trans for B
 * given as [K,N]). 256 threads = 8 warps in a 2 x 4 grid over a BM x BN tile;
 * the grid is persistent over the tiles, in the same grouped order as the
 * sm_90a kernel, with the same hooks (gemm_sm80_hooks.cuh).
 *
 * NVRTC-compatible; the JIT entry td_gemm_sm80 is built from -D values like
 * the sm_90a one. */
#ifndef TD_TILE_CUDA_GEMM_SM80_CUH
#define TD_TILE_CUDA_GEMM_SM80_CUH

#ifndef TD_JIT_CONCAT /* the JIT pastes the pieces in order instead */
#include "gemm_sm80_hooks.cuh"
#endif

template <int BM, int BN, int STAGES, int B_KN>
struct td__gemm_sm80_shape {
  static constexpr int BK = 32;
  static constexpr int THREADS = 256;
  static constexpr int WM = BM / 2, WN = BN / 4; /* warp tile */
  static constexpr int MI = WM / 16, NI = WN / 8;
  static constexpr int A_PITCH = BK + 8; /* elements; the pad spreads ldmatrix rows over all banks */
  static constexpr int B_ROWS = B_KN ? BK : BN;
  static constexpr int B_PITCH = B_KN ? BN + 8 : BK + 8;
  static constexpr int A_ELEMS = BM * A_PITCH, B_ELEMS = B_ROWS * B_PITCH;
  static constexpr int SMEM_BYTES = STAGES * (A_ELEMS + B_ELEMS) * 2;
};

__device__ __forceinline__ void td__cp_async16(td__gemm_u32 dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void td__ldmatrix_x4(td__gemm_u32 *r, td__gemm_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void td__ldmatrix_x4_trans(td__gemm_u32 *r, td__gemm_u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <int DTYPE>
__device__ __forceinline__ void td__mma_16816(float *d, const td__gemm_u32 *a, const td__gemm_u32 *b) {
  if constexpr (DTYPE == TD_GEMM_DT_BF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Issues the cp.async pieces of k-block kb into ring slot `slot`. */
template <int BM, int BN, int STAGES, int B_KN>
__device__ __forceinline__ void td__gemm_sm80_load(td__gemm_u32 sa, td__gemm_u32 sb, const td__gemm_u16 *a,
                                                   const td__gemm_u16 *b, int m, int n, int k, int m0,
                                                   int n0, int kb) {
  typedef td__gemm_sm80_shape<BM, BN, STAGES, B_KN> S;
  const int k0 = kb * S::BK;
#pragma unroll
  for (int i = threadIdx.x; i < BM * (S::BK / 8); i += S::THREADS) {
    int r = i / (S::BK / 8), ch = i % (S::BK / 8);
    int gr = m0 + r, gk = k0 + ch * 8;
    bool ok = gr < m && gk < k;
    const td__gemm_u16 *src = ok ? a + (long long)gr * k + gk : a;
    td__cp_async16(sa + (r * S::A_PITCH + ch * 8) * 2, src, ok);
  }
  if constexpr (B_KN) {
#pragma unroll
    for (int i = threadIdx.x; i < S::BK * (BN / 8); i += S::THREADS) {
      int r = i / (BN / 8), ch = i % (BN / 8);
      int gk = k0 + r, gn = n0 + ch * 8;
      bool ok = gk < k && gn < n;
      const td__gemm_u16 *src = ok ? b + (long long)gk * n + gn : b;
      td__cp_async16(sb + (r * S::B_PITCH + ch * 8) * 2, src, ok);
    }
  } else {
#pragma unroll
    for (int i = threadIdx.x; i < BN * (S::BK / 8); i += S::THREADS) {
      int r = i / (S::BK / 8), ch = i % (S::BK / 8);
      int gn = n0 + r, gk = k0 + ch * 8;
      bool ok = gn < n && gk < k;
      const td__gemm_u16 *src = ok ? b + (long long)gn * k + gk : b;
      td__cp_async16(sb + (r * S::B_PITCH + ch * 8) * 2, src, ok);
    }
  }
}

template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, int B_KN, unsigned HOOKS>
__device__ __forceinline__ void td__gemm_sm80_body(const td__gemm_u16 *a, const td__gemm_u16 *b, td__gemm_u16 *c,
                                                   int m, int n, int k,
                                                   const td_gemm_hooks &hooks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  typedef td__gemm_sm80_shape<BM, BN, STAGES, B_KN> S;
  static_assert(S::MI >= 1 && S::NI % 2 == 0, "BM must be >= 32 and BN a multiple of 64");
  static_assert((HOOKS & (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_NSPLIT)) == 0,
                "GATHER, KGATHER, BCAST and NSPLIT exist for the sm_90a kernel only");
  extern __shared__ __align__(16) unsigned char td__smem80[];
  const td__gemm_u32 smem = (td__gemm_u32)__cvta_generic_to_shared(td__smem80);
  const td__gemm_u32 ring_b = smem + STAGES * S::A_ELEMS * 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;
  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int nk = (k + S::BK - 1) / S::BK;
  const bool vec = (n % 2) == 0;
  int waits_on = 1;
  (void)waits_on;

  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    int tm, tn;
    td__gemm_tile_coords(t, tiles_m, tiles_n, GROUP_M, &tm, &tn);
    const int m0 = tm * BM, n0 = tn * BN;
    if constexpr ((HOOKS & TD_GEMM_HOOK_WAIT) != 0) {
      __shared__ int timed_out;
      if (threadIdx.x < 32) {
        long long r1 = m0 + BM < m ? m0 + BM : m;
        int late = waits_on ? td__gemm_wait_rows(hooks, m0, r1) : 1;
        if (threadIdx.x == 0)
          timed_out = late;
      }
      __syncthreads(); /* warp 0's acquires now order every thread's loads */
      if (timed_out)
        waits_on = 0;
    }
    float acc[S::MI][S::NI][4];
#pragma unroll
    for (int i = 0; i < S::MI; i++)
#pragma unroll
      for (int j = 0; j < S::NI; j++)
#pragma unroll
        for (int q = 0; q < 4; q++)
          acc[i][j][q] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < nk)
        td__gemm_sm80_load<BM, BN, STAGES, B_KN>(smem + s * S::A_ELEMS * 2,
                                                 ring_b + s * S::B_ELEMS * 2, a, b, m, n, k, m0,
                                                 n0, s);
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
    for (int kb = 0; kb < nk; kb++) {
      asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2) : "memory");
      __syncthreads();
      int next = kb + STAGES - 1;
      if (next < nk) {
        int slot = next % STAGES;
        td__gemm_sm80_load<BM, BN, STAGES, B_KN>(smem + slot * S::A_ELEMS * 2,
                                                 ring_b + slot * S::B_ELEMS * 2, a, b, m, n, k,
                                                 m0, n0, next);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
      const int slot = kb % STAGES;
      const td__gemm_u32 sa = smem + slot * S::A_ELEMS * 2, sb = ring_b + slot * S::B_ELEMS * 2;
#pragma unroll
      for (int kk = 0; kk < S::BK; kk += 16) {
        td__gemm_u32 af[S::MI][4], bf[S::NI][2];
#pragma unroll
        for (int i = 0; i < S::MI; i++) {
          int row = wm * S::WM + i * 16 + (lane % 16), col = kk + (lane / 16) * 8;
          td__ldmatrix_x4(af[i], sa + (row * S::A_PITCH + col) * 2);
        }
#pragma unroll
        for (int j = 0; j < S::NI; j += 2) {
          td__gemm_u32 r[4];
          if constexpr (B_KN) {
            int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
            int ncol = wn * S::WN + j * 8 + (lane >> 4) * 8;
            td__ldmatrix_x4_trans(r, sb + (krow * S::B_PITCH + ncol) * 2);
          } else {
            int nrow = wn * S::WN + j * 8 + (lane & 7) + (lane >> 4) * 8;
            int kcol = kk + ((lane >> 3) & 1) * 8;
            td__ldmatrix_x4(r, sb + (nrow * S::B_PITCH + kcol) * 2);
          }
          bf[j][0] = r[0];
          bf[j][1] = r[1];
          bf[j + 1][0] = r[2];
          bf[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < S::MI; i++)
#pragma unroll
          for (int j = 0; j < S::NI; j++)
            td__mma_16816<DTYPE>(acc[i][j], af[i], bf[j]);
      }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads(); /* the ring is refilled by the next tile */

#pragma unroll
    for (int i = 0; i < S::MI; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        long long r = (long long)m0 + wm * S::WM + i * 16 + lane / 4 + 8 * h;
        if (r < m) {
          td__gemm_u16 *rowp = td__gemm_out_row<DTYPE, HOOKS>(c, hooks, n, r);
#pragma unroll
          for (int j = 0; j < S::NI; j++)
            td__gemm_put2<DTYPE, HOOKS>(rowp, n0 + wn * S::WN + j * 8 + (lane % 4) * 2, n, vec,
                                        acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        }
      }
    if constexpr ((HOOKS & TD_GEMM_HOOK_RAISE) != 0) {
      __syncthreads();
      if (threadIdx.x == 0) {
        long long r1 = m0 + BM < m ? m0 + BM : m;
        td__gemm_raise_rows<HOOKS>(hooks, m0, r1);
      }
    }
  }
#endif
}

template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, int B_KN, unsigned HOOKS>
__global__ void __launch_bounds__(256)
    td__gemm_sm80_kernel(const td__gemm_u16 *a, const td__gemm_u16 *b, td__gemm_u16 *c, int m, int n, int k,
                         const __grid_constant__ td_gemm_hooks hooks) {
  td__gemm_sm80_body<BM, BN, STAGES, GROUP_M, DTYPE, B_KN, HOOKS>(a, b, c, m, n, k, hooks);
}

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
extern "C" __global__ void __launch_bounds__(256)
    td_gemm_sm80(const td__gemm_u16 *a, const td__gemm_u16 *b, td__gemm_u16 *c, int m, int n, int k,
                 const __grid_constant__ td_gemm_hooks hooks) {
  td__gemm_sm80_body<TD_GEMM_BM, TD_GEMM_BN, TD_GEMM_STAGES, TD_GEMM_GROUP_M, TD_GEMM_DTYPE,
                     TD_GEMM_B_KN, TD_GEMM_HOOKS>(a, b, c, m, n, k, hooks);
}
#endif

#endif
