/* SPDX-License-Identifier: Apache-2.0
 * Internal: the tile table interface (tiles layer). A tile is the unit of
 * work of one task on one worker: a GEMM output tile, a chunk copy, an
 * element-wise or reduce tile, an rmsnorm block. Each backend has one const
 * table of tile functions indexed by td_task_kind; for every kind there is a
 * portable C reference (td__tile_cpu_reference), and a backend overrides only
 * what it optimised (td__tile_cpu overrides GEMM with OpenBLAS). Tests compare
 * every override with the reference.
 *
 * Contract of every tile function:
 *  - matrices are row-major 2-D views: element (i, j) of m lives at
 *    (char *)m.ptr + (i * m.ld + j) * td_dtype_size(m.dtype); ld >= cols;
 *  - shapes and dtypes are those td_plan_validate accepts for the kind
 *    (schedule_validate.c); tiles do not re-check them;
 *  - any view may be a peer's copy (an LSA pointer from td_symm_ptr): tiles
 *    use plain loads and stores, and the executor orders them with signals;
 *  - 16-bit floats are converted to f32, computed in f32 and rounded once on
 *    store (round to nearest even);
 *  - the only failure is TD_ERR_NO_MEMORY when the worker's scratch cannot
 *    grow. Tiles are thread-safe given distinct ctx and non-overlapping
 *    outputs. */
#ifndef TD_TILE_TILE_H
#define TD_TILE_TILE_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/schedule.h"
#include "tdist/types.h"

typedef struct td_tile_mat {
  void *ptr;          /* element (0, 0) of the view */
  td_dtype dtype;
  int64_t rows, cols; /* elements */
  int64_t ld;         /* row stride in elements */
} td_tile_mat;

/** What one tile call gets: the task's op and alpha, and its three views
 * (unused views have ptr NULL). Meaning per kind as in schedule.h. */
typedef struct td_tile_args {
  uint32_t op;
  float alpha;
  td_tile_mat a, b, c;
} td_tile_args;

/** Per-worker state: scratch memory that tiles may grow (f32 staging of
 * 16-bit GEMM operands). Zero-initialise; free with td__tile_ctx_free. */
typedef struct td_tile_ctx {
  void *scratch;
  size_t scratch_bytes;
} td_tile_ctx;

typedef td_status (*td_tile_fn)(td_tile_ctx *ctx, const td_tile_args *args);

typedef struct td__tile_table {
  const char *name;
  td_tile_fn fn[TD_TASK_KIND_COUNT]; /* NOP's entry is NULL: nothing to run */
} td__tile_table;

/** Portable C references of every kind. */
extern const td__tile_table td__tile_cpu_reference;
/** The CPU backend's table: the references, GEMM through OpenBLAS, gelu and
 * copy element-wise tiles vectorised (ewise_fast.c). */
extern const td__tile_table td__tile_cpu;

/** Makes ctx->scratch hold at least `bytes` (64-byte aligned); contents lost. */
td_status td__tile_scratch(td_tile_ctx *ctx, size_t bytes);
void td__tile_ctx_free(td_tile_ctx *ctx);

/* The CPU tile functions, one file per kind (src/tile/cpu/). */
td_status td__tile_cpu_copy(td_tile_ctx *ctx, const td_tile_args *args);
td_status td__tile_cpu_reduce(td_tile_ctx *ctx, const td_tile_args *args);
td_status td__tile_cpu_ewise(td_tile_ctx *ctx, const td_tile_args *args);
td_status td__tile_cpu_ewise_fast(td_tile_ctx *ctx, const td_tile_args *args);
td_status td__tile_cpu_rmsnorm(td_tile_ctx *ctx, const td_tile_args *args);
td_status td__tile_cpu_gemm_ref(td_tile_ctx *ctx, const td_tile_args *args);
td_status td__tile_cpu_gemm_blas(td_tile_ctx *ctx, const td_tile_args *args);

/** Makes OpenBLAS single-threaded in this process if it is not already
 * (each CPU worker runs its own sgemm; see gemm_blas.c). Thread-safe. */
void td__tile_cpu_blas_single_thread(void);

#endif
