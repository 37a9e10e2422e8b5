/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` (tools layer): what the
 * driver (bench_ops.c) and the baselines and device helpers
 * (bench_ops_base.c) share. The baseline of a case is the sequential one
 * built from outside tdist: on cpu the host collective (coll.h) then one
 * OpenBLAS sgemm; on cuda the collective done by cudaMemcpyAsync copies and
 * cuBLAS axpy reductions between ranks sharing the GPU (what NCCL would do at
 * best; NCCL itself refuses two ranks on one GPU), then cuBLAS GEMM, all on
 * the rank's one stream. */
#ifndef TD_TOOLS_BENCH_OPS_H
#define TD_TOOLS_BENCH_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/tdist.h"

typedef struct bo_shape {
  char name[40];
  int64_t m, n, k; /* GEMM operators */
  size_t count;    /* all_reduce */
} bo_shape;

/* Memory of a backend: host (cpu) or the current CUDA device. */
void *bo_alloc(int cuda, size_t bytes);
void bo_free(int cuda, void *p);
/* Fills `bytes` with uniform values in [-scale, scale) of dtype (random, never zeros). */
int bo_fill(int cuda, void *p, size_t bytes, td_dtype dt, uint64_t seed, double scale);
/* Copies `rows` rows of `cols` elements (row stride ld) from p to host dst (packed). */
int bo_rows_to_host(int cuda, void *dst, const void *p, int64_t row0, int64_t rows, int64_t cols, int64_t ld,
                    td_dtype dt);
/* Bytes of device memory in use (cuda) or of the symmetric heap (cpu). */
size_t bo_mem_used(int cuda, td_world *w);
/* Environment lines for the report: fills a cJSON object (opaque here). */
void bo_env(int cuda, void *json_obj);
/* Binds the calling thread to the rank's device (cuda: device 0 .. count-1). */
int bo_set_device(int cuda, int rank);

typedef struct bo_base bo_base;
/* The baseline's state (shared by bench_ops_base.c and bench_ops_cuda.c). */
struct bo_base {
  int cuda;
  td_tp_kind kind;
  bo_shape s;
  td_dtype dt;
  td_team *team;
  int n, me;
  td_tp_layout la[64], lb, lc[64]; /* A and C layouts of every rank (n <= 64) */
  const void *a, *b;
  void *c;
  void *work;           /* cpu: gathered A / padded partial; cuda: gathered A / partial */
  size_t work_bytes;
  uint64_t *peer_a, *peer_c, *peer_w; /* cuda: every rank's pointers */
  void *stream; /* cuda: cudaStream_t */
  void *blas;   /* cuda: cublasHandle_t */
};

#ifdef TD_HAVE_GEMM_CUDA
int bo_cuda_setup(bo_base *b, char *msg, size_t msg_size);
int bo_cuda_run(bo_base *b, char *msg, size_t msg_size);
void bo_cuda_release(bo_base *b);
#endif
/* Collective over the team: makes the baseline of one case, reading this
 * rank's operands a, b laid out as op's (td_tp_operand). Returns 0, or -1
 * with a message in msg. */
int bo_base_create(int cuda, td_tp_kind kind, const bo_shape *s, td_dtype dt, td_team *team, const td_tp_op *op,
                   const void *a, const void *b, void *c, bo_base **out, char *msg, size_t msg_size);
/* One call: c = the operator's result, by the sequential route. Blocking. */
int bo_base_run(bo_base *b, char *msg, size_t msg_size);
void bo_base_destroy(bo_base *b);

#endif
