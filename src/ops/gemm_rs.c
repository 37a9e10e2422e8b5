/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: GEMM + ReduceScatter, C = ReduceScatter(A * B, rows), the
 * second GEMM of a tensor-parallel MLP. The program is
 *     input a : [M, K] shard(1);  weight b : [K, N] shard(0)
 *     c = reduce_scatter(matmul(a, b), 0)   # [M, N] shard(0)
 * and the compiler's GEMM -> RS pattern does the overlap: GEMM tiles are
 * produced by destination r+1, r+2, ..., own rows last; each finished row
 * piece is pushed into its owner's receive slot and the owner reduces pieces
 * as they arrive (fixed order, so results are reproducible). Variants: sm
 * (overlapped), sequential (every GEMM tile, then the reduce-scatter). */
#include "ops/ops_internal.h"

#include "core/error.h"

static td_status td__gemm_rs_build(const td__tp_desc *d, td_program *p, td_value vals[3]) {
  td_value a, b, prod, c;
  TD_CHECK(td__tp_row_parallel_matmul(d, p, &a, &b, &prod));
  TD_CHECK(td_program_reduce_scatter(p, prod, 0, &c));
  TD_CHECK(td_program_set_name(p, c, "c"));
  TD_CHECK(td_program_output(p, c));
  vals[0] = a, vals[1] = b, vals[2] = c;
  return TD_OK;
}

void td__gemm_rs_desc(int64_t m, int64_t n, int64_t k, td_dtype dtype, td__tp_desc *out) {
  td__tp_desc d = {
      .kind = TD_TP_GEMM_RS, .m = m, .n = n, .k = k, .dtype = dtype,
      .variants = 1u << TD_TP_SEQUENTIAL | 1u << TD_TP_SM | 1u << TD_TP_FUSED,
      .auto_candidates = {TD_TP_SM, TD_TP_SEQUENTIAL, TD_TP_AUTO},
      .min_k_ranks = 1,
      .build = td__gemm_rs_build,
  };
  *out = d;
}

td_status td_gemm_rs_create(td_team *team, int64_t m, int64_t n, int64_t k, td_dtype dtype,
                            const td_tp_opts *opts, td_tp_op **out) {
  td__tp_desc d;
  td__gemm_rs_desc(m, n, k, dtype, &d);
  return td__tp_create(team, &d, opts, out);
}

td_status td_gemm_rs(td_tp_op *op, void *c, const void *a, const void *b) {
  return td__tp_run(op, TD_TP_GEMM_RS, c, a, b);
}
