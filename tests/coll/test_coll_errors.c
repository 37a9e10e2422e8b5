/* SPDX-License-Identifier: Apache-2.0
 * Errors of the collectives: calls that differ across ranks (count, dtype,
 * op, root, which collective, all_to_allv counts) fail on every rank with
 * TD_ERR_MISMATCH naming each rank's value, and the next matching call works;
 * a rank whose own arguments are wrong gets TD_ERR_INVALID_ARG and its peers
 * TD_ERR_MISMATCH at once; local argument errors of every entry point; a
 * rank that never calls makes the others time out with a diagnostic; a heap
 * too small for the collectives' block; a peer that fails before the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_harness.h"
#include "core/error.h"

/* Fails unless st is `want` and the message contains every non-NULL needle. */
static td_status expect_err(td_status st, td_status want, const char *a, const char *b) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", td_last_error());
  if (st != want || (a && !strstr(msg, a)) || (b && !strstr(msg, b)))
    return td__error(TD_ERR_CHECK_FAILED, "expected %s with '%s' and '%s', got %s: '%s'",
                     td_status_name(want), a ? a : "", b ? b : "", td_status_name(st), msg);
  return TD_OK;
}

/* After an error the ranks must still agree: a matching call works. */
static td_status still_works(td_team *t) {
  int one = 1, sum = 0;
  TD_CHECK(td_all_reduce(t, &sum, &one, 1, TD_I32, TD_SUM));
  if (sum != td_team_size(t))
    return td__error(TD_ERR_CHECK_FAILED, "sum %d after an error, expected %d", sum, td_team_size(t));
  return TD_OK;
}

static td_status mismatch_rank(td_world *w, int r, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  float src[64] = {1}, dst[64 * 4];
  /* counts: rank 0 passes 8, the others 7 */
  TD_CHECK(expect_err(td_all_reduce(t, dst, src, r == 0 ? 8 : 7, TD_F32, TD_SUM), TD_ERR_MISMATCH,
                      "passed different counts", "rank 0: 8, rank 1: 7"));
  TD_CHECK(still_works(t));
  /* dtypes, big enough for the staged path */
  static float big[40000], bigout[40000 * 4];
  TD_CHECK(expect_err(td_all_gather(t, bigout, big, 10000, r == 1 ? TD_I32 : TD_F32), TD_ERR_MISMATCH,
                      "different dtypes", "rank 1: i32"));
  TD_CHECK(still_works(t));
  TD_CHECK(expect_err(td_reduce_scatter(t, dst, src, 4, TD_F32, r == 1 ? TD_MAX : TD_SUM), TD_ERR_MISMATCH,
                      "different reduction ops", "rank 0: sum, rank 1: max"));
  TD_CHECK(expect_err(td_broadcast(t, dst, src, 4, TD_F32, r == 0 ? 1 : 0), TD_ERR_MISMATCH,
                      "different roots", "rank 0: 1, rank 1: 0"));
  /* which collective */
  td_status st = r == 0 ? td_all_gather(t, dst, src, 4, TD_F32) : td_broadcast(t, dst, src, 4, TD_F32, 0);
  TD_CHECK(expect_err(st, TD_ERR_MISMATCH, "made different collective calls",
                      "rank 0: td_all_gather, rank 1: td_broadcast"));
  TD_CHECK(still_works(t));
  /* all_to_allv: rank 1 expects one element more from rank 0 than rank 0 sends */
  /* rank p sends 1 + p + q elements to rank q; rank 1 expects one more from rank 0 */
  size_t r_ = (size_t)r, sc[2] = {1 + r_, 2 + r_}, rc[2] = {1 + r_ + (r == 1), 2 + r_};
  size_t sd[2] = {0, sc[0]}, rd[2] = {0, rc[0]};
  TD_CHECK(expect_err(td_all_to_allv(t, dst, rc, rd, src, sc, sd, TD_F32), TD_ERR_MISMATCH,
                      "rank 0 sends 2 elements to rank 1", "rank 1 expects 3"));
  TD_CHECK(still_works(t));
  /* one rank's own arguments are wrong: it gets INVALID_ARG, its peer MISMATCH */
  st = td_all_reduce(t, dst, r == 1 ? NULL : src, 4, TD_F32, TD_SUM);
  if (r == 1)
    TD_CHECK(expect_err(st, TD_ERR_INVALID_ARG, "td_all_reduce: src is NULL", NULL));
  else
    TD_CHECK(expect_err(st, TD_ERR_MISMATCH, "rank 1's arguments failed its own checks", NULL));
  return still_works(t);
}

static void test_mismatch(void **state) {
  (void)state;
  td_status st = td_local_world_run(2, NULL, mismatch_rank, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
}

/* Local errors on a world of one rank: every entry point's checks. */
static td_status args_rank(td_world *w, int r, void *arg) {
  (void)r;
  (void)arg;
  td_team *t = td_world_team(w);
  float a[16] = {1}, b[16];
  size_t c1[1] = {1}, d0[1] = {0};
  TD_CHECK(expect_err(td_all_reduce(t, b, a, 4, (td_dtype)99, TD_SUM), TD_ERR_INVALID_ARG, "dtype 99", NULL));
  TD_CHECK(expect_err(td_all_reduce(t, b, a, 4, TD_F32, (td_red_op)9), TD_ERR_INVALID_ARG, "op 9", NULL));
  TD_CHECK(expect_err(td_reduce_scatter(t, b, a, 4, TD_U8, TD_SUM), TD_ERR_INVALID_ARG, "u8 is raw bytes", NULL));
  TD_CHECK(expect_err(td_all_reduce(t, a + 1, a, 4, TD_F32, TD_SUM), TD_ERR_INVALID_ARG, "overlap", NULL));
  TD_CHECK(expect_err(td_all_reduce(t, NULL, a, 4, TD_F32, TD_SUM), TD_ERR_INVALID_ARG, "dst is NULL", NULL));
  TD_CHECK(expect_err(td_all_gather(t, b, NULL, 4, TD_F32), TD_ERR_INVALID_ARG, "src is NULL", NULL));
  TD_CHECK(expect_err(td_all_gather(t, a + 1, a, 4, TD_F32), TD_ERR_INVALID_ARG, "overlap", NULL));
  TD_CHECK(expect_err(td_all_gather(t, b, a, SIZE_MAX / 2, TD_F32), TD_ERR_INVALID_ARG, "overflows",
                      "elements per rank"));
  char limit[64]; /* an overflowing count names the largest allowed */
  snprintf(limit, sizeof limit, "at most %zu elements", SIZE_MAX / 4);
  TD_CHECK(expect_err(td_all_reduce(t, b, a, SIZE_MAX / 2, TD_F32, TD_SUM), TD_ERR_INVALID_ARG,
                      "count 9223372036854775807 of f32 (4 bytes each) overflows", limit));
  TD_CHECK(expect_err(td_broadcast(t, b, a, 4, TD_F32, 1), TD_ERR_INVALID_ARG, "root 1 is not a rank", NULL));
  TD_CHECK(expect_err(td_broadcast(t, NULL, a, 4, TD_F32, 0), TD_ERR_INVALID_ARG, "dst is NULL", NULL));
  TD_CHECK(expect_err(td_all_to_all(t, a + 2, a, 4, TD_F32), TD_ERR_INVALID_ARG, "overlap", NULL));
  TD_CHECK(expect_err(td_all_to_all(t, b, a, 4, (td_dtype)-1), TD_ERR_INVALID_ARG, "is not a td_dtype", NULL));
  TD_CHECK(expect_err(td_reduce_scatter(t, NULL, a, 4, TD_F32, TD_SUM), TD_ERR_INVALID_ARG, "dst is NULL", NULL));
  TD_CHECK(expect_err(td_all_to_allv(t, b, NULL, d0, a, c1, d0, TD_F32), TD_ERR_INVALID_ARG,
                      "recv_counts is NULL", NULL));
  TD_CHECK(expect_err(td_all_to_allv(t, b, c1, d0, NULL, c1, d0, TD_F32), TD_ERR_INVALID_ARG, "src is NULL", NULL));
  size_t huge[1] = {SIZE_MAX / 2};
  TD_CHECK(expect_err(td_all_to_allv(t, b, c1, d0, a, huge, d0, TD_F32), TD_ERR_INVALID_ARG, "overflow",
                      "displacement at most"));
  /* count 0 with NULL buffers is fine everywhere */
  TD_CHECK(td_all_reduce(t, NULL, NULL, 0, TD_F32, TD_SUM));
  TD_CHECK(td_all_gather(t, NULL, NULL, 0, TD_F32));
  return still_works(t);
}

static void test_local_args(void **state) {
  (void)state;
  td_status st = td_local_world_run(1, NULL, args_rank, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  float x = 0;
  size_t c[1] = {0};
  assert_int_equal(td_all_gather(NULL, &x, &x, 1, TD_F32), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_all_gather: team is NULL"));
  assert_int_equal(td_reduce_scatter(NULL, &x, &x, 1, TD_F32, TD_SUM), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_reduce_scatter: team is NULL"));
  assert_int_equal(td_all_reduce(NULL, &x, &x, 1, TD_F32, TD_SUM), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_all_reduce: team is NULL"));
  assert_int_equal(td_broadcast(NULL, &x, &x, 1, TD_F32, 0), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_broadcast: team is NULL"));
  assert_int_equal(td_all_to_all(NULL, &x, &x, 1, TD_F32), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_all_to_all: team is NULL"));
  assert_int_equal(td_all_to_allv(NULL, &x, c, c, &x, c, c, TD_F32), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "td_all_to_allv: team is NULL"));
}

/* Rank 1 never makes the second call: rank 0 times out with a diagnostic. */
static td_status timeout_rank(td_world *w, int r, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  TD_CHECK(still_works(t));
  if (r == 1)
    return TD_OK;
  float x = 1, y;
  return expect_err(td_all_reduce(t, &y, &x, 1, TD_F32, TD_SUM), TD_ERR_TIMEOUT, "td_all_reduce: ",
                    "timed out");
}

static void test_timeout(void **state) {
  (void)state;
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 300;
  td_status st = td_local_world_run(2, &o, timeout_rank, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
}

/* A heap too small for the collectives' control and scratch block. */
static td_status small_heap_rank(td_world *w, int r, void *arg) {
  (void)r;
  (void)arg;
  float x = 1, y;
  return expect_err(td_all_reduce(td_world_team(w), &y, &x, 1, TD_F32, TD_SUM), TD_ERR_HEAP_EXHAUSTED,
                    "collectives: allocating the team's", "control and scratch block");
}

static void test_heap_exhausted(void **state) {
  (void)state;
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 8192;
  td_status st = td_local_world_run(2, &o, small_heap_rank, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
}

/* Rank 1 fails before the call: rank 0's collective ends with PEER_FAILED, not a hang. */
static td_status peer_failed_rank(td_world *w, int r, void *arg) {
  int *saw = arg;
  td_team *t = td_world_team(w);
  TD_CHECK(still_works(t));
  if (r == 1)
    return td__error(TD_ERR_INTERNAL, "rank 1 gives up on purpose");
  float x[100000] = {1}, y[100000];
  TD_CHECK(expect_err(td_all_reduce(t, y, x, 100000, TD_F32, TD_SUM), TD_ERR_PEER_FAILED, "td_all_reduce: ",
                      "rank 1 failed"));
  *saw = 1;
  return TD_OK;
}

static void test_peer_failed(void **state) {
  (void)state;
  static int saw;
  td_status st = td_local_world_run(2, NULL, peer_failed_rank, &saw);
  assert_int_equal(st, TD_ERR_INTERNAL);
  assert_non_null(strstr(td_last_error(), "rank 1 gives up on purpose"));
  assert_int_equal(saw, 1);
}

/* A bad TD_COLL_SINGLE_COPY: every rank's first collective fails with the
 * variable's name and what is allowed, none hangs, and the team still works
 * once the value is fixed (the probe runs again on the next call). */
static td_status bad_single_copy_rank(td_world *w, int r, void *arg) {
  (void)r;
  (void)arg;
  static float x[8192], y[8192 * 2];
  td_team *t = td_world_team(w);
  TD_CHECK(expect_err(td_all_gather(t, y, x, 8192, TD_F32), TD_ERR_INVALID_ARG, "TD_COLL_SINGLE_COPY", "allowed 0 to 1"));
  TD_CHECK(td_team_sync(t)); /* every rank saw the error before the value is fixed */
  return TD_OK;
}

static td_status fixed_single_copy_rank(td_world *w, int r, void *arg) {
  (void)arg;
  static float x[2][8192], y[2][8192 * 2];
  td_team *t = td_world_team(w);
  for (int i = 0; i < 8192; i++)
    x[r][i] = (float)(r * 8192 + i);
  TD_CHECK(td_all_gather(t, y[r], x[r], 8192, TD_F32));
  for (int i = 0; i < 2 * 8192; i++)
    if (y[r][i] != (float)i)
      return td__error(TD_ERR_CHECK_FAILED, "rank %d: element %d is %g, expected %d", r, i, y[r][i], i);
  return TD_OK;
}

static void test_bad_single_copy_env(void **state) {
  (void)state;
  setenv("TD_COLL_SINGLE_COPY", "2", 1);
  td_status st = td_local_world_run(2, NULL, bad_single_copy_rank, NULL);
  unsetenv("TD_COLL_SINGLE_COPY");
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  st = td_local_world_run(2, NULL, fixed_single_copy_rank, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
}

/* all_to_allv receive blocks that overlap (every peer's block at offset 0):
 * refused, naming both peers; the team still works. */
static td_status recv_overlap_rank(td_world *w, int r, void *arg) {
  (void)r;
  (void)arg;
  td_team *t = td_world_team(w);
  float src[8] = {1}, dst[8];
  size_t sc[2] = {2, 2}, sd[2] = {0, 2}, rc[2] = {2, 2}, rd[2] = {0, 1};
  TD_CHECK(expect_err(td_all_to_allv(t, dst, rc, rd, src, sc, sd, TD_F32), TD_ERR_INVALID_ARG,
                      "receive blocks from ranks 0 [0, 2) and 1 [1, 3) overlap", NULL));
  rd[1] = 2; /* adjacent is fine */
  TD_CHECK(td_all_to_allv(t, dst, rc, rd, src, sc, sd, TD_F32));
  return still_works(t);
}

static void test_a2av_recv_overlap(void **state) {
  (void)state;
  td_status st = td_local_world_run(2, NULL, recv_overlap_rank, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_mismatch), cmocka_unit_test(test_local_args),
                                     cmocka_unit_test(test_timeout), cmocka_unit_test(test_heap_exhausted),
                                     cmocka_unit_test(test_peer_failed), cmocka_unit_test(test_bad_single_copy_env),
                                     cmocka_unit_test(test_a2av_recv_overlap)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
