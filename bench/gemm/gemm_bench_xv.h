/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's launcher for measurement variants of the hooked Hopper GEMM
 * (bench layer; see gemm_bench_xv.cu). */
#ifndef TD_BENCH_GEMM_BENCH_XV_H
#define TD_BENCH_GEMM_BENCH_XV_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "gemm.h"

/** Whether cfg/b_layout is the one configuration the variants exist for. */
bool xv_config_matches(const td_gemm_config *cfg, int b_layout);

/** Whether variant `xv` exists with `hooks`. */
bool xv_exists(int xv, unsigned hooks);

/** Launches variant `xv` (0 shipped; 16, 32, 48 the hooks6 wait / raise /
 * both paths; 64 the hooks6 loader codegen; 112 the hooks6 kernel; 128 a
 * uniform warpgroup index, with hooks 0 too; bits as
 * gemm_sm90.cuh's XV) with `hooks` (WAIT, RAISE or both)
 * on `stream`; false when there is no such variant or a launch step failed. */
bool xv_run(int xv, unsigned hooks, const td_gemm_problem *p, const td_gemm_hooks *h, cudaStream_t stream);

/** Launches the stamped variant `xv` (XV & 8: 8 plain with hooks 0; 8, 72
 * and 120 with WAIT | RAISE) `launches` times, one at a time, and prints the
 * median time of each phase (gemm_sm90.cuh's TD__XV_*) to `out`: after the
 * block's own start (clock64), after the launch's first block start and for
 * the latest block (globaltimer). False when a launch failed. */
bool xv_stamps(const char *label, int xv, unsigned hooks, const td_gemm_problem *p, const td_gemm_hooks *h,
               int launches, FILE *out);

#endif
