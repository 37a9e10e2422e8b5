/* SPDX-License-Identifier: Apache-2.0
 * Operators whose output shares memory with an input: for every kind and
 * every variant it accepts on cpu, one rank passes C overlapping A (or B;
 * dst overlapping src for all-reduce) and every rank must refuse the call
 * with TD_ERR_INVALID_ARG (the faulty rank naming both operands and their
 * byte ranges, its peers naming the faulty rank), with nothing run: the next
 * call with separate buffers then gives the right result. Before the fix the
 * overlapped variants returned TD_OK with wrong values. Ranks are threads of
 * one process here, so one rank's output can also be another's operand (the
 * same C passed on two ranks, say): refused on every rank alike, while an
 * input shared between ranks (the same B) runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"
#include "tdist/tdist.h"

enum { NR = 2 };

typedef struct alias_case {
  td_tp_kind kind;
  td_tp_variant variant;
  int bad_rank;
  int with_b;        /* 1: C overlaps B instead of A */
  int skipped[NR];   /* out, per rank (no shared write): the variant does not apply to the kind */
  td_status got[NR]; /* out: the aliased call's status per rank */
  char msg[NR][600];
  int good_ok[NR];   /* out: the call after it ran and was right */
} alias_case;

static td_status alias_create(td_team *t, const alias_case *c, td_tp_op **op) {
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.variant = c->variant;
  o.timeout_ms = 10000;
  switch (c->kind) {
  case TD_TP_AG_GEMM: return td_ag_gemm_create(t, 8, 6, 4, TD_F32, &o, op);
  case TD_TP_GEMM_RS: return td_gemm_rs_create(t, 8, 6, 4, TD_F32, &o, op);
  case TD_TP_GEMM_AR: return td_gemm_ar_create(t, 8, 6, 4, TD_F32, &o, op);
  default: return td_ll_all_reduce_create(t, 48, TD_F32, &o, op);
  }
}

static td_status alias_call(td_tp_op *op, td_tp_kind kind, void *c, const void *a, const void *b) {
  switch (kind) {
  case TD_TP_AG_GEMM: return td_ag_gemm(op, c, a, b);
  case TD_TP_GEMM_RS: return td_gemm_rs(op, c, a, b);
  case TD_TP_GEMM_AR: return td_gemm_ar(op, c, a, b);
  default: return td_ll_all_reduce(op, c, a);
  }
}

static float *alias_alloc(size_t bytes, float v) {
  size_t n = bytes / sizeof(float) + 16;
  float *p = malloc(n * sizeof *p);
  for (size_t i = 0; p && i < n; i++)
    p[i] = v;
  return p;
}

/* This rank's A, B and C layouts. */
static void alias_layouts(const td_tp_op *op, int rank, td_tp_layout *la, td_tp_layout *lb, td_tp_layout *lc) {
  td_tp_operand(op, TD_TP_A, rank, la);
  td_tp_operand(op, TD_TP_B, rank, lb);
  td_tp_operand(op, TD_TP_C, rank, lc);
}

static td_status alias_rank(td_world *w, int rank, void *arg) {
  alias_case *c = arg;
  td_tp_op *op = NULL;
  td_status st = alias_create(td_world_team(w), c, &op);
  if (st == TD_ERR_INVALID_ARG && strstr(td_last_error(), "does not apply")) {
    c->skipped[rank] = 1;
    return TD_OK;
  }
  if (st != TD_OK)
    return st;
  td_tp_layout la, lb, lc;
  alias_layouts(op, rank, &la, &lb, &lc);
  /* Every input element is 1, so each output element is K (GEMMs: a sum
   * over K of 1 * 1, however it is split) or the rank count (all-reduce). */
  float *a = alias_alloc(la.bytes + lc.bytes, 1.0f), *b = alias_alloc(lb.bytes + lc.bytes, 1.0f);
  float *out = alias_alloc(lc.bytes, -7.0f);
  float want = c->kind == TD_TP_ALL_REDUCE ? (float)NR : 4.0f;
  void *bad_c = c->with_b ? (void *)(b + 1) : (void *)(a + 1);
  void *cc = rank == c->bad_rank ? bad_c : out;
  c->got[rank] = alias_call(op, c->kind, cc, a, b);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  st = alias_call(op, c->kind, out, a, b);
  int ok = st == TD_OK;
  for (int64_t i = 0; ok && i < lc.rows; i++)
    for (int64_t j = 0; ok && j < lc.cols; j++)
      ok = out[i * lc.ld + j] == want;
  c->good_ok[rank] = ok;
  td_status d = td_tp_destroy(op);
  free(a), free(b), free(out);
  return st != TD_OK ? st : d;
}

static void run_case(td_tp_kind kind, td_tp_variant v, int bad_rank, int with_b) {
  alias_case c = {.kind = kind, .variant = v, .bad_rank = bad_rank, .with_b = with_b};
  td_status st = td_local_world_run(NR, NULL, alias_rank, &c);
  if (st != TD_OK)
    fail_msg("%s %s: %s: %s", td_tp_kind_name(kind), td_tp_variant_name(v), td_status_name(st), td_last_error());
  if (c.skipped[0])
    return;
  int ar = kind == TD_TP_ALL_REDUCE;
  char who[64];
  snprintf(who, sizeof who, "rank %d", bad_rank);
  for (int r = 0; r < NR; r++) {
    const char *m = c.msg[r];
    if (c.got[r] != TD_ERR_INVALID_ARG)
      fail_msg("%s %s rank %d: aliased call gave %s (%s)", td_tp_kind_name(kind), td_tp_variant_name(v), r,
               td_status_name(c.got[r]), m);
    if (!strstr(m, td_tp_kind_name(kind)) || !strstr(m, who) ||
        !strstr(m, ar ? "operand dst [" : "operand C [") ||
        !strstr(m, ar ? "overlaps operand src [" : with_b ? "overlaps operand B [" : "overlaps operand A [") ||
        !strstr(m, "bytes") || !strstr(m, "pass separate buffers"))
      fail_msg("%s %s rank %d: message '%s'", td_tp_kind_name(kind), td_tp_variant_name(v), r, m);
    if (r != bad_rank && !strstr(m, "refused the call"))
      fail_msg("%s %s rank %d: peer message '%s'", td_tp_kind_name(kind), td_tp_variant_name(v), r, m);
    /* a peer relays the faulty rank's message whole, or cut with "..." at its end, never cut silently */
    size_t ml = strlen(m);
    if (r != bad_rank && !(ml >= 8 && !strcmp(m + ml - 8, "refused)")) && !(ml >= 3 && !strcmp(m + ml - 3, "...")))
      fail_msg("%s %s rank %d: peer message cut without a mark: '%s'", td_tp_kind_name(kind), td_tp_variant_name(v),
               r, m);
    if (!c.good_ok[r])
      fail_msg("%s %s rank %d: the call after the refusal was wrong", td_tp_kind_name(kind),
               td_tp_variant_name(v), r);
  }
}

/* The pure rule: the first output of one rank overlapping an operand of another, outputs first; shared
 * inputs and adjacent ranges pass. */
static void test_cross_overlap_rule(void **state) {
  (void)state;
  td__tp_ranges r[3] = {{{0x1000, 0x2000, 0x3000}, {0x100, 0x100, 0x100}},
                        {{0x4000, 0x2000, 0x5000}, {0x100, 0x100, 0x100}},
                        {{0x6000, 0x7000, 0x8000}, {0x100, 0x100, 0x100}}};
  const size_t st = sizeof r[0];
  int p = -1, q = -1, qi = -1;
  assert_int_equal(td__tp_cross_overlap(3, r, st, &p, &q, &qi), 0); /* rank 0 and 1 share B: an input */
  r[2].lo[2] = 0x30ff; /* rank 2's C starts on rank 0's C's last byte */
  assert_int_equal(td__tp_cross_overlap(3, r, st, &p, &q, &qi), 1);
  assert_int_equal(p, 0), assert_int_equal(q, 2), assert_int_equal(qi, 2);
  r[2].lo[2] = 0x3100; /* adjacent: no overlap */
  assert_int_equal(td__tp_cross_overlap(3, r, st, &p, &q, &qi), 0);
  r[1].lo[2] = 0x6080; /* rank 1's C over rank 2's A */
  assert_int_equal(td__tp_cross_overlap(3, r, st, &p, &q, &qi), 1);
  assert_int_equal(p, 1), assert_int_equal(q, 2), assert_int_equal(qi, 0);
  r[1].len[2] = 0; /* no C (an operand the kind lacks): nothing written */
  assert_int_equal(td__tp_cross_overlap(3, r, st, &p, &q, &qi), 0);
  assert_int_equal(td__tp_cross_overlap(1, r, st, &p, &q, &qi), 0);
  /* read in place from larger records, as tp_op.c does */
  struct {
    int32_t status;
    td__tp_ranges ops;
    char msg[40];
  } rec[2] = {{0, {{0x1000, 0x2000, 0x3000}, {0x100, 0x100, 0x100}}, ""},
              {0, {{0x4000, 0x5000, 0x3080}, {0x100, 0x100, 0x100}}, ""}};
  assert_int_equal(td__tp_cross_overlap(2, &rec[0].ops, sizeof rec[0], &p, &q, &qi), 1);
  assert_int_equal(p, 0), assert_int_equal(q, 1), assert_int_equal(qi, 2);
}

/* Two ranks (threads of one process) whose outputs or inputs meet: `mode` 1 = both pass rank 0's C, 2 = rank
 * 1's C is rank 0's A, 3 = both pass rank 0's B (an input shared: runs and is right). */
typedef struct cross_case {
  td_tp_kind kind;
  int mode;
  float *shared[3]; /* rank 0's A, B and C, set by rank 0 before the barrier */
  td_status got[NR];
  char msg[NR][600];
  int good_ok[NR];
} cross_case;

static td_status cross_rank(td_world *w, int rank, void *arg) {
  cross_case *c = arg;
  td_tp_op *op = NULL;
  alias_case ac = {.kind = c->kind, .variant = TD_TP_AUTO};
  td_status st = alias_create(td_world_team(w), &ac, &op);
  if (st != TD_OK)
    return st;
  td_tp_layout la, lb, lc;
  alias_layouts(op, rank, &la, &lb, &lc);
  /* sized for the larger part, so that another rank's operand can stand in for this rank's */
  const size_t big = la.bytes + lb.bytes + lc.bytes;
  float *a = alias_alloc(big, 1.0f), *b = alias_alloc(big, 1.0f), *out = alias_alloc(big, -7.0f);
  if (rank == 0)
    c->shared[0] = a, c->shared[1] = b, c->shared[2] = out;
  td_barrier_all(w);
  float *ca = a, *cb = b, *cc = out;
  if (rank == 1 && c->mode == 1)
    cc = c->shared[2];
  if (rank == 1 && c->mode == 2)
    cc = c->shared[0];
  if (rank == 1 && c->mode == 3)
    cb = c->shared[1];
  c->got[rank] = alias_call(op, c->kind, cc, ca, cb);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  td_barrier_all(w); /* nobody frees what a peer may still pass */
  st = alias_call(op, c->kind, out, a, b);
  float want = c->kind == TD_TP_ALL_REDUCE ? (float)NR : 4.0f;
  int ok = st == TD_OK;
  for (int64_t i = 0; ok && i < lc.rows; i++)
    for (int64_t j = 0; ok && j < lc.cols; j++)
      ok = out[i * lc.ld + j] == want;
  c->good_ok[rank] = ok;
  td_barrier_all(w);
  td_status d = td_tp_destroy(op);
  free(a), free(b), free(out);
  return st != TD_OK ? st : d;
}

static void test_cross_rank_overlap(void **state) {
  (void)state;
  for (int k = 0; k < TD_TP_KIND_COUNT; k++)
    for (int mode = 1; mode <= 3; mode++) {
      if (k == TD_TP_ALL_REDUCE && mode == 3)
        continue; /* all-reduce has no B */
      cross_case c = {.kind = (td_tp_kind)k, .mode = mode};
      td_world_opts o;
      td_world_opts_init(&o);
      o.timeout_ms = 20000; /* a rank left waiting fails the test by this deadline */
      td_status st = td_local_world_run(NR, &o, cross_rank, &c);
      if (st != TD_OK)
        fail_msg("%s mode %d: %s: %s", td_tp_kind_name((td_tp_kind)k), mode, td_status_name(st), td_last_error());
      const int ar = k == TD_TP_ALL_REDUCE;
      for (int r = 0; r < NR; r++) {
        if (mode == 3) {
          if (c.got[r] != TD_OK)
            fail_msg("%s shared B, rank %d: %s (%s)", td_tp_kind_name((td_tp_kind)k), r, td_status_name(c.got[r]),
                     c.msg[r]);
        } else {
          const char *want = mode == 1 ? (ar ? "rank 0's operand dst [" : "rank 0's operand C [")
                                       : (ar ? "rank 1's operand dst [" : "rank 1's operand C [");
          const char *other = mode == 1 ? (ar ? "overlaps rank 1's operand dst [" : "overlaps rank 1's operand C [")
                                        : (ar ? "overlaps rank 0's operand src [" : "overlaps rank 0's operand A [");
          if (c.got[r] != TD_ERR_INVALID_ARG || !strstr(c.msg[r], want) || !strstr(c.msg[r], other) ||
              !strstr(c.msg[r], "threads of one process") || !strstr(c.msg[r], "pass separate buffers"))
            fail_msg("%s mode %d rank %d: %s '%s'", td_tp_kind_name((td_tp_kind)k), mode, r,
                     td_status_name(c.got[r]), c.msg[r]);
        }
        if (!c.good_ok[r])
          fail_msg("%s mode %d rank %d: the call after it was wrong", td_tp_kind_name((td_tp_kind)k), mode, r);
      }
    }
}

static void test_every_kind_and_variant(void **state) {
  (void)state;
  for (int k = 0; k < TD_TP_KIND_COUNT; k++)
    for (int v = TD_TP_AUTO; v <= TD_TP_TWO_SHOT; v++)
      run_case((td_tp_kind)k, (td_tp_variant)v, v % NR, 0);
}

static void test_c_overlaps_b(void **state) {
  (void)state;
  for (int k = TD_TP_AG_GEMM; k <= TD_TP_GEMM_AR; k++)
    run_case((td_tp_kind)k, TD_TP_AUTO, 1, 1);
}

/* One rank: the same check, no exchange; the exact byte count is named. */
static td_status single_rank(td_world *w, int rank, void *arg) {
  (void)rank, (void)arg;
  td_tp_op *op = NULL;
  td_status st = td_gemm_ar_create(td_world_team(w), 4, 4, 4, TD_F32, NULL, &op);
  if (st != TD_OK)
    return st;
  float buf[64] = {0};
  int ok = td_gemm_ar(op, buf + 15, buf, buf + 32) == TD_ERR_INVALID_ARG &&
           strstr(td_last_error(), "(64 bytes) overlaps operand A") != NULL;
  ok &= td_gemm_ar(op, buf + 16, buf, buf + 32) == TD_OK; /* adjacent, not overlapping */
  td_tp_destroy(op);
  return ok ? TD_OK : TD_ERR_CHECK_FAILED;
}

static void test_single_rank_edges(void **state) {
  (void)state;
  td_status st = td_local_world_run(1, NULL, single_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  assert_int_equal(st, TD_OK);
}

/* One rank calls the wrong operator function on its handle: every rank
 * refuses (peers are not left in their matching call until the deadline) and
 * the next right call works. */
static td_status wrong_fn_rank(td_world *w, int rank, void *arg) {
  char (*msg)[600] = arg;
  td_tp_op *op = NULL;
  td_status st = td_ag_gemm_create(td_world_team(w), 8, 6, 4, TD_F32, NULL, &op);
  if (st != TD_OK)
    return st;
  td_tp_layout la, lb, lc;
  alias_layouts(op, rank, &la, &lb, &lc);
  float *a = alias_alloc(la.bytes, 1.0f), *b = alias_alloc(lb.bytes, 1.0f), *c = alias_alloc(lc.bytes, 0.0f);
  td_status got = rank == 0 ? td_gemm_rs(op, c, a, b) : td_ag_gemm(op, c, a, b);
  snprintf(msg[rank], sizeof msg[rank], "%s|%s", td_status_name(got), td_last_error());
  st = td_ag_gemm(op, c, a, b);
  for (int64_t i = 0; st == TD_OK && i < lc.rows; i++)
    for (int64_t j = 0; st == TD_OK && j < lc.cols; j++)
      if (c[i * lc.ld + j] != 4.0f)
        st = TD_ERR_CHECK_FAILED;
  td_status d = td_tp_destroy(op);
  free(a), free(b), free(c);
  return st != TD_OK ? st : d;
}

static void test_wrong_function_refused_everywhere(void **state) {
  (void)state;
  static char msg[NR][600];
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 20000; /* a peer left waiting would fail the test by this deadline, not pass it */
  td_status st = td_local_world_run(NR, &o, wrong_fn_rank, msg);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  assert_non_null(strstr(msg[0], "TD_ERR_INVALID_ARG|gemm_rs: the operator was created as ag_gemm"));
  assert_non_null(strstr(msg[1], "TD_ERR_INVALID_ARG|"));
  assert_non_null(strstr(msg[1], "rank 0 refused the call"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cross_overlap_rule),
      cmocka_unit_test(test_cross_rank_overlap),
      cmocka_unit_test(test_wrong_function_refused_everywhere),
      cmocka_unit_test(test_every_kind_and_variant),
      cmocka_unit_test(test_c_overlaps_b),
      cmocka_unit_test(test_single_rank_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
