/* SPDX-License-Identifier: Apache-2.0
 * Internal: what the compiler needs to know, at compile time, about the GPU a
 * cuda plan is for (executor layer, cuda backend; used by src/compiler when
 * built with TD_HAVE_CUDA_EXEC): whether whole-GEMM tasks can go to the
 * executor's kernel queue as Hopper GEMMs, and which tile configuration each
 * should use (the tuning cache of `tdist tune gemm`, else the rule of thumb).
 *
 * The target is the visible GPU (TD_CUDA_DEVICE, else device 0), or, with no
 * GPU (a CI box, `tdist explain` on a laptop), TD_CUDA_TARGET_SM and
 * TD_CUDA_TARGET_NAME. The Hopper GEMM lives in tdist_gemm_cuda, which links
 * tdist; it is reached through weak references and counts as absent when the
 * program did not link it. */
#ifndef TD_EXEC_CUDA_GEMM_TARGET_H
#define TD_EXEC_CUDA_GEMM_TARGET_H

#include "exec/gemm_queue_cfg.h"
#include "tdist/types.h"

typedef struct td__cuda_gemm_target {
  int queue;      /* 1: emit whole-GEMM queue tasks for this target */
  int sm;         /* compute capability x 10 of the target; 0 when unknown */
  char gpu[96];   /* the GPU's name as the tuning cache keys it */
  char why[160];  /* when queue is 0: why not (for explain) */
} td__cuda_gemm_target;

/** Fills *out; never fails (an unusable target gives queue 0 and a reason). */
void td__cuda_gemm_target_get(td__cuda_gemm_target *out);

/** The tile configuration of an m x n x k queue GEMM of dtype with B stored
 * [N,K] (b_nk) or [K,N]: the tuning cache's entry for (target GPU, dtype,
 * layout, shape class) when there is one (returns 1), else
 * td__cuda_gemm_pick_compiled's (returns 0, or 2 when the cache's entry is
 * cuBLAS (TD_GEMM_CUBLAS), which a queue task does not run: it has no tile
 * configuration and ignores the SM cap; explain can count these apart);
 * -1 when neither is available. */
int td__cuda_gemm_target_config(const td__cuda_gemm_target *t, td_dtype dtype, int b_nk, int m, int n, int k,
                                td__gemm_qcfg *out);

/** The Hopper GEMM's default rule (td__gemm_cuda_default_config) mapped onto
 * a configuration compiled into this build for (dtype, layout): the rule's
 * own when compiled, else the nearest block shape. Returns 0, or -1 when the
 * Hopper GEMM is not linked or nothing is compiled for (dtype, layout). */
int td__cuda_gemm_pick_compiled(td_dtype dtype, int b_nk, int m, int n, int k, td__gemm_qcfg *out);

#endif
