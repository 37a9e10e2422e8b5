/* SPDX-License-Identifier: Apache-2.0
 * Property test of the CPU executor: random task graphs (randgraph.c) over
 * 1-8 ranks, random worker counts, two launches without any reset, compared
 * with the sequential interpretation of the same graph.
 *
 *   test_exec_random --seeds A B   seeds A .. B-1 (what ctest runs, in slices)
 *   test_exec_random --seed S      one seed, e.g. to replay a failure
 *
 * A failing seed is printed with the line that replays it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdlib.h>

#include "exec_harness.h"
#include "randgraph.h"

enum { RUNS = 2 };

static uint64_t seed_lo = 0, seed_hi = 50;

/* Runs one seed; returns 1 on success, else prints why and returns 0. */
static int run_seed(uint64_t seed) {
  rg_graph g;
  td_status st = rg_generate(seed, RUNS, &g);
  if (st != TD_OK) {
    print_error("seed %" PRIu64 ": generating the graph failed: %s: %s\n", seed, td_status_name(st),
                td_last_error());
    rg_free(&g);
    return 0;
  }
  if (getenv("TD_TEST_DUMP")) /* replay aid: the plan as text */
    td_plan_dump(g.plan, stderr);
  td_world_opts o = ex_world_opts(30000);
  st = td_local_world_run(g.nranks, &o, rg_run_rank, &g);
  if (st != TD_OK)
    print_error("seed %" PRIu64 " (%d ranks, %u tasks, %u signals, %d+%d workers) FAILED: %s: %s\n"
                "  replay: test_exec_random --seed %" PRIu64 "\n",
                seed, g.nranks, g.ntasks, g.nsignals, g.compute_workers, g.comm_workers, td_status_name(st),
                td_last_error(), seed);
  rg_free(&g);
  return st == TD_OK;
}

static void test_random_graphs(void **state) {
  (void)state;
  int failed = 0;
  for (uint64_t s = seed_lo; s < seed_hi; s++)
    failed += !run_seed(s);
  if (failed)
    fail_msg("%d of %" PRIu64 " seeds failed (listed above)", failed, seed_hi - seed_lo);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed_lo = strtoull(argv[++i], NULL, 10);
      seed_hi = seed_lo + 1;
    } else if (!strcmp(argv[i], "--seeds") && i + 2 < argc) {
      seed_lo = strtoull(argv[++i], NULL, 10);
      seed_hi = strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: %s [--seed S | --seeds FIRST END]\n", argv[0]);
      return 2;
    }
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_graphs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
