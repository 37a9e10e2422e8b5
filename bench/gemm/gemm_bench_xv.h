/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's launcher for measurement variants of the hooked Hopper GEMM
 * (bench layer; see gemm_bench_xv.cu). */
#ifndef TD_BENCH_GEMM_BENCH_XV_H
#define TD_BENCH_GEMM_BENCH_XV_H

#include <cuda_runtime.h>

#include "gemm.h"

/** Whether cfg/b_layout is the one configuration the variants exist for. */
bool xv_config_matches(const td_gemm_config *cfg, int b_layout);

/** Launches variant `xv` (0, 1, 2, 4 or 7; bits as gemm_sm90.cuh's XV) with
 * `hooks` (WAIT, RAISE or both) on `stream`; false when there is no such
 * variant or a launch step failed. */
bool xv_run(int xv, unsigned hooks, const td_gemm_problem *p, const td_gemm_hooks *h, cudaStream_t stream);

#endif
