/* SPDX-License-Identifier: Apache-2.0
 * The plan text form: dump -> parse -> dump gives identical text for random
 * plans (randgraph.c) and a hand-built one with awkward strings and floats;
 * parse errors name line:col and what was expected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "exec_harness.h"
#include "randgraph.h"

/* The dump of a plan as a malloc'd string. */
static char *dump_text(const td_plan *p) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  assert_int_equal(td_plan_dump(p, f), TD_OK);
  fclose(f);
  return buf;
}

static void round_trip(td_plan *p) {
  char *a = dump_text(p);
  td_plan *q = NULL;
  if (td_plan_parse(a, &q) != TD_OK)
    fail_msg("parse of own dump failed: %s\n%s", td_last_error(), a);
  char *b = dump_text(q);
  assert_string_equal(a, b);
  /* Structure survives too, and the copy validates like the original. */
  assert_int_equal(td_plan_nranks(q), td_plan_nranks(p));
  assert_int_equal(td_plan_nsignals(q), td_plan_nsignals(p));
  assert_int_equal(td_plan_validate(q), td_plan_validate(p));
  for (uint32_t s = 0; s < td_plan_nsignals(p); s++)
    for (int r = 0; r < td_plan_nranks(p); r++)
      assert_int_equal(td_plan_signal_total(q, s, r), td_plan_signal_total(p, s, r));
  td_plan_destroy(q);
  free(a);
  free(b);
}

static void test_random_round_trips(void **state) {
  (void)state;
  for (uint64_t seed = 0; seed < 200; seed++) {
    rg_graph g;
    assert_int_equal(rg_generate(seed, 1, &g), TD_OK);
    round_trip(g.plan);
    rg_free(&g);
  }
}

static void test_awkward_values(void **state) {
  (void)state;
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(3, &p), TD_OK);
  int32_t b = ex_buffer(p, "quote\"back\\slash", TD_BUF_SYMM, TD_BF16, 5, 7);
  uint32_t s;
  assert_int_equal(td_plan_add_signal(p, "tab\there", &s), TD_OK);
  assert_int_equal(td_plan_add_signal(p, "", &s), TD_OK);
  td_task t = ex_task(TD_TASK_EWISE, TD_WORKER_COPY_ENGINE, TD_EW_SCALE, "# not a comment");
  t.alpha = 0.1f; /* not exact in decimal */
  t.a = ex_view(b, 2, 1, 2, 3, 4);
  t.c = ex_view(b, TD_PEER_SELF, 0, 0, 3, 4);
  td_wait w = {0, TD_CMP_EQ, UINT64_MAX / 4};
  td_raise r = {1, 2, 123456789012345ull};
  uint32_t idx;
  assert_int_equal(td_plan_add_task(p, 2, &t, NULL, 0, &w, 1, &r, 1, &idx), TD_OK);
  uint32_t dep = 0;
  assert_int_equal(td_plan_add_task(p, 2, &t, &dep, 1, NULL, 0, NULL, 0, &idx), TD_OK);
  round_trip(p);
  char *text = dump_text(p);
  td_plan *q = NULL;
  assert_int_equal(td_plan_parse(text, &q), TD_OK);
  assert_true(td_plan_schedule(q, 2)->tasks[0].alpha == 0.1f);
  assert_string_equal(td_plan_buffer(q, 0)->name, "quote\"back\\slash");
  assert_string_equal(td_plan_signal_name(q, 0), "tab\there");
  assert_string_equal(td_plan_schedule(q, 2)->tasks[0].label, "# not a comment");
  td_plan_destroy(q);
  free(text);
  td_plan_destroy(p);
}

static void expect_parse_error(const char *text, const char *needle) {
  td_plan *q = NULL;
  assert_int_equal(td_plan_parse(text, &q), TD_ERR_PARSE);
  assert_null(q);
  if (!strstr(td_last_error(), needle))
    fail_msg("message '%s' lacks '%s'", td_last_error(), needle);
}

static void test_parse_errors(void **state) {
  (void)state;
  expect_parse_error("tdist-plan 2\nranks 1\n", "line 1:12: version '2' is not supported; this build reads version 1");
  expect_parse_error("# comment\ntdist-plan 1\nrank 1\n", "line 3:1: expected 'ranks', got 'rank'");
  expect_parse_error("tdist-plan 1\nranks 0\n", "line 2:7: expected an integer from 1 to 4096, got '0'");
  expect_parse_error("tdist-plan 1\nranks 1\nbuffer 0 \"x\" symm f33 1 1\n",
                     "line 3:19: expected a dtype (f32, f16, bf16, i32, f64, i64, u8), got 'f33'");
  expect_parse_error("tdist-plan 1\nranks 1\nbuffer 1 \"x\" symm f32 1 1\n", "line 3:8: buffer 1 out of order; expected 0");
  expect_parse_error("tdist-plan 1\nranks 1\nsignal 0 \"open\n", "line 3:10: string is not closed");
  expect_parse_error("tdist-plan 1\nranks 1\nsignal 0 \"s\" extra\n", "line 3:14: expected end of line, got 'extra'");
  expect_parse_error("tdist-plan 1\nranks 1\nbogus\n", "line 3:1: expected 'buffer', 'signal' or 'task', got 'bogus'");
  expect_parse_error("tdist-plan 1\nranks 2\ntask 1 0 nop compute op 0 alpha 0x0p+0 a -1 -1 0 0 0 0 b -1 -1 0 0 0 0 "
                     "c -1 -1 0 0 0 0 deps 0 waits 1 0 ge\n",
                     "line 3:107: expected an unsigned 64-bit integer, got end of line");
  expect_parse_error("tdist-plan 1\nranks 1\ntask 0 1 nop compute", "line 3:8: task index 1 of rank 0 out of order; expected 0");
  td_plan *q = NULL;
  assert_int_equal(td_plan_parse(NULL, &q), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "text and out must not be NULL"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_round_trips),
      cmocka_unit_test(test_awkward_values),
      cmocka_unit_test(test_parse_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
