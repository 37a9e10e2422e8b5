/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: GEMM + AllReduce, C = AllReduce(A * B), for row-parallel
 * layers whose output every rank needs (small batches, decode). The program is
 *     input a : [M, K] shard(1);  weight b : [K, N] shard(0)
 *     c = all_reduce(matmul(a, b))          # [M, N] replicated
 * and the compiler's GEMM -> AR pattern overlaps it: one-shot (every finished
 * piece pushed to every peer, each rank reducing all contributions in rank
 * order, so every rank gets bitwise the same C) for small outputs; RS then AG
 * (the AG of a block starts when its owner's reduction of it ends) for large
 * ones. AUTO compares one-shot, two-shot and sequential with the perf model. */
#include "ops/ops_internal.h"

#include "core/error.h"

static td_status td__gemm_ar_build(const td__tp_desc *d, td_program *p, td_value vals[3]) {
  td_value a, b, prod, c;
  TD_CHECK(td__tp_row_parallel_matmul(d, p, &a, &b, &prod));
  TD_CHECK(td_program_all_reduce(p, prod, &c));
  TD_CHECK(td_program_set_name(p, c, "c"));
  TD_CHECK(td_program_output(p, c));
  vals[0] = a, vals[1] = b, vals[2] = c;
  return TD_OK;
}

void td__gemm_ar_desc(int64_t m, int64_t n, int64_t k, td_dtype dtype, td__tp_desc *out) {
  td__tp_desc d = {
      .kind = TD_TP_GEMM_AR, .m = m, .n = n, .k = k, .dtype = dtype,
      .variants = 1u << TD_TP_SEQUENTIAL | 1u << TD_TP_ONE_SHOT | 1u << TD_TP_TWO_SHOT | 1u << TD_TP_FUSED,
      .auto_candidates = {TD_TP_ONE_SHOT, TD_TP_TWO_SHOT, TD_TP_SEQUENTIAL, TD_TP_AUTO},
      .min_k_ranks = 1,
      .build = td__gemm_ar_build,
  };
  *out = d;
}

td_status td_gemm_ar_create(td_team *team, int64_t m, int64_t n, int64_t k, td_dtype dtype,
                            const td_tp_opts *opts, td_tp_op **out) {
  td__tp_desc d;
  td__gemm_ar_desc(m, n, k, dtype, &d);
  return td__tp_create(team, &d, opts, out);
}

td_status td_gemm_ar(td_tp_op *op, void *c, const void *a, const void *b) {
  return td__tp_run(op, TD_TP_GEMM_AR, c, a, b);
}
