/* SPDX-License-Identifier: Apache-2.0
 * Plan limits that validation enforces: view bounds that would overflow
 * int64 (from plan text), GEMM sizes and row strides over the BLAS int
 * range, per-launch signal totals over TD_SIGNAL_TOTAL_MAX (so epochs never
 * wrap), and the GEMM tile with K = 0 and a zero row stride (no BLAS call,
 * so OpenBLAS never prints). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec_harness.h"

static void expect_validate(td_plan *p, const char *needle) {
  assert_int_equal(td_plan_validate(p), TD_ERR_SCHEDULE);
  if (!strstr(td_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", td_last_error(), needle);
}

/* The fuzzer's input: a view with row0 = rows = INT64_MAX. */
static void test_view_overflow_from_text(void **state) {
  (void)state;
  const char *text = "tdist-plan 1\nranks 1\nbuffer 0 \"x\" local f32 4 4\n"
                     "task 0 0 copy comm op 0 alpha 0x1p+0 a 0 -1 9223372036854775807 0 9223372036854775807 4 "
                     "b -1 -1 0 0 0 0 c 0 -1 0 0 1 4 deps 0 waits 0 raises 0 label \"t\"\n";
  td_plan *p = NULL;
  assert_int_equal(td_plan_parse(text, &p), TD_OK);
  expect_validate(p, "rank 0 task 0 't': view a (rows 9223372036854775807 +9223372036854775807, cols 0 +4) "
                     "lies outside buffer 'x' (4 x 4)");
  td_plan_destroy(p);
  /* Column start + extent overflowing, through the API. */
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  int32_t x = ex_buffer(p, "x", TD_BUF_LOCAL, TD_F32, 4, 4);
  td_task t = ex_task(TD_TASK_COPY, TD_WORKER_COMM, 0, "cols");
  t.a = ex_view(x, TD_PEER_SELF, 0, 2, 1, INT64_MAX - 1);
  t.c = ex_view(x, TD_PEER_SELF, 0, 0, 1, 4);
  uint32_t idx;
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  expect_validate(p, "view a (rows 0 +1, cols 2 +9223372036854775806) lies outside buffer 'x'");
  td_plan_destroy(p);
}

/* Buffers whose element count or byte size would overflow are refused. */
static void test_buffer_size_overflow(void **state) {
  (void)state;
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  assert_int_equal(ex_buffer(p, "huge", TD_BUF_LOCAL, TD_F64, INT64_MAX / 8, 4), -1);
  assert_non_null(strstr(td_last_error(), "buffer 'huge' has shape"));
  assert_int_equal(ex_buffer(p, "max", TD_BUF_LOCAL, TD_F32, INT64_MAX, INT64_MAX), -1);
  assert_int_equal(td_plan_nbuffers(p), 0);
  td_plan_destroy(p);
}

static void test_gemm_over_blas_int(void **state) {
  (void)state;
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  int64_t wide = (int64_t)INT32_MAX + 1;
  int32_t a = ex_buffer(p, "a", TD_BUF_INPUT, TD_F32, 2, wide), b = ex_buffer(p, "b", TD_BUF_WEIGHT, TD_F32, 2, 2);
  int32_t c = ex_buffer(p, "c", TD_BUF_OUTPUT, TD_F32, 2, 2);
  td_task t = ex_task(TD_TASK_GEMM, TD_WORKER_COMPUTE, 0, "wide lda");
  t.a = ex_view(a, TD_PEER_SELF, 0, 0, 2, 2);
  t.b = ex_view(b, TD_PEER_SELF, 0, 0, 2, 2);
  t.c = ex_view(c, TD_PEER_SELF, 0, 0, 2, 2);
  uint32_t idx;
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  expect_validate(p, "rank 0 task 0 'wide lda': gemm a's row stride (buffer cols) is 2147483648; GEMM tiles "
                     "take at most 2147483647");
  td_plan_destroy(p);
}

static void test_signal_total_cap(void **state) {
  (void)state;
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  uint32_t s, idx;
  assert_int_equal(td_plan_add_signal(p, "big", &s), TD_OK);
  td_raise r = {s, TD_PEER_SELF, (UINT64_C(1) << 63) - 1}; /* would wrap by launch 3 */
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "huge raise");
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, &r, 1, &idx), TD_OK);
  expect_validate(p, "raises of signal 'big' on rank 0 add up to more than 8388608 (2^23) per launch");
  td_plan_destroy(p);
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  assert_int_equal(td_plan_add_signal(p, "cap", &s), TD_OK);
  r.value = TD_SIGNAL_TOTAL_MAX;
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, &r, 1, &idx), TD_OK);
  assert_int_equal(td_plan_validate(p), TD_OK);
  assert_true(td_plan_signal_total(p, s, 0) == TD_SIGNAL_TOTAL_MAX);
  td_plan_destroy(p);
}

/* K = 0 with a zero row stride: c = 0 (or unchanged with ACCUMULATE). */
typedef struct k0_case {
  td_plan *plan;
  float c[16];
} k0_case;

static td_status k0_rank(td_world *w, int rank, void *arg) {
  k0_case *k = arg;
  (void)rank;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(k->plan, td_world_team(w), NULL, &ex));
  float none[1] = {0};
  EX_OK(td_exec_bind(ex, 0, none));
  EX_OK(td_exec_bind(ex, 1, none));
  EX_OK(td_exec_bind(ex, 2, k->c));
  td_status st = td_exec_run(ex);
  td_status d = td_exec_destroy(ex);
  return st != TD_OK ? st : d;
}

static void test_gemm_k0_zero_stride(void **state) {
  (void)state;
  k0_case k;
  assert_int_equal(td_plan_create(1, &k.plan), TD_OK);
  int32_t a = ex_buffer(k.plan, "a", TD_BUF_INPUT, TD_F32, 4, 0), b = ex_buffer(k.plan, "b", TD_BUF_WEIGHT, TD_F32, 0, 4);
  int32_t c = ex_buffer(k.plan, "c", TD_BUF_OUTPUT, TD_F32, 4, 4);
  uint32_t idx;
  for (int acc = 1; acc >= 0; acc--) {
    td_task t = ex_task(TD_TASK_GEMM, TD_WORKER_COMPUTE, acc ? TD_GEMM_ACCUMULATE : 0, acc ? "k0 acc" : "k0");
    t.a = ex_view(a, TD_PEER_SELF, 0, 0, 4, 0);
    t.b = ex_view(b, TD_PEER_SELF, 0, 0, 0, 4);
    t.c = ex_view(c, TD_PEER_SELF, 0, 0, 4, 4);
    uint32_t dep = 0;
    assert_int_equal(td_plan_add_task(k.plan, 0, &t, acc ? NULL : &dep, acc ? 0 : 1, NULL, 0, NULL, 0, &idx), TD_OK);
  }
  assert_int_equal(td_plan_validate(k.plan), TD_OK);
  for (int i = 0; i < 16; i++)
    k.c[i] = (float)(i + 1);
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(1, &o, k0_rank, &k);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
  for (int i = 0; i < 16; i++)
    assert_true(k.c[i] == 0.0f); /* accumulate kept c, then the plain k = 0 product zeroed it */
  td_plan_destroy(k.plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_view_overflow_from_text),
      cmocka_unit_test(test_buffer_size_overflow),
      cmocka_unit_test(test_gemm_over_blas_int),
      cmocka_unit_test(test_signal_total_cap),
      cmocka_unit_test(test_gemm_k0_zero_stride),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
