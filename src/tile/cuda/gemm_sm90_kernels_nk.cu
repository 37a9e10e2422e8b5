/* SPDX-License-Identifier: Apache-2.0
 * The sm_90a GEMM kernels that nvcc compiles into this build for B given as
 * [N,K] (tiles layer, cuda backend): the configurations the benchmark and
 * `tdist tune gemm` choose from, plus the hooked variants the tests use. Any
 * other configuration is compiled at run time by the JIT from gemm_sm90.cuh.
 * Kept apart from the [K,N] kernels so the two compile in parallel. */
#include "gemm_sm90.cuh"
#include "gemm_sm90_registry.h"

template <int BM, int BN, int STAGES, int GROUP_M, int DTYPE, unsigned HOOKS, int CLUSTER = 1>
static td__gemm_kernel_entry td__entry(void) {
  typedef td__gemm_sm90_shape<BM, BN, STAGES> S;
  td__gemm_kernel_entry e = {90, BM, BN, S::BK, STAGES, GROUP_M, CLUSTER, DTYPE, TD_GEMM_B_NK, HOOKS,
                             (const void *)td__gemm_sm90_kernel<BM, BN, STAGES, GROUP_M, DTYPE,
                                                                TD_GEMM_B_NK, HOOKS, CLUSTER>,
                             S::THREADS, S::SMEM_BYTES, 0 /* no staged tile */, 0 /* no variant */};
  return e;
}

static const unsigned WR = TD_GEMM_HOOK_WAIT | TD_GEMM_HOOK_RAISE;
static const unsigned PR = TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_RAISE;

static const td__gemm_kernel_entry td__nk[] = {
    /* large M: 128 x BN tiles, BN chosen so N divides into few partial waves;
     * cluster 2 shares B between two CTAs through TMA multicast */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 256, 4, 16, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 224, 5, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 224, 5, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 192, 5, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 192, 5, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 160, 6, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 160, 6, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, 0, 2>(),
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, 0, 2>(),
    /* small M: many thin tiles so every multiprocessor streams B */
    td__entry<128, 64, 8, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<128, 32, 8, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<64, 64, 8, 8, TD_GEMM_DT_BF16, 0>(),
    td__entry<64, 32, 8, 8, TD_GEMM_DT_BF16, 0>(),
    /* hooked variants of the configurations the benchmark picks: wait+raise
     * (AG+GEMM); push+raise (GEMM+RS); every hook */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, WR>(),
    td__entry<128, 256, 4, 8, TD_GEMM_DT_BF16, WR, 2>(),
    td__entry<128, 256, 4, 16, TD_GEMM_DT_BF16, WR, 2>(), /* the 8192-row winner */
    td__entry<128, 224, 5, 8, TD_GEMM_DT_BF16, WR, 2>(),
    td__entry<128, 224, 5, 8, TD_GEMM_DT_BF16, WR>(),
    td__entry<128, 160, 6, 8, TD_GEMM_DT_BF16, WR>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, WR>(),
    td__entry<64, 64, 8, 8, TD_GEMM_DT_BF16, WR>(),
    /* one hook alone at M = 128's configuration: gemm_bench --hook-modes splits the overhead */
    td__entry<64, 64, 8, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_WAIT>(),
    td__entry<64, 64, 8, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_RAISE>(),
    td__entry<256, 128, 4, 8, TD_GEMM_DT_BF16, WR, 2>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, PR>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_ALL>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_BF16, TD_GEMM_HOOK_ALL, 2>(),
    /* fp16 */
    td__entry<128, 256, 4, 8, TD_GEMM_DT_F16, 0>(),
    td__entry<128, 128, 6, 8, TD_GEMM_DT_F16, 0>(),
};

extern "C" const td__gemm_kernel_entry *td__gemm_sm90_kernels_nk(int *count) {
  *count = (int)(sizeof td__nk / sizeof td__nk[0]);
  return td__nk;
}
