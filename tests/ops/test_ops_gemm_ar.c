/* SPDX-License-Identifier: Apache-2.0
 * td_gemm_ar on the cpu backend: one-shot, two-shot and sequential forced,
 * and AUTO, on 1-8 ranks, uneven M and K, f32 and bf16, repeated calls,
 * checked against the f64 reference on every rank (C is replicated). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops_harness.h"

static void test_variants_and_ranks(void **state) {
  (void)state;
  const td_tp_variant vs[] = {TD_TP_AUTO, TD_TP_ONE_SHOT, TD_TP_TWO_SHOT, TD_TP_SEQUENTIAL};
  const int ranks[] = {1, 2, 3, 4, 8};
  for (int v = 0; v < 4; v++)
    for (int r = 0; r < 5; r++) {
      oh_case c = {.kind = TD_TP_GEMM_AR, .variant = vs[v], .dtype = TD_F32, .m = 37, .n = 26, .k = 27,
                   .calls = 3};
      OH_EXPECT_OK(ranks[r], &c);
      assert_int_not_equal(c.chosen, TD_TP_AUTO);
    }
}

static void test_bf16(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_GEMM_AR, .variant = TD_TP_TWO_SHOT, .dtype = TD_BF16, .m = 29, .n = 40, .k = 32,
               .calls = 2};
  OH_EXPECT_OK(4, &c);
  c.variant = TD_TP_ONE_SHOT;
  OH_EXPECT_OK(3, &c);
}

static void test_m_smaller_than_ranks(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_GEMM_AR, .variant = TD_TP_TWO_SHOT, .dtype = TD_F32, .m = 3, .n = 5, .k = 11,
               .calls = 2};
  OH_EXPECT_OK(8, &c);
}

static void test_many_calls(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_GEMM_AR, .variant = TD_TP_ONE_SHOT, .dtype = TD_F32, .m = 9, .n = 7, .k = 8,
               .calls = 30};
  OH_EXPECT_OK(4, &c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variants_and_ranks),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_m_smaller_than_ranks),
      cmocka_unit_test(test_many_calls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
