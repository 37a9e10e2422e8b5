/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: AllGather + GEMM, C = AllGather(A, rows) * B, the first
 * GEMM of a tensor-parallel MLP. The program is
 *     input a : [M, K] shard(0);  weight b : [K, N] shard(1)
 *     c = matmul(all_gather(a), b)          # [M, N] shard(1)
 * and the compiler's AG -> GEMM pattern does the overlap: each rank's part
 * of A is cut into chunks put into every peer's gather buffer (rank r sends
 * to r-1, r-2, ... so rank p hears from p+1 first), and every GEMM tile waits
 * only on the chunk holding its rows, starting with the rank's own rows.
 * B is declared an input, not a weight: the compiler prepacks 16-bit
 * weights as f32 buffers on cpu, but the caller of an operator hands B in the
 * operator's dtype (the cpu GEMM tiles then read an f32 copy made once per
 * call). Variants: sm (comm workers move chunks), copy_engine (puts on the copy
 * engine), ring (chunks forwarded along a ring), sequential (baseline). */
#include "ops/ops_internal.h"

#include "core/error.h"

static td_status td__ag_gemm_build(const td__tp_desc *d, td_program *p, td_value vals[3]) {
  char m[24], n[24], k[24];
  td__tp_dim(m, sizeof m, d->m), td__tp_dim(n, sizeof n, d->n), td__tp_dim(k, sizeof k, d->k);
  td_value a, b, g, c;
  TD_CHECK(td_program_input(p, "a", 0, d->dtype, m, k, (td_layout){TD_LAYOUT_SHARD, 0}, &a));
  TD_CHECK(td_program_input(p, "b", 0, d->dtype, k, n, (td_layout){TD_LAYOUT_SHARD, 1}, &b));
  TD_CHECK(td_program_all_gather(p, a, &g));
  TD_CHECK(td_program_matmul(p, g, b, 0, &c));
  TD_CHECK(td_program_set_name(p, c, "c"));
  TD_CHECK(td_program_output(p, c));
  vals[0] = a, vals[1] = b, vals[2] = c;
  return TD_OK;
}

void td__ag_gemm_desc(int64_t m, int64_t n, int64_t k, td_dtype dtype, td_exec_backend be, td__tp_desc *out) {
  td__tp_desc d = {
      .kind = TD_TP_AG_GEMM, .m = m, .n = n, .k = k, .dtype = dtype,
      .variants = 1u << TD_TP_SEQUENTIAL | 1u << TD_TP_SM | 1u << TD_TP_COPY_ENGINE | 1u << TD_TP_RING |
                  1u << TD_TP_FUSED,
      /* On cuda the copy engine keeps every SM on the GEMM; on cpu it is a comm thread anyway. */
      .auto_candidates = {be == TD_EXEC_CUDA ? TD_TP_COPY_ENGINE : TD_TP_SM, TD_TP_SEQUENTIAL, TD_TP_AUTO},
      .build = td__ag_gemm_build,
  };
  *out = d;
}

td_status td_ag_gemm_create(td_team *team, int64_t m, int64_t n, int64_t k, td_dtype dtype,
                            const td_tp_opts *opts, td_tp_op **out) {
  td__tp_desc d;
  td__ag_gemm_desc(m, n, k, dtype, opts ? opts->backend : TD_EXEC_CPU, &d);
  return td__tp_create(team, &d, opts, out);
}

td_status td_ag_gemm(td_tp_op *op, void *c, const void *a, const void *b) {
  return td__tp_run(op, TD_TP_AG_GEMM, c, a, b);
}
