/* SPDX-License-Identifier: Apache-2.0
 * The sm_90a GEMM kernels that nvcc compiles into this build for B given as
 * [K,N] (tiles layer, cuda backend; wgmma reads B as an MN-major operand, so
 * BN is a multiple of 64). See gemm_sm90_kernels_nk.cu for the [N,K] set. */
#include "gemm_sm90.cuh"
#include "gemm_sm90_registry.h"

template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, unsigned HOOKS, int CLUSTER = 1, int XV = 0>
static td__gemm_kernel_entry td__entry(void) {
  typedef td__gemm_sm90_shape<BM, BN, STAGES> S;
  /* BCAST stages the tile (or half of it) for its TMA stores beside the ring (gemm_sm90.cuh) */
  const int cols = (HOOKS & TD_GEMM_HOOK_BCAST) ? td__gemm_sm90_bcast<BM, BN, STAGES>::COLS : 0;
  td__gemm_kernel_entry e = {90, BM, BN, S::BK, STAGES, GROUP_M, CLUSTER, DTYPE, TD_GEMM_B_KN, HOOKS,
                             (const void *)td__gemm_sm90_kernel<BM, BN, STAGES, GROUP_M, DTYPE,
                                                                TD_GEMM_B_KN, HOOKS, CLUSTER, XV>,
                             S::THREADS, S::SMEM_BYTES + BM * cols * 2, cols, XV == TD__XV_BCAST_DEFER};
  return e;
}

static const td__gemm_kernel_entry td__kn[] = {
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 192, 5, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 64, 8, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, 0>(), /* cuBLASLt's pick at M = 1024, N = 29568 (docs/perf.md) */
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_ALL>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_F16, 0>(),
    /* zero-copy AllGather + GEMM of ranks sharing a GPU (fused ag_gemm) */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER>(),
    td__entry<128, 192, 5, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER>(),
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER>(), /* halves of 128 rows, from two sources */
    /* the same for every rank at once, each rank's B and C a column source: one launch */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT>(),
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT>(),
    /* ... in clusters of 2 along M, each k-block's B multicast to the pair (cuBLASLt's 2x1x1 at 4096 x 3696 x 8192) */
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, 2>(),
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, 2>(), /* 0.99x cuBLAS plain at K = 12288 */
    /* GEMM + ReduceScatter of ranks sharing a GPU without partial sums (fused gemm_rs kgather) */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER>(),
    /* the same for every rank at once, each row stored at its owner's
     * (gemm_rs) or at every rank's (gemm_ar): one launch, B read once */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH>(),
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST>(), /* + 32 KiB: half staged */
    /* ... its second half deferred into the next tile's main loop (bcast_defer; variant 1) */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST, 1, TD__XV_BCAST_DEFER>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST>(),
};

extern "C" const td__gemm_kernel_entry *td__gemm_sm90_kernels_kn(int *count) {
  *count = (int)(sizeof td__kn / sizeof td__kn[0]);
  return td__kn;
}
