/* SPDX-License-Identifier: Apache-2.0
 * td_ag_gemm on the cpu backend: every variant on local worlds of 1-8 ranks,
 * M not divisible by the rank count and M smaller than it, f32 and bf16,
 * several calls in a row with new inputs (no reset), checked against the f64
 * reference; AUTO picks an overlapped variant when there is something to
 * overlap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ops/ops_harness.h"

static void test_variants_and_ranks(void **state) {
  (void)state;
  const td_tp_variant vs[] = {TD_TP_AUTO, TD_TP_SEQUENTIAL, TD_TP_SM, TD_TP_COPY_ENGINE, TD_TP_RING};
  const int ranks[] = {1, 2, 3, 4, 8};
  for (int v = 0; v < 5; v++)
    for (int r = 0; r < 5; r++) {
      oh_case c = {.kind = TD_TP_AG_GEMM, .variant = vs[v], .dtype = TD_F32, .m = 67, .n = 45, .k = 24,
                   .calls = 3};
      OH_EXPECT_OK(ranks[r], &c);
      if (vs[v] != TD_TP_AUTO)
        assert_int_equal(c.chosen, vs[v]);
      else
        assert_int_not_equal(c.chosen, TD_TP_AUTO);
    }
}

static void test_bf16_and_chunks(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_AG_GEMM, .variant = TD_TP_SM, .dtype = TD_BF16, .m = 53, .n = 33, .k = 40,
               .calls = 2, .chunks = 3};
  OH_EXPECT_OK(4, &c);
  /* td_tp_schedule names the variant and the chunks asked for */
  assert_non_null(strstr(c.schedule, "sm: 3 chunks per rank"));
  char buf[8] = "x";
  assert_ptr_equal(td_tp_schedule(NULL, buf, sizeof buf), buf);
  assert_string_equal(buf, "x"); /* nothing written for a NULL op */
  c.variant = TD_TP_COPY_ENGINE;
  OH_EXPECT_OK(3, &c);
  c.dtype = TD_F16;
  OH_EXPECT_OK(2, &c);
}

static void test_m_smaller_than_ranks(void **state) {
  (void)state;
  /* Ranks 3..7 hold no rows of A; N also smaller than the rank count. */
  oh_case c = {.kind = TD_TP_AG_GEMM, .variant = TD_TP_SM, .dtype = TD_F32, .m = 3, .n = 5, .k = 7, .calls = 2};
  OH_EXPECT_OK(8, &c);
  c.variant = TD_TP_SEQUENTIAL;
  OH_EXPECT_OK(8, &c);
}

static void test_many_calls(void **state) {
  (void)state;
  /* Epochs only: thirty calls on one handle with no reset. */
  oh_case c = {.kind = TD_TP_AG_GEMM, .variant = TD_TP_SM, .dtype = TD_F32, .m = 17, .n = 8, .k = 6, .calls = 30};
  OH_EXPECT_OK(4, &c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variants_and_ranks),
      cmocka_unit_test(test_bf16_and_chunks),
      cmocka_unit_test(test_m_smaller_than_ranks),
      cmocka_unit_test(test_many_calls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
