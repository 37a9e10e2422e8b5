/* SPDX-License-Identifier: Apache-2.0
 * Internal: code generation of the CUDA executor's kernel text (executor
 * layer, cuda backend). A specialisation fixes, as compile-time constants, the
 * block size, the task kinds the schedule uses (only their tiles are compiled)
 * and whether the GEMM tile may use the sm_80+ tensor-core path. The text is
 * self-contained CUDA C (no includes) and defines two kernels:
 *   td_exec_kernel(td_dev_plan)          the persistent executor
 *   td_tile_grid_kernel(const td_dev_task *)  one block per task, no waits
 * and the kernel queue's two: td_kq_tile_kernel (one task over a grid of
 * sub-tiles) and td_kq_finish_kernel (raise and mark done after it).
 * The generated text is the JIT cache's key material, so equal specialisations
 * give byte-identical text. */
#ifndef TD_EXEC_CUDA_CODEGEN_H
#define TD_EXEC_CUDA_CODEGEN_H

#include "tdist/schedule.h"
#include "tdist/status.h"

typedef struct td__cuda_spec {
  int threads;         /* threads per block: 128, 256 or 512 */
  unsigned kinds;      /* bit (1u << td_task_kind) per kind compiled in */
  int gemm_mma;        /* nonzero: compile the mma.sync GEMM path (needs sm_80+) */
  int queue;           /* nonzero: every task runs on the kernel queue (kernel_queue.c), so
                          td_exec_kernel only orchestrates and holds no tile code */
} td__cuda_spec;

#define TD__CUDA_THREADS_DEFAULT 256

/** The specialisation a schedule needs for architecture `sm` (e.g. 80, 90):
 * the kinds its tasks use, 256 threads, mma for sm >= 80, queue 0 (the
 * caller sets it). */
void td__cuda_spec_for_schedule(const td_schedule *sched, int sm, td__cuda_spec *out);

/** Writes the generated CUDA C text (malloc'ed, NUL-terminated) to *out.
 * Errors: TD_ERR_INVALID_ARG (threads not 128/256/512, unknown kind bits: the
 * message names the value and what is allowed), TD_ERR_NO_MEMORY. */
td_status td__cuda_codegen(const td__cuda_spec *spec, char **out);

#endif
