/* SPDX-License-Identifier: Apache-2.0
 * Baseline for the main job: the sequence-parallel MLP of examples/tp_mlp.td
 * with Open MPI and OpenBLAS, the way a careful MPI user writes it, with the
 * same dtype handling as tdist's cpu plan (so that the comparison is fair):
 *   X = MPI_Allgatherv(x)                  (bf16 on the wire, as tdist sends; then f32)
 *   H = gelu(X W1_r)                       (cblas_sgemm, f32; H stays f32, as tdist keeps
 *                                           16-bit local intermediates in f32)
 *   P = H W2_r                             (cblas_sgemm, f32 partial sums)
 *   y = bf16(MPI_Reduce_scatter(P, sum))   (f32 sums, as tdist's; rounded once to bf16)
 * GELU is the same tanh formula as tdist's, through libm tanhf as plain C
 * would write it; TD_MPI_GELU=fast uses instead the exp form that tdist's
 * tiles vectorise, 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)), written out here,
 * to show what of tdist's lead is the GELU loop. Weights are converted to
 * f32 once, outside the timed loop (tdist prepacks them when binding); every
 * collective completes before the next GEMM starts (no overlap).
 *   mpirun -n N td_mpi_tp_mlp M H F [iters] [seed]
 * Prints one line: ranks, dims, the median over iterations of the max over
 * ranks of one forward pass, in milliseconds, and a checksum of y. */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The split every tdist collective uses (types.h td_chunk_range). */
static void part(long count, int n, int p, long *off, long *len) {
  long q = count / n, r = count % n;
  *off = p * q + (p < r ? p : r);
  *len = q + (p < r ? 1 : 0);
}

static float bf16_to_f32(uint16_t v) {
  uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

static double uniform(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -n N %s M H F [iters] [seed]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  long M = atol(argv[1]), H = atol(argv[2]), F = atol(argv[3]);
  int iters = argc > 4 ? atoi(argv[4]) : 10;
  uint64_t seed = argc > 5 ? (uint64_t)atoll(argv[5]) : 1;
  openblas_set_num_threads(1); /* one process per rank shares the cores, as tdist's ranks do */
  long xo, xl, fo, fl;
  part(M, n, rank, &xo, &xl);
  part(F, n, rank, &fo, &fl);
  uint16_t *x = malloc(sizeof *x * (size_t)(xl * H + 1)), *X = malloc(sizeof *X * (size_t)(M * H));
  float *Xf = malloc(sizeof *Xf * (size_t)(M * H)), *w1 = malloc(sizeof *w1 * (size_t)(H * fl + 1));
  float *w2 = malloc(sizeof *w2 * (size_t)(fl * H + 1)), *h = malloc(sizeof *h * (size_t)(M * fl + 1));
  float *P = malloc(sizeof *P * (size_t)(M * H)), *y = malloc(sizeof *y * (size_t)(xl * H + 1));
  int *counts = malloc(sizeof *counts * (size_t)n), *displs = malloc(sizeof *displs * (size_t)n);
  int *rcounts = malloc(sizeof *rcounts * (size_t)n);
  for (int p = 0; p < n; p++) {
    long o, l;
    part(M, n, p, &o, &l);
    counts[p] = (int)(l * H);
    displs[p] = (int)(o * H);
    rcounts[p] = (int)(l * H);
  }
  uint64_t s = seed * 7919 + (uint64_t)rank;
  for (long i = 0; i < xl * H; i++)
    x[i] = f32_to_bf16((float)uniform(&s));
  for (long i = 0; i < H * fl; i++)
    w1[i] = round_bf16((float)(uniform(&s) / sqrt((double)H)));
  for (long i = 0; i < fl * H; i++)
    w2[i] = round_bf16((float)(uniform(&s) / sqrt((double)F)));
  double *times = malloc(sizeof *times * (size_t)(iters + 1));
  uint16_t *yb = malloc(sizeof *yb * (size_t)(xl * H + 1));
  const char *gm = getenv("TD_MPI_GELU");
  int fast = gm && !strcmp(gm, "fast");
  const float k = 0.7978845608f;
  for (int it = -1; it < iters; it++) { /* it = -1: warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allgatherv(x, (int)(xl * H), MPI_UINT16_T, X, counts, displs, MPI_UINT16_T, MPI_COMM_WORLD);
    for (long i = 0; i < M * H; i++)
      Xf[i] = bf16_to_f32(X[i]);
    if (fl > 0) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)fl, (int)H, 1.0f, Xf, (int)H, w1,
                  (int)fl, 0.0f, h, (int)fl);
      if (fast)
        for (long i = 0; i < M * fl; i++) {
          float v = h[i], t = -2.0f * k * (v + 0.044715f * v * v * v);
          h[i] = v < -10.0f ? 0.0f : v / (1.0f + expf(t < 87.0f ? t : 87.0f));
        }
      else
        for (long i = 0; i < M * fl; i++) {
          float v = h[i];
          h[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
        }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)H, (int)fl, 1.0f, h, (int)fl, w2,
                  (int)H, 0.0f, P, (int)H);
    } else {
      memset(P, 0, sizeof *P * (size_t)(M * H));
    }
    MPI_Reduce_scatter(P, y, rcounts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (long i = 0; i < xl * H; i++)
      yb[i] = f32_to_bf16(y[i]);
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (it >= 0)
      times[it] = tmax;
  }
  double sum = 0, all = 0;
  for (long i = 0; i < xl * H; i++)
    sum += fabs((double)bf16_to_f32(yb[i]));
  MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  qsort(times, (size_t)iters, sizeof *times, cmp);
  if (rank == 0)
    printf("mpi_tp_mlp ranks=%d M=%ld H=%ld F=%ld iters=%d gelu=%s median_ms=%.3f checksum=%.6e\n", n, M, H, F,
           iters, fast ? "fast" : "libm", times[iters / 2] * 1e3, all);
  free(x), free(X), free(Xf), free(w1), free(w2), free(h), free(P), free(y);
  free(counts), free(displs), free(rcounts), free(times), free(yb);
  MPI_Finalize();
  return 0;
}
