/* SPDX-License-Identifier: Apache-2.0
 * Random task graphs for property tests of executors: a seed gives a plan
 * over 1-8 ranks of random tiles (copy/put, reduce, ewise, rmsnorm, gemm,
 * nop) on small blocks of caller, local and symmetric buffers, with local
 * dependencies and cross-rank signals derived from the data conflicts of a
 * random global order (so the graph is acyclic by construction), random
 * initial data, and the expected memory after `runs` launches, computed by
 * a sequential interpreter that runs the tasks in that global order with
 * the reference tiles. */
#ifndef TD_TESTS_EXEC_RANDGRAPH_H
#define TD_TESTS_EXEC_RANDGRAPH_H

#include <stdint.h>

#include "tdist/tdist.h"

enum { RG_IN, RG_W, RG_OUT, RG_LOC, RG_S0, RG_S1, RG_H0, RG_NBUFS };

typedef struct rg_graph {
  uint64_t seed;
  int nranks, runs;
  int bm, bn, nblocks;
  int compute_workers, comm_workers;
  uint32_t ntasks, nsignals;
  td_plan *plan;     /* validated */
  int32_t buf[RG_NBUFS];
  void **init;       /* [rank * RG_NBUFS + b]: initial contents of rank's copy */
  void **expect;     /* same layout: contents after `runs` launches */
} rg_graph;

/** Builds graph `seed` (plan validated, interpreter run). Returns TD_OK or the
 * status of the failing plan call (message set). */
td_status rg_generate(uint64_t seed, int runs, rg_graph *g);
void rg_free(rg_graph *g);

/** Bytes of buffer b's copy on one rank. */
size_t rg_bytes(const rg_graph *g, int b);

/** Compares `got` (rank's copy of buffer b) with the expectation; on a
 * difference writes a description to msg and returns 0. Tolerance: 1e-3
 * (f32) or 2e-2 (bf16) relative to max(1, |expected|), because the executor's
 * GEMM is OpenBLAS and the interpreter's the reference. */
int rg_compare(const rg_graph *g, int rank, int b, const void *got, char *msg, size_t cap);

/** Rank function for td_local_world_run / forked worlds (arg: the graph):
 * creates a CPU executor with the graph's worker counts, loads the initial
 * data, runs `runs` launches, barriers, and compares this rank's copies of
 * every writable buffer with the expectation (TD_ERR_CHECK_FAILED naming the
 * first difference). */
td_status rg_run_rank(td_world *w, int rank, void *arg);

#endif
