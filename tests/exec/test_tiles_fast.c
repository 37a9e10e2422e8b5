/* SPDX-License-Identifier: Apache-2.0
 * CPU tiles: the vectorised GELU and conversions (src/tile/cpu/gelu.c) as the
 * cpu table's element-wise override and as the GEMM epilogue (TD_GEMM_GELU),
 * each against its reference in td__tile_cpu_reference (libm tanhf, one
 * element at a time): f32/bf16/f16 in and out, odd and strided shapes, in
 * place, K = 0, large magnitudes and NaN; and the f32 add-and-round and sum
 * loops of the reduce-scatter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tile/tile.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(float scale) { /* xorshift64, uniform in [-scale, scale) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return ((float)((double)(rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f) * scale;
}

static void put(td_tile_mat *m, size_t k, float v) {
  if (m->dtype == TD_F32)
    ((float *)m->ptr)[k] = v;
  else
    ((uint16_t *)m->ptr)[k] = m->dtype == TD_BF16 ? td_f32_to_bf16(v) : td_f32_to_f16(v);
}

static float get(const td_tile_mat *m, int64_t i, int64_t j) {
  size_t k = (size_t)(i * m->ld + j);
  if (m->dtype == TD_F32)
    return ((float *)m->ptr)[k];
  uint16_t h = ((uint16_t *)m->ptr)[k];
  return m->dtype == TD_BF16 ? td_bf16_to_f32(h) : td_f16_to_f32(h);
}

/* A rows x cols view with row stride cols + pad, random in [-scale, scale). */
static td_tile_mat make_mat(td_dtype dt, int64_t rows, int64_t cols, int64_t pad, float scale) {
  td_tile_mat m = {NULL, dt, rows, cols, cols + pad};
  size_t n = (size_t)((rows + 1) * m.ld + 1);
  m.ptr = malloc(n * td_dtype_size(dt));
  for (size_t i = 0; i < n; i++)
    put(&m, i, frand(scale));
  return m;
}

static td_tile_mat clone_mat(const td_tile_mat *m) {
  td_tile_mat c = *m;
  size_t bytes = (size_t)((m->rows + 1) * m->ld + 1) * td_dtype_size(m->dtype);
  c.ptr = malloc(bytes);
  memcpy(c.ptr, m->ptr, bytes);
  return c;
}

/* Fast and reference agree to f32 precision before the one rounding into c:
 * a 16-bit result may differ by one unit in the last place of its dtype. */
static double tol_of(td_dtype dt) { return dt == TD_F32 ? 4e-6 : dt == TD_F16 ? 1.0 / 1024 : 1.0 / 128; }

static void expect_close(const td_tile_mat *x, const td_tile_mat *y, const char *what) {
  for (int64_t i = 0; i < x->rows; i++)
    for (int64_t j = 0; j < x->cols; j++) {
      double a = get(x, i, j), b = get(y, i, j);
      double lim = tol_of(x->dtype) * (1.0 + fabs(b));
      if (!(fabs(a - b) <= lim)) {
        print_error("%s: (%lld, %lld) fast %.9g reference %.9g (dtype %s)\n", what, (long long)i, (long long)j, a,
                    b, td_dtype_name(x->dtype));
        fail();
      }
    }
}

static void test_ewise_gelu_and_copy(void **state) {
  (void)state;
  const td_dtype dts[3] = {TD_F32, TD_BF16, TD_F16};
  const int64_t shapes[4][2] = {{1, 1}, {3, 17}, {5, 64}, {2, 1001}};
  td_tile_ctx ctx = {0};
  int cases = 0;
  for (int op = 0; op < 2; op++)
    for (int da = 0; da < 3; da++)
      for (int dc = 0; dc < 3; dc++)
        for (int s = 0; s < 4; s++) {
          int64_t rows = shapes[s][0], cols = shapes[s][1];
          td_tile_args args = {op ? TD_EW_COPY : TD_EW_GELU, 1.0f, {0}, {0}, {0}};
          args.a = make_mat(dts[da], rows, cols, s, 6.0f); /* tails and the steep part of gelu */
          args.b.ptr = NULL;
          args.c = make_mat(dts[dc], rows, cols, 3 - s, 1.0f);
          td_tile_args ref = args;
          ref.c = clone_mat(&args.c);
          assert_int_equal(td__tile_cpu.fn[TD_TASK_EWISE](&ctx, &args), TD_OK);
          assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &ref), TD_OK);
          expect_close(&args.c, &ref.c, op ? "copy" : "gelu");
          /* the padding past each row is untouched */
          for (int64_t i = 0; i < rows; i++)
            for (int64_t j = cols; j < args.c.ld; j++)
              assert_true(get(&args.c, i, j) == get(&ref.c, i, j));
          free(args.a.ptr), free(args.c.ptr), free(ref.c.ptr);
          cases++;
        }
  assert_int_equal(cases, 2 * 9 * 4);
  td__tile_ctx_free(&ctx);
}

static void test_ewise_gelu_in_place(void **state) {
  (void)state;
  const td_dtype dts[3] = {TD_F32, TD_BF16, TD_F16};
  td_tile_ctx ctx = {0};
  for (int d = 0; d < 3; d++) {
    td_tile_mat m = make_mat(dts[d], 7, 33, 2, 4.0f);
    td_tile_mat r = clone_mat(&m);
    td_tile_args args = {TD_EW_GELU, 1.0f, m, {0}, m}, ref = {TD_EW_GELU, 1.0f, r, {0}, r};
    assert_int_equal(td__tile_cpu.fn[TD_TASK_EWISE](&ctx, &args), TD_OK);
    assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &ref), TD_OK);
    expect_close(&m, &r, "gelu in place");
    free(m.ptr), free(r.ptr);
  }
  td__tile_ctx_free(&ctx);
}

/* Large magnitudes (x^3 overflows f32 past ~7e12), zeros and NaN. */
static void test_gelu_special_values(void **state) {
  (void)state;
  const float xs[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 8.0f, -8.0f, 9.5f, -9.5f, 30.0f, -30.0f,
                      1e10f, -1e10f, 1e30f, -1e30f, 3e38f, -3e38f, INFINITY, NAN};
  const int n = (int)(sizeof xs / sizeof xs[0]);
  float in[32], out[32], ref[32];
  memcpy(in, xs, sizeof xs);
  td_tile_mat a = {in, TD_F32, 1, n, n}, c = {out, TD_F32, 1, n, n}, r = {ref, TD_F32, 1, n, n};
  td_tile_args args = {TD_EW_GELU, 1.0f, a, {0}, c}, rargs = {TD_EW_GELU, 1.0f, a, {0}, r};
  td_tile_ctx ctx = {0};
  assert_int_equal(td__tile_cpu.fn[TD_TASK_EWISE](&ctx, &args), TD_OK);
  assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &rargs), TD_OK);
  for (int i = 0; i < n; i++) {
    if (isnan(xs[i])) {
      assert_true(isnan(out[i]));
      continue;
    }
    /* gelu(x) -> x for large x and -> 0 for very negative x */
    double expect = xs[i] > 20.0f ? xs[i] : xs[i] < -20.0f ? 0.0 : ref[i];
    if (!(out[i] == expect || fabs(out[i] - expect) <= 4e-6 * (1.0 + fabs(expect)))) {
      print_error("gelu(%g) = %.9g, expected %.9g\n", (double)xs[i], (double)out[i], expect);
      fail();
    }
  }
  td__tile_ctx_free(&ctx);
}

static void test_gemm_gelu_epilogue(void **state) {
  (void)state;
  const td_dtype dts[3] = {TD_F32, TD_BF16, TD_F16};
  const int64_t sizes[4] = {1, 3, 17, 40};
  td_tile_ctx ctx_ref = {0}, ctx_blas = {0};
  int cases = 0;
  for (int da = 0; da < 3; da++)
    for (int dc = 0; dc < 3; dc++)
      for (uint32_t flags = 0; flags < 8; flags++)
        for (int s = 0; s < 4; s++) {
          int64_t m = sizes[s], n = sizes[(s + 1) % 4], k = sizes[(s + 2) % 4];
          td_tile_args args = {flags | TD_GEMM_GELU, 0.5f, {0}, {0}, {0}};
          args.a = (flags & TD_GEMM_TRANS_A) ? make_mat(dts[da], k, m, s, 1.0f) : make_mat(dts[da], m, k, s, 1.0f);
          args.b = (flags & TD_GEMM_TRANS_B) ? make_mat(dts[(da + 1) % 3], n, k, 1, 1.0f)
                                             : make_mat(dts[(da + 1) % 3], k, n, 1, 1.0f);
          args.c = make_mat(dts[dc], m, n, 2, 1.0f);
          td_tile_args ref = args;
          ref.c = clone_mat(&args.c);
          assert_int_equal(td__tile_cpu.fn[TD_TASK_GEMM](&ctx_blas, &args), TD_OK);
          assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_GEMM](&ctx_ref, &ref), TD_OK);
          /* sums of k products in [-1, 1]: BLAS order differs from the reference's by ~k ulps */
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
              double x = get(&args.c, i, j), y = get(&ref.c, i, j);
              double lim = (args.c.dtype == TD_F32 ? 2e-5 : tol_of(args.c.dtype)) * (1.0 + 0.5 * (double)k);
              if (!(fabs(x - y) <= lim)) {
                print_error("gemm+gelu flags %u dtypes %s/%s (%lld,%lld): blas %.9g reference %.9g\n", flags,
                            td_dtype_name(dts[da]), td_dtype_name(dts[dc]), (long long)i, (long long)j, x, y);
                fail();
              }
            }
          free(args.a.ptr), free(args.b.ptr), free(args.c.ptr), free(ref.c.ptr);
          cases++;
        }
  assert_int_equal(cases, 3 * 3 * 8 * 4);
  td__tile_ctx_free(&ctx_ref);
  td__tile_ctx_free(&ctx_blas);
}

/* K = 0: the product is zero, so c = gelu(0) = 0, or gelu(c) when accumulating. */
static void test_gemm_gelu_k_zero(void **state) {
  (void)state;
  float a[1] = {0}, b[4] = {0}, c[4] = {1.0f, -2.0f, 0.5f, 3.0f}, r[4];
  memcpy(r, c, sizeof r);
  td_tile_ctx ctx = {0};
  for (int acc = 0; acc < 2; acc++) {
    float cc[4], rr[4];
    memcpy(cc, c, sizeof cc);
    memcpy(rr, r, sizeof rr);
    uint32_t op = TD_GEMM_GELU | (acc ? TD_GEMM_ACCUMULATE : 0);
    td_tile_args x = {op, 1.0f, {a, TD_F32, 2, 0, 1}, {b, TD_F32, 0, 2, 2}, {cc, TD_F32, 2, 2, 2}};
    td_tile_args y = {op, 1.0f, {a, TD_F32, 2, 0, 1}, {b, TD_F32, 0, 2, 2}, {rr, TD_F32, 2, 2, 2}};
    assert_int_equal(td__tile_cpu.fn[TD_TASK_GEMM](&ctx, &x), TD_OK);
    assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_GEMM](&ctx, &y), TD_OK);
    for (int i = 0; i < 4; i++) {
      assert_float_equal(cc[i], rr[i], 1e-6);
      if (!acc)
        assert_float_equal(cc[i], 0.0f, 0.0f);
    }
  }
  td__tile_ctx_free(&ctx);
}

/* f32 + f32 -> any dtype (the reduce-scatter's add-and-round step) against the
 * reference, and the f32 sum reduce against the additions written out: both
 * are the same single additions, so f32 results must match bit for bit. */
static void test_add_and_sum_f32(void **state) {
  (void)state;
  const td_dtype dts[3] = {TD_F32, TD_BF16, TD_F16};
  td_tile_ctx ctx = {0};
  for (int dc = 0; dc < 3; dc++) {
    td_tile_args args = {TD_EW_ADD, 1.0f, {0}, {0}, {0}};
    args.a = make_mat(TD_F32, 5, 131, 3, 8.0f);
    args.b = make_mat(TD_F32, 5, 131, 1, 8.0f);
    args.c = make_mat(dts[dc], 5, 131, 2, 1.0f);
    td_tile_args ref = args;
    ref.c = clone_mat(&args.c);
    assert_int_equal(td__tile_cpu.fn[TD_TASK_EWISE](&ctx, &args), TD_OK);
    assert_int_equal(td__tile_cpu_reference.fn[TD_TASK_EWISE](&ctx, &ref), TD_OK);
    for (int64_t i = 0; i < 5; i++)
      for (int64_t j = 0; j < 131; j++)
        assert_true(get(&args.c, i, j) == get(&ref.c, i, j));
    free(args.a.ptr), free(args.b.ptr), free(args.c.ptr), free(ref.c.ptr);
  }
  td_tile_mat a = make_mat(TD_F32, 4, 77, 5, 3.0f), c = make_mat(TD_F32, 4, 77, 1, 3.0f);
  td_tile_mat c0 = clone_mat(&c);
  td_tile_args red = {TD_SUM, 1.0f, a, {0}, c};
  assert_int_equal(td__tile_cpu.fn[TD_TASK_REDUCE](&ctx, &red), TD_OK);
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 77; j++)
      assert_true(get(&c, i, j) == get(&c0, i, j) + get(&a, i, j));
  free(a.ptr), free(c.ptr), free(c0.ptr);
  td__tile_ctx_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ewise_gelu_and_copy), cmocka_unit_test(test_ewise_gelu_in_place),
      cmocka_unit_test(test_gelu_special_values), cmocka_unit_test(test_gemm_gelu_epilogue),
      cmocka_unit_test(test_gemm_gelu_k_zero),     cmocka_unit_test(test_add_and_sum_f32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
