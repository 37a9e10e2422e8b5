/* SPDX-License-Identifier: Apache-2.0
 * Benchmark of the host runtime (shm transport) against Open MPI on the same
 * processes: run under `mpirun -n N`, every process is both a tdist rank
 * (td_world_init reads Open MPI's variables) and an MPI rank, so the two are
 * timed side by side in one run. Measures
 *   - barrier: td_barrier_all vs MPI_Barrier (µs per barrier, max over ranks),
 *   - ping-pong: 8-byte putmem_signal + wait vs MPI_Send/Recv between ranks 0
 *     and 1 (µs one way),
 *   - one-way bandwidth of 4 MiB messages: putmem_signal vs MPI_Send/Recv
 *     (GB/s), each message acknowledged before the next.
 * Ping-pong and bandwidth run only with exactly 2 ranks: idle extra ranks
 * would wait in one library's barrier (MPI's spins, tdist's sleeps) and so
 * favour one side.
 * Each figure is the median of 5 repetitions. Prints one line per figure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/rma.h"
#include "tdist/symm.h"
#include "tdist/world.h"

enum { REPS = 5 };

static double median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return v[n / 2];
}

static double max_over_ranks(double x) {
  double m = 0;
  MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

#define TRY(expr)                                                                              \
  do {                                                                                         \
    td_status st_ = (expr);                                                                    \
    if (st_ != TD_OK) {                                                                        \
      fprintf(stderr, "rt_bench: %s: %s: %s\n", #expr, td_status_name(st_), td_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
    }                                                                                          \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  /* ITERS: barriers per repetition, a whole number 1..10000000 */
  char *end = NULL;
  long iters_l = argc > 1 ? strtol(argv[1], &end, 10) : 10000;
  int mpi_n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_n);
  if (argc > 2 || (argc > 1 && (end == argv[1] || *end || iters_l < 1 || iters_l > 10000000)) || mpi_n < 2) {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0)
      fprintf(stderr, "%susage: mpirun -n N td_rt_bench [ITERS]   (N >= 2 ranks; ITERS = barriers per repetition, "
              "1..10000000, default 10000)\n", mpi_n < 2 ? "td_rt_bench: needs at least 2 MPI ranks (run it under "
              "mpirun)\n" : "");
    MPI_Finalize();
    return 2;
  }
  int iters = (int)iters_l;
  td_world *w = NULL;
  TRY(td_world_init(NULL, &w));
  td_team *team = td_world_team(w);
  int rank = td_world_rank(w), n = td_world_size(w);
  size_t big = (size_t)4 << 20;
  char *buf = NULL;
  uint64_t *sig = NULL;
  TRY(td_symm_alloc(team, big, 0, (void **)&buf));
  TRY(td_symm_alloc(team, 2 * sizeof(uint64_t), 0, (void **)&sig));
  sig[0] = sig[1] = 0;
  char *src = malloc(big);
  memset(src, rank + 1, big);
  TRY(td_barrier_all(w));
  double td_bar[REPS], mpi_bar[REPS], td_pp[REPS], mpi_pp[REPS], td_bw[REPS], mpi_bw[REPS];
  uint64_t epoch = 0;
  int bw_iters = 50;
  for (int r = 0; r < REPS; r++) {
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
      TRY(td_barrier_all(w));
    td_bar[r] = max_over_ranks((MPI_Wtime() - t0) / iters * 1e6);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
      MPI_Barrier(MPI_COMM_WORLD);
    mpi_bar[r] = max_over_ranks((MPI_Wtime() - t0) / iters * 1e6);
    if (n != 2)
      continue;
    /* Ping-pong between ranks 0 and 1 (signal epochs never reset). */
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters && rank < 2; i++) {
      epoch++;
      if (rank == 0) {
        TRY(td_putmem_signal(team, buf, src, 8, &sig[0], epoch, TD_SIGNAL_SET, 1));
        TRY(td_signal_wait_until(team, &sig[0], TD_CMP_GE, epoch, NULL));
      } else {
        TRY(td_signal_wait_until(team, &sig[0], TD_CMP_GE, epoch, NULL));
        TRY(td_putmem_signal(team, buf, src, 8, &sig[0], epoch, TD_SIGNAL_SET, 0));
      }
    }
    td_pp[r] = (MPI_Wtime() - t0) / iters / 2 * 1e6;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters && rank < 2; i++) {
      if (rank == 0) {
        MPI_Send(src, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(src, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    mpi_pp[r] = (MPI_Wtime() - t0) / iters / 2 * 1e6;
    /* One-way 4 MiB messages from 0 to 1, each acknowledged. */
    TRY(td_barrier_all(w));
    t0 = MPI_Wtime();
    for (int i = 0; i < bw_iters && rank < 2; i++) {
      epoch++;
      if (rank == 0) {
        TRY(td_putmem_signal(team, buf, src, big, &sig[1], epoch, TD_SIGNAL_SET, 1));
        TRY(td_signal_wait_until(team, &sig[1], TD_CMP_GE, epoch, NULL));
      } else {
        TRY(td_signal_wait_until(team, &sig[1], TD_CMP_GE, epoch, NULL));
        TRY(td_signal_op(team, &sig[1], epoch, TD_SIGNAL_SET, 0));
      }
    }
    td_bw[r] = (double)big * bw_iters / (MPI_Wtime() - t0) / 1e9;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    char ack = 0;
    for (int i = 0; i < bw_iters && rank < 2; i++) {
      if (rank == 0) {
        MPI_Send(src, (int)big, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(&ack, 1, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, (int)big, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&ack, 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
      }
    }
    mpi_bw[r] = (double)big * bw_iters / (MPI_Wtime() - t0) / 1e9;
    TRY(td_barrier_all(w));
  }
  if (rank == 0) {
    double tb = median(td_bar, REPS), mb = median(mpi_bar, REPS);
    printf("barrier   ranks=%d  tdist %.2f us  mpi %.2f us  (mpi/tdist %.2fx)\n", n, tb, mb, mb / tb);
    if (n == 2) {
      double tp = median(td_pp, REPS), mp = median(mpi_pp, REPS);
      double tw = median(td_bw, REPS), mw = median(mpi_bw, REPS);
      printf("pingpong  8 B       tdist %.2f us  mpi %.2f us  (mpi/tdist %.2fx)\n", tp, mp, mp / tp);
      printf("bandwidth 4 MiB     tdist %.2f GB/s  mpi %.2f GB/s  (tdist/mpi %.2fx)\n", tw, mw, tw / mw);
    }
  }
  TRY(td_symm_free(team, sig));
  TRY(td_symm_free(team, buf));
  free(src);
  TRY(td_world_finalize(w));
  MPI_Finalize();
  return 0;
}
