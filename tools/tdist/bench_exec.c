/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench exec`: the CPU executor's overhead (tools layer). One GEMM
 * C = A * B (f32, M x N x K, default 4096^3) is computed two ways in the same
 * process, alternately:
 *   baseline  one cblas_sgemm with OpenBLAS using all `--workers` threads;
 *   executor  a one-rank plan of `--tiles` independent GEMM tasks (row blocks
 *             of C, M / tiles rows each, the last one taking the remainder),
 *             run by the CPU executor with `--workers` compute workers, each
 *             calling single-threaded sgemm.
 * Each side gets one warm-up, then `--iters` timed runs (CLOCK_MONOTONIC
 * around the call), alternating sides so drift affects both; the report is
 * the median (and the fastest run, the figure least disturbed by other
 * processes on a shared machine) per side, GFLOP/s, and overhead =
 * executor / baseline - 1. The
 * two results are compared (max relative difference) so a fast wrong answer
 * cannot pass. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "bench_ops.h" /* bo_host_memory: the host memory every bench kind checks a case against */
#include "cli_common.h"
#include "cli_options.h"
#include "core/format.h"
#include "out_check.h"
#include "tdist/tdist.h"

typedef struct be_opts {
  int64_t m, n, k;
  int tiles, workers, iters;
  int micro; /* tasks per run of the per-task overhead mode; 0 = GEMM mode */
  int size_given; /* the dims came from --size (for the memory check's remedy) */
  const char *json;
} be_opts;

typedef struct be_state {
  be_opts o;
  float *a, *b, *c_blas, *c_exec;
  double *t_blas, *t_exec; /* seconds per timed run */
  double max_rel_diff;
  int status; /* exit status of the rank function */
} be_state;

static double be_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int be_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double be_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, be_cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void be_usage(FILE *out) {
  fprintf(out,
          "usage: tdist bench exec [--size N | --m M --n N --k K] [--tiles T] [--workers W] [--iters I]\n"
          "                        [--json FILE]\n"
          "       (or: tdist bench exec --micro N [--workers W] [--iters I])\n"
          "  One f32 GEMM (default 4096^3) as T independent row-block tiles run by the CPU executor\n"
          "  with W compute workers, against one multi-threaded OpenBLAS sgemm with W threads.\n"
          "  --size N, --m M, --n N, --k K   dims, 1..65536; A, B and two C (4 x (MK + KN + 2MN) bytes) must\n"
          "               fit host memory (TD_RUN_HOST_MEMORY, else physical), checked before anything runs\n"
          "  --tiles T    GEMM tasks, 1..1048576 and at most M (default: one per worker, at most M)\n"
          "  --workers W  executor compute workers and OpenBLAS threads, 1..1024 (default: online cores)\n"
          "  --iters I    timed runs per side, after one warm-up, 1..100000 (default 5)\n"
          "  --json FILE  also write the results as JSON\n"
          "  --micro N    instead: per-task cost of N (1..1000000) empty tasks per run (1 rank, W workers), and\n"
          "               the latency of a signal hop between 2 ranks (N/10 round trips); takes --workers\n"
          "               and --iters only (no GEMM: --size, --m, --n, --k, --tiles, --json are refused)\n");
}

static int be_parse(int argc, char **argv, be_opts *o) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  *o = (be_opts){4096, 4096, 4096, 0, cores > 0 ? (int)cores : 1, 5, 0, 0, NULL};
  const td_cli_options *table = &td_cli_options_bench_exec; /* cli_options.c: the table --help is checked against */
  td_cli_seen seen = {0}; /* every option once, not the last one silently winning */
  for (int i = 1; i < argc; i++) {
    char nbuf[32];
    const char *a, *v;
    int inl; /* --opt=value: the same as --opt value */
    int known = td_cli_arg(argc, argv, i, table->valued, table->nvalued, nbuf, sizeof nbuf, &a, &v, &inl);
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      be_usage(stdout);
      return 1;
    }
    if (!known && a[0] != '-') { /* a word, not a misspelt option: say what bench exec takes */
      td_cli_positional("tdist bench exec", a, table->valued, table->nvalued, table->flags, table->nflags);
      return 2;
    }
    if (!known) {
      char hint[200];
      fprintf(stderr, "tdist bench exec: unknown option '%s'%s (see --help)\n", a,
              td_cli_option_hint(a, &td_cli_options_bench_exec, hint, sizeof hint));
      return 2;
    }
    if (!v) {
      fprintf(stderr, "tdist bench exec: option '%s' needs a value\n", a);
      return 2;
    }
    if (!td_cli_once("tdist bench exec", &seen, a, NULL))
      return 2;
    /* --size sets all three dims: beside --m, --n or --k one of them would win by position */
    int dim = !strcmp(a, "--m") || !strcmp(a, "--n") || !strcmp(a, "--k");
    for (int k = 0; k < seen.n - 1 && (dim || !strcmp(a, "--size")); k++) {
      const char *other = seen.names[k];
      int clash = dim ? !strcmp(other, "--size") : !strcmp(other, "--m") || !strcmp(other, "--n") ||
                                                   !strcmp(other, "--k");
      if (clash) {
        fprintf(stderr, "tdist bench exec: --size sets M, N and K; give it alone or --m, --n and --k, not both "
                "(%s and %s given)\n", other, a);
        return 2;
      }
    }
    /* Ranges: dims up to 65536 (the three f32 matrices must fit in memory),
     * workers as the executor allows, --micro within one plan's task count. */
    static const struct { const char *name; long long lo, hi; } opts[] = {
        {"--size", 1, 65536}, {"--m", 1, 65536}, {"--n", 1, 65536}, {"--k", 1, 65536},
        {"--tiles", 1, 1 << 20}, {"--workers", 1, 1024}, {"--iters", 1, 100000}, {"--micro", 1, 1000000}};
    long long x = 0;
    int which = -1;
    for (int j = 0; j < (int)(sizeof opts / sizeof opts[0]); j++)
      if (!strcmp(a, opts[j].name))
        which = j;
    if (which >= 0 && !td_cli_int("tdist bench exec", a, v, opts[which].lo, opts[which].hi, &x))
      return 2;
    if (!strcmp(a, "--json")) {
      o->json = v;
    } else if (!strcmp(a, "--size")) {
      o->m = o->n = o->k = x;
      o->size_given = 1;
    } else if (!strcmp(a, "--m")) {
      o->m = x;
    } else if (!strcmp(a, "--n")) {
      o->n = x;
    } else if (!strcmp(a, "--k")) {
      o->k = x;
    } else if (!strcmp(a, "--tiles")) {
      o->tiles = (int)x;
    } else if (!strcmp(a, "--workers")) {
      o->workers = (int)x;
    } else if (!strcmp(a, "--iters")) {
      o->iters = (int)x;
    } else if (!strcmp(a, "--micro")) {
      o->micro = (int)x;
    } else {
      char hint[200];
      fprintf(stderr, "tdist bench exec: unknown option '%s'%s (see --help)\n", a,
              td_cli_option_hint(a, &td_cli_options_bench_exec, hint, sizeof hint));
      return 2;
    }
    i += !inl;
  }
  /* --micro times empty tasks and signal hops: no GEMM, so the GEMM's
   * options (and --json, which that mode does not write) would be dropped
   * without a word. */
  if (o->micro) {
    static const char *const gemm_only[] = {"--size", "--m", "--n", "--k", "--tiles", "--json"};
    for (int k = 0; k < seen.n; k++)
      for (size_t j = 0; j < sizeof gemm_only / sizeof gemm_only[0]; j++)
        if (!strcmp(seen.names[k], gemm_only[j])) {
          fprintf(stderr, "tdist bench exec: %s does not apply with --micro (it times empty tasks, no GEMM, and "
                  "writes no JSON); --micro takes --workers and --iters only\n", gemm_only[j]);
          return 2;
        }
  }
  /* A tile is a block of at least one row of C: more tiles than M rows would be empty. */
  if (o->tiles > o->m) {
    fprintf(stderr, "tdist bench exec: --tiles %d is more than M = %lld: each tile is a block of rows of C, so "
            "--tiles must be in 1..M (1..%lld here)\n", o->tiles, (long long)o->m, (long long)o->m);
    return 2;
  }
  /* One tile per worker by default: each tile's sgemm packs all of B again,
   * so more, shorter tiles cost B-packing traffic (measured: 8 tiles of 512
   * rows ran 1-15 % slower than 2 of 2048 on the dev box). With fewer rows
   * than workers, one tile per row. */
  if (o->tiles == 0)
    o->tiles = o->workers < o->m ? o->workers : (int)o->m;
  return 0;
}

/* Whether the GEMM's matrices fit this machine's memory (bo_host_memory:
 * TD_RUN_HOST_MEMORY, else physical), before anything is allocated: A, B and
 * two C (OpenBLAS's and the executor's), f32. --size 65536 needs 64 GiB;
 * past the memory it would page for minutes or be killed with no word.
 * Returns 0, or 2 after saying what it needs, the limit and what fits. */
static int be_fit(const be_opts *o, int size_given) {
  int configured = 0;
  const double have = bo_host_memory(&configured);
  const double m = (double)o->m, n = (double)o->n, k = (double)o->k;
  const double need = 4.0 * (m * k + k * n + 2.0 * m * n);
  if (have <= 0 || need <= have)
    return 0;
  char nh[32], hh[32], fits[96];
  td__format_bytes(need, nh, sizeof nh);
  td__format_bytes(have, hh, sizeof hh);
  /* a square case of side s needs 16 s^2 bytes */
  long long side = (long long)sqrt(have / 16.0);
  while (side > 0 && 16.0 * (double)side * (double)side > have)
    side--;
  if (side >= 1 && size_given)
    snprintf(fits, sizeof fits, "; give a smaller --size (at most %lld fits)", side);
  else if (side >= 1)
    snprintf(fits, sizeof fits, "; give smaller dims (--m, --n, --k; --size %lld fits)", side);
  else
    snprintf(fits, sizeof fits, "; no case fits that limit");
  fprintf(stderr, "tdist bench exec: the f32 GEMM %lld x %lld x %lld needs at least %.0f bytes (%s) of host memory "
          "(A M x K, B K x N and two C M x N, OpenBLAS's and the executor's, 4 bytes an element), but %s %.0f bytes "
          "(%s)%s\n", (long long)o->m, (long long)o->n, (long long)o->k,
          need, nh, configured ? "TD_RUN_HOST_MEMORY allows" : "this machine has", have, hh, fits);
  return 2;
}

/* The plan: tiles row blocks of C, each one GEMM task on a compute worker. */
static td_status be_plan(const be_opts *o, td_plan **out, int32_t buf[3]) {
  td_plan *p = NULL;
  td_status st = td_plan_create(1, &p);
  const char *names[3] = {"A", "B", "C"};
  const td_buffer_kind kinds[3] = {TD_BUF_INPUT, TD_BUF_WEIGHT, TD_BUF_OUTPUT};
  const int64_t rows[3] = {o->m, o->k, o->m}, cols[3] = {o->k, o->n, o->n};
  for (int i = 0; st == TD_OK && i < 3; i++) {
    td_buffer_desc d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", names[i]);
    d.kind = kinds[i], d.dtype = TD_F32, d.rows = rows[i], d.cols = cols[i];
    st = td_plan_add_buffer(p, &d, &buf[i]);
  }
  for (int t = 0; st == TD_OK && t < o->tiles; t++) {
    int64_t r0 = o->m * t / o->tiles, r1 = o->m * (t + 1) / o->tiles;
    td_task task;
    memset(&task, 0, sizeof task);
    task.kind = TD_TASK_GEMM;
    task.worker = TD_WORKER_COMPUTE;
    task.alpha = 1.0f;
    task.a = (td_view){buf[0], TD_PEER_SELF, r0, 0, r1 - r0, o->k};
    task.b = (td_view){buf[1], TD_PEER_SELF, 0, 0, o->k, o->n};
    task.c = (td_view){buf[2], TD_PEER_SELF, r0, 0, r1 - r0, o->n};
    snprintf(task.label, sizeof task.label, "gemm rows %lld", (long long)r0);
    uint32_t idx;
    st = td_plan_add_task(p, 0, &task, NULL, 0, NULL, 0, NULL, 0, &idx);
  }
  if (st == TD_OK)
    st = td_plan_validate(p);
  if (st != TD_OK) {
    td_plan_destroy(p);
    return st;
  }
  *out = p;
  return TD_OK;
}

static td_status be_rank(td_world *w, int rank, void *arg) {
  (void)rank;
  be_state *s = arg;
  const be_opts *o = &s->o;
  td_plan *plan = NULL;
  int32_t buf[3];
  td_status st = be_plan(o, &plan, buf);
  if (st != TD_OK)
    return st;
  td_exec_opts eo;
  td_exec_opts_init(&eo);
  eo.compute_workers = o->workers;
  td_exec *ex = NULL;
  st = td_exec_create(plan, td_world_team(w), &eo, &ex);
  if (st == TD_OK)
    st = td_exec_bind(ex, buf[0], s->a);
  if (st == TD_OK)
    st = td_exec_bind(ex, buf[1], s->b);
  if (st == TD_OK)
    st = td_exec_bind(ex, buf[2], s->c_exec);
  for (int it = -1; st == TD_OK && it < o->iters; it++) { /* it = -1: warm-up */
    openblas_set_num_threads(o->workers);
    double t0 = be_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)o->m, (blasint)o->n, (blasint)o->k, 1.0f,
                s->a, (blasint)o->k, s->b, (blasint)o->n, 0.0f, s->c_blas, (blasint)o->n);
    double t1 = be_now();
    st = td_exec_run(ex); /* sets OpenBLAS back to one thread per worker */
    double t2 = be_now();
    if (it >= 0)
      s->t_blas[it] = t1 - t0, s->t_exec[it] = t2 - t1;
  }
  td_status dst = td_exec_destroy(ex);
  td_plan_destroy(plan);
  return st != TD_OK ? st : dst;
}

/* Returns 0, or -1 after printing why the file could not be written. */
static int be_write_json(const be_state *s, double tb, double te) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "bench", "exec");
  cJSON_AddStringToObject(root, "tdist_version", td_version());
  cJSON_AddNumberToObject(root, "m", (double)s->o.m);
  cJSON_AddNumberToObject(root, "n", (double)s->o.n);
  cJSON_AddNumberToObject(root, "k", (double)s->o.k);
  cJSON_AddNumberToObject(root, "tiles", s->o.tiles);
  cJSON_AddNumberToObject(root, "workers", s->o.workers);
  cJSON_AddNumberToObject(root, "iters", s->o.iters);
  cJSON_AddNumberToObject(root, "openblas_median_s", tb);
  cJSON_AddNumberToObject(root, "executor_median_s", te);
  cJSON_AddNumberToObject(root, "overhead_pct", (te / tb - 1.0) * 100.0);
  cJSON_AddNumberToObject(root, "openblas_fastest_s", s->t_blas[0]);
  cJSON_AddNumberToObject(root, "executor_fastest_s", s->t_exec[0]);
  cJSON_AddNumberToObject(root, "max_rel_diff", s->max_rel_diff);
  char *text = cJSON_Print(root);
  int rc = td_cli_write_text("tdist bench exec", s->o.json, text);
  free(text);
  cJSON_Delete(root);
  return rc;
}

/* ---- per-task overhead (--micro) ---- */

typedef struct be_micro {
  int tasks, workers, iters;
  double t_nop, t_hop; /* median seconds per run */
} be_micro;

static td_status be_micro_rank(td_world *w, int rank, void *arg) {
  be_micro *mc = arg;
  int n = td_world_size(w);
  td_plan *p = NULL;
  td_status st = td_plan_create(n, &p);
  uint32_t ping = 0, pong = 0, idx;
  if (st == TD_OK && n == 1) { /* independent empty tasks */
    for (int i = 0; st == TD_OK && i < mc->tasks; i++) {
      td_task t;
      memset(&t, 0, sizeof t);
      t.a.buf = t.b.buf = t.c.buf = -1;
      st = td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx);
    }
  } else if (st == TD_OK) { /* ping-pong: rank 0 raises ping, rank 1 answers pong */
    st = td_plan_add_signal(p, "ping", &ping);
    if (st == TD_OK)
      st = td_plan_add_signal(p, "pong", &pong);
    for (int i = 0; st == TD_OK && i < mc->tasks / 10; i++) {
      td_task t;
      memset(&t, 0, sizeof t);
      t.worker = TD_WORKER_COMM;
      t.a.buf = t.b.buf = t.c.buf = -1;
      td_wait w0 = {pong, TD_CMP_GE, (uint64_t)i}, w1 = {ping, TD_CMP_GE, (uint64_t)i + 1};
      td_raise r0 = {ping, 1, 1}, r1 = {pong, 0, 1};
      st = td_plan_add_task(p, 0, &t, NULL, 0, &w0, 1, &r0, 1, &idx);
      if (st == TD_OK)
        st = td_plan_add_task(p, 1, &t, NULL, 0, &w1, 1, &r1, 1, &idx);
    }
  }
  if (st == TD_OK)
    st = td_plan_validate(p);
  td_exec *ex = NULL;
  td_exec_opts eo;
  td_exec_opts_init(&eo);
  eo.compute_workers = mc->workers;
  if (st == TD_OK)
    st = td_exec_create(p, td_world_team(w), &eo, &ex);
  double *t = calloc((size_t)mc->iters, sizeof *t);
  for (int it = -1; st == TD_OK && t && it < mc->iters; it++) {
    double t0 = be_now();
    st = td_exec_run(ex);
    if (it >= 0)
      t[it] = be_now() - t0;
  }
  if (st == TD_OK && rank == 0 && t)
    *(n == 1 ? &mc->t_nop : &mc->t_hop) = be_median(t, mc->iters);
  free(t);
  td_status dst = td_exec_destroy(ex);
  td_plan_destroy(p);
  return st != TD_OK ? st : dst;
}

static int be_micro_main(const be_opts *o) {
  be_micro mc = {o->micro, o->workers, o->iters, 0, 0};
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.heap_size = (size_t)1 << 20;
  wo.transport = "local";
  td_status st = td_local_world_run(1, &wo, be_micro_rank, &mc);
  if (st == TD_OK && o->micro >= 10)
    st = td_local_world_run(2, &wo, be_micro_rank, &mc);
  if (st != TD_OK) {
    fprintf(stderr, "tdist bench exec --micro: %s: %s\n", td_status_name(st), td_last_error());
    return 1;
  }
  printf("# tdist bench exec --micro %d: %d workers, median of %d runs (each starts with a team barrier)\n",
         o->micro, o->workers, o->iters);
  printf("empty task, 1 rank:            %8.3f us per task (%.3f ms per run)\n", mc.t_nop / o->micro * 1e6,
         mc.t_nop * 1e3);
  if (o->micro >= 10)
    printf("signal round trip, 2 ranks:    %8.3f us per round trip (%d per run)\n",
           mc.t_hop / (o->micro / 10) * 1e6, o->micro / 10);
  return 0;
}

int td_bench_exec(int argc, char **argv) {
  be_state s;
  memset(&s, 0, sizeof s);
  int rc = be_parse(argc, argv, &s.o);
  if (rc)
    return rc == 1 ? 0 : rc;
  if (td_cli_check_output("tdist bench exec", "--json", s.o.json))
    return 2;
  const be_opts *o = &s.o;
  if (o->micro)
    return be_micro_main(o);
  if (be_fit(o, o->size_given))
    return 2;
  size_t na = (size_t)(o->m * o->k), nb = (size_t)(o->k * o->n), nc = (size_t)(o->m * o->n);
  s.a = malloc(na * sizeof(float)), s.b = malloc(nb * sizeof(float));
  s.c_blas = malloc(nc * sizeof(float)), s.c_exec = malloc(nc * sizeof(float));
  s.t_blas = calloc((size_t)o->iters, sizeof(double)), s.t_exec = calloc((size_t)o->iters, sizeof(double));
  if (!s.a || !s.b || !s.c_blas || !s.c_exec || !s.t_blas || !s.t_exec) {
    fprintf(stderr, "tdist bench exec: out of memory for %lld x %lld x %lld\n", (long long)o->m,
            (long long)o->n, (long long)o->k);
    return 1;
  }
  uint64_t x = 0x9e3779b97f4a7c15ull; /* random inputs, never zeros */
  for (size_t i = 0; i < na + nb; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    float v = (float)((double)(x >> 11) / 9007199254740992.0) - 0.5f;
    if (i < na)
      s.a[i] = v;
    else
      s.b[i - na] = v;
  }
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.heap_size = (size_t)1 << 20;
  wo.transport = "local";
  td_status st = td_local_world_run(1, &wo, be_rank, &s);
  if (st != TD_OK) {
    fprintf(stderr, "tdist bench exec: %s: %s\n", td_status_name(st), td_last_error());
    return 1;
  }
  for (size_t i = 0; i < nc; i++) {
    double d = fabs((double)s.c_exec[i] - (double)s.c_blas[i]) / fmax(1.0, fabs((double)s.c_blas[i]));
    if (d > s.max_rel_diff)
      s.max_rel_diff = d;
  }
  double tb = be_median(s.t_blas, o->iters), te = be_median(s.t_exec, o->iters);
  double mb = s.t_blas[0], me = s.t_exec[0]; /* sorted by be_median: the fastest runs */
  double gflop = 2.0 * (double)o->m * (double)o->n * (double)o->k * 1e-9;
  printf("# tdist bench exec: f32 GEMM %lld x %lld x %lld, %d tiles, %d workers, median of %d\n",
         (long long)o->m, (long long)o->n, (long long)o->k, o->tiles, o->workers, o->iters);
  printf("%-28s %12s %10s %12s\n", "side", "median ms", "GFLOP/s", "fastest ms");
  printf("%-28s %12.2f %10.1f %12.2f\n", "OpenBLAS sgemm (threads)", tb * 1e3, gflop / tb, mb * 1e3);
  printf("%-28s %12.2f %10.1f %12.2f\n", "CPU executor (tiles)", te * 1e3, gflop / te, me * 1e3);
  printf("overhead: %+.2f %% (medians), %+.2f %% (fastest runs)   max relative difference: %.2e\n",
         (te / tb - 1.0) * 100.0, (me / mb - 1.0) * 100.0, s.max_rel_diff);
  int bad = !(s.max_rel_diff < 1e-3), unwritten = o->json && be_write_json(&s, tb, te);
  if (bad)
    fprintf(stderr, "tdist bench exec: the executor's result differs from OpenBLAS's (max rel %.3g)\n",
            s.max_rel_diff);
  free(s.a), free(s.b), free(s.c_blas), free(s.c_exec), free(s.t_blas), free(s.t_exec);
  return bad || unwritten;
}
