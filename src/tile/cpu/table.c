/* SPDX-License-Identifier: Apache-2.0
 * The CPU tile tables (tiles layer, cpu backend) and the per-worker scratch.
 * td__tile_cpu_reference holds the portable C reference of every kind;
 * td__tile_cpu is what the CPU executor runs: the references, with GEMM
 * overridden by OpenBLAS and EWISE by the vectorised gelu/copy of
 * ewise_fast.c. A new override replaces one entry here and gets a
 * test comparing it with the reference (tests/exec/test_tiles.c). */
#include <stdlib.h>

#include "core/error.h"
#include "tile/tile.h"

const td__tile_table td__tile_cpu_reference = {
    .name = "cpu-reference",
    .fn = {[TD_TASK_NOP] = NULL,
           [TD_TASK_GEMM] = td__tile_cpu_gemm_ref,
           [TD_TASK_COPY] = td__tile_cpu_copy,
           [TD_TASK_REDUCE] = td__tile_cpu_reduce,
           [TD_TASK_EWISE] = td__tile_cpu_ewise,
           [TD_TASK_RMSNORM] = td__tile_cpu_rmsnorm},
};

const td__tile_table td__tile_cpu = {
    .name = "cpu",
    .fn = {[TD_TASK_NOP] = NULL,
           [TD_TASK_GEMM] = td__tile_cpu_gemm_blas,
           [TD_TASK_COPY] = td__tile_cpu_copy,
           [TD_TASK_REDUCE] = td__tile_cpu_reduce,
           [TD_TASK_EWISE] = td__tile_cpu_ewise_fast,
           [TD_TASK_RMSNORM] = td__tile_cpu_rmsnorm},
};

td_status td__tile_scratch(td_tile_ctx *ctx, size_t bytes) {
  if (bytes <= ctx->scratch_bytes)
    return TD_OK;
  size_t cap = ctx->scratch_bytes ? ctx->scratch_bytes : 4096;
  while (cap < bytes)
    cap *= 2;
  void *p = aligned_alloc(64, (cap + 63) & ~(size_t)63);
  if (!p)
    return td__error(TD_ERR_NO_MEMORY, "CPU tile scratch: out of memory for %zu bytes", cap);
  free(ctx->scratch);
  ctx->scratch = p;
  ctx->scratch_bytes = cap;
  return TD_OK;
}

void td__tile_ctx_free(td_tile_ctx *ctx) {
  if (!ctx)
    return;
  free(ctx->scratch);
  ctx->scratch = NULL;
  ctx->scratch_bytes = 0;
}
