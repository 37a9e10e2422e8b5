/* SPDX-License-Identifier: Apache-2.0
 * The Open MPI baseline of `tdist bench coll` (bench layer, not part of the
 * library). Times MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce and
 * MPI_Alltoall on float data exactly as the tdist side times its collectives:
 * sizes in bytes as nccl-tests counts them (all_gather / reduce_scatter /
 * all_to_all: the whole n-rank buffer; all_reduce: the vector), counts
 * rounded down to a multiple of the rank count, the same warm-up and
 * iteration rule, a barrier before each timed round, the slowest rank's
 * mean time per round, and the median of ROUNDS rounds. Rank 0 prints one
 * machine-readable line per measurement:
 *   MPIB <op> <bytes> <count> <time_us>
 * usage: td_mpi_coll_bench OPS MIN_BYTES MAX_BYTES ITERS   (ITERS per round; 0 = by size)
 *   OPS: comma-separated all_gather,reduce_scatter,all_reduce,all_to_all */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Timed rounds per size; the median round is reported (the machine is shared). */
#define ROUNDS 5

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Iterations per round for a size when none are given: ~32 MiB moved, 2..1000. */
static int iters_for(size_t bytes, int fixed) {
  if (fixed > 0)
    return fixed;
  size_t it = ((size_t)32 << 20) / (bytes ? bytes : 1);
  return it < 2 ? 2 : it > 1000 ? 1000 : (int)it;
}

static int run(const char *op, float *src, float *dst, size_t total, int n) {
  if (!strcmp(op, "all_gather"))
    return MPI_Allgather(src, (int)(total / n), MPI_FLOAT, dst, (int)(total / n), MPI_FLOAT, MPI_COMM_WORLD);
  if (!strcmp(op, "reduce_scatter"))
    return MPI_Reduce_scatter_block(src, dst, (int)(total / n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (!strcmp(op, "all_reduce"))
    return MPI_Allreduce(src, dst, (int)total, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return MPI_Alltoall(src, (int)(total / n), MPI_FLOAT, dst, (int)(total / n), MPI_FLOAT, MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc != 5) {
    if (rank == 0)
      fprintf(stderr, "usage: %s OPS MIN_BYTES MAX_BYTES ITERS\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  size_t lo = strtoull(argv[2], NULL, 10), hi = strtoull(argv[3], NULL, 10);
  int fixed = atoi(argv[4]);
  float *src = malloc(hi + 64), *dst = malloc(hi + 64);
  if (!src || !dst) {
    fprintf(stderr, "td_mpi_coll_bench: no memory for 2 x %zu bytes\n", hi);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < hi / 4; i++) { /* random-ish, never zero; touches every page */
    src[i] = (float)((i * 2654435761u + (size_t)rank * 40503u) % 1000 + 1) * 0.001f;
    dst[i] = 0.0f;
  }
  char ops[256];
  snprintf(ops, sizeof ops, "%s", argv[1]);
  for (char *save = NULL, *op = strtok_r(ops, ",", &save); op; op = strtok_r(NULL, ",", &save)) {
    for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
      size_t total = bytes / 4;
      if (strcmp(op, "all_reduce"))
        total -= total % (size_t)n;
      if (total == 0)
        continue;
      int iters = iters_for(bytes, fixed), warm = iters / 10 < 2 ? 2 : iters / 10;
      for (int i = 0; i < warm; i++)
        run(op, src, dst, total, n);
      double round_us[ROUNDS];
      for (int k = 0; k < ROUNDS; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
          run(op, src, dst, total, n);
        double mine = (MPI_Wtime() - t0) / iters, worst = 0;
        MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        round_us[k] = worst * 1e6;
      }
      qsort(round_us, ROUNDS, sizeof round_us[0], cmp_double);
      if (rank == 0) {
        printf("MPIB %s %zu %zu %.3f\n", op, total * 4, total, round_us[ROUNDS / 2]);
        fflush(stdout);
      }
    }
  }
  free(src);
  free(dst);
  MPI_Finalize();
  return 0;
}
