/* SPDX-License-Identifier: Apache-2.0
 * td_gemm_rs on the cpu backend: overlapped and sequential variants on 1-8
 * ranks, M and K not divisible by the rank count, M smaller than it, f32 and
 * bf16, repeated calls, checked against the f64 reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops_harness.h"

static void test_variants_and_ranks(void **state) {
  (void)state;
  const td_tp_variant vs[] = {TD_TP_AUTO, TD_TP_SEQUENTIAL, TD_TP_SM};
  const int ranks[] = {1, 2, 3, 5, 8};
  for (int v = 0; v < 3; v++)
    for (int r = 0; r < 5; r++) {
      oh_case c = {.kind = TD_TP_GEMM_RS, .variant = vs[v], .dtype = TD_F32, .m = 61, .n = 38, .k = 29,
                   .calls = 3};
      OH_EXPECT_OK(ranks[r], &c);
      assert_int_not_equal(c.chosen, TD_TP_AUTO);
    }
}

static void test_bf16(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_GEMM_RS, .variant = TD_TP_SM, .dtype = TD_BF16, .m = 45, .n = 24, .k = 48,
               .calls = 2, .chunks = 2};
  OH_EXPECT_OK(4, &c);
}

static void test_m_smaller_than_ranks(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_GEMM_RS, .variant = TD_TP_SM, .dtype = TD_F32, .m = 5, .n = 9, .k = 16, .calls = 2};
  OH_EXPECT_OK(8, &c);
}

static void test_many_calls(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_GEMM_RS, .variant = TD_TP_SM, .dtype = TD_F32, .m = 19, .n = 7, .k = 9, .calls = 30};
  OH_EXPECT_OK(3, &c);
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
