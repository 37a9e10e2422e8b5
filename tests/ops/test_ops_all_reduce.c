/* SPDX-License-Identifier: Apache-2.0
 * td_ll_all_reduce on the cpu backend: one-shot, two-shot and AUTO on 1-8
 * ranks, counts that are prime (a one-column view), smaller than the rank
 * count and a few KiB, f32 and bf16, thirty calls without reset, checked
 * against the f64 sum of the rounded addends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops_harness.h"

static void test_variants_and_ranks(void **state) {
  (void)state;
  const td_tp_variant vs[] = {TD_TP_AUTO, TD_TP_ONE_SHOT, TD_TP_TWO_SHOT};
  const int ranks[] = {1, 2, 3, 4, 8};
  const size_t counts[] = {2048, 1009, 6000};
  for (int v = 0; v < 3; v++)
    for (int r = 0; r < 5; r++)
      for (int k = 0; k < 3; k++) {
        oh_case c = {.kind = TD_TP_ALL_REDUCE, .variant = vs[v], .dtype = TD_F32, .count = counts[k], .calls = 2};
        OH_EXPECT_OK(ranks[r], &c);
        assert_int_not_equal(c.chosen, TD_TP_AUTO);
      }
}

static void test_small_counts_and_bf16(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_ALL_REDUCE, .variant = TD_TP_TWO_SHOT, .dtype = TD_F32, .count = 5, .calls = 2};
  OH_EXPECT_OK(8, &c);
  c.count = 1;
  OH_EXPECT_OK(3, &c);
  c.variant = TD_TP_ONE_SHOT, c.dtype = TD_BF16, c.count = 4096;
  OH_EXPECT_OK(4, &c);
}

static void test_many_calls(void **state) {
  (void)state;
  oh_case c = {.kind = TD_TP_ALL_REDUCE, .variant = TD_TP_ONE_SHOT, .dtype = TD_F32, .count = 2048, .calls = 30};
  OH_EXPECT_OK(4, &c);
  c.variant = TD_TP_TWO_SHOT;
  OH_EXPECT_OK(4, &c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variants_and_ranks),
      cmocka_unit_test(test_small_counts_and_bf16),
      cmocka_unit_test(test_many_calls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
