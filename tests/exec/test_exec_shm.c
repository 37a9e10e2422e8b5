/* SPDX-License-Identifier: Apache-2.0
 * The CPU executor across processes: random task graphs (randgraph.c) run
 * as shm worlds of forked processes (one process per rank, the executor's
 * workers threads inside each), compared with the sequential interpreter.
 * Same graphs as test_exec_random, other transport; `--seed S` replays one,
 * `--seeds A B` runs A .. B-1 (default 0 .. 39). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>

#include "exec_harness.h"
#include "randgraph.h"
#include "runtime/rt_harness.h"

static uint64_t seed_lo = 0, seed_hi = 40;

static void test_random_graphs_shm(void **state) {
  (void)state;
  int failed = 0;
  for (uint64_t seed = seed_lo; seed < seed_hi; seed++) {
    rg_graph g;
    assert_int_equal(rg_generate(seed, 2, &g), TD_OK);
    td_world_opts o;
    td_world_opts_init(&o);
    o.heap_size = (size_t)4 << 20;
    o.timeout_ms = 30000;
    char job[32];
    snprintf(job, sizeof job, "exec%" PRIu64, seed);
    td_status st = rt_fork(g.nranks, job, &o, rg_run_rank, &g);
    if (st != TD_OK) {
      print_error("seed %" PRIu64 " (%d ranks, %u tasks) FAILED on shm: %s: %s\n"
                  "  replay: test_exec_shm --seed %" PRIu64 "\n",
                  seed, g.nranks, g.ntasks, td_status_name(st), td_last_error(), seed);
      failed++;
    }
    rg_free(&g);
  }
  if (failed)
    fail_msg("%d seeds failed (listed above)", failed);
}

int main(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++) {
    if (!strcmp(argv[i], "--seed")) {
      seed_lo = strtoull(argv[i + 1], NULL, 10);
      seed_hi = seed_lo + 1;
    } else if (!strcmp(argv[i], "--seeds") && i + 2 < argc) {
      seed_lo = strtoull(argv[i + 1], NULL, 10);
      seed_hi = strtoull(argv[i + 2], NULL, 10);
    }
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_graphs_shm)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
