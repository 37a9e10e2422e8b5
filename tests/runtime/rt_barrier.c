/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: barriers. 10,000 rounds alternating td_barrier_all,
 * td_team_barrier and td_team_sync; in each round every rank publishes the
 * round number and, after the barrier, must see its neighbour's value for this
 * round (double-buffered, so one barrier per round is enough). */
#include "runtime/rt_harness.h"

enum { ROUNDS = 10000 };

static td_status barrier_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  int n = td_world_size(w), next = (rank + 1) % n;
  uint64_t *slot = NULL;
  RT_OK(td_symm_alloc(team, 2 * sizeof(uint64_t), 0, (void **)&slot));
  uint64_t *peer = td_symm_ptr(team, slot, next);
  RT_CHECK(peer != NULL);
  RT_OK(td_barrier_all(w));
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    __atomic_store_n(&slot[i % 2], i, __ATOMIC_RELAXED);
    switch (i % 3) {
    case 0: RT_OK(td_barrier_all(w)); break;
    case 1: RT_OK(td_team_barrier(team)); break;
    default: RT_OK(td_team_sync(team)); break;
    }
    uint64_t v = __atomic_load_n(&peer[i % 2], __ATOMIC_RELAXED);
    if (v != i)
      return RT_FAIL("rank %d round %llu: neighbour %d shows %llu", rank, (unsigned long long)i, next,
                     (unsigned long long)v);
  }
  RT_OK(td_barrier_all(w));
  RT_OK(td_symm_free(team, slot));
  return TD_OK;
}

static void test_barrier_stress(void **state) { rt_run_all(NULL, barrier_rank, NULL); }

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_barrier_stress)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
