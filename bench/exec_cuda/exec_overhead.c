/* SPDX-License-Identifier: Apache-2.0
 * Benchmark: CUDA executor overhead. One rank runs a schedule of independent
 * GEMM tiles (bf16 in, f32 accumulation, bf16 out) covering C = A B through
 * the persistent executor (td_exec_run), and the same tiles launched as an
 * ordinary grid of one block per tile (td_tile_grid_kernel, same JIT image, no
 * waits, no task pulling). Both compute exactly the same thing with the same
 * tile code, so their outputs must match bit for bit; a few entries are also
 * checked against a double-precision dot product.
 *
 * Timing: host wall clock around each synchronous call (launch to completion),
 * one warm-up each, then runs alternating executor/grid; medians reported.
 * The run count adapts so the timed part lasts about --budget seconds.
 *
 *   exec_overhead [--shape MxNxK] [--tile BMxBN] [--budget S] [--min-runs R]
 * Prints one summary line starting with "| exec-overhead". */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/cuda/cuda_exec.h"
#include "tdist/tdist.h"

typedef struct {
  long long m, n, k, bm, bn;
  double budget;
  int min_runs;
  td_status st;
  char msg[512];
} bench_cfg;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static td_plan *build_plan(const bench_cfg *c, int32_t *a, int32_t *b, int32_t *out, int *ntasks) {
  td_plan *p = NULL;
  if (td_plan_create(1, &p) != TD_OK)
    return NULL;
  td_buffer_desc da = {"A", TD_BUF_INPUT, TD_BF16, c->m, c->k};
  td_buffer_desc db = {"B", TD_BUF_WEIGHT, TD_BF16, c->k, c->n};
  td_buffer_desc dc = {"C", TD_BUF_OUTPUT, TD_BF16, c->m, c->n};
  td_plan_add_buffer(p, &da, a);
  td_plan_add_buffer(p, &db, b);
  td_plan_add_buffer(p, &dc, out);
  *ntasks = 0;
  for (long long i = 0; i < c->m; i += c->bm)
    for (long long j = 0; j < c->n; j += c->bn) {
      td_task t;
      memset(&t, 0, sizeof t);
      t.kind = TD_TASK_GEMM;
      t.worker = TD_WORKER_COMPUTE;
      t.alpha = 1.0f;
      const long long rows = c->m - i < c->bm ? c->m - i : c->bm;
      const long long cols = c->n - j < c->bn ? c->n - j : c->bn;
      t.a = (td_view){*a, TD_PEER_SELF, i, 0, rows, c->k};
      t.b = (td_view){*b, TD_PEER_SELF, 0, j, c->k, cols};
      t.c = (td_view){*out, TD_PEER_SELF, i, j, rows, cols};
      snprintf(t.label, sizeof t.label, "gemm m%lld n%lld", i / c->bm, j / c->bn);
      uint32_t idx;
      if (td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx) != TD_OK)
        return NULL;
      (*ntasks)++;
    }
  if (td_plan_validate(p) != TD_OK)
    return NULL;
  return p;
}

static td_status bench_rank(td_world *w, int rank, void *arg) {
  bench_cfg *c = arg;
  int32_t ia, ib, ic;
  int ntasks = 0;
  td_plan *plan = build_plan(c, &ia, &ib, &ic, &ntasks);
  if (!plan)
    return TD_ERR_INTERNAL;
  const size_t na = (size_t)(c->m * c->k), nb = (size_t)(c->k * c->n), nc = (size_t)(c->m * c->n);
  uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2), *h1 = malloc(nc * 2), *h2 = malloc(nc * 2);
  srand(12345);
  for (size_t i = 0; i < na; i++)
    ha[i] = td_f32_to_bf16((float)rand() / (float)RAND_MAX * 2.0f - 1.0f);
  for (size_t i = 0; i < nb; i++)
    hb[i] = td_f32_to_bf16((float)rand() / (float)RAND_MAX * 2.0f - 1.0f);
  void *da, *db, *dc;
  cudaMalloc(&da, na * 2);
  cudaMalloc(&db, nb * 2);
  cudaMalloc(&dc, nc * 2);
  cudaMemcpy(da, ha, na * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, hb, nb * 2, cudaMemcpyHostToDevice);
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.skip_launch_barrier = 1;
  td_exec *ex = NULL;
  td_status st = td_exec_create(plan, td_world_team(w), &o, &ex);
  if (st != TD_OK)
    return st;
  td_exec_bind(ex, ia, da);
  td_exec_bind(ex, ib, db);
  td_exec_bind(ex, ic, dc);
  const td__cuda_exec *cx = ex->impl;
  /* Warm-up (JIT load, clocks), and the outputs of both paths. */
  double t = now_s();
  if ((st = td_exec_run(ex)) != TD_OK)
    return st;
  const double t_exec = now_s() - t;
  cudaMemcpy(h1, dc, nc * 2, cudaMemcpyDeviceToHost);
  cudaMemset(dc, 0, nc * 2);
  t = now_s();
  if ((st = td__cuda_exec_run_grid(ex)) != TD_OK)
    return st;
  const double t_grid = now_s() - t;
  cudaMemcpy(h2, dc, nc * 2, cudaMemcpyDeviceToHost);
  size_t differ = 0;
  for (size_t i = 0; i < nc; i++)
    differ += h1[i] != h2[i];
  double max_err = 0;
  for (int s = 0; s < 64; s++) {
    const size_t i = (size_t)rand() % (size_t)c->m, j = (size_t)rand() % (size_t)c->n;
    double ref = 0;
    for (long long k = 0; k < c->k; k++)
      ref += (double)td_bf16_to_f32(ha[i * c->k + k]) * (double)td_bf16_to_f32(hb[k * c->n + j]);
    const double got = td_bf16_to_f32(h1[i * c->n + j]);
    const double err = fabs(got - ref) / fmax(1.0, fabs(ref));
    if (err > max_err)
      max_err = err;
  }
  int runs = (int)(c->budget / (t_exec + t_grid));
  if (runs < c->min_runs)
    runs = c->min_runs;
  if (runs > 200)
    runs = 200;
  double *te = calloc((size_t)runs, sizeof(double)), *tg = calloc((size_t)runs, sizeof(double));
  for (int r = 0; r < runs && st == TD_OK; r++) {
    for (int half = 0; half < 2 && st == TD_OK; half++) {
      const int grid_first = r % 2; /* alternate the order so drift cancels */
      const int do_grid = (half == 0) == grid_first;
      t = now_s();
      st = do_grid ? td__cuda_exec_run_grid(ex) : td_exec_run(ex);
      (do_grid ? tg : te)[r] = now_s() - t;
    }
  }
  if (st == TD_OK) {
    const double me = median(te, runs), mg = median(tg, runs);
    const double flop = 2.0 * (double)c->m * (double)c->n * (double)c->k;
    printf("| exec-overhead | %lldx%lldx%lld bf16 | tile %lldx%lld | %d tasks | blocks %d+%d (%d SMs x %d) | "
           "runs %d | executor %.3f ms (%.1f TFLOP/s) | grid %.3f ms (%.1f TFLOP/s) | overhead %+.2f%% | "
           "outputs differ %zu | max rel err %.2e |\n",
           c->m, c->n, c->k, c->bm, c->bn, ntasks, cx->nblocks[0], cx->nblocks[1], cx->nsm, cx->occupancy, runs,
           me * 1e3, flop / me * 1e-12, mg * 1e3, flop / mg * 1e-12, (me / mg - 1.0) * 100.0, differ, max_err);
    if (differ || max_err > 2e-2)
      st = TD_ERR_CHECK_FAILED;
  }
  free(te);
  free(tg);
  td_exec_destroy(ex);
  td_plan_destroy(plan);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  free(ha);
  free(hb);
  free(h1);
  free(h2);
  (void)rank;
  return st;
}

int main(int argc, char **argv) {
  bench_cfg c = {8192, 3584, 8192, 256, 256, 30.0, 5, TD_OK, ""};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--shape"))
      sscanf(argv[i + 1], "%lldx%lldx%lld", &c.m, &c.n, &c.k);
    else if (!strcmp(argv[i], "--tile"))
      sscanf(argv[i + 1], "%lldx%lld", &c.bm, &c.bn);
    else if (!strcmp(argv[i], "--budget"))
      c.budget = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--min-runs"))
      c.min_runs = atoi(argv[i + 1]);
  }
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.transport = "local";
  wo.heap_size = (size_t)1 << 20;
  td_status st = td_local_world_run(1, &wo, bench_rank, &c);
  if (st != TD_OK) {
    fprintf(stderr, "exec_overhead: %s: %s\n", td_status_name(st), td_last_error());
    return 1;
  }
  return 0;
}
