/* SPDX-License-Identifier: Apache-2.0
 * CUDA tile: the simple, correct GEMM tile (TD_TASK_GEMM) run by one thread
 * block: c = alpha * op(a) * op(b) (+ c with TD_GEMM_ACCUMULATE), f32
 * accumulation. a is M x K (K x M stored with TRANS_A), b is K x N (N x K with
 * TRANS_B), c is M x N; the block walks the task's c view in sub-tiles.
 *
 * Two paths. The tensor-core path (TD_GEMM_MMA, sm_80+) takes bf16 or f16
 * inputs of one dtype without transposes whose K and N are multiples of 8 and
 * whose rows are 16-byte aligned: 128 x 128 x 32 sub-tiles, 8 warps of 64 x 32,
 * mma.sync m16n8k16, global loads for step k+1 held in registers while step k
 * computes from the other of two shared buffers. Rows or columns past the
 * edge load as zeros and are not stored, so shapes need not divide. Every other
 * case takes the SIMT path (64 x 64 x 16, 4 x 4 per thread, any dtype and
 * transpose). Neither is the fast Hopper GEMM (src/tile/cuda/gemm_sm90*);
 * they exist so every plan runs and so the executor can be measured. */

#define TD_GEMM_TRANS_A 1u
#define TD_GEMM_TRANS_B 2u
#define TD_GEMM_ACCUMULATE 4u

__device__ __forceinline__ void td_gemm_store(const td_dev_task &t, td_dev_i64 i, td_dev_i64 j, float acc) {
  if (i >= t.c.rows || j >= t.c.cols)
    return;
  float v = t.alpha * acc;
  if (t.op & TD_GEMM_ACCUMULATE)
    v += td_load_f(t.c, i, j);
  td_store_f(t.c, i, j, v);
}

/* op(a)[i][k] and op(b)[k][j] with the transposes applied. */
__device__ __forceinline__ float td_gemm_a(const td_dev_task &t, td_dev_i64 i, td_dev_i64 k) {
  return (t.op & TD_GEMM_TRANS_A) ? td_load_f(t.a, k, i) : td_load_f(t.a, i, k);
}
__device__ __forceinline__ float td_gemm_b(const td_dev_task &t, td_dev_i64 k, td_dev_i64 j) {
  return (t.op & TD_GEMM_TRANS_B) ? td_load_f(t.b, j, k) : td_load_f(t.b, k, j);
}

__device__ void td_gemm_simt(const td_dev_task &t, td_dev_i64 K) {
  __shared__ float As[16][64 + 4], Bs[16][64 + 4];
  const td_dev_i64 M = t.c.rows, N = t.c.cols;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16; /* 16 x 16 threads, 4 x 4 each */
  for (td_dev_i64 m0 = 0; m0 < M; m0 += 64) {
    for (td_dev_i64 n0 = 0; n0 < N; n0 += 64) {
      float acc[4][4];
      for (int r = 0; r < 4; r++)
        for (int s = 0; s < 4; s++)
          acc[r][s] = 0.0f;
      for (td_dev_i64 k0 = 0; k0 < K; k0 += 16) {
        for (int e = threadIdx.x; e < 16 * 64; e += TD_THREADS) {
          const int kk = e / 64, x = e % 64;
          const td_dev_i64 gi = m0 + x, gj = n0 + x, gk = k0 + kk;
          As[kk][x] = (gi < M && gk < K) ? td_gemm_a(t, gi, gk) : 0.0f;
          Bs[kk][x] = (gj < N && gk < K) ? td_gemm_b(t, gk, gj) : 0.0f;
        }
        __syncthreads();
        for (int kk = 0; kk < 16; kk++)
          for (int r = 0; r < 4; r++)
            for (int s = 0; s < 4; s++)
              acc[r][s] += As[kk][ty * 4 + r] * Bs[kk][tx * 4 + s];
        __syncthreads();
      }
      for (int r = 0; r < 4; r++)
        for (int s = 0; s < 4; s++)
          td_gemm_store(t, m0 + ty * 4 + r, n0 + tx * 4 + s, acc[r][s]);
    }
  }
}

#ifdef TD_GEMM_MMA
#define TD_MMA_BM 128
#define TD_MMA_BN 128
#define TD_MMA_BK 32

__device__ __forceinline__ unsigned int td_pack2(unsigned short lo, unsigned short hi) {
  return (unsigned int)lo | ((unsigned int)hi << 16);
}

__device__ __forceinline__ void td_mma16816(float *d, const unsigned int *a, const unsigned int *b, int is_bf16) {
  if (is_bf16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ bool td_gemm_mma_fits(const td_dev_task &t, td_dev_i64 K) {
  const td_dev_view &a = t.a, &b = t.b;
  return (t.op & (TD_GEMM_TRANS_A | TD_GEMM_TRANS_B)) == 0 && a.dtype == b.dtype &&
         (a.dtype == TD_DT_BF16 || a.dtype == TD_DT_F16) && K % 8 == 0 && t.c.cols % 8 == 0 &&
         a.ld % 8 == 0 && b.ld % 8 == 0 && (a.ptr % 16) == 0 && (b.ptr % 16) == 0;
}

__device__ void td_gemm_mma(const td_dev_task &t, td_dev_i64 K) {
  __shared__ __align__(16) unsigned short As[2][TD_MMA_BM][TD_MMA_BK + 8];
  __shared__ __align__(16) unsigned short Bs[2][TD_MMA_BK][TD_MMA_BN + 8];
  const td_dev_i64 M = t.c.rows, N = t.c.cols;
  const unsigned short *A = (const unsigned short *)t.a.ptr, *B = (const unsigned short *)t.b.ptr;
  const int is_bf16 = t.a.dtype == TD_DT_BF16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tig = lane % 4;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
  for (td_dev_i64 m0 = 0; m0 < M; m0 += TD_MMA_BM) {
    for (td_dev_i64 n0 = 0; n0 < N; n0 += TD_MMA_BN) {
      float acc[4][4][4];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
          for (int r = 0; r < 4; r++)
            acc[i][j][r] = 0.0f;
      uint4 ra[2], rb[2];
      /* Global -> registers for the step at k0 (zeros past the edges). */
      auto load = [&](td_dev_i64 k0) {
        for (int r = 0; r < 2; r++) {
          const int idx = threadIdx.x + r * TD_THREADS;
          const int arow = idx / 4, acol = (idx % 4) * 8;
          const td_dev_i64 gi = m0 + arow, gk = k0 + acol;
          ra[r] = (gi < M && gk < K) ? *(const uint4 *)(A + gi * t.a.ld + gk) : make_uint4(0, 0, 0, 0);
          const int brow = idx / 16, bcol = (idx % 16) * 8;
          const td_dev_i64 bk = k0 + brow, bj = n0 + bcol;
          rb[r] = (bk < K && bj < N) ? *(const uint4 *)(B + bk * t.b.ld + bj) : make_uint4(0, 0, 0, 0);
        }
      };
      auto stash = [&](int buf) {
        for (int r = 0; r < 2; r++) {
          const int idx = threadIdx.x + r * TD_THREADS;
          *(uint4 *)&As[buf][idx / 4][(idx % 4) * 8] = ra[r];
          *(uint4 *)&Bs[buf][idx / 16][(idx % 16) * 8] = rb[r];
        }
      };
      load(0);
      stash(0);
      __syncthreads();
      int buf = 0;
      for (td_dev_i64 k0 = 0; k0 < K; k0 += TD_MMA_BK) {
        const bool more = k0 + TD_MMA_BK < K;
        if (more)
          load(k0 + TD_MMA_BK);
        for (int kk = 0; kk < TD_MMA_BK; kk += 16) {
          unsigned int af[4][4], bf[4][2];
          for (int i = 0; i < 4; i++) {
            const int r0 = wm + i * 16 + g;
            af[i][0] = *(const unsigned int *)&As[buf][r0][kk + tig * 2];
            af[i][1] = *(const unsigned int *)&As[buf][r0 + 8][kk + tig * 2];
            af[i][2] = *(const unsigned int *)&As[buf][r0][kk + tig * 2 + 8];
            af[i][3] = *(const unsigned int *)&As[buf][r0 + 8][kk + tig * 2 + 8];
          }
          for (int j = 0; j < 4; j++) {
            const int cn = wn + j * 8 + g, k = kk + tig * 2;
            bf[j][0] = td_pack2(Bs[buf][k][cn], Bs[buf][k + 1][cn]);
            bf[j][1] = td_pack2(Bs[buf][k + 8][cn], Bs[buf][k + 9][cn]);
          }
          for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
              td_mma16816(acc[i][j], af[i], bf[j], is_bf16);
        }
        if (more)
          stash(buf ^ 1);
        __syncthreads();
        buf ^= 1;
      }
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
          const td_dev_i64 r = m0 + wm + i * 16 + g, c = n0 + wn + j * 8 + tig * 2;
          td_gemm_store(t, r, c, acc[i][j][0]);
          td_gemm_store(t, r, c + 1, acc[i][j][1]);
          td_gemm_store(t, r + 8, c, acc[i][j][2]);
          td_gemm_store(t, r + 8, c + 1, acc[i][j][3]);
        }
    }
  }
}
#endif

__device__ void td_tile_gemm(const td_dev_task &t) {
  const td_dev_i64 K = (t.op & TD_GEMM_TRANS_A) ? t.a.rows : t.a.cols;
#ifdef TD_GEMM_MMA
  if (td_gemm_mma_fits(t, K)) {
    td_gemm_mma(t, K);
    return;
  }
#endif
  td_gemm_simt(t, K);
}
