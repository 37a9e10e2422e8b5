/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: the rules of the fused cuda variant (TD_TP_FUSED) that
 * need no GPU, so every build (and CI without a GPU) checks them the same
 * way. The fused variant runs the Hopper GEMM kernels of src/tile/cuda
 * directly, and those take only some shapes: 16-byte rows (K % 8 == 0, and
 * N % 8 == 0 for B stored [K,N]), bf16 for the hooked (signal-waiting)
 * kernel, bf16 or f16 for the plain one; the GEMM runs on each rank's whole
 * buffer, so a split dimension must give every rank the same width (the
 * buffer's padding would otherwise enter the sum). The answer depends only on
 * the arguments, which the collective check already made equal on every
 * rank, so all ranks accept or refuse together. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/ops_internal.h"

#ifndef TD_HAVE_OPS_FUSED
int td__tp_fused_linked(void) { return 0; }
td_status td__tp_fused_create(td_tp_op *op) {
  (void)op;
  return td__error(TD_ERR_UNSUPPORTED, "fused variant: this build has no CUDA (configure with -DTD_WITH_CUDA=ON)");
}
td_status td__tp_fused_run(td_tp_op *op, void *c, const void *a, const void *b) {
  (void)op, (void)c, (void)a, (void)b;
  return td__error(TD_ERR_UNSUPPORTED, "fused variant: this build has no CUDA");
}
td_status td__tp_fused_destroy(td_tp_op *op) {
  (void)op;
  return TD_OK;
}
#endif

#ifdef TD_HAVE_OPS_FUSED
/* The widest part of `count` split over `nranks` (the buffers' row length). */
static int64_t td__widest(int64_t count, int nranks) {
  size_t off, len, best = 0;
  for (int r = 0; r < nranks; r++) {
    td_chunk_range((size_t)count, nranks, r, &off, &len);
    if (len > best)
      best = len;
  }
  return (int64_t)best;
}
#endif

td_status td__tp_fused_check(const td__tp_desc *d, int nranks, const td_tp_opts *o) {
  const char *kn = td_tp_kind_name(d->kind);
  if (d->kind != TD_TP_AG_GEMM && d->kind != TD_TP_GEMM_RS && d->kind != TD_TP_GEMM_AR)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant exists for ag_gemm, gemm_rs and gemm_ar only", kn);
  if (o->backend != TD_EXEC_CUDA)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant runs on the cuda backend only; use backend "
                     "TD_EXEC_CUDA or another variant", kn);
#ifndef TD_HAVE_OPS_FUSED
  return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs a build with CUDA (-DTD_WITH_CUDA=ON)", kn);
#else
  if (nranks > 8)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant runs on up to 8 ranks (one node); got %d", kn,
                     nranks);
  if (d->kind == TD_TP_AG_GEMM) {
    if (d->dtype != TD_BF16)
      return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs bf16 (its signal-waiting GEMM kernel is "
                       "compiled for bf16 only); got %s", kn, td_dtype_name(d->dtype));
    int64_t nb = td__widest(d->n, nranks);
    if (d->k % 8 != 0 || nb % 8 != 0)
      return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs K %% 8 == 0 and N / ranks (rounded up) "
                       "%% 8 == 0 (16-byte rows); got K=%" PRId64 ", N=%" PRId64 " on %d ranks (%" PRId64 ")",
                       kn, d->k, d->n, nranks, nb);
    return TD_OK;
  }
  if (d->dtype != TD_BF16 && d->dtype != TD_F16)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs bf16 or f16; got %s", kn,
                     td_dtype_name(d->dtype));
  if (d->k % nranks != 0 || (d->k / nranks) % 8 != 0 || d->n % 8 != 0)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs K %% (8 x ranks) == 0 and N %% 8 == 0 "
                     "(equal 16-byte K parts); got K=%" PRId64 ", N=%" PRId64 " on %d ranks", kn, d->k, d->n,
                     nranks);
  return TD_OK;
#endif
}
