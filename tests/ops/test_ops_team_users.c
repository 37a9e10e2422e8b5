/* SPDX-License-Identifier: Apache-2.0
 * The team must outlive every object made on it: td_team_destroy refuses
 * (TD_ERR_STATE on every rank alike, naming how many operators and executors
 * of which ranks still use the team) while operators or executors built on it
 * exist, leaves the team usable, and destroys it once they are gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tdist/tdist.h"

enum { NR = 4 };
#define RC_RANKS NR
#include "rank_check.h"

static td_status users_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *sub = NULL;
  UCHECK(td_team_split(td_world_team(w), rank % 2, rank, &sub) == TD_OK);
  td_tp_opts o;
  td_tp_opts_init(&o);
  td_tp_op *op1 = NULL, *op2 = NULL;
  UCHECK(td_ag_gemm_create(sub, 8, 8, 8, TD_F32, &o, &op1) == TD_OK);
  UCHECK(td_ll_all_reduce_create(sub, 64, TD_F32, &o, &op2) == TD_OK);
  td_plan *plan = NULL;
  UCHECK(td_plan_create(td_team_size(sub), &plan) == TD_OK);
  UCHECK(td_plan_validate(plan) == TD_OK);
  td_exec *ex = NULL;
  UCHECK(td_exec_create(plan, sub, NULL, &ex) == TD_OK);

  /* Refused on every rank, naming this rank's objects and the other rank's. */
  UCHECK(td_team_destroy(sub) == TD_ERR_STATE);
  const char *m = td_last_error();
  UCHECK(strstr(m, "td_team_destroy: 2 operators and 1 executor still use this team on this rank") != NULL);
  char other[64];
  snprintf(other, sizeof other, "also team rank %d has 2 operators and 1 executor", 1 - td_team_rank(sub));
  UCHECK(strstr(m, other) != NULL);
  UCHECK(strstr(m, "destroy them first") != NULL);
  UCHECK(strstr(m, "the team is still usable") != NULL);

  /* The team and the operators still work. */
  UCHECK(td_team_barrier(sub) == TD_OK);
  float src[64], dst[64];
  for (int i = 0; i < 64; i++)
    src[i] = (float)(i + rank);
  UCHECK(td_ll_all_reduce(op2, dst, src) == TD_OK);
  for (int i = 0; i < 64; i++) /* the two members are rank % 2 and rank % 2 + 2 */
    UCHECK(dst[i] == (float)(2 * i + 2 * (rank % 2) + 2));

  /* One kind left, then one object left ("uses"). */
  UCHECK(td_exec_destroy(ex) == TD_OK);
  UCHECK(td_tp_destroy(op1) == TD_OK);
  UCHECK(td_team_destroy(sub) == TD_ERR_STATE);
  UCHECK(strstr(td_last_error(), ": 1 operator still uses this team on this rank") != NULL);
  UCHECK(td_tp_destroy(op2) == TD_OK);
  UCHECK(td_team_destroy(sub) == TD_OK);
  td_plan_destroy(plan);
  return TD_OK;
}

static void test_destroy_refused_while_used(void **state) {
  (void)state;
  rank_check_run(NR, users_rank);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destroy_refused_while_used),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
