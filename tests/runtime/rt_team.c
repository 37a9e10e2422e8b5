/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: teams. Strided and color/key splits, rank translation, team
 * barriers and allocations on teams that overlap, destroy, and the argument
 * errors of splitting (mismatched strided arguments, invalid ranges). */
#include "runtime/rt_harness.h"

/* Even ranks and odd ranks (strided), then a color/key split that reverses the order. */
static td_status split_rank(td_world *w, int rank, void *arg) {
  td_team *world = td_world_team(w);
  int n = td_world_size(w);
  td_team *even = NULL, *odd = NULL, *rev = NULL;
  int neven = (n + 1) / 2, nodd = n / 2;
  RT_OK(td_team_split_strided(world, 0, 2, neven, &even));
  if (nodd > 0)
    RT_OK(td_team_split_strided(world, 1, 2, nodd, &odd));
  RT_CHECK((even != NULL) == (rank % 2 == 0));
  RT_CHECK((odd != NULL) == (rank % 2 == 1));
  td_team *mine = even ? even : odd;
  RT_CHECK(td_team_rank(mine) == rank / 2);
  RT_CHECK(td_team_size(mine) == (rank % 2 ? nodd : neven));
  RT_CHECK(td_team_world(mine) == w);
  for (int r = 0; r < td_team_size(mine); r++)
    RT_CHECK(td_team_translate_rank(mine, r, world) == 2 * r + rank % 2);
  RT_CHECK(td_team_translate_rank(world, rank, mine) == rank / 2);
  RT_CHECK(td_team_translate_rank(mine, td_team_size(mine), world) == -1);
  if (((rank + 1) % n) % 2 != rank % 2)
    RT_CHECK(td_team_translate_rank(world, (rank + 1) % n, mine) == -1);

  /* color = rank % 3, key = -rank: reversed order within each color. */
  RT_OK(td_team_split(world, rank % 3, -rank, &rev));
  RT_CHECK(rev != NULL);
  int expect_size = 0, expect_rank = 0;
  for (int r = 0; r < n; r++)
    if (r % 3 == rank % 3) {
      expect_size++;
      if (r > rank)
        expect_rank++;
    }
  RT_CHECK(td_team_size(rev) == expect_size);
  RT_CHECK(td_team_rank(rev) == expect_rank);

  /* Allocations on overlapping teams: the team block must not collide with a
   * later world block on any member; data moves within each team. */
  uint64_t *tb = NULL, *wb = NULL;
  RT_OK(td_symm_alloc(mine, 256, 0, (void **)&tb));
  RT_OK(td_symm_alloc(world, 256, 0, (void **)&wb));
  RT_CHECK((char *)wb >= (char *)tb + 256 || (char *)wb + 256 <= (char *)tb);
  uint64_t *sig = NULL;
  RT_OK(td_symm_alloc(rev, sizeof *sig, 0, (void **)&sig));
  *sig = 0;
  RT_OK(td_team_barrier(rev));
  int rs = td_team_size(rev), rr = td_team_rank(rev);
  uint64_t val = 1000 + (uint64_t)rank;
  RT_OK(td_putmem_signal(rev, tb /* any symmetric word */, &val, 0, sig, val, TD_SIGNAL_SET, (rr + 1) % rs));
  uint64_t seen = 0;
  int from = td_team_translate_rank(rev, (rr + rs - 1) % rs, world);
  RT_OK(td_signal_wait_until(rev, sig, TD_CMP_EQ, 1000 + (uint64_t)from, &seen));
  RT_OK(td_team_sync(mine));
  RT_OK(td_team_barrier(rev));
  RT_OK(td_symm_free(rev, sig));
  RT_OK(td_symm_free(world, wb));
  RT_OK(td_symm_free(mine, tb));

  /* A sub-team of a sub-team, then destroy all; a destroyed team's index is reused. */
  td_team *sub = NULL;
  RT_OK(td_team_split(mine, 0, 0, &sub));
  RT_CHECK(td_team_size(sub) == td_team_size(mine));
  RT_OK(td_team_barrier(sub));
  RT_OK(td_team_destroy(sub));
  RT_OK(td_team_destroy(rev));
  RT_OK(td_team_destroy(even));
  RT_OK(td_team_destroy(odd));
  RT_OK(td_team_destroy(world)); /* ignored */
  RT_OK(td_team_destroy(NULL));
  for (int i = 0; i < 100; i++) {
    td_team *t = NULL;
    RT_OK(td_team_split(world, 0, 0, &t));
    RT_OK(td_team_barrier(t));
    RT_OK(td_team_destroy(t));
  }
  RT_OK(td_barrier_all(w));
  return TD_OK;
}

static void test_split(void **state) { rt_run_all(NULL, split_rank, NULL); }

/* TD_COLOR_UNDEFINED leaves a rank out. */
static td_status undefined_rank(td_world *w, int rank, void *arg) {
  td_team *t = (td_team *)1;
  RT_OK(td_team_split(td_world_team(w), rank == 0 ? TD_COLOR_UNDEFINED : 5, 0, &t));
  RT_CHECK((t == NULL) == (rank == 0));
  if (t) {
    RT_CHECK(td_team_size(t) == td_world_size(w) - 1);
    RT_OK(td_team_barrier(t));
    RT_OK(td_team_destroy(t));
  }
  return TD_OK;
}

static void test_color_undefined(void **state) { rt_run_all(NULL, undefined_rank, NULL); }

/* Different strided arguments on different ranks: every rank gets TD_ERR_MISMATCH. */
static td_status mismatch_rank(td_world *w, int rank, void *arg) {
  td_team *t = (td_team *)1;
  td_status st = td_team_split_strided(td_world_team(w), 0, 1, rank == 1 ? 1 : 2, &t);
  RT_CHECK(st == TD_ERR_MISMATCH);
  RT_CHECK(t == (td_team *)1);
  RT_CHECK(strstr(td_last_error(), "different arguments") != NULL);
  RT_CHECK(strstr(td_last_error(), "size=1") != NULL);
  /* The parent still works afterwards. */
  RT_OK(td_barrier_all(w));
  return TD_OK;
}

static void test_strided_mismatch(void **state) {
  td_status st = td_local_world_run(3, NULL, mismatch_rank, NULL);
  assert_int_equal(st, TD_OK);
}

static td_status invalid_rank(td_world *w, int rank, void *arg) {
  td_team *t = NULL;
  td_status st = td_team_split_strided(td_world_team(w), 1, 2, 5, &t);
  RT_CHECK(st == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "parent team size 4") != NULL);
  st = td_team_split(td_world_team(w), -7, 0, &t);
  RT_CHECK(st == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "color=-7") != NULL);
  /* Only rank 2 passes a bad color: the others learn who. */
  st = td_team_split(td_world_team(w), rank == 2 ? -3 : 0, 0, &t);
  RT_CHECK(st == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), rank == 2 ? "color=-3" : "team rank 2 passed an invalid color -3") != NULL);
  RT_CHECK(td_team_split(NULL, 0, 0, &t) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "parent is NULL") != NULL);
  return TD_OK;
}

static void test_split_invalid(void **state) {
  td_status st = td_local_world_run(4, NULL, invalid_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest all[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_color_undefined),
      cmocka_unit_test(test_strided_mismatch),
      cmocka_unit_test(test_split_invalid),
  };
  const struct CMUnitTest launched[] = {
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_color_undefined),
  };
  if (rt_launched())
    return cmocka_run_group_tests(launched, NULL, NULL);
  return cmocka_run_group_tests(all, NULL, NULL);
}
