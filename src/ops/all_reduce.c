/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: the low-latency AllReduce for decode-size messages
 * (8 KiB - 64 MiB). The vector of `count` elements is viewed as a row-major
 * [count / W, W] matrix, W the largest divisor of count up to 2048, so the
 * compiler can cut it into row pieces; the program is
 *     input x : [R, W] partial(sum);  y = all_reduce(x)   # replicated
 * lowered one-shot (every rank pushes its addend to every peer's slot and
 * reduces all n in rank order: one step, n-1 puts) or two-shot (ReduceScatter
 * then AllGather: 2(n-1) steps of 1/n of the data). The perf model picks the
 * faster unless a variant is forced. On cuda, when the ranks are threads of
 * one process sharing one GPU, AUTO runs the fused variant instead (reduction
 * kernels reading the peers' buffers directly, src/ops/cuda/fused_ar.c).
 * Named td_ll_all_reduce because
 * td_all_reduce is the host collective of coll.h. */
#include "ops/ops_internal.h"

#include <string.h>

#include "core/error.h"

static td_status td__ar_build(const td__tp_desc *d, td_program *p, td_value vals[3]) {
  char r[24], w[24];
  td__tp_dim(r, sizeof r, d->m), td__tp_dim(w, sizeof w, d->n);
  td_value x, y;
  TD_CHECK(td_program_input(p, "x", 0, d->dtype, r, w, (td_layout){TD_LAYOUT_PARTIAL, 0}, &x));
  TD_CHECK(td_program_all_reduce(p, x, &y));
  TD_CHECK(td_program_set_name(p, y, "y"));
  TD_CHECK(td_program_output(p, y));
  vals[0] = x, vals[1] = -1, vals[2] = y;
  return TD_OK;
}

void td__all_reduce_desc(size_t count, td_dtype dtype, td__tp_desc *out) {
  int64_t w = 1;
  for (int64_t c = count < 2048 ? (int64_t)count : 2048; c > 1; c--)
    if (count % (size_t)c == 0) {
      w = c;
      break;
    }
  td__tp_desc d = {
      .kind = TD_TP_ALL_REDUCE, .m = count ? (int64_t)(count / (size_t)w) : 0, .n = w, .k = 0,
      .count = count, .dtype = dtype,
      .variants = 1u << TD_TP_ONE_SHOT | 1u << TD_TP_TWO_SHOT | 1u << TD_TP_FUSED,
      .auto_candidates = {TD_TP_ONE_SHOT, TD_TP_TWO_SHOT, TD_TP_AUTO},
      .build = td__ar_build,
  };
  *out = d;
}

td_status td_ll_all_reduce_create(td_team *team, size_t count, td_dtype dtype, const td_tp_opts *opts,
                                  td_tp_op **out) {
  td__tp_desc d;
  td__all_reduce_desc(count, dtype, &d);
  td_status st = td__tp_create(team, &d, opts, out);
  /* The compiler refuses a program of too many row tiles, in its own terms
   * (tiles, tile rows, dims) that an all_reduce caller never chose: say it in
   * the caller's (count, bytes). Every rank gets it alike: the arguments were
   * compared before compiling. */
  if (st == TD_ERR_INVALID_ARG && strstr(td_last_error(), "tiles per rank"))
    return td__error(TD_ERR_INVALID_ARG,
                     "all_reduce: count = %zu elements of %s (%.0f bytes per rank, in src and in dst) is too large "
                     "for one operator; reduce the vector in parts of fewer elements",
                     count, td_dtype_name(dtype), (double)count * (double)td_dtype_size(dtype));
  return st;
}

td_status td_ll_all_reduce(td_tp_op *op, void *dst, const void *src) {
  return td__tp_run(op, TD_TP_ALL_REDUCE, dst, src, NULL);
}
