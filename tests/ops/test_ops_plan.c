/* SPDX-License-Identifier: Apache-2.0
 * What the operators hand to the executor: the copy-engine variant moves
 * every put (and nothing else) to the copy-engine class; AUTO keeps the
 * candidate the perf model predicts fastest; td_tp_operand reports each
 * rank's part, row stride and buffer size as documented in ops.h (uneven
 * splits, empty parts, the flat all-reduce vector). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <unistd.h>

#include "ops/ops_harness.h"
#include "ops/ops_internal.h"

static int count_class(const td_plan *p, td_worker_class cls, int peer_copies_only) {
  int k = 0;
  for (int r = 0; r < td_plan_nranks(p); r++) {
    const td_schedule *s = td_plan_schedule(p, r);
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      if (t->worker == cls && (!peer_copies_only || (t->kind == TD_TASK_COPY && t->c.peer != TD_PEER_SELF)))
        k++;
    }
  }
  return k;
}

typedef struct plan_arg {
  int ce_puts, ce_other, comm_puts, sm_ce;
  double pred_auto, pred_seq, pred_sm;
  td_tp_variant chosen;
} plan_arg;

static td_status plan_rank(td_world *w, int rank, void *arg) {
  plan_arg *pa = arg;
  td_tp_opts o;
  td_tp_opts_init(&o);
  td_tp_op *ce = NULL, *sm = NULL, *au = NULL, *seq = NULL;
  td_team *t = td_world_team(w);
  o.variant = TD_TP_COPY_ENGINE;
  td_status st = td_ag_gemm_create(t, 203, 64, 48, TD_F32, &o, &ce);
  o.variant = TD_TP_SM;
  if (st == TD_OK)
    st = td_ag_gemm_create(t, 203, 64, 48, TD_F32, &o, &sm);
  o.variant = TD_TP_AUTO;
  if (st == TD_OK)
    st = td_ag_gemm_create(t, 203, 64, 48, TD_F32, &o, &au);
  o.variant = TD_TP_SEQUENTIAL;
  if (st == TD_OK)
    st = td_ag_gemm_create(t, 203, 64, 48, TD_F32, &o, &seq);
  if (st == TD_OK && rank == 0) {
    pa->ce_puts = count_class(ce->plan, TD_WORKER_COPY_ENGINE, 1);
    pa->ce_other = count_class(ce->plan, TD_WORKER_COPY_ENGINE, 0) - pa->ce_puts;
    pa->comm_puts = count_class(ce->plan, TD_WORKER_COMM, 1);
    pa->sm_ce = count_class(sm->plan, TD_WORKER_COPY_ENGINE, 0);
    pa->pred_auto = td_tp_predicted_seconds(au);
    pa->pred_seq = td_tp_predicted_seconds(seq);
    pa->pred_sm = td_tp_predicted_seconds(sm);
    td_tp_choices(au, &pa->chosen, NULL, NULL, NULL);
  }
  td_tp_destroy(ce);
  td_tp_destroy(sm);
  td_tp_destroy(au);
  td_tp_destroy(seq);
  return st;
}

static void test_copy_engine_and_auto(void **state) {
  (void)state;
  plan_arg pa = {0};
  td_status st = td_local_world_run(4, NULL, plan_rank, &pa);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  /* 4 ranks x 3 peers x chunks puts, all on the copy engine; the local copies stay on comm. */
  assert_true(pa.ce_puts >= 12);
  assert_int_equal(pa.ce_puts % 12, 0);
  assert_int_equal(pa.ce_other, 0);
  assert_int_equal(pa.comm_puts, 0);
  assert_int_equal(pa.sm_ce, 0);
  /* AUTO on cpu compares sm and sequential and keeps the smaller prediction. */
  assert_true(pa.pred_auto > 0 && pa.pred_seq > 0 && pa.pred_sm > 0);
  double best = pa.pred_sm < pa.pred_seq ? pa.pred_sm : pa.pred_seq;
  assert_true(pa.pred_auto <= best * 1.000001);
  assert_int_equal(pa.chosen, pa.pred_sm <= pa.pred_seq ? TD_TP_SM : TD_TP_SEQUENTIAL);
}

typedef struct lay_arg {
  td_tp_layout l[4][3][4]; /* [kind][operand][rank] */
} lay_arg;

static td_status lay_rank(td_world *w, int rank, void *arg) {
  lay_arg *la = arg;
  td_team *t = td_world_team(w);
  td_tp_op *op[4] = {0};
  td_status st = td_ag_gemm_create(t, 10, 7, 5, TD_BF16, NULL, &op[0]);
  if (st == TD_OK)
    st = td_gemm_rs_create(t, 10, 7, 6, TD_F32, NULL, &op[1]);
  if (st == TD_OK)
    st = td_gemm_ar_create(t, 3, 7, 6, TD_F32, NULL, &op[2]);
  if (st == TD_OK)
    st = td_ll_all_reduce_create(t, 1001, TD_BF16, NULL, &op[3]);
  for (int k = 0; k < 4 && st == TD_OK && rank == 0; k++)
    for (int which = 0; which < 3; which++)
      for (int r = 0; r < 4; r++)
        st = td_tp_operand(op[k], (td_tp_operand_id)which, r, &la->l[k][which][r]);
  for (int k = 0; k < 4; k++)
    td_tp_destroy(op[k]);
  return st;
}

static void expect_layout(const td_tp_layout *l, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                          int64_t ld, size_t bytes) {
  assert_int_equal(l->row0, row0);
  assert_int_equal(l->rows, rows);
  assert_int_equal(l->col0, col0);
  assert_int_equal(l->cols, cols);
  assert_int_equal(l->ld, ld);
  assert_int_equal(l->bytes, bytes);
}

static void test_operand_layouts(void **state) {
  (void)state;
  lay_arg la;
  memset(&la, 0, sizeof la);
  td_status st = td_local_world_run(4, NULL, lay_rank, &la);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  /* ag_gemm 10x7x5 bf16: A rows 3,3,2,2 (buffers of 3 rows); B and C cols 2,2,2,1 (ld 2). */
  expect_layout(&la.l[0][0][0], 0, 3, 0, 5, 5, 3 * 5 * 2);
  expect_layout(&la.l[0][0][3], 8, 2, 0, 5, 5, 3 * 5 * 2);
  expect_layout(&la.l[0][1][3], 0, 5, 6, 1, 2, 5 * 2 * 2);
  expect_layout(&la.l[0][2][1], 0, 10, 2, 2, 2, 10 * 2 * 2);
  /* gemm_rs 10x7x6 f32: A cols 2,2,1,1 (ld 2); B rows 2,2,1,1; C rows 3,3,2,2 of 7. */
  expect_layout(&la.l[1][0][2], 0, 10, 4, 1, 2, 10 * 2 * 4);
  expect_layout(&la.l[1][1][2], 4, 1, 0, 7, 7, 2 * 7 * 4);
  expect_layout(&la.l[1][2][3], 8, 2, 0, 7, 7, 3 * 7 * 4);
  /* gemm_ar 3x7x6: C replicated. */
  expect_layout(&la.l[2][2][3], 0, 3, 0, 7, 7, 3 * 7 * 4);
  /* all_reduce of 1001 bf16: flat; no B. */
  expect_layout(&la.l[3][0][2], 0, 1, 0, 1001, 1001, 1001 * 2);
  expect_layout(&la.l[3][2][0], 0, 1, 0, 1001, 1001, 1001 * 2);
  expect_layout(&la.l[3][1][0], 0, 0, 0, 0, 0, 0);
}

/* ag_gemm's C is laid out as gemm_rs's A (an MLP passes h on with no copy). */
typedef struct chain_arg {
  td_tp_layout c[3], a[3];
} chain_arg;

static td_status chain_rank(td_world *w, int rank, void *arg) {
  chain_arg *ca = arg;
  td_tp_op *ag = NULL, *rs = NULL;
  td_status st = td_ag_gemm_create(td_world_team(w), 11, 7, 5, TD_BF16, NULL, &ag);
  if (st == TD_OK)
    st = td_gemm_rs_create(td_world_team(w), 11, 5, 7, TD_BF16, NULL, &rs);
  if (st == TD_OK) {
    td_tp_operand(ag, TD_TP_C, rank, &ca->c[rank]);
    td_tp_operand(rs, TD_TP_A, rank, &ca->a[rank]);
  }
  td_tp_destroy(ag);
  td_tp_destroy(rs);
  return st;
}

static void test_ag_output_is_rs_input(void **state) {
  (void)state;
  chain_arg ca;
  memset(&ca, 0, sizeof ca);
  assert_int_equal(td_local_world_run(3, NULL, chain_rank, &ca), TD_OK);
  for (int r = 0; r < 3; r++)
    expect_layout(&ca.a[r], ca.c[r].row0, ca.c[r].rows, ca.c[r].col0, ca.c[r].cols, ca.c[r].ld, ca.c[r].bytes);
}

/* Rank 1 makes no call until rank 0 is done: rank 0's call times out (at the
 * launch barrier); afterwards its handle refuses calls with TD_ERR_STATE;
 * both ranks can destroy. */
typedef struct fail_arg {
  td_status first, second;
  char msg1[512], msg2[512];
  _Atomic int rank0_done; /* rank 1 stays out of every executor call until rank 0 is done */
} fail_arg;

static td_status fail_rank(td_world *w, int rank, void *arg) {
  fail_arg *fa = arg;
  td_tp_op *op = NULL;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.variant = TD_TP_SM;
  o.timeout_ms = 300;
  td_status st = td_ag_gemm_create(td_world_team(w), 8, 8, 8, TD_F32, &o, &op);
  if (st != TD_OK)
    return st;
  float a[64] = {0}, b[64] = {0}, c[64];
  if (rank == 0) {
    fa->first = td_ag_gemm(op, c, a, b);
    snprintf(fa->msg1, sizeof fa->msg1, "%s", td_last_error());
    fa->second = td_ag_gemm(op, c, a, b);
    snprintf(fa->msg2, sizeof fa->msg2, "%s", td_last_error());
    atomic_store(&fa->rank0_done, 1);
  } else {
    while (!atomic_load(&fa->rank0_done))
      usleep(1000);
  }
  td_tp_destroy(op); /* may report the peer's failure; the handle is freed anyway */
  return TD_OK;
}

static void test_failed_call_then_state(void **state) {
  (void)state;
  fail_arg fa = {0};
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 400;
  assert_int_equal(td_local_world_run(2, &wo, fail_rank, &fa), TD_OK);
  assert_int_equal(fa.first, TD_ERR_TIMEOUT);
  assert_non_null(strstr(fa.msg1, "ag_gemm: "));
  assert_int_equal(fa.second, TD_ERR_STATE);
  assert_non_null(strstr(fa.msg2, "ag_gemm: an earlier call failed; the operator can only be destroyed"));
}

/* Without a usable GPU the cuda backend is refused on every rank, with the operator named. */
typedef struct cuda_arg {
  td_status st[2];
  char msg[2][512];
} cuda_arg;

static td_status cuda_rank(td_world *w, int rank, void *arg) {
  cuda_arg *ca = arg;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  td_tp_op *op = NULL;
  ca->st[rank] = td_gemm_rs_create(td_world_team(w), 64, 64, 64, TD_BF16, &o, &op);
  snprintf(ca->msg[rank], sizeof ca->msg[rank], "%s", td_last_error());
  td_tp_destroy(op);
  return TD_OK;
}

static void test_cuda_refused_without_gpu(void **state) {
  (void)state;
  cuda_arg ca = {0};
  assert_int_equal(td_local_world_run(2, NULL, cuda_rank, &ca), TD_OK);
  if (ca.st[0] == TD_OK && ca.st[1] == TD_OK)
    skip(); /* a machine with a GPU: nothing to refuse */
  for (int r = 0; r < 2; r++) {
    assert_int_equal(ca.st[r], TD_ERR_UNSUPPORTED);
    assert_non_null(strstr(ca.msg[r], "gemm_rs: "));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copy_engine_and_auto),
      cmocka_unit_test(test_operand_layouts),
      cmocka_unit_test(test_ag_output_is_rs_input),
      cmocka_unit_test(test_failed_call_then_state),
      cmocka_unit_test(test_cuda_refused_without_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
