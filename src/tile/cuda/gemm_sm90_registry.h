/* SPDX-License-Identifier: Apache-2.0
 * Internal to the CUDA GEMM launchers (tiles layer): the table of kernels that
 * nvcc compiled into this build. Each kernels file (gemm_sm90_kernels_*.cu,
 * gemm_sm80.cu) contributes one array; gemm_sm90_launch.cu looks entries up
 * by configuration, dtype, B layout and hook flags. */
#ifndef TD_TILE_CUDA_GEMM_SM90_REGISTRY_H
#define TD_TILE_CUDA_GEMM_SM90_REGISTRY_H

#include "gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td__gemm_kernel_entry {
  int arch;                   /* 80 or 90 */
  int bm, bn, bk, stages, group_m, cluster;
  int dtype;                  /* TD_GEMM_DT_* */
  int b_kn;                   /* TD_GEMM_B_NK / TD_GEMM_B_KN */
  unsigned hooks;             /* TD_GEMM_HOOK_* mask compiled in */
  const void *fn;             /* the __global__ function */
  int threads, smem_bytes;    /* launch shape */
  int epi_cols;               /* BCAST: columns of a staged tile (the C maps' box width); 0 = bn */
  int variant;                /* 0: the configuration's kernel; 1: BCAST's deferred second half
                               * (td_gemm_hooks.bcast_defer), looked up only when asked for and
                               * never listed as a configuration of its own */
} td__gemm_kernel_entry;

/* Each returns its array and writes its length. */
const td__gemm_kernel_entry *td__gemm_sm90_kernels_nk(int *count);
const td__gemm_kernel_entry *td__gemm_sm90_kernels_kn(int *count);
const td__gemm_kernel_entry *td__gemm_sm80_kernels(int *count);

#ifdef __cplusplus
}
#endif
#endif
