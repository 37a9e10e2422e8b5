/* SPDX-License-Identifier: Apache-2.0
 * Every error path of the operator API, with the message checked: bad dims,
 * dtypes, variants, options and K smaller than the rank count refused on
 * every rank (also when only one rank is wrong), ranks that disagree
 * (TD_ERR_MISMATCH naming both), NULL arguments, an operator of another kind,
 * overlapping all-reduce buffers, operand queries out of range and unknown
 * variant names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ops/ops_harness.h"

enum { NR = 3 };

/* One create call per rank; `bad_rank` gets the broken argument (-1: all). */
typedef struct err_case {
  int what;       /* which argument to break, see err_create */
  int bad_rank;
  td_status want;
  const char *want_text[2]; /* substrings every rank's message must contain */
} err_case;

static td_status err_got[NR];
static char err_msg[NR][512];

static td_status err_create(td_world *w, int rank, const err_case *e, td_tp_op **op) {
  int bad = e->bad_rank < 0 || e->bad_rank == rank;
  td_tp_opts o;
  td_tp_opts_init(&o);
  td_team *t = td_world_team(w);
  int64_t m = 20, n = 16, k = 12;
  td_dtype dt = TD_F32;
  switch (bad ? e->what : -1) {
  case 0: m = 0; break;
  case 1: dt = TD_I32; break;
  case 2: o.variant = TD_TP_RING; return td_gemm_rs_create(t, m, n, k, dt, &o, op);
  case 3: o.variant = (td_tp_variant)42; break;
  case 4: o.backend = (td_exec_backend)7; break;
  case 5: o.chunks_per_rank = -2; break;
  case 6: return td_gemm_ar_create(t, m, n, 2, dt, &o, op); /* K = 2 < 3 ranks */
  case 7: m = 21; break;                                   /* differs from the others */
  case 8: return td_ag_gemm_create(t, m, n, k, dt, &o, NULL);
  case 9: return td_ll_all_reduce_create(t, 0, dt, &o, op);
  case 10: o.variant = TD_TP_SEQUENTIAL; return td_ll_all_reduce_create(t, 100, dt, &o, op);
  default: break;
  }
  if (e->what == 6)
    return td_gemm_ar_create(t, m, n, 2, dt, &o, op);
  if (e->what == 2)
    return td_gemm_rs_create(t, m, n, k, dt, &o, op);
  if (e->what == 9 || e->what == 10)
    return td_ll_all_reduce_create(t, 100, dt, &o, op);
  return td_ag_gemm_create(t, m, n, k, dt, &o, op);
}

static td_status err_rank(td_world *w, int rank, void *arg) {
  err_case *e = arg;
  td_tp_op *op = NULL;
  err_got[rank] = err_create(w, rank, e, &op);
  snprintf(err_msg[rank], sizeof err_msg[rank], "%s", td_last_error());
  td_tp_destroy(op);
  return TD_OK;
}

/* The in-process world every case runs in: a short deadline, so a rank left waiting fails the test. */
static td_world_opts err_world(void) {
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 10000;
  return wo;
}

static void run_err(err_case *e) {
  const td_world_opts wo = err_world();
  assert_int_equal(td_local_world_run(NR, &wo, err_rank, e), TD_OK);
  for (int r = 0; r < NR; r++) {
    if (err_got[r] != e->want)
      fail_msg("case %d rank %d: %s (%s), wanted %s", e->what, r, td_status_name(err_got[r]), err_msg[r],
               td_status_name(e->want));
    for (int i = 0; i < 2 && e->want_text[i]; i++)
      if (!strstr(err_msg[r], e->want_text[i]))
        fail_msg("case %d rank %d: message '%s' lacks '%s'", e->what, r, err_msg[r], e->want_text[i]);
  }
}

static void test_create_errors(void **state) {
  (void)state;
  err_case cases[] = {
      {0, 1, TD_ERR_INVALID_ARG, {"rank 1: ag_gemm: M=0", "every dim must be >= 1"}},
      {1, -1, TD_ERR_INVALID_ARG, {"dtype i32", "use f32, f16 or bf16"}},
      {2, -1, TD_ERR_INVALID_ARG, {"gemm_rs: variant ring", "allowed: auto, sequential, sm"}},
      {3, 2, TD_ERR_INVALID_ARG, {"rank 2", "variant invalid (42)"}},
      {4, 0, TD_ERR_INVALID_ARG, {"rank 0", "backend 7 is unknown"}},
      {5, -1, TD_ERR_INVALID_ARG, {"chunks_per_rank -2", "0..64"}},
      {6, -1, TD_ERR_SHAPE, {"K=2 is split over 3 ranks", "K must be >= the rank count"}},
      {7, 2, TD_ERR_MISMATCH, {"rank 0 (kind ag_gemm, M=20", "rank 2 (kind ag_gemm, M=21"}},
      {8, 1, TD_ERR_INVALID_ARG, {"rank 1: ag_gemm: out is NULL", NULL}},
      {9, -1, TD_ERR_INVALID_ARG, {"all_reduce: count is 0", NULL}},
      {10, -1, TD_ERR_INVALID_ARG, {"variant sequential (1) does not apply", "allowed: auto, one_shot, two_shot"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_err(&cases[i]);
}

/* A bad operator knob (TD_OPS_*) fails every operator's creation on every
 * rank, on the cpu backend too, where no fused schedule would read it: the
 * variable, the value and the allowed values in each rank's message. */
static void test_env_knobs(void **state) {
  (void)state;
  static const char *const vars[][3] = {
      {"TD_OPS_FUSED_TAIL", "junk", "allowed: split,split2,none"},
      {"TD_OPS_FUSED_MAP_FENCE", "each", "allowed: tile,start"},
      {"TD_OPS_FUSED_BCAST_HALF", "later", "allowed: wait,defer,pace"},
      {"TD_OPS_FUSED_AG", "gather_one", "allowed: auto,copy,direct,batched,batched-one,gather,gather-one"},
      {"TD_OPS_FUSED_AG_GEMMS", "two", "is not"},
      {"TD_OPS_FUSED_BCAST_HINT", "evict-first", "allowed: none,evict_first"},
      {"TD_OPS_FUSED_BCAST_PACE", "0", "is out of range; allowed 1 to 16"},
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    setenv(vars[i][0], vars[i][1], 1);
    char want[96];
    snprintf(want, sizeof want, "%s='%s'", vars[i][0], vars[i][1]);
    err_case e = {-1, -1, TD_ERR_INVALID_ARG, {want, vars[i][2]}}; /* a well-formed ag_gemm on cpu */
    run_err(&e);
    unsetenv(vars[i][0]);
  }
  /* a misspelt knob: refused, with the close names (TILE is one edit away, TAIL two) */
  setenv("TD_OPS_FUSED_TALE", "split", 1);
  err_case typo = {-1, -1, TD_ERR_INVALID_ARG,
                   {"TD_OPS_FUSED_TALE is not a tdist variable", "did you mean TD_OPS_FUSED_TILE or TD_OPS_FUSED_TAIL?"}};
  run_err(&typo);
  unsetenv("TD_OPS_FUSED_TALE");
  setenv("TD_OPS_FUSED_TAIL", "", 1); /* empty reads as unset: fine */
  err_case ok = {-1, -1, TD_OK, {NULL, NULL}};
  run_err(&ok);
  unsetenv("TD_OPS_FUSED_TAIL");
}

/* test_env_knobs' variables unset even when one of its checks failed, so
 * that a failure there is reported alone, not again by every later test
 * that creates an operator (each would be refused by the leftover knob). */
static int env_knobs_teardown(void **state) {
  (void)state;
  static const char *const names[] = {"TD_OPS_FUSED_TAIL", "TD_OPS_FUSED_MAP_FENCE", "TD_OPS_FUSED_BCAST_HALF",
                                      "TD_OPS_FUSED_AG", "TD_OPS_FUSED_AG_GEMMS", "TD_OPS_FUSED_BCAST_HINT",
                                      "TD_OPS_FUSED_BCAST_PACE", "TD_OPS_FUSED_TALE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    unsetenv(names[i]);
  return 0;
}

static void test_null_team(void **state) {
  (void)state;
  td_tp_op *op = NULL;
  assert_int_equal(td_ag_gemm_create(NULL, 4, 4, 4, TD_F32, NULL, &op), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "ag_gemm: team is NULL"));
  assert_int_equal(td_ll_all_reduce_create(NULL, 4, TD_F32, NULL, &op), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "all_reduce: team is NULL"));
  assert_null(op);
}

/* Call-time errors on a world of one rank. */
static td_status call_errors(td_world *w, int rank, void *arg) {
  (void)rank, (void)arg;
  td_tp_op *ag = NULL, *ar = NULL;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.variant = TD_TP_SM;
  td_status st = td_ag_gemm_create(td_world_team(w), 8, 8, 8, TD_F32, &o, &ag);
  if (st != TD_OK)
    return st;
  o.variant = TD_TP_AUTO;
  st = td_ll_all_reduce_create(td_world_team(w), 64, TD_F32, &o, &ar);
  if (st != TD_OK)
    return st;
  float a[64], b[64], c[64];
  int ok = 1;
#define EXPECT(call, status, text) \
  ok &= (call) == (status) && strstr(td_last_error(), (text)) != NULL
  EXPECT(td_ag_gemm(NULL, c, a, b), TD_ERR_INVALID_ARG, "ag_gemm: op is NULL");
  EXPECT(td_ag_gemm(ag, c, NULL, b), TD_ERR_INVALID_ARG, "operand A is NULL on rank 0; pass a buffer of 256 bytes");
  EXPECT(td_ag_gemm(ag, NULL, a, b), TD_ERR_INVALID_ARG, "operand C is NULL");
  EXPECT(td_gemm_rs(ag, c, a, b), TD_ERR_INVALID_ARG, "gemm_rs: the operator was created as ag_gemm; call td_ag_gemm");
  EXPECT(td_gemm_ar(ar, c, a, b), TD_ERR_INVALID_ARG, "created as all_reduce; call td_ll_all_reduce");
  EXPECT(td_ll_all_reduce(ar, a + 8, a), TD_ERR_INVALID_ARG, "overlaps operand src [");
  EXPECT(td_ll_all_reduce(ar, c, NULL), TD_ERR_INVALID_ARG, "operand src is NULL");
  td_tp_layout l;
  EXPECT(td_tp_operand(ag, TD_TP_C, 1, &l), TD_ERR_INVALID_ARG, "rank 1 (0..0) out of range");
  EXPECT(td_tp_operand(ag, (td_tp_operand_id)5, 0, &l), TD_ERR_INVALID_ARG, "operand 5");
  EXPECT(td_tp_operand(NULL, TD_TP_A, 0, &l), TD_ERR_INVALID_ARG, "op or out is NULL");
  td_tp_variant v = TD_TP_SM;
  EXPECT(td_tp_variant_parse("fast", &v), TD_ERR_INVALID_ARG, "variant 'fast' is unknown; use auto");
  ok &= v == TD_TP_SM;
  /* After the refusals the operators still work. */
  for (int i = 0; i < 64; i++)
    a[i] = (float)(i % 7), b[i] = 1.0f;
  ok &= td_ag_gemm(ag, c, a, b) == TD_OK && c[0] == 0.0f + 1 + 2 + 3 + 4 + 5 + 6 + 0;
  ok &= td_ll_all_reduce(ar, c, a) == TD_OK && c[5] == 5.0f;
#undef EXPECT
  td_tp_destroy(ag);
  td_tp_destroy(ar);
  return ok ? TD_OK : TD_ERR_CHECK_FAILED;
}

static void test_call_errors(void **state) {
  (void)state;
  td_status st = td_local_world_run(1, NULL, call_errors, NULL);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  assert_null(NULL);
  assert_int_equal(td_tp_destroy(NULL), TD_OK);
  assert_string_equal(td_tp_kind_name((td_tp_kind)9), "invalid");
  assert_string_equal(td_tp_variant_name(TD_TP_COPY_ENGINE), "copy_engine");
}

/* A rank function that returns its create's status, so the in-process world
 * reports the first failed rank's message. */
static td_status err_rank_fails(td_world *w, int rank, void *arg) {
  td_tp_op *op = NULL;
  td_status st = err_create(w, rank, arg, &op);
  td_tp_destroy(op);
  return st;
}

/* The world's message names the rank at fault once, whichever rank reported
 * first: every rank fails with rank 1's "rank 1: ag_gemm: M=0 ...", and the
 * world must not prefix it with the reporting rank ("rank 2: rank 1: ..."). */
static void test_world_names_rank_once(void **state) {
  (void)state;
  const td_world_opts wo = err_world();
  err_case e = {0, 1, TD_ERR_INVALID_ARG, {NULL, NULL}};
  for (int rep = 0; rep < 20; rep++) { /* the first reporter varies from run to run */
    assert_int_equal(td_local_world_run(NR, &wo, err_rank_fails, &e), TD_ERR_INVALID_ARG);
    const char *m = td_last_error();
    if (strncmp(m, "rank 1: ag_gemm: M=0", 20) != 0)
      fail_msg("run %d: world message '%s' does not start with rank 1's own", rep, m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test_teardown(test_env_knobs, env_knobs_teardown),
      cmocka_unit_test(test_null_team),
      cmocka_unit_test(test_call_errors),
      cmocka_unit_test(test_world_names_rank_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
