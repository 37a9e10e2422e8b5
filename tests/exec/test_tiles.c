/* SPDX-License-Identifier: Apache-2.0
 * CPU tiles: every override in td__tile_cpu against its reference in
 * td__tile_cpu_reference (today: GEMM through OpenBLAS vs the portable C
 * GEMM, over dtypes, transposes, accumulate, odd and strided shapes), and
 * the references themselves against the formulas written out here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tile/tile.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* xorshift64, uniform in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

/* A rows x cols view inside a (rows + 1) x (cols + pad) allocation, random. */
static td_tile_mat make_mat(td_dtype dt, int64_t rows, int64_t cols, int64_t pad) {
  td_tile_mat m = {NULL, dt, rows, cols, cols + pad};
  size_t n = (size_t)((rows + 1) * m.ld + 1);
  m.ptr = malloc(n * td_dtype_size(dt));
  for (size_t i = 0; i < n; i++) {
    float v = frand();
    if (dt == TD_F32)
      ((float *)m.ptr)[i] = v;
    else
      ((uint16_t *)m.ptr)[i] = dt == TD_BF16 ? td_f32_to_bf16(v) : td_f32_to_f16(v);
  }
  return m;
}

static td_tile_mat clone_mat(const td_tile_mat *m) {
  td_tile_mat c = *m;
  size_t bytes = (size_t)((m->rows + 1) * m->ld + 1) * td_dtype_size(m->dtype);
  c.ptr = malloc(bytes);
  memcpy(c.ptr, m->ptr, bytes);
  return c;
}

static float get(const td_tile_mat *m, int64_t i, int64_t j) {
  size_t k = (size_t)(i * m->ld + j);
  if (m->dtype == TD_F32)
    return ((float *)m->ptr)[k];
  uint16_t h = ((uint16_t *)m->ptr)[k];
  return m->dtype == TD_BF16 ? td_bf16_to_f32(h) : td_f16_to_f32(h);
}

/* Tolerance of c's dtype relative to the scale of the values. */
static double tol_of(td_dtype dt) { return dt == TD_F32 ? 2e-5 : dt == TD_F16 ? 2e-3 : 1.6e-2; }

static void test_gemm_blas_vs_reference(void **state) {
  (void)state;
  const td_dtype dts[3] = {TD_F32, TD_BF16, TD_F16};
  const int64_t sizes[4] = {1, 3, 17, 33};
  td_tile_ctx ctx_ref = {0}, ctx_blas = {0};
  int cases = 0;
  for (int da = 0; da < 3; da++)
    for (int dc = 0; dc < 3; dc++)
      for (uint32_t flags = 0; flags < 8; flags++)
        for (int s = 0; s < 4; s++) {
          int64_t m = sizes[s], n = sizes[(s + 1) % 4], k = sizes[(s + 2) % 4];
          td_tile_args args = {flags, 0.75f, {0}, {0}, {0}};
          args.a = (flags & TD_GEMM_TRANS_A) ? make_mat(dts[da], k, m, s) : make_mat(dts[da], m, k, s);
          args.b = (flags & TD_GEMM_TRANS_B) ? make_mat(dts[(da + 1) % 3], n, k, 1) : make_mat(dts[(da + 1) % 3], k, n, 1);
          args.c = make_mat(dts[dc], m, n, 2);
          td_tile_args ref = args;
          ref.c = clone_mat(&args.c);
          assert_int_equal(td__tile_cpu.fn[TD_TASK_GEMM](&ctx_blas, &args), TD_OK);
          assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_GEMM](&ctx_ref, &ref), TD_OK);
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
              double x = get(&args.c, i, j), y = get(&ref.c, i, j);
              double scale = 1.0 + 0.75 * (double)k; /* |sum| <= alpha K for inputs in [-1, 1] */
              if (fabs(x - y) > tol_of(dts[dc]) * scale)
                fail_msg("gemm a %s c %s flags %u m %lld n %lld k %lld: (%lld,%lld) blas %.8g ref %.8g",
                         td_dtype_name(dts[da]), td_dtype_name(dts[dc]), flags, (long long)m, (long long)n,
                         (long long)k, (long long)i, (long long)j, x, y);
            }
          /* the padding beside the view is untouched */
          assert_memory_equal((char *)args.c.ptr + (size_t)(m * args.c.ld) * td_dtype_size(dts[dc]),
                              (char *)ref.c.ptr + (size_t)(m * args.c.ld) * td_dtype_size(dts[dc]),
                              (size_t)args.c.ld * td_dtype_size(dts[dc]));
          free(args.a.ptr), free(args.b.ptr), free(args.c.ptr), free(ref.c.ptr);
          cases++;
        }
  td__tile_ctx_free(&ctx_ref);
  td__tile_ctx_free(&ctx_blas);
  assert_int_equal(cases, 3 * 3 * 8 * 4);
}

static void test_gemm_k_zero(void **state) {
  (void)state;
  td_tile_ctx ctx = {0};
  td_tile_args args = {0, 1.0f, make_mat(TD_F32, 3, 0, 0), make_mat(TD_F32, 0, 4, 0), make_mat(TD_F32, 3, 4, 0)};
  assert_int_equal(td__tile_cpu.fn[TD_TASK_GEMM](&ctx, &args), TD_OK);
  for (int i = 0; i < 12; i++)
    assert_true(((float *)args.c.ptr)[i] == 0.0f);
  free(args.a.ptr), free(args.b.ptr), free(args.c.ptr);
  td__tile_ctx_free(&ctx);
}

static void test_copy_and_reduce(void **state) {
  (void)state;
  td_tile_ctx ctx = {0};
  td_tile_args args = {0, 1.0f, make_mat(TD_F32, 5, 3, 2), {0}, make_mat(TD_F32, 5, 3, 1)};
  assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_COPY](&ctx, &args), TD_OK);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 3; j++)
      assert_true(get(&args.c, i, j) == get(&args.a, i, j));
  for (uint32_t op = 0; op < TD_RED_OP_COUNT; op++) {
    td_tile_args r = {op, 1.0f, args.a, {0}, clone_mat(&args.c)};
    td_tile_mat before = clone_mat(&r.c);
    /* make c differ from a so max/min are not trivially equal */
    for (int j = 0; j < 3; j++)
      ((float *)r.c.ptr)[j] = ((float *)before.ptr)[j] = 0.25f * (float)j - 0.3f;
    assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_REDUCE](&ctx, &r), TD_OK);
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 3; j++) {
        float x = get(&before, i, j), y = get(&args.a, i, j);
        float want = op == TD_SUM ? x + y : op == TD_MAX ? fmaxf(x, y) : op == TD_MIN ? fminf(x, y) : x * y;
        assert_true(get(&r.c, i, j) == want);
      }
    free(r.c.ptr), free(before.ptr);
  }
  /* integer reduce */
  int32_t ci[4] = {1, -5, 7, 100}, ai[4] = {2, 3, -9, -1};
  td_tile_args ri = {TD_SUM, 1.0f, {ai, TD_I32, 2, 2, 2}, {0}, {ci, TD_I32, 2, 2, 2}};
  assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_REDUCE](&ctx, &ri), TD_OK);
  assert_int_equal(ci[0], 3), assert_int_equal(ci[1], -2), assert_int_equal(ci[2], -2), assert_int_equal(ci[3], 99);
  free(args.a.ptr), free(args.c.ptr);
  td__tile_ctx_free(&ctx);
}

static void test_ewise_formulas(void **state) {
  (void)state;
  td_tile_ctx ctx = {0};
  td_tile_mat a = make_mat(TD_F32, 4, 6, 1), b = make_mat(TD_F32, 4, 6, 0);
  for (uint32_t op = 0; op < TD_EW_OP_COUNT; op++) {
    td_tile_args args = {op, 1.5f, a, b, make_mat(TD_F32, 4, 6, 3)};
    assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &args), TD_OK);
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++) {
        double x = get(&a, i, j), y = get(&b, i, j), want;
        switch (op) {
        case TD_EW_ADD: want = x + y; break;
        case TD_EW_MUL: want = x * y; break;
        case TD_EW_GELU: want = 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); break;
        case TD_EW_SILU: want = x / (1.0 + exp(-x)); break;
        case TD_EW_SCALE: want = 1.5 * x; break;
        default: want = x; break;
        }
        if (fabs(get(&args.c, i, j) - want) > 1e-6)
          fail_msg("ewise op %u at (%d,%d): got %.9g want %.9g", op, i, j, (double)get(&args.c, i, j), want);
      }
    free(args.c.ptr);
  }
  /* gelu(tanh) stays within 1e-3 of the erf form on [-1, 1] */
  for (int i = 0; i < 4; i++) {
    td_tile_args g = {TD_EW_GELU, 1.0f, a, {0}, make_mat(TD_F32, 4, 6, 0)};
    assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &g), TD_OK);
    double x = get(&a, i, 0);
    assert_true(fabs(get(&g.c, i, 0) - 0.5 * x * (1.0 + erf(x / sqrt(2.0)))) < 1e-3);
    free(g.c.ptr);
  }
  /* converting copy f32 -> bf16 rounds to nearest even */
  td_tile_args cv = {TD_EW_COPY, 1.0f, a, {0}, make_mat(TD_BF16, 4, 6, 0)};
  assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &cv), TD_OK);
  assert_int_equal(((uint16_t *)cv.c.ptr)[0], td_f32_to_bf16(get(&a, 0, 0)));
  free(cv.c.ptr), free(a.ptr), free(b.ptr);
  td__tile_ctx_free(&ctx);
}

static void test_rmsnorm(void **state) {
  (void)state;
  td_tile_ctx ctx = {0};
  td_tile_mat a = make_mat(TD_F32, 3, 9, 2), w = make_mat(TD_F32, 1, 9, 0);
  td_tile_args args = {0, 1e-5f, a, w, make_mat(TD_BF16, 3, 9, 0)};
  assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_RMSNORM](&ctx, &args), TD_OK);
  for (int i = 0; i < 3; i++) {
    double ss = 0;
    for (int j = 0; j < 9; j++)
      ss += (double)get(&a, i, j) * get(&a, i, j);
    double inv = 1.0 / sqrt(ss / 9 + 1e-5);
    for (int j = 0; j < 9; j++) {
      double want = get(&a, i, j) * inv * get(&w, 0, j);
      assert_true(fabs(get(&args.c, i, j) - want) <= 8e-3 * fmax(1.0, fabs(want)));
    }
  }
  free(a.ptr), free(w.ptr), free(args.c.ptr);
  td__tile_ctx_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_blas_vs_reference), cmocka_unit_test(test_gemm_k_zero),
      cmocka_unit_test(test_copy_and_reduce),        cmocka_unit_test(test_ewise_formulas),
      cmocka_unit_test(test_rmsnorm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
