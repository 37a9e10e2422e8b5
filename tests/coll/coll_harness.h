/* SPDX-License-Identifier: Apache-2.0
 * Runs a collective check routine (coll_checks.h) on local worlds of 1, 2,
 * 3, 4 and 8 ranks, on the world team, from a cmocka test. The large count
 * (1 MiB + 3) runs with 2 and 3 ranks only, so 8 ranks on 2 cores (and the
 * sanitizer builds) stay fast. */
#ifndef TD_TESTS_COLL_HARNESS_H
#define TD_TESTS_COLL_HARNESS_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "coll/coll_checks.h"

typedef td_status (*ch_check_fn)(td_team *team, const cu_opts *opts);

typedef struct ch_arg {
  ch_check_fn fn;
  cu_opts opts;
} ch_arg;

static inline td_status ch_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  const ch_arg *a = arg;
  return a->fn(td_world_team(w), &a->opts);
}

static inline void ch_run_sizes(ch_check_fn fn) {
  static const int sizes[] = {1, 2, 3, 4, 8};
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    const int big = sizes[i] == 2; /* sanitizers run 5-20x slower */
#else
    const int big = sizes[i] == 2 || sizes[i] == 3;
#endif
    ch_arg a = {fn, {.big = big, .all_dtypes = 1}};
    td_status st = td_local_world_run(sizes[i], NULL, ch_rank, &a);
    if (st != TD_OK)
      fprintf(stderr, "%d ranks: %s: %s\n", sizes[i], td_status_name(st), td_last_error());
    assert_int_equal(st, TD_OK);
  }
}

#endif
