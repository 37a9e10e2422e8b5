/* SPDX-License-Identifier: Apache-2.0
 * GEMM tile through OpenBLAS (tiles layer, cpu backend): the override of
 * gemm_ref.c, same contract.
 *
 * f32 operands go straight to cblas_sgemm with their row strides. f16/bf16
 * operands are first converted into f32 copies in the worker's scratch, and
 * a non-f32 c is produced in an f32 scratch tile, then added/rounded into c
 * once, so accumulation is always f32. With TD_GEMM_GELU the epilogue
 * applies GELU (gelu.c's vectorised form) to each row right after sgemm,
 * while the tile is still in cache, before the one rounding into c.
 *
 * Threads: every CPU worker runs its own tile, so each sgemm must be
 * single-threaded: td__tile_cpu_blas_single_thread() (called by the CPU
 * executor when it is created and before every run) sets OpenBLAS to one
 * thread process-wide when it is not already. That setting is global to the
 * process: an application that calls OpenBLAS itself between runs may raise
 * it; the executor lowers it again at its next run. */
#include <cblas.h>
#include <stdint.h>

#include "core/error.h"
#include "tile/cpu/elem.h"

void td__tile_cpu_blas_single_thread(void) {
  if (openblas_get_num_threads() != 1)
    openblas_set_num_threads(1);
}

/* Copies view m (r x c) to contiguous f32 at dst. */
static void td__to_f32(const td_tile_mat *m, float *dst) {
  for (int64_t i = 0; i < m->rows; i++)
    td__row_to_f32(td__elem(m, i, 0), m->dtype, m->cols, dst + i * m->cols);
}

td_status td__tile_cpu_gemm_blas(td_tile_ctx *ctx, const td_tile_args *args) {
  const td_tile_mat *a = &args->a, *b = &args->b, *c = &args->c;
  int ta = (args->op & TD_GEMM_TRANS_A) != 0, tb = (args->op & TD_GEMM_TRANS_B) != 0;
  int acc = (args->op & TD_GEMM_ACCUMULATE) != 0, gelu = (args->op & TD_GEMM_GELU) != 0;
  int64_t m = c->rows, n = c->cols, k = ta ? a->rows : a->cols;
  if (m == 0 || n == 0)
    return TD_OK;
  if (k == 0) { /* sgemm with K = 0 scales c by beta (and may refuse lda 0); c += 0 or c = 0 here */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        float v = acc ? td__ld_f32(td__elem(c, i, 0), c->dtype, j) : 0.0f;
        td__st_f32(td__elem(c, i, 0), c->dtype, j, gelu ? td__gelu_tanh(v) : v);
      }
    return TD_OK;
  }
  /* Validation refuses sizes and strides over INT32_MAX; a 32-bit blasint
   * must never see a truncated value (OpenBLAS would print or compute wrong). */
  if (sizeof(blasint) < sizeof(int64_t) &&
      (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || a->ld > INT32_MAX || b->ld > INT32_MAX ||
       c->ld > INT32_MAX))
    return td__error(TD_ERR_UNSUPPORTED, "gemm tile: M %lld, N %lld, K %lld or a row stride (%lld, %lld, %lld) "
                     "exceeds the BLAS int range (%d)", (long long)m, (long long)n, (long long)k,
                     (long long)a->ld, (long long)b->ld, (long long)c->ld, INT32_MAX);
  size_t need = 0, a_off = 0, b_off = 0, c_off = 0;
  if (a->dtype != TD_F32)
    a_off = need, need += (size_t)(a->rows * a->cols) * sizeof(float);
  if (b->dtype != TD_F32)
    b_off = need, need += (size_t)(b->rows * b->cols) * sizeof(float);
  if (c->dtype != TD_F32)
    c_off = need, need += (size_t)(m * n) * sizeof(float);
  if (need)
    TD_CHECK(td__tile_scratch(ctx, need));
  char *s = ctx->scratch;
  const float *ap = a->ptr, *bp = b->ptr;
  int64_t lda = a->ld, ldb = b->ld;
  if (a->dtype != TD_F32) {
    td__to_f32(a, (float *)(s + a_off));
    ap = (const float *)(s + a_off), lda = a->cols;
  }
  if (b->dtype != TD_F32) {
    td__to_f32(b, (float *)(s + b_off));
    bp = (const float *)(s + b_off), ldb = b->cols;
  }
  if (c->dtype == TD_F32) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, args->alpha, ap, (blasint)lda, bp, (blasint)ldb, acc ? 1.0f : 0.0f,
                (float *)c->ptr, (blasint)c->ld);
    if (gelu) /* the epilogue, while the tile is still in cache */
      td__gelu_f32_rows((float *)c->ptr, m, n, c->ld);
    return TD_OK;
  }
  float *cs = (float *)(s + c_off);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (blasint)m,
              (blasint)n, (blasint)k, args->alpha, ap, (blasint)lda, bp, (blasint)ldb, 0.0f, cs, (blasint)n);
  for (int64_t i = 0; i < m; i++) {
    char *cr = td__elem(c, i, 0);
    float *row = cs + i * n;
    if (acc)
      for (int64_t j = 0; j < n; j++)
        row[j] += td__ld_f32(cr, c->dtype, j);
    td__gelu_f32_to(row, n, cr, c->dtype, gelu); /* gelu (or not) and one rounding */
  }
  return TD_OK;
}
