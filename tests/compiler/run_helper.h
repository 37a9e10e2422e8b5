/* SPDX-License-Identifier: Apache-2.0
 * Test helper: parse a `.td` text, bind dims, and run it with td_program_run
 * overlapped and sequential on n ranks, asserting that both match the f64
 * reference. Small shapes, one timed launch: correctness only. */
#ifndef TD_TESTS_COMPILER_RUN_HELPER_H
#define TD_TESTS_COMPILER_RUN_HELPER_H

#include <string.h>

#include "tdist/tdist.h"

typedef struct td_test_run {
  int chunks;          /* 0 = model */
  int64_t tile_rows;   /* 0 = model */
  int ring;
  int64_t one_shot;    /* -1 = model */
  int compute_workers; /* 0 = 1 */
} td_test_run;

static void td_test_run_program(const char *text, const char *dims, int n, const td_test_run *cfg) {
  td_program *p = NULL;
  if (td_program_parse(text, strlen(text), "test.td", &p) != TD_OK)
    print_error("parse: %s\n", td_last_error());
  assert_non_null(p);
  if (dims && td_program_set_dims(p, dims) != TD_OK)
    print_error("dims: %s\n", td_last_error());
  for (int overlap = 1; overlap >= 0; overlap--) {
    td_compile_opts co;
    td_compile_opts_init(&co);
    co.chunks_per_rank = cfg ? cfg->chunks : 0;
    co.tile_rows = cfg ? cfg->tile_rows : 0;
    co.ring = cfg ? cfg->ring : 0;
    co.one_shot_bytes = cfg ? cfg->one_shot : -1;
    co.compute_workers = cfg && cfg->compute_workers ? cfg->compute_workers : 1;
    co.comm_workers = 1;
    td_program_run_opts ro = {n, "cpu", 1, 7, overlap, 1, NULL, &co, 0, NULL, NULL};
    td_program_run_result res;
    td_status st = td_program_run(p, &ro, &res);
    if (st != TD_OK || !res.pass)
      print_error("program <%s> dims %s ranks %d overlap %d: %s, error %.3e (tolerance %.1e)\n", text,
                  dims ? dims : "-", n, overlap, st ? td_last_error() : "ran", res.max_rel_error, res.tolerance);
    assert_int_equal(st, TD_OK);
    assert_true(res.pass);
    assert_true(res.max_rel_error <= res.tolerance);
  }
  td_program_destroy(p);
}

#endif
