/* SPDX-License-Identifier: Apache-2.0
 * AUTO against the measurements: for the cases measured on the H200
 * (docs/perf.md, 8 ranks sharing the GPU, bf16), the variant the perf model
 * picks for a cuda plan must be the one that measured fastest there. Only
 * compiles and simulates plans, so it runs without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "ops/ops_internal.h"

static td_tp_variant pick(const td__tp_desc *d, int nranks, double pred[4]) {
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  td_program *p = NULL;
  td_value vals[3];
  assert_int_equal(td_program_create(&p), TD_OK);
  assert_int_equal(d->build(d, p, vals), TD_OK);
  td_tp_variant v = TD_TP_AUTO;
  for (int i = 0; i < 4; i++)
    pred[i] = -1;
  assert_int_equal(td__tp_auto_variant(d, nranks, &o, p, &v, pred), TD_OK);
  td_program_destroy(p);
  return v;
}

static void expect(const char *what, const td__tp_desc *d, td_tp_variant want) {
  double pred[4];
  td_tp_variant got = pick(d, 8, pred);
  printf("%-28s -> %-12s predicted", what, td_tp_variant_name(got));
  for (int i = 0; i < 4 && d->auto_candidates[i] != TD_TP_AUTO; i++)
    printf(" %s %.3f ms", td_tp_variant_name(d->auto_candidates[i]), pred[i] * 1e3);
  printf("\n");
  if (got != want)
    fail_msg("%s: AUTO picked %s, the H200 measured %s fastest", what, td_tp_variant_name(got),
             td_tp_variant_name(want));
}

static void test_auto_matches_h200(void **state) {
  (void)state;
  td__tp_desc d;
  td__ag_gemm_desc(4096, 14336, 4096, TD_BF16, TD_EXEC_CUDA, &d);
  expect("ag_gemm llama3.1-8b M=4096", &d, TD_TP_COPY_ENGINE);
  td__ag_gemm_desc(4096, 28672, 8192, TD_BF16, TD_EXEC_CUDA, &d);
  expect("ag_gemm llama3.1-70b M=4096", &d, TD_TP_COPY_ENGINE);
  td__ag_gemm_desc(4091 * 8, 5120, 1024, TD_BF16, TD_EXEC_CUDA, &d);
  expect("ag_gemm 4091x8", &d, TD_TP_COPY_ENGINE);
  td__gemm_rs_desc(4096, 14336, 4096, TD_BF16, &d);
  expect("gemm_rs llama3.1-8b M=4096", &d, TD_TP_SM);
  td__gemm_ar_desc(1024, 14336, 4096, TD_BF16, &d);
  expect("gemm_ar llama3.1-8b M=1024", &d, TD_TP_TWO_SHOT);
  const size_t bytes[] = {8u << 10, 64u << 10, 1u << 20, 8u << 20, 64u << 20};
  for (int i = 0; i < 5; i++) {
    char what[40];
    snprintf(what, sizeof what, "all_reduce %zu KiB", bytes[i] >> 10);
    td__all_reduce_desc(bytes[i] / 2, TD_BF16, &d);
    expect(what, &d, TD_TP_TWO_SHOT);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_auto_matches_h200)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
