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

static td_status random_rank(td_world *w, int rank, void *arg) {
  rg_graph *g = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.compute_workers = g->compute_workers;
  o.comm_workers = g->comm_workers;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(g->plan, td_world_team(w), &o, &ex));
  /* Caller buffers: copies of the initial data (out is written). */
  void *mine[RG_NBUFS] = {0};
  td_status st = TD_OK;
  for (int b = 0; b < RG_NBUFS; b++) {
    void *init = g->init[rank * RG_NBUFS + b];
    size_t bytes = rg_bytes(g, b);
    const td_buffer_desc *d = td_plan_buffer(g->plan, g->buf[b]);
    if (d->kind == TD_BUF_SYMM || d->kind == TD_BUF_LOCAL) {
      EX_OK(td_exec_buffer(ex, g->buf[b], &mine[b]));
      memcpy(mine[b], init, bytes);
    } else {
      mine[b] = malloc(bytes);
      memcpy(mine[b], init, bytes);
      EX_OK(td_exec_bind(ex, g->buf[b], mine[b]));
    }
  }
  for (int run = 0; st == TD_OK && run < RUNS; run++)
    st = td_exec_run(ex);
  /* Peers' writes into this rank's copies are ordered with this rank's end
   * only where this rank waits for them: the barrier orders the rest. */
  if (st == TD_OK)
    st = td_barrier_all(w);
  char msg[256];
  for (int b = RG_OUT; st == TD_OK && b < RG_NBUFS; b++)
    if (!rg_compare(g, rank, b, mine[b], msg, sizeof msg))
      st = EX_FAIL("%s", msg);
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", td_last_error());
  td_status dst = td_exec_destroy(ex);
  for (int b = 0; b < RG_NBUFS; b++) {
    const td_buffer_desc *d = td_plan_buffer(g->plan, g->buf[b]);
    if (d->kind != TD_BUF_SYMM && d->kind != TD_BUF_LOCAL)
      free(mine[b]);
  }
  if (st != TD_OK)
    return td__error(st, "%s", saved);
  return dst;
}

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
  st = td_local_world_run(g.nranks, &o, random_rank, &g);
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
