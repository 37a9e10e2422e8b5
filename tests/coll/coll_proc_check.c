/* SPDX-License-Identifier: Apache-2.0
 * One rank of a launched job (tdrun sets TD_RANK etc.): runs every collective
 * check of coll_checks.h on the world team and on an even/odd color split,
 * with one process per rank (the `shm` transport). Prints one line per rank
 * and exits 0 when every check passed, 1 otherwise. */
#include <stdio.h>

#include "coll/coll_checks.h"
#include "core/error.h"

static td_status run_all(td_team *team, const cu_opts *o) {
  TD_CHECK(cu_check_all_gather(team, o));
  TD_CHECK(cu_check_broadcast(team, o));
  TD_CHECK(cu_check_reduce_scatter(team, o));
  TD_CHECK(cu_check_all_reduce(team, o));
  TD_CHECK(cu_check_all_to_all(team, o));
  return cu_check_all_to_allv(team, o);
}

int main(void) {
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  if (st != TD_OK) {
    fprintf(stderr, "coll_proc_check: td_world_init: %s\n", td_last_error());
    return 1;
  }
  int n = td_world_size(w), r = td_world_rank(w);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  cu_opts all = {.big = 0, .all_dtypes = n <= 4}; /* the local-world tests cover the big count */
#else
  cu_opts all = {.big = n == 2, .all_dtypes = n <= 4};
#endif
  st = run_all(td_world_team(w), &all);
  td_team *half = NULL;
  if (st == TD_OK)
    st = td_team_split(td_world_team(w), r % 2, n - r, &half);
  cu_opts few = {.big = 0, .all_dtypes = 0};
  if (st == TD_OK)
    st = run_all(half, &few);
  if (st == TD_OK)
    st = td_team_destroy(half);
  if (st != TD_OK)
    fprintf(stderr, "coll_proc_check: rank %d of %d: %s: %s\n", r, n, td_status_name(st), td_last_error());
  else
    printf("coll_proc_check: rank %d of %d ok (transport %s)\n", r, n, td_world_transport(w));
  td_status fst = td_world_finalize(w);
  return st == TD_OK && fst == TD_OK ? 0 : 1;
}
