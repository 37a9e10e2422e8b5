/* SPDX-License-Identifier: Apache-2.0
 * The sm_80 GEMM kernels nvcc compiles into this build (tiles layer, cuda
 * backend): a few tile shapes for both B layouts and dtypes, plus one variant
 * with every hook for the tests. Launched by gemm_sm90_launch.cu. */
#include "gemm_sm80.cuh"
#include "gemm_sm90_registry.h"

template <int BM, int BN, int STAGES, int DTYPE, int B_KN, unsigned HOOKS>
static td__gemm_kernel_entry td__entry(void) {
  typedef td__gemm_sm80_shape<BM, BN, STAGES, B_KN> S;
  td__gemm_kernel_entry e = {80, BM, BN, S::BK, STAGES, 8, 1, DTYPE, B_KN, HOOKS,
                             (const void *)td__gemm_sm80_kernel<BM, BN, STAGES, 8, DTYPE, B_KN, HOOKS>,
                             S::THREADS, S::SMEM_BYTES, 0 /* no staged tile */, 0 /* no variant */};
  return e;
}

static const td__gemm_kernel_entry td__sm80[] = {
    td__entry<128, 128, 4, TD_GEMM_DT_BF16, TD_GEMM_B_NK, 0>(),
    td__entry<128, 128, 4, TD_GEMM_DT_BF16, TD_GEMM_B_KN, 0>(),
    td__entry<128, 256, 3, TD_GEMM_DT_BF16, TD_GEMM_B_NK, 0>(),
    td__entry<64, 64, 4, TD_GEMM_DT_BF16, TD_GEMM_B_NK, 0>(),
    td__entry<128, 128, 4, TD_GEMM_DT_F16, TD_GEMM_B_NK, 0>(),
    td__entry<128, 128, 4, TD_GEMM_DT_F16, TD_GEMM_B_KN, 0>(),
    td__entry<128, 128, 4, TD_GEMM_DT_BF16, TD_GEMM_B_NK, TD_GEMM_HOOK_ALL>(),
    td__entry<128, 128, 4, TD_GEMM_DT_BF16, TD_GEMM_B_NK, TD_GEMM_HOOK_WAIT | TD_GEMM_HOOK_RAISE>(),
};

extern "C" const td__gemm_kernel_entry *td__gemm_sm80_kernels(int *count) {
  *count = (int)(sizeof td__sm80 / sizeof td__sm80[0]);
  return td__sm80;
}
