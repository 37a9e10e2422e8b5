/* SPDX-License-Identifier: Apache-2.0
 * Example: a tensor-parallel MLP with the ready operators of ops.h.
 *   h = AllGather(x) * W1      td_ag_gemm  (x sharded by rows, W1 by columns)
 *   y = ReduceScatter(h * W2)  td_gemm_rs  (h sharded by columns, W2 by rows)
 * The output of the first operator is already laid out as the input of the
 * second (columns of h, same row stride), so it is passed on with no copy.
 * Every rank checks its rows of y against a plain product of the whole
 * tensors; the calls run several times on the same handles (no reset).
 *
 *   ./tp_mlp_ops            # 4 ranks (threads), M=1000 tokens, H=256, F=1024
 *   ./tp_mlp_ops 8 333      # 8 ranks, 333 tokens (not a multiple of 8)
 *   tdrun -n 4 ./tp_mlp_ops # 4 processes over shared memory */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/tdist.h"

enum { H = 256, F = 1024, CALLS = 3 };
static int64_t M = 1000;

/* Deterministic inputs every rank can compute for any global element. */
static float x_at(int64_t i, int64_t j) { return (float)((i * 7 + j * 3) % 17) / 17.0f - 0.5f; }
static float w1_at(int64_t i, int64_t j) { return (float)((i * 5 + j * 11) % 13) / 13.0f / 16.0f - 0.03f; }
static float w2_at(int64_t i, int64_t j) { return (float)((i * 3 + j * 7) % 19) / 19.0f / 32.0f - 0.015f; }

static void fill(td_tp_op *op, td_tp_operand_id which, int rank, float *buf, float (*at)(int64_t, int64_t)) {
  td_tp_layout l;
  td_tp_operand(op, which, rank, &l);
  for (int64_t i = 0; i < l.rows; i++)
    for (int64_t j = 0; j < l.cols; j++)
      buf[i * l.ld + j] = at(l.row0 + i, l.col0 + j);
}

static td_status mlp(td_world *world, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(world);
  td_tp_op *ag = NULL, *rs = NULL;
  td_status st = td_ag_gemm_create(team, M, F, H, TD_F32, NULL, &ag); /* h[M,F] = x[M,H] W1[H,F] */
  if (st == TD_OK)
    st = td_gemm_rs_create(team, M, H, F, TD_F32, NULL, &rs); /* y[M,H] = h[M,F] W2[F,H] */
  if (st != TD_OK) {
    td_tp_destroy(ag);
    return st;
  }
  td_tp_layout lx, lw1, lh, lw2, ly;
  td_tp_operand(ag, TD_TP_A, rank, &lx);
  td_tp_operand(ag, TD_TP_B, rank, &lw1);
  td_tp_operand(ag, TD_TP_C, rank, &lh);
  td_tp_operand(rs, TD_TP_B, rank, &lw2);
  td_tp_operand(rs, TD_TP_C, rank, &ly);
  float *x = malloc(lx.bytes), *w1 = malloc(lw1.bytes), *h = malloc(lh.bytes), *w2 = malloc(lw2.bytes),
        *y = malloc(ly.bytes);
  if (!x || !w1 || !h || !w2 || !y)
    st = TD_ERR_NO_MEMORY;
  if (st == TD_OK) {
    fill(ag, TD_TP_A, rank, x, x_at);
    fill(ag, TD_TP_B, rank, w1, w1_at);
    fill(rs, TD_TP_B, rank, w2, w2_at);
  }
  for (int call = 0; call < CALLS && st == TD_OK; call++) {
    st = td_ag_gemm(ag, h, x, w1);
    if (st == TD_OK)
      st = td_gemm_rs(rs, y, h, w2); /* h is this rank's columns: gemm_rs's A as is */
  }
  double worst = 0;
  for (int64_t i = 0; i < ly.rows && st == TD_OK; i++) { /* reference for this rank's rows */
    int64_t gi = ly.row0 + i;
    double hrow[F];
    for (int64_t f = 0; f < F; f++) {
      hrow[f] = 0;
      for (int64_t k = 0; k < H; k++)
        hrow[f] += (double)x_at(gi, k) * w1_at(k, f);
    }
    for (int64_t j = 0; j < H; j++) {
      double ref = 0;
      for (int64_t f = 0; f < F; f++)
        ref += hrow[f] * w2_at(f, j);
      double e = fabs(y[i * ly.ld + j] - ref) / (fabs(ref) + 1e-3);
      worst = e > worst ? e : worst;
    }
  }
  if (st == TD_OK) {
    td_tp_variant v1, v2;
    td_tp_choices(ag, &v1, NULL, NULL, NULL);
    td_tp_choices(rs, &v2, NULL, NULL, NULL);
    printf("rank %d: rows %lld..%lld of y, %d calls, ag_gemm %s, gemm_rs %s, max rel error %.2e %s\n", rank,
           (long long)ly.row0, (long long)(ly.row0 + ly.rows), CALLS, td_tp_variant_name(v1),
           td_tp_variant_name(v2), worst, worst < 1e-3 ? "ok" : "WRONG");
    if (worst >= 1e-3)
      st = TD_ERR_CHECK_FAILED;
  }
  free(x), free(w1), free(h), free(w2), free(y);
  td_status st2 = td_tp_destroy(rs);
  td_status st3 = td_tp_destroy(ag);
  return st != TD_OK ? st : st2 != TD_OK ? st2 : st3;
}

/* A whole decimal number in [lo, hi], or -1. */
static long long arg_num(const char *s, long long lo, long long hi) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  return end != s && *end == 0 && v >= lo && v <= hi ? v : -1;
}

int main(int argc, char **argv) {
  const char *usage = "usage: tp_mlp_ops [RANKS (1-64, default 4) [TOKENS (1-1000000, default 1000)]]\n"
                      "       tdrun -n RANKS tp_mlp_ops [RANKS [TOKENS]]   (RANKS is then the launcher's)\n";
  long long n = argc > 1 ? arg_num(argv[1], 1, 64) : 4;
  long long m = argc > 2 ? arg_num(argv[2], 1, 1000000) : M;
  if (argc > 3 || n < 0 || m < 0) {
    int help = argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (!help && argc > 3)
      fprintf(stderr, "tp_mlp_ops: bad arguments: %d given, at most 2\n", argc - 1);
    else if (!help)
      fprintf(stderr, "tp_mlp_ops: bad arguments: %s '%s' is not a whole number in %s\n", n < 0 ? "RANKS" : "TOKENS",
              n < 0 ? argv[1] : argv[2], n < 0 ? "1..64" : "1..1000000");
    fputs(usage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  M = m;
  td_status st;
  char why[2048] = "";
  if (getenv("TD_RANK") || getenv("OMPI_COMM_WORLD_RANK")) { /* launched: this process is one rank */
    td_world *w = NULL;
    st = td_world_init(NULL, &w);
    if (st == TD_OK) {
      st = mlp(w, td_world_rank(w), NULL);
      /* the failing call's message, before finalize may write its own */
      if (st != TD_OK)
        snprintf(why, sizeof why, "%s", td_last_error());
      td_world_finalize(w);
    } else {
      snprintf(why, sizeof why, "%s", td_last_error());
    }
  } else {
    st = td_local_world_run((int)n, NULL, mlp, NULL);
    if (st != TD_OK)
      snprintf(why, sizeof why, "%s", td_last_error());
  }
  if (st != TD_OK) {
    fprintf(stderr, "tp_mlp_ops: %s: %s\n", td_status_name(st), why);
    return 1;
  }
  return 0;
}
