/* SPDX-License-Identifier: Apache-2.0
 * Test helper for operator tests whose ranks run as threads of a local
 * world: a rank function cannot call cmocka, so UCHECK records the first
 * failed check of a rank (line, condition, last error) and returns from the
 * rank function; rank_check_run runs the world and fails the test with each
 * rank's record. Include after <cmocka.h>; define RC_RANKS (the most ranks
 * a test uses) before including. */
#ifndef TD_TESTS_OPS_RANK_CHECK_H
#define TD_TESTS_OPS_RANK_CHECK_H

#include <stdio.h>
#include <string.h>

#include "tdist/tdist.h"

static char got_msg[RC_RANKS][1024];

#define UCHECK(cond)                                                                                       \
  do {                                                                                                     \
    if (!(cond)) {                                                                                         \
      snprintf(got_msg[rank], sizeof got_msg[rank], "line %d: %s (last error: %s)", __LINE__, #cond,      \
               td_last_error());                                                                           \
      return TD_ERR_INTERNAL;                                                                              \
    }                                                                                                      \
  } while (0)

/* Runs fn on n ranks (20 s deadline) and fails the test with any rank's record. */
static inline void rank_check_run(int n, td_status (*fn)(td_world *, int, void *)) {
  memset(got_msg, 0, sizeof got_msg);
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  td_status st = td_local_world_run(n, &wo, fn, NULL);
  for (int r = 0; r < n; r++)
    if (got_msg[r][0])
      fail_msg("rank %d: %s", r, got_msg[r]);
  assert_int_equal(st, TD_OK);
}

#endif
