/* SPDX-License-Identifier: Apache-2.0
 * td_all_to_allv on local worlds of 1, 2, 3, 4 and 8 ranks against the single-rank
 * reference, bit for bit: counts 0, 1, 7, 4097 and 1 MiB + 3, every dtype
 * (and op), ordinary, symmetric, mixed and in-place buffers. */
#include "coll/coll_harness.h"

static void test_all_to_allv(void **state) {
  (void)state;
  ch_run_sizes(cu_check_all_to_allv);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_to_allv)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
