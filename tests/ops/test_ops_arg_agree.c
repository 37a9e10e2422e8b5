/* SPDX-License-Identifier: Apache-2.0
 * Operator create arguments that the shape checks do not cover: a timeout_ms
 * that differs between ranks is refused on every rank (TD_ERR_MISMATCH naming
 * both values), and an all_reduce count too large for one operator is named
 * in the caller's terms (count, dtype, bytes per rank), not the compiler's
 * tiles and dims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tdist/tdist.h"

enum { NR = 3 };
#define RC_RANKS NR
#include "rank_check.h"

static td_status timeout_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.timeout_ms = rank == 1 ? 5 : 0;
  td_tp_op *op = NULL;
  UCHECK(td_gemm_ar_create(td_world_team(w), 8, 8, 8, TD_F32, &o, &op) == TD_ERR_MISMATCH);
  UCHECK(op == NULL);
  UCHECK(strstr(td_last_error(), "gemm_ar: ranks passed different opts.timeout_ms: rank 0 0, rank 1 5") != NULL);
  /* Equal values are accepted, and the team still works after the refusal. */
  o.timeout_ms = 15000;
  UCHECK(td_gemm_ar_create(td_world_team(w), 8, 8, 8, TD_F32, &o, &op) == TD_OK);
  UCHECK(td_tp_destroy(op) == TD_OK);
  return TD_OK;
}

static void test_timeout_differs(void **state) {
  (void)state;
  rank_check_run(NR, timeout_rank);
}

static td_status huge_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_tp_op *op = NULL;
  UCHECK(td_ll_all_reduce_create(td_world_team(w), SIZE_MAX, TD_F32, NULL, &op) == TD_ERR_INVALID_ARG);
  UCHECK(op == NULL);
  char want[160];
  snprintf(want, sizeof want, "all_reduce: count = %zu elements of f32 (%.0f bytes per rank", (size_t)SIZE_MAX,
           (double)SIZE_MAX * 4.0);
  UCHECK(strstr(td_last_error(), want) != NULL);
  UCHECK(strstr(td_last_error(), "tiles") == NULL);
  return TD_OK;
}

static void test_huge_all_reduce_count(void **state) {
  (void)state;
  rank_check_run(2, huge_rank);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timeout_differs),
      cmocka_unit_test(test_huge_all_reduce_count),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
