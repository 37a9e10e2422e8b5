/* SPDX-License-Identifier: Apache-2.0
 * Collectives on teams: a strided team (odd world ranks) and a color split
 * (world rank mod 3, keys reversed) of local worlds of 3, 4 and 8 ranks; the
 * split teams run at the same time, and calls on the world team are
 * interleaved with them, so per-team step counters must stay apart. */
#include "coll/coll_harness.h"
#include "core/error.h"

static td_status run_few(td_team *t) {
  cu_opts o = {.big = 0, .all_dtypes = 0};
  TD_CHECK(cu_check_all_reduce(t, &o));
  TD_CHECK(cu_check_all_gather(t, &o));
  TD_CHECK(cu_check_reduce_scatter(t, &o));
  TD_CHECK(cu_check_broadcast(t, &o));
  return cu_check_all_to_allv(t, &o);
}

static td_status teams_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  int n = td_world_size(w);
  td_team *world = td_world_team(w), *odd = NULL, *color = NULL;
  TD_CHECK(td_team_split_strided(world, 1, 2, n / 2, &odd));
  if (odd)
    TD_CHECK(run_few(odd));
  TD_CHECK(td_team_split(world, rank % 3, n - rank, &color));
  /* interleave: world call, then every color team at once, then world again */
  float one = 1.0f, sum = 0.0f;
  TD_CHECK(td_all_reduce(world, &sum, &one, 1, TD_F32, TD_SUM));
  if (sum != (float)n)
    return td__error(TD_ERR_CHECK_FAILED, "world sum %g != %d", sum, n);
  TD_CHECK(run_few(color));
  if (td_team_rank(color) != (n - 1 - rank) / 3)
    return td__error(TD_ERR_CHECK_FAILED, "color team rank %d for world rank %d (keys reversed)",
                     td_team_rank(color), rank);
  TD_CHECK(td_all_reduce(world, &sum, &one, 1, TD_F32, TD_SUM));
  if (sum != (float)n)
    return td__error(TD_ERR_CHECK_FAILED, "world sum %g != %d after team calls", sum, n);
  TD_CHECK(td_team_destroy(color));
  return td_team_destroy(odd);
}

static void test_teams(void **state) {
  (void)state;
  static const int sizes[] = {3, 4, 8};
  for (unsigned i = 0; i < 3; i++) {
    td_status st = td_local_world_run(sizes[i], NULL, teams_rank, NULL);
    if (st != TD_OK)
      fprintf(stderr, "%d ranks: %s\n", sizes[i], td_last_error());
    assert_int_equal(st, TD_OK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_teams)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
