/* SPDX-License-Identifier: Apache-2.0
 * CUDA executor property test (label gpu): the random task graphs of the CPU
 * executor's property test (tests/exec/randgraph.h: random tiles, local
 * dependencies and cross-rank signals, acyclic by construction, expected
 * memory from a sequential interpreter) run on one GPU shared by 1, 2, 4 and
 * 8 ranks (threads of a local world), several launches in a row with no
 * reset, with default and with minimal block counts; plus one traced run
 * whose events must cover every task. A failing seed is printed for replay
 * (TD_SEED=<seed> runs only that one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec/cuda/cuda_exec.h"
#include "exec/exec_harness.h"
#include "exec/randgraph.h"
#include "exec_gpu_graph.h"

static int g_ce_reported;

typedef struct {
  rg_graph g;
  int compute, comm, trace;
} run_ctx;

#define CU_OK(call)                                                                              \
  do {                                                                                           \
    cudaError_t ce_ = (call);                                                                    \
    if (ce_ != cudaSuccess)                                                                      \
      return EX_FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(ce_));       \
  } while (0)

static td_status rank_fn(td_world *w, int rank, void *arg) {
  run_ctx *c = arg;
  rg_graph *g = &c->g;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.compute_workers = c->compute;
  o.comm_workers = c->comm;
  o.trace = c->trace;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(g->plan, td_world_team(w), &o, &ex));
  const td__cuda_exec *cx = ex->impl;
  if (cx->nce > 0 && __atomic_exchange_n(&g_ce_reported, 1, __ATOMIC_RELAXED) == 0)
    printf("copy-engine tasks: %s (seed %" PRIu64 ", rank %d: %u on the queue)\n",
           cx->ce_enabled ? "on the copy-engine stream" : "on communication blocks", g->seed, rank, cx->nce);
  void *dev[RG_NBUFS] = {0};
  int owned[RG_NBUFS] = {0};
  td_status st = TD_OK;
  if (st == TD_OK)
    st = eg_upload(ex, g, rank, dev, owned);
  for (int run = 1; run <= g->runs && st == TD_OK; run++)
    st = td_exec_run(ex);
  /* Peers' writes into this rank's copies are ordered with this rank's end
   * only where this rank waits for them: the barrier orders the rest. */
  if (st == TD_OK)
    st = td_barrier_all(w);
  if (st == TD_OK && c->trace) {
    const td_trace_event *ev = NULL;
    size_t n = 0;
    st = td_exec_trace_events(ex, &ev, &n);
    const td_schedule *s = td_plan_schedule(g->plan, rank);
    if (st == TD_OK && n != s->ntasks)
      st = EX_FAIL("rank %d: %zu trace events for %u tasks", rank, n, s->ntasks);
    for (size_t i = 0; i < n && st == TD_OK; i++)
      if (ev[i].end_ns < ev[i].start_ns || ev[i].task >= s->ntasks || ev[i].worker < 0)
        st = EX_FAIL("rank %d: trace event %zu is malformed", rank, i);
    /* The same Chrome-trace writer as the CPU executor (collective). */
    char path[128];
    snprintf(path, sizeof path, "/tmp/tdist-gpu-trace-%d.json", (int)getpid());
    td_trace_summary sum;
    if (st == TD_OK)
      st = td_exec_trace_summary(ex, &sum);
    if (st == TD_OK && sum.ntasks != s->ntasks)
      st = EX_FAIL("rank %d: summary counts %u tasks, schedule has %u", rank, sum.ntasks, s->ntasks);
    if (st == TD_OK)
      st = td_exec_trace_write(ex, path);
    if (st == TD_OK && rank == 0) {
      FILE *f = fopen(path, "r");
      char head[64] = "";
      if (!f || !fgets(head, sizeof head, f) || !strchr(head, '{'))
        st = EX_FAIL("trace file %s missing or not JSON", path);
      if (f)
        fclose(f);
      remove(path);
    }
  }
  if (st == TD_OK)
    st = eg_check_outputs(g, rank, dev);
  eg_free(dev, owned);
  td_status st2 = td_exec_destroy(ex);
  return st != TD_OK ? st : st2;
}

static void run_seed(uint64_t seed, int runs, int minimal, int trace) {
  run_ctx c = {0};
  c.trace = trace;
  if (minimal)
    c.compute = 1, c.comm = 1;
  if (rg_generate(seed, runs, &c.g) != TD_OK)
    fail_msg("seed %" PRIu64 ": generation failed: %s", seed, td_last_error());
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(c.g.nranks, &o, rank_fn, &c);
  if (st != TD_OK)
    fail_msg("seed %" PRIu64 " (%d ranks, %u tasks, %d runs, %s blocks): %s: %s\n  replay: TD_SEED=%" PRIu64,
             seed, c.g.nranks, c.g.ntasks, runs, minimal ? "minimal" : "default", td_status_name(st),
             td_last_error(), seed);
  rg_free(&c.g);
}

/* The first `count` seeds from `start` whose graph has `nranks` ranks. */
static void run_ranks(int nranks, int count, int runs) {
  int done = 0;
  for (uint64_t seed = 1; done < count && seed < 100000; seed++) {
    rg_graph g;
    if (rg_generate(seed, 1, &g) != TD_OK)
      fail_msg("seed %" PRIu64 ": generation failed: %s", seed, td_last_error());
    const int n = g.nranks;
    rg_free(&g);
    if (n != nranks)
      continue;
    run_seed(seed, runs, done % 2 == 1, 0);
    done++;
  }
  assert_int_equal(done, count);
}

static void test_one_rank(void **state) { run_ranks(1, 6, 3); }
static void test_two_ranks(void **state) { run_ranks(2, 6, 3); }
static void test_four_ranks(void **state) { run_ranks(4, 6, 3); }
static void test_eight_ranks(void **state) { run_ranks(8, 6, 3); }
static void test_many_launches(void **state) { run_seed(7, 40, 0, 0); }
static void test_traced(void **state) { run_seed(11, 2, 0, 1); }

int main(void) {
  const char *replay = getenv("TD_SEED");
  if (replay && *replay) {
    run_seed(strtoull(replay, NULL, 10), 3, 0, 0);
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_rank),   cmocka_unit_test(test_two_ranks),
      cmocka_unit_test(test_four_ranks), cmocka_unit_test(test_eight_ranks),
      cmocka_unit_test(test_many_launches), cmocka_unit_test(test_traced),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
