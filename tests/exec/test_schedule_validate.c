/* SPDX-License-Identifier: Apache-2.0
 * td_plan_validate and the plan-building errors: each fault gives
 * TD_ERR_SCHEDULE (or the builder's TD_ERR_INVALID_ARG) with a message that
 * names the rank, the task index and label, and the fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec_harness.h"

typedef struct {
  td_plan *p;
  int32_t in, sy, loc, w, h;
  uint32_t sig;
} fixture;

static int setup(void **state) {
  static fixture f;
  if (td_plan_create(2, &f.p) != TD_OK)
    return -1;
  f.in = ex_buffer(f.p, "in", TD_BUF_INPUT, TD_F32, 8, 4);
  f.sy = ex_buffer(f.p, "sy", TD_BUF_SYMM, TD_F32, 8, 4);
  f.loc = ex_buffer(f.p, "loc", TD_BUF_LOCAL, TD_F32, 8, 4);
  f.w = ex_buffer(f.p, "w", TD_BUF_WEIGHT, TD_F32, 4, 4);
  f.h = ex_buffer(f.p, "h", TD_BUF_SYMM, TD_BF16, 8, 4);
  if (td_plan_add_signal(f.p, "ready", &f.sig) != TD_OK)
    return -1;
  *state = &f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  td_plan_destroy(f->p);
  return 0;
}

/* Adds `t` as rank r's next task with optional single dep/wait/raise. */
static void add(fixture *f, int r, td_task t, const uint32_t *dep, const td_wait *wait, const td_raise *raise) {
  uint32_t idx;
  assert_int_equal(td_plan_add_task(f->p, r, &t, dep, dep ? 1 : 0, wait, wait ? 1 : 0, raise, raise ? 1 : 0,
                                    &idx),
                   TD_OK);
}

/* A fresh plan of the fixture's buffers, for one fault. */
static fixture fresh(void **state) {
  fixture *f = *state;
  td_plan_destroy(f->p);
  setup(state);
  return *f;
}

static void expect_fault(fixture *f, const char *needle1, const char *needle2) {
  assert_int_equal(td_plan_validate(f->p), TD_ERR_SCHEDULE);
  const char *m = td_last_error();
  if (!strstr(m, needle1) || (needle2 && !strstr(m, needle2)))
    fail_msg("message '%s' lacks '%s' / '%s'", m, needle1, needle2 ? needle2 : "");
  assert_int_equal(td_plan_signal_total(f->p, 0, 0), 0); /* not validated: no totals */
}

static td_task copy_task(fixture *f, const char *label) {
  td_task t = ex_task(TD_TASK_COPY, TD_WORKER_COMM, 0, label);
  t.a = ex_view(f->in, TD_PEER_SELF, 0, 0, 2, 4);
  t.c = ex_view(f->sy, 1, 0, 0, 2, 4);
  return t;
}

static void test_valid_plan_totals(void **state) {
  fixture f = fresh(state);
  td_raise r = {f.sig, 1, 3};
  add(&f, 0, copy_task(&f, "put"), NULL, NULL, &r);
  add(&f, 0, copy_task(&f, "put again"), NULL, NULL, &r);
  td_wait w = {f.sig, TD_CMP_GE, 6};
  td_task t = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, TD_EW_GELU, "gelu");
  t.a = t.c = ex_view(f.sy, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 1, t, NULL, &w, NULL);
  assert_int_equal(td_plan_validate(f.p), TD_OK);
  assert_int_equal(td_plan_signal_total(f.p, f.sig, 1), 6);
  assert_int_equal(td_plan_signal_total(f.p, f.sig, 0), 0);
  *(fixture *)*state = f;
}

static void test_unknown_buffer(void **state) {
  fixture f = fresh(state);
  td_task t = copy_task(&f, "bad buf");
  t.a.buf = 42;
  add(&f, 1, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 1 task 0 'bad buf': view a names unknown buffer 42", "the plan has 5 buffers");
  *(fixture *)*state = f;
}

static void test_view_out_of_range(void **state) {
  fixture f = fresh(state);
  add(&f, 0, copy_task(&f, "ok"), NULL, NULL, NULL);
  td_task t = copy_task(&f, "too far");
  t.a.row0 = 7; /* rows 7..9 of 8 */
  t.c.row0 = 0;
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 1 'too far': view a (rows 7 +2, cols 0 +4) lies outside buffer 'in' (8 x 4)", NULL);
  *(fixture *)*state = f;
}

static void test_wrong_shapes(void **state) {
  fixture f = fresh(state);
  td_task t = copy_task(&f, "copy shapes");
  t.c.rows = 3;
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'copy shapes': copy needs views a and c of one shape; got 2 x 4 and 3 x 4", NULL);

  f = fresh(state);
  td_task g = ex_task(TD_TASK_GEMM, TD_WORKER_COMPUTE, 0, "gemm k");
  g.a = ex_view(f.in, TD_PEER_SELF, 0, 0, 2, 3);  /* M 2, K 3 */
  g.b = ex_view(f.w, TD_PEER_SELF, 0, 0, 4, 4);   /* K 4 */
  g.c = ex_view(f.loc, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 1, g, NULL, NULL, NULL);
  expect_fault(&f, "rank 1 task 0 'gemm k': gemm shapes do not agree", "op(a) 2 x 3, op(b) 4 x 4");

  f = fresh(state);
  td_task n = ex_task(TD_TASK_RMSNORM, TD_WORKER_COMPUTE, 0, "norm");
  n.a = ex_view(f.in, TD_PEER_SELF, 0, 0, 2, 4);
  n.b = ex_view(f.w, TD_PEER_SELF, 0, 0, 2, 4);
  n.c = ex_view(f.loc, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 0, n, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'norm': rmsnorm needs weight view b of 1 x 4; got 2 x 4", NULL);

  f = fresh(state);
  td_task c = copy_task(&f, "dtypes");
  c.c = ex_view(f.h, 1, 0, 0, 2, 4);
  add(&f, 0, c, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'dtypes': copy needs a and c of one dtype; got f32 and bf16", NULL);
  *(fixture *)*state = f;
}

static void test_peer_view_not_symm(void **state) {
  fixture f = fresh(state);
  td_task t = copy_task(&f, "peer loc");
  t.c = ex_view(f.loc, 1, 0, 0, 2, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'peer loc': view c reads peer 1's copy of buffer 'loc', which is local",
               "only symm buffers have peer copies");
  f = fresh(state);
  t = copy_task(&f, "peer 5");
  t.c.peer = 5;
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'peer 5': view c names peer 5; allowed -1 (self) or 0 to 1", NULL);
  *(fixture *)*state = f;
}

static void test_writes_input(void **state) {
  fixture f = fresh(state);
  td_task t = copy_task(&f, "into input");
  t.a = ex_view(f.sy, TD_PEER_SELF, 0, 0, 2, 4);
  t.c = ex_view(f.in, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 1, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 1 task 0 'into input': writes buffer 'in', which is input (read-only)", NULL);
  *(fixture *)*state = f;
}

static void test_dependency_on_later_task(void **state) {
  fixture f = fresh(state);
  uint32_t dep = 1;
  add(&f, 0, copy_task(&f, "first"), &dep, NULL, NULL);
  add(&f, 0, copy_task(&f, "second"), NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'first': depends on task 1, which is not earlier", NULL);
  *(fixture *)*state = f;
}

static void test_unsatisfiable_wait(void **state) {
  fixture f = fresh(state);
  td_raise r = {f.sig, 1, 2};
  add(&f, 0, copy_task(&f, "put"), NULL, NULL, &r);
  td_wait w = {f.sig, TD_CMP_GE, 3};
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "wait 3");
  add(&f, 1, t, NULL, &w, NULL);
  expect_fault(&f, "rank 1 task 0 'wait 3': waits for signal 'ready' ge 3, but all ranks' raises add only 2 "
               "to rank 1's copy per launch", "can never be satisfied");
  *(fixture *)*state = f;
}

static void test_bad_signal_refs(void **state) {
  fixture f = fresh(state);
  td_wait w = {9, TD_CMP_GE, 1};
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "w9"), NULL, &w, NULL);
  expect_fault(&f, "rank 0 task 0 'w9': waits on unknown signal 9; the plan has 1 signals", NULL);
  f = fresh(state);
  td_wait lt = {f.sig, TD_CMP_LT, 1};
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "lt"), NULL, &lt, NULL);
  expect_fault(&f, "rank 0 task 0 'lt': waits on signal 'ready' with comparison lt; allowed ge, eq", NULL);
  f = fresh(state);
  td_raise r = {f.sig, 2, 1};
  add(&f, 1, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "r2"), NULL, NULL, &r);
  expect_fault(&f, "rank 1 task 0 'r2': raises signal 'ready' on peer 2; allowed -1 (self) or 0 to 1", NULL);
  *(fixture *)*state = f;
}

/* Rank 0 waits for rank 1's raise before raising what rank 1 waits for. */
static void test_cycle_across_ranks(void **state) {
  fixture f = fresh(state);
  uint32_t back;
  assert_int_equal(td_plan_add_signal(f.p, "back", &back), TD_OK);
  td_wait w0 = {back, TD_CMP_GE, 1};
  td_raise r0 = {f.sig, 1, 1};
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "r0 waits back"), NULL, &w0, &r0);
  td_wait w1 = {f.sig, TD_CMP_GE, 1};
  td_raise r1 = {back, 0, 1};
  add(&f, 1, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "r1 waits ready"), NULL, &w1, &r1);
  expect_fault(&f, "rank 0 task 0 'r0 waits back': deadlock: its wait on signal 'back' for 1 stops at 0",
               "also stuck: rank 1 task 0 'r1 waits ready'");
  *(fixture *)*state = f;
}

/* In-order queues: rank 0's one comm worker blocks on task 0, whose raise
 * comes from task 1 of the same class: a cycle through worker order. */
static void test_cycle_through_class_order(void **state) {
  fixture f = fresh(state);
  td_wait w = {f.sig, TD_CMP_GE, 1};
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "blocked"), NULL, &w, NULL);
  td_raise r = {f.sig, TD_PEER_SELF, 1};
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COPY_ENGINE, 0, "raiser"), NULL, NULL, &r);
  expect_fault(&f, "rank 0 task 0 'blocked': deadlock", "checked with one worker per class");
  /* The same raise from the compute class is fine. */
  f = fresh(state);
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "blocked"), NULL, &w, NULL);
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "raiser"), NULL, NULL, &r);
  assert_int_equal(td_plan_validate(f.p), TD_OK);
  *(fixture *)*state = f;
}

static void test_builder_errors(void **state) {
  fixture *f = *state;
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(0, &p), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "nranks 0 is out of range; allowed 1 to 4096"));
  assert_null(p);
  td_task t = copy_task(f, "x");
  uint32_t idx;
  assert_int_equal(td_plan_add_task(f->p, 2, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "rank 2 is out of range; the plan has 2 ranks"));
  assert_int_equal(td_plan_add_task(f->p, 0, &t, NULL, 1, NULL, 0, NULL, 0, &idx), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "a non-zero count with a NULL array"));
  assert_int_equal(td_plan_add_signal(f->p, "a name that is far too long for a signal", &idx),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "is longer than 31 characters"));
  td_buffer_desc d;
  memset(&d, 0, sizeof d);
  strcpy(d.name, "neg");
  d.rows = -1;
  int32_t bi;
  assert_int_equal(td_plan_add_buffer(f->p, &d, &bi), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "buffer 'neg' has shape -1 x 0"));
  d.rows = 1;
  d.kind = (td_buffer_kind)9;
  assert_int_equal(td_plan_add_buffer(f->p, &d, &bi), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "buffer 'neg' has unknown kind 9"));
  assert_int_equal(td_plan_validate(NULL), TD_ERR_INVALID_ARG);
}

/* Kind-specific faults not covered above, one plan each. */
static void test_kind_faults(void **state) {
  fixture f = fresh(state);
  td_task t = ex_task((td_task_kind)17, TD_WORKER_COMPUTE, 0, "odd kind");
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'odd kind': unknown task kind 17", NULL);

  f = fresh(state);
  t = ex_task(TD_TASK_NOP, (td_worker_class)5, 0, "odd class");
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'odd class': unknown worker class 5", NULL);

  f = fresh(state);
  t = ex_task(TD_TASK_GEMM, TD_WORKER_COMPUTE, 0x20, "gemm flags"); /* 1, 2, 4, 8 (QUEUE), 16 (GELU) are known */
  t.a = ex_view(f.in, TD_PEER_SELF, 0, 0, 4, 4);
  t.b = ex_view(f.w, TD_PEER_SELF, 0, 0, 4, 4);
  t.c = ex_view(f.loc, TD_PEER_SELF, 0, 0, 4, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'gemm flags': gemm flags 0x20 have unknown bits", NULL);

  f = fresh(state);
  t = ex_task(TD_TASK_REDUCE, TD_WORKER_COMM, 9, "red op");
  t.a = ex_view(f.in, TD_PEER_SELF, 0, 0, 2, 4);
  t.c = ex_view(f.sy, 1, 0, 0, 2, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'red op': reduce op 9 is unknown; allowed sum, max, min, prod", NULL);

  f = fresh(state);
  t = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, 11, "ew op");
  t.a = t.c = ex_view(f.loc, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'ew op': ewise op 11 is unknown", NULL);

  f = fresh(state);
  int32_t iv = ex_buffer(f.p, "ints", TD_BUF_LOCAL, TD_I32, 2, 4);
  t = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, TD_EW_SILU, "ew ints");
  t.a = ex_view(iv, TD_PEER_SELF, 0, 0, 2, 4);
  t.c = ex_view(f.loc, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'ew ints': ewise needs view a in f32, f16 or bf16; buffer is i32", NULL);

  f = fresh(state);
  int32_t bytes = ex_buffer(f.p, "bytes", TD_BUF_LOCAL, TD_U8, 2, 4);
  t = ex_task(TD_TASK_REDUCE, TD_WORKER_COMPUTE, TD_SUM, "red u8");
  t.a = t.c = ex_view(bytes, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'red u8': reduce needs a and c of one dtype other than u8; got u8 and u8", NULL);

  f = fresh(state);
  t = ex_task(TD_TASK_RMSNORM, TD_WORKER_COMPUTE, 0, "neg eps");
  t.alpha = -1.0f;
  t.a = ex_view(f.in, TD_PEER_SELF, 0, 0, 2, 4);
  t.b = ex_view(f.w, TD_PEER_SELF, 0, 0, 1, 4);
  t.c = ex_view(f.loc, TD_PEER_SELF, 0, 0, 2, 4);
  add(&f, 0, t, NULL, NULL, NULL);
  expect_fault(&f, "rank 0 task 0 'neg eps': rmsnorm epsilon (alpha) -1 must be >= 0", NULL);

  f = fresh(state);
  /* Two raises of half the cap sum to exactly TD_SIGNAL_TOTAL_MAX: allowed;
   * one more unit is refused, naming the cap. */
  td_raise big = {f.sig, 1, TD_SIGNAL_TOTAL_MAX / 2};
  td_raise one = {f.sig, 1, 1};
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "big 1"), NULL, NULL, &big);
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "big 2"), NULL, NULL, &big);
  assert_int_equal(td_plan_validate(f.p), TD_OK);
  add(&f, 0, ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "one more"), NULL, NULL, &one);
  expect_fault(&f, "rank 0 task 2 'one more': raises of signal 'ready' on rank 1 add up to more than 8388608 "
               "(2^23) per launch", NULL);
  *(fixture *)*state = f;
}

static void test_null_arguments(void **state) {
  fixture *f = *state;
  int32_t bi;
  uint32_t idx;
  td_buffer_desc d;
  memset(&d, 'x', sizeof d); /* name without a terminator */
  assert_int_equal(td_plan_add_buffer(f->p, &d, &bi), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "name is not NUL-terminated within 32 bytes"));
  memset(&d, 0, sizeof d);
  d.dtype = (td_dtype)99;
  assert_int_equal(td_plan_add_buffer(f->p, &d, &bi), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "has unknown dtype 99"));
  assert_int_equal(td_plan_add_buffer(f->p, NULL, &bi), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "plan, desc and index must not be NULL"));
  assert_int_equal(td_plan_add_signal(NULL, "s", &idx), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "plan and index must not be NULL"));
  assert_int_equal(td_plan_add_task(f->p, 0, NULL, NULL, 0, NULL, 0, NULL, 0, &idx), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "plan, task and index must not be NULL"));
  assert_int_equal(td_plan_create(2, NULL), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "out is NULL"));
  assert_int_equal(td_plan_dump(NULL, stdout), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "plan and out must not be NULL"));
  assert_null(td_plan_schedule(f->p, 7));
  assert_null(td_plan_buffer(f->p, -1));
  assert_null(td_plan_signal_name(f->p, 99));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_plan_totals),  cmocka_unit_test(test_unknown_buffer),
      cmocka_unit_test(test_view_out_of_range),  cmocka_unit_test(test_wrong_shapes),
      cmocka_unit_test(test_peer_view_not_symm), cmocka_unit_test(test_writes_input),
      cmocka_unit_test(test_dependency_on_later_task), cmocka_unit_test(test_unsatisfiable_wait),
      cmocka_unit_test(test_bad_signal_refs),    cmocka_unit_test(test_cycle_across_ranks),
      cmocka_unit_test(test_cycle_through_class_order), cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_kind_faults),        cmocka_unit_test(test_null_arguments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
