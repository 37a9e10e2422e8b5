/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` (tools layer): checks made
 * before a case allocates anything. A case whose sides cannot fit the
 * symmetric heap (or, on cpu, the host's memory) is refused at once with the
 * total, the heap size and the remedy, instead of after seconds of filling
 * full-size operands (or an OOM kill). The sides of a case are alive together
 * (they alternate call by call, bench_ops.c), so their needs add up.
 *
 * The heap figures are lower bounds per rank, measured from the operators'
 * plans on cpu (the MiB/rank column): all_reduce's output plus a staging copy
 * (2 x bytes; one_shot (ranks + 1) x bytes), ag_gemm's gathered A (M x K),
 * gemm_rs's partial C (M x N), gemm_ar's partial and reduced C (2 x M x N;
 * one_shot (ranks + 1) x M x N). auto and fused count at the smallest. To
 * these come what the library takes besides the operands, counted from where
 * it is allocated: per side the executor's control block (td_exec_create's
 * agreement slots, td__agree_block_bytes) and its
 * signal words (one per source rank and chunk of each collective, at most 64
 * chunks per rank and two collectives: 1024 x ranks bytes at most,
 * src/compiler/lower_*.c), each 64-byte aligned; once per case the team's
 * collective control and scratch block (the auto side's broadcast and the
 * baselines: td__coll_block_bytes_max, 4 KiB-aligned). So a heap of the figure the message asks for holds
 * the case; a case refused here could not have run.
 * Also the warning for ranks x workers far beyond the cores. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_ops.h"
#include "coll/coll_internal.h"
#include "core/format.h"
#include "exec/backend.h"

/* Symmetric bytes per rank that side `v` needs at least. */
static double bo_side_heap(td_tp_kind kind, td_tp_variant v, const bo_shape *s, td_dtype dt, int ranks) {
  double es = (double)td_dtype_size(dt), mn = (double)s->m * (double)s->n * es;
  double one_shot = (double)ranks + 1.0;
  switch (kind) {
  case TD_TP_AG_GEMM: return (double)s->m * (double)s->k * es;
  case TD_TP_GEMM_RS: return mn;
  case TD_TP_GEMM_AR: return (v == TD_TP_ONE_SHOT ? one_shot : 2.0) * mn;
  default: return (v == TD_TP_ONE_SHOT ? one_shot : 2.0) * (double)s->count * es;
  }
}

/* Heap bytes a side takes besides its operands: the executor's control
 * block (td__agree_block_bytes) and a bound on its signal words, each rounded
 * up to 64 bytes. */
static double bo_side_extra(int ranks) {
  double control = (double)td__agree_block_bytes(ranks), signals = 1024.0 * ranks;
  return control + 64.0 + signals + 64.0;
}

/* The team's collective control and scratch block (td__coll_block_bytes_max),
 * 4 KiB-aligned (up to 4 KiB of padding before it). */
static double bo_coll_block(int ranks) { return (double)td__coll_block_bytes_max(ranks) + 4096.0; }

/* Host bytes of the operands over all ranks (cpu: ranks are threads of this
 * process): A, B, and one C per side (nsides, the baseline included). */
static double bo_host_operands(td_tp_kind kind, const bo_shape *s, td_dtype dt, int ranks, int nsides) {
  double es = (double)td_dtype_size(dt), m = (double)s->m, n = (double)s->n, k = (double)s->k;
  if (kind == TD_TP_ALL_REDUCE)
    return (1.0 + nsides) * (double)ranks * (double)s->count * es;
  double c = kind == TD_TP_GEMM_AR ? (double)ranks * m * n : m * n; /* gemm_ar: every rank holds all of C */
  return (m * k + k * n + nsides * c) * es;
}

int bo_fit_check(td_tp_kind kind, const bo_shape *s, td_dtype dt, int ranks, int cuda, const td_tp_variant *sides,
                 const char *const *names, int nsides_tdist, int nsides_all, char *msg, size_t cap,
                 double *heap_need, size_t *heap_auto) {
  int64_t heap = 0;
  *heap_need = 0;
  *heap_auto = 0;
  if (td_config_int("TD_SYMM_HEAP_SIZE", &heap) != TD_OK)
    return 0; /* a malformed variable was refused before the first case */
  double need = 0, part[16];
  for (int i = 0; i < nsides_tdist && i < 16; i++)
    need += part[i] = bo_side_heap(kind, sides[i], s, dt, ranks) + bo_side_extra(ranks);
  double coll = bo_coll_block(ranks);
  need += coll;
  /* The suggestion in whole MiB, so that it reads as a TD_SYMM_HEAP_SIZE value. */
  double ask = ceil(need / 1048576.0);
  *heap_need = need;
  char hn[32], hh[32];
  td__format_bytes(need, hn, sizeof hn);
  td__format_bytes((double)heap, hh, sizeof hh);
  const char *hv = getenv("TD_SYMM_HEAP_SIZE");
  if (need > (double)heap && !cuda && (!hv || !*hv) && ask * 1048576.0 <= BO_AUTO_HEAP_MAX) {
    /* nobody chose a heap: the case gets the one it needs (device heaps are
     * left to the user, as the GPU's memory is not known here) */
    *heap_auto = (size_t)ask * 1048576u;
  } else if (need > (double)heap) {
    size_t off = (size_t)snprintf(msg, cap, "not run: the %d tdist side%s of this case need at least %.0f bytes "
                                  "(%s) of symmetric heap per rank together (",
                                  nsides_tdist, nsides_tdist == 1 ? "" : "s", need, hn);
    for (int i = 0; i < nsides_tdist && i < 16 && off < cap; i++) {
      char p[32];
      td__format_bytes(part[i], p, sizeof p);
      off += (size_t)snprintf(msg + off, cap - off, "%s%s %s", i ? ", " : "", names[i], p);
    }
    char cb[32];
    td__format_bytes(coll, cb, sizeof cb);
    if (off < cap)
      off += (size_t)snprintf(msg + off, cap - off, ", the team's collective block %s; the sides are alive "
                              "together, as they alternate call by call) but TD_SYMM_HEAP_SIZE is %lld bytes (%s); ",
                              cb, (long long)heap, hh);
    if (off < cap && ask > 1048576.0) /* the config's largest heap is 1024G */
      snprintf(msg + off, cap - off, "that is more than the largest heap TD_SYMM_HEAP_SIZE allows (1024G): run fewer "
               "sides (--variants none: baseline and auto only) or a smaller case");
    else if (off < cap)
      snprintf(msg + off, cap - off, "set TD_SYMM_HEAP_SIZE=%.0fM (or more), run fewer sides (--variants none: "
               "baseline and auto only) or a smaller case", ask);
    return 1;
  }
  if (cuda)
    return 0; /* operands are device memory: the heap check above is the one known before allocating */
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  double host = bo_host_operands(kind, s, dt, ranks, nsides_all) + (double)ranks * need;
  double phys = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
  if (phys > 0 && host > phys) {
    char hb[32], pb[32];
    td__format_bytes(host, hb, sizeof hb);
    td__format_bytes(phys, pb, sizeof pb);
    snprintf(msg, cap, "not run: on cpu the %d ranks' operands (A, B and one C per side, %d sides) and symmetric "
             "heaps need at least %.0f bytes (%s) of host memory together, but this machine has %.0f bytes (%s); "
             "run a smaller case, fewer ranks or fewer sides (--variants none)",
             ranks, nsides_all, host, hb, phys, pb);
    return 1;
  }
  return 0;
}

void bo_oversub_warn(const char *cmd, int cuda, int ranks, int compute, int comm) {
  if (cuda)
    return; /* cuda workers are SM shares, not threads */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1)
    cores = 1;
  int64_t v = 0;
  if (!compute) /* what the CPU executor chooses (cpu_exec.c): the variable, else cores / ranks */
    compute = td_config_int("TD_CPU_COMPUTE_WORKERS", &v) == TD_OK && v > 0 ? (int)v
              : cores / ranks > 1                                          ? (int)(cores / ranks)
                                                                           : 1;
  if (!comm)
    comm = td_config_int("TD_CPU_COMM_WORKERS", &v) == TD_OK && v > 0 ? (int)v : 1;
  long threads = (long)ranks * (compute + comm);
  if (threads > BO_OVERSUB_FACTOR * cores)
    fprintf(stderr, "%s: note: %d ranks x %d workers (%d compute + %d comm) = %ld threads on %ld cores (%ldx "
            "oversubscribed): comm workers share cores with compute workers, so every call is slow and "
            "hidden communication still costs CPU time; lower --ranks or the worker counts\n",
            cmd, ranks, compute + comm, compute, comm, threads, cores, threads / cores);
}
