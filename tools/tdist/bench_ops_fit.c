/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` (tools layer): checks made
 * before any case allocates anything. A case whose sides cannot fit the
 * symmetric heap, the largest heap there is, or this machine (on cpu the
 * host's memory, on cuda each rank's share of its GPU) is refused with the
 * total, the limit and the remedies that apply here, instead of after
 * seconds of filling full-size operands (or an OOM kill); bench_ops.c makes
 * that a usage error before the first case runs. The sides of a case are
 * alive together (they alternate call by call, bench_ops.c), so their needs
 * add up.
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
 * Also the warning for ranks x workers far beyond the cores, and the host
 * memory limit itself (bo_host_memory), which `tdist bench exec` checks its
 * one GEMM against too. */
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

/* The largest heap TD_SYMM_HEAP_SIZE accepts (src/core/config.c): 1 TiB. */
#define BO_HEAP_MAX ((double)(1ull << 40))
#define BO_MIB 1048576.0
enum { BO_FIT_SIDES = 16 };

/* What a case needs: per rank on the symmetric heap, and its operands. */
typedef struct bo_need {
  double part[BO_FIT_SIDES]; /* each tdist side's symmetric bytes per rank, its executor's blocks included */
  double coll;               /* the team's collective block */
  double heap;               /* symmetric bytes per rank: the parts and coll */
  double host;               /* cpu: every rank's operands and heap */
  double device;             /* cuda: one rank's share of the operands, and its heap */
} bo_need;

static void bo_need_of(td_tp_kind kind, const bo_shape *s, td_dtype dt, int ranks, const td_tp_variant *sides,
                       int nsides_tdist, int nsides_all, bo_need *n) {
  memset(n, 0, sizeof *n);
  for (int i = 0; i < nsides_tdist && i < BO_FIT_SIDES; i++)
    n->heap += n->part[i] = bo_side_heap(kind, sides[i], s, dt, ranks) + bo_side_extra(ranks);
  n->coll = bo_coll_block(ranks);
  n->heap += n->coll;
  double operands = bo_host_operands(kind, s, dt, ranks, nsides_all);
  n->host = operands + (double)ranks * n->heap;
  n->device = operands / ranks + n->heap;
}

/* The limits a case meets on this machine. */
typedef struct bo_limits {
  int cuda;
  double heap;     /* the heap every rank gets: TD_SYMM_HEAP_SIZE, or its default */
  int heap_set;    /* TD_SYMM_HEAP_SIZE set (and not empty): the user chose it */
  double host;     /* cpu: host memory (TD_RUN_HOST_MEMORY, else physical; 0 unknown) */
  int host_config; /* host is TD_RUN_HOST_MEMORY's */
  double device;   /* cuda: a rank's share of its GPU (0 unknown) */
} bo_limits;

/* Whether the bench gives the case the heap it needs by itself (cpu, no heap chosen, at most BO_AUTO_HEAP_MAX). */
static int bo_auto_heap(const bo_need *n, const bo_limits *l) {
  return !l->cuda && !l->heap_set && ceil(n->heap / BO_MIB) * BO_MIB <= BO_AUTO_HEAP_MAX;
}

/* Whether a need can fit this machine at all, given a heap as large as it needs. */
static int bo_fits_here(const bo_need *n, const bo_limits *l) {
  if (n->heap > BO_HEAP_MAX)
    return 0;
  if (l->cuda)
    return !l->device || n->device <= l->device;
  return !l->host || n->host <= l->host;
}

/* ... and with the heap it would get now. */
static int bo_fits_now(const bo_need *n, const bo_limits *l) {
  return bo_fits_here(n, l) && (n->heap <= l->heap || bo_auto_heap(n, l));
}

/* A size for --sizes: whole MiB (or KiB, or bytes) rounded down, a multiple of es. */
static void bo_size_text(double bytes, size_t es, char *buf, size_t cap) {
  size_t b = (size_t)bytes;
  if (b >= ((size_t)1 << 20) && ((size_t)1 << 20) % es == 0)
    snprintf(buf, cap, "%zuM", b >> 20);
  else if (b >= 1024 && 1024 % es == 0)
    snprintf(buf, cap, "%zuK", b >> 10);
  else
    snprintf(buf, cap, "%zu", b - b % es);
}

double bo_host_memory(int *from_config) {
  int64_t v = 0;
  const char *mv = getenv("TD_RUN_HOST_MEMORY");
  *from_config = 0;
  if (mv && *mv && td_config_int("TD_RUN_HOST_MEMORY", &v) == TD_OK && v > 0) {
    *from_config = 1; /* a smaller budget for a shared machine, as tdist run takes it */
    return (double)v;
  }
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  return pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
}

int bo_fit_check(td_tp_kind kind, const bo_shape *s, td_dtype dt, int ranks, int cuda, const td_tp_variant *sides,
                 const char *const *names, int nsides_tdist, int nsides_all, char *msg, size_t cap, bo_fit *fit) {
  memset(fit, 0, sizeof *fit);
  int64_t heap = 0;
  if (td_config_int("TD_SYMM_HEAP_SIZE", &heap) != TD_OK)
    return 0; /* a malformed variable was refused before the first case */
  const char *hv = getenv("TD_SYMM_HEAP_SIZE");
  bo_limits l = {.cuda = cuda, .heap = (double)heap, .heap_set = hv && *hv};
  l.host = bo_host_memory(&l.host_config);
  if (cuda)
    l.device = bo_device_capacity(cuda, ranks);
  bo_need n;
  bo_need_of(kind, s, dt, ranks, sides, nsides_tdist, nsides_all, &n);
  fit->heap_need = n.heap;
  /* A heap suggestion in whole MiB, so that it reads as a TD_SYMM_HEAP_SIZE value. */
  double ask = ceil(n.heap / BO_MIB) * BO_MIB;
  int here = bo_fits_here(&n, &l);
  if (here && n.heap <= l.heap)
    return 0;
  if (here && bo_auto_heap(&n, &l)) { /* nobody chose a heap: the case gets the one it needs */
    fit->heap_auto = (size_t)ask;
    return 0;
  }
  if (here)
    fit->heap_ask = ask;

  /* What the case needs on the heap: the sides' parts and the team's block. */
  char hn[32], cb[32];
  td__format_bytes(n.heap, hn, sizeof hn);
  td__format_bytes(n.coll, cb, sizeof cb);
  size_t off;
  if (nsides_tdist == 1)
    off = (size_t)snprintf(msg, cap, "the case's one tdist side (%s) needs at least %.0f bytes (%s) of symmetric "
                           "heap per rank (", names[0], n.heap, hn);
  else
    off = (size_t)snprintf(msg, cap, "the %d tdist sides of this case need at least %.0f bytes (%s) of symmetric "
                           "heap per rank together (", nsides_tdist, n.heap, hn);
  for (int i = 0; i < nsides_tdist && i < BO_FIT_SIDES && off < cap; i++) {
    char p[32];
    td__format_bytes(n.part[i], p, sizeof p);
    off += (size_t)snprintf(msg + off, cap - off, "%s%s %s", i ? ", " : "", names[i], p);
  }
  if (off < cap)
    off += (size_t)snprintf(msg + off, cap - off, ", the team's collective block %s%s)", cb,
                            nsides_tdist > 1 ? "; the sides are alive together, as they alternate call by call" : "");

  /* The limit, and whether anything but a smaller case can help. */
  if (off >= cap) {
  } else if (n.heap > BO_HEAP_MAX) {
    off += (size_t)snprintf(msg + off, cap - off, ", more than the largest heap TD_SYMM_HEAP_SIZE allows (1024G): "
                            "no heap can hold it");
  } else if (!here && !cuda) {
    char hb[32], pb[32];
    td__format_bytes(n.host, hb, sizeof hb);
    td__format_bytes(l.host, pb, sizeof pb);
    off += (size_t)snprintf(msg + off, cap - off, "; on cpu the %d ranks' buffers (%s per side, %d sides) and "
                            "these heaps need at least %.0f bytes (%s) of host memory together, but %s %.0f bytes "
                            "(%s): the case cannot fit here", ranks,
                            kind == TD_TP_ALL_REDUCE ? "the input and one output" : "A, B and one C", nsides_all,
                            n.host, hb, l.host_config ? "TD_RUN_HOST_MEMORY allows" : "this machine has", l.host,
                            pb);
  } else if (!here) {
    char db[32], gb[32];
    td__format_bytes(n.device, db, sizeof db);
    td__format_bytes(l.device, gb, sizeof gb);
    off += (size_t)snprintf(msg + off, cap - off, "; with its share of the operands each rank needs at least %.0f "
                            "bytes (%s) of GPU memory, but it has %.0f bytes (%s), its share of its GPU: the case "
                            "cannot fit on these GPUs", n.device, db, l.device, gb);
  } else {
    char hh[32];
    td__format_bytes(l.heap, hh, sizeof hh);
    off += (size_t)snprintf(msg + off, cap - off, ", but %s %.0f bytes (%s)%s", l.heap_set ? "TD_SYMM_HEAP_SIZE is"
                            : "the default heap (TD_SYMM_HEAP_SIZE unset) is", l.heap, hh,
                            !l.heap_set && !cuda ? " and the bench sizes a heap itself only up to 2 GiB" : "");
  }

  /* The remedies that apply here, and only those. */
  char rem[4][200];
  int nr = 0;
  if (here)
    snprintf(rem[nr++], sizeof rem[0], "set TD_SYMM_HEAP_SIZE=%.0fM (or more)", ask / BO_MIB);
  if (nsides_tdist > 1) { /* auto alone: the baseline (and the other outside sides) and auto */
    bo_need a;
    bo_need_of(kind, s, dt, ranks, sides, 1, nsides_all - (nsides_tdist - 1), &a);
    if (bo_fits_now(&a, &l))
      snprintf(rem[nr++], sizeof rem[0], "run fewer sides (--variants none: the baseline and auto only)");
    else if (bo_fits_here(&a, &l))
      snprintf(rem[nr++], sizeof rem[0], "run fewer sides (--variants none: the baseline and auto only) with "
               "TD_SYMM_HEAP_SIZE=%.0fM", ceil(a.heap / BO_MIB));
  }
  for (int r = ranks - 1; r >= 1; r--) { /* the most ranks that fit as things are */
    bo_need f;
    bo_need_of(kind, s, dt, r, sides, nsides_tdist, nsides_all, &f);
    if (bo_fits_now(&f, &l)) {
      snprintf(rem[nr++], sizeof rem[0], "run fewer ranks (--ranks %d fits)", r);
      break;
    }
  }
  if (kind == TD_TP_ALL_REDUCE) { /* the largest size that fits as things are, by bisection (the need grows with it) */
    size_t es = td_dtype_size(dt), lo = 0, hi = s->count;
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      bo_shape t = *s;
      t.count = mid;
      bo_need f;
      bo_need_of(kind, &t, dt, ranks, sides, nsides_tdist, nsides_all, &f);
      if (bo_fits_now(&f, &l))
        lo = mid;
      else
        hi = mid;
    }
    if (lo > 0) {
      char sz[32];
      bo_size_text((double)lo * (double)es, es, sz, sizeof sz);
      snprintf(rem[nr++], sizeof rem[0], "give a smaller size (at most %s fits with these sides and ranks)", sz);
    }
  } else {
    snprintf(rem[nr++], sizeof rem[0], "run a smaller case (M, N or K)");
  }
  for (int i = 0; i < nr && off < cap; i++)
    off += (size_t)snprintf(msg + off, cap - off, "%s%s", i == 0 ? "; " : i == nr - 1 ? " or " : ", ", rem[i]);
  return 1;
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
