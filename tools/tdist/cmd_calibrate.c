/* SPDX-License-Identifier: Apache-2.0
 * `tdist calibrate`: measures the perf model's constants on this machine and
 * stores them ($TD_CACHE_DIR/calibration.json, else ~/.cache/tdist/...), where
 * the compiler finds them. alpha: half a signal ping-pong between two ranks
 * of a local world; beta: a large td_putmem between them; flops: a GEMM
 * program on one rank and one compute worker (the real tile path); memory
 * bandwidth: an element-wise program; task overhead: a program of many
 * one-row tasks. Each figure is the median of a few repetitions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "compiler/compiler.h"
#include "core/file.h"
#include "commands.h"
#include "tdist/tdist.h"

typedef struct td__calib {
  int reps;
  double alpha_s, beta_bytes_s;
} td__calib;

static double td__secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Two ranks: ping-pong on a signal for alpha, then a 4 MiB put for beta. */
static td_status td__calib_rank(td_world *world, int rank, void *arg) {
  td__calib *cb = arg;
  td_team *team = td_world_team(world);
  uint64_t *sig = NULL;
  char *buf = NULL;
  size_t bytes = (size_t)4 << 20;
  td_status st = td_symm_alloc(team, 64, 0, (void **)&sig);
  if (st == TD_OK)
    st = td_symm_alloc(team, bytes, 0, (void **)&buf);
  if (st != TD_OK)
    return st;
  *sig = 0;
  char *src = calloc(1, bytes);
  if (!src)
    return TD_ERR_NO_MEMORY;
  st = td_barrier_all(world);
  int rounds = 200 * cb->reps;
  double t0 = td__secs();
  for (int i = 1; i <= rounds && st == TD_OK; i++) {
    if (rank == 0) {
      st = td_signal_op(team, sig, (uint64_t)i, TD_SIGNAL_SET, 1);
      if (st == TD_OK)
        st = td_signal_wait_until(team, sig, TD_CMP_GE, (uint64_t)i, NULL);
    } else {
      st = td_signal_wait_until(team, sig, TD_CMP_GE, (uint64_t)i, NULL);
      if (st == TD_OK)
        st = td_signal_op(team, sig, (uint64_t)i, TD_SIGNAL_SET, 0);
    }
  }
  if (rank == 0)
    cb->alpha_s = (td__secs() - t0) / (2.0 * rounds);
  if (st == TD_OK)
    st = td_barrier_all(world);
  if (rank == 0 && st == TD_OK) {
    memset(src, 1, bytes);
    double best = 1e30;
    for (int i = 0; i < 3 * cb->reps && st == TD_OK; i++) {
      double t = td__secs();
      st = td_putmem(team, buf, src, bytes, 1);
      t = td__secs() - t;
      if (t < best)
        best = t;
    }
    cb->beta_bytes_s = (double)bytes / best;
  }
  if (st == TD_OK)
    st = td_barrier_all(world);
  free(src);
  td_symm_free(team, buf);
  td_symm_free(team, sig);
  return st;
}

/* Seconds per launch of `text` on one rank with one compute and one comm worker. */
static int td__time_program(const char *text, int64_t tile_rows, int reps, double *seconds) {
  td_program *p = NULL;
  if (td_program_parse(text, strlen(text), "<calibrate>", &p) != TD_OK)
    return 0;
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.compute_workers = 1;
  co.comm_workers = 1;
  co.tile_rows = tile_rows;
  td_program_run_opts ro = {1, "cpu", reps, 1, 1, 0, NULL, &co, 0, NULL, NULL};
  td_program_run_result res;
  td_status st = td_program_run(p, &ro, &res);
  td_program_destroy(p);
  if (st != TD_OK)
    return 0;
  *seconds = res.seconds;
  return 1;
}

int td_cmd_calibrate(int argc, char **argv) {
  int quick = 0;
  td_cli_seen seen = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: tdist calibrate [--quick]\n"
             "  measures the compiler's perf model constants and stores them in\n"
             "  $TD_CACHE_DIR/calibration.json (default ~/.cache/tdist/calibration.json)\n"
             "  --quick   fewer repetitions (seconds instead of tens of seconds)\n");
      return 0;
    } else if (!strcmp(argv[i], "--quick")) {
      if (!td_cli_once("tdist calibrate", &seen, argv[i], NULL)) /* as every subcommand: an option once */
        return 2;
      quick = 1;
    } else {
      fprintf(stderr, "tdist calibrate: unknown argument '%s' (see tdist calibrate --help)\n", argv[i]);
      return 2;
    }
  }
  /* Where the results go, checked before seconds of measuring: a directory
   * there can never be written (an input error, as in tdist run). */
  char where[600];
  const char *kind = td__perf_model_path(where, sizeof where) ? td__path_not_a_file(where) : NULL;
  if (kind) {
    fprintf(stderr, "tdist calibrate: calibration file '%s' is %s, expected a file; remove it, or set TD_CACHE_DIR "
            "to another folder\n", where, kind);
    return 2;
  }
  int reps = quick ? 1 : 5;
  td_perf_model m;
  td_perf_model_load(&m);
  td__calib cb = {reps, 0, 0};
  td_world_opts wo;
  td_world_opts_init(&wo);
  if (td_local_world_run(2, &wo, td__calib_rank, &cb) != TD_OK) {
    fprintf(stderr, "tdist calibrate: communication measurement failed: %s\n", td_last_error());
    return 1;
  }
  m.alpha_s = cb.alpha_s;
  m.beta_bytes_s = cb.beta_bytes_s;
  double t;
  const int64_t M = quick ? 128 : 256, K = 1024, N = 1024;
  char text[512];
  snprintf(text, sizeof text,
           "input a : f32[%lld, %lld]\nweight b : f32[%lld, %lld]\noutput c = matmul(a, b)\n",
           (long long)M, (long long)K, (long long)K, (long long)N);
  if (!td__time_program(text, M, 3 * reps, &t)) {
    fprintf(stderr, "tdist calibrate: GEMM measurement failed: %s\n", td_last_error());
    return 1;
  }
  m.flops_s = 2.0 * (double)M * (double)N * (double)K / t;
  const int64_t E = (int64_t)1 << (quick ? 20 : 22);
  snprintf(text, sizeof text, "input x : f32[%lld, 1024]\noutput y = scale(x, 0.5)\n", (long long)(E / 1024));
  if (!td__time_program(text, E / 1024, 3 * reps, &t)) {
    fprintf(stderr, "tdist calibrate: memory measurement failed: %s\n", td_last_error());
    return 1;
  }
  m.mem_bytes_s = 3.0 * 4.0 * (double)E / t;
  double t_scale = t;
  snprintf(text, sizeof text, "input x : f32[%lld, 1024]\noutput y = gelu(x)\n", (long long)(E / 1024));
  if (!td__time_program(text, E / 1024, 3 * reps, &t)) {
    fprintf(stderr, "tdist calibrate: gelu measurement failed: %s\n", td_last_error());
    return 1;
  }
  m.transcendental_s = t > t_scale ? (t - t_scale) / (double)E : 1e-10;
  snprintf(text, sizeof text, "input x : f32[2048, 1]\noutput y = scale(x, 0.5)\n");
  if (!td__time_program(text, 1, 3 * reps, &t)) {
    fprintf(stderr, "tdist calibrate: task overhead measurement failed: %s\n", td_last_error());
    return 1;
  }
  m.task_overhead_s = t / 2048.0;
  m.cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  char path[512];
  if (td_perf_model_save(&m, path, sizeof path) != TD_OK) {
    fprintf(stderr, "tdist calibrate: %s\n", td_last_error());
    return 1;
  }
  printf("alpha          %10.2f us   (signal one way, local world)\n", m.alpha_s * 1e6);
  printf("beta           %10.2f GB/s (4 MiB put between two ranks)\n", m.beta_bytes_s / 1e9);
  printf("flops          %10.2f GFLOP/s per compute worker (f32 GEMM tiles)\n", m.flops_s / 1e9);
  printf("memory         %10.2f GB/s per worker (element-wise tiles)\n", m.mem_bytes_s / 1e9);
  printf("gelu/silu      %10.2f ns per element beyond memory traffic\n", m.transcendental_s * 1e9);
  printf("task overhead  %10.2f us\n", m.task_overhead_s * 1e6);
  printf("cores          %10d\nwritten to %s\n", m.cores, path);
  return 0;
}
