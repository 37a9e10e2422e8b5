/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` (tools layer): the
 * tensor-parallel operators of ops.h against the sequential baseline, side by
 * side in one run, same inputs. Ranks are threads of a local world (on cuda
 * they share the GPU, so the figures measure correctness and overhead, not
 * interconnect speed). Sides: the baseline (bench_ops_base.c), tdist with
 * the variant the perf model picks (auto), and each forced variant. Every
 * call starts after a team barrier; a call's time is the slowest rank's;
 * sides alternate call by call so drift hits all alike; the report gives p50
 * and p99 per side, TFLOP/s (all_reduce: algorithm bandwidth, bytes / time),
 * speedup over the baseline, the memory each side
 * adds, and the largest difference between its C and the baseline's on a
 * sample of rows. Output: a markdown table and, with --json, a cJSON file
 * with the environment. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli_common.h"
#include "core/suggest.h"
#include "cli_options.h"
#include "out_check.h"
#include "bench.h"
#include "bench_ops.h"

enum { BO_MAX_SIDES = 10, BO_MAX_SHAPES = 64, BO_SAMPLE_ROWS = 24 };
#define BO_MAX_SIZE_BYTES ((size_t)1 << 39) /* --sizes item: half the largest heap */

typedef struct bo_opts {
  td_tp_kind kind;
  int cuda, ranks, iters, warmup, chunks, compute_workers, comm_workers;
  td_dtype dt;
  const char *json, *models, *variants;
  long long ms[BO_MAX_SHAPES]; /* M of each model row (--m) */
  int nms;
  int64_t m, n, k;
  const char *sizes;
  int no_base_note; /* 1: no baseline exists for this backend and dtype (said once above the table) */
} bo_opts;

typedef struct bo_side {
  char name[32];
  td_tp_variant forced; /* TD_TP_AUTO for auto; -1 for a side from outside tdist */
  td_tp_variant ran;
  char schedule[160]; /* td_tp_schedule of rank 0's operator */
  int created; /* a tdist side: its operator was made (else its variant shows as forced, or '-' for auto) */
  int mode;    /* -1: a tdist side; else the bo_base_mode of a side from outside tdist (the first sides) */
  int skipped; /* an outside side that does not apply here (reason in msg): not a failure */
  int ok;
  char msg[2048]; /* whole: the library's messages run to ~2 KiB and end with the remedy */
  double p50, p99, max_rel_diff;
  size_t mem_bytes; /* added by this side on rank 0's view (cuda: whole device / ranks) */
} bo_side;

typedef struct bo_case {
  const bo_opts *o;
  bo_shape s;
  int nsides;
  bo_side side[BO_MAX_SIDES];
  double *t; /* [side][iter][rank] seconds */
  double diff[BO_MAX_SIDES][64]; /* [side][rank] largest relative difference from the reference side */
  int fatal;
  char msg[2048];
} bo_case;

static double bo_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bo_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static td_status bo_create(const bo_case *bc, td_team *t, td_tp_variant v, td_tp_op **op) {
  const bo_opts *o = bc->o;
  td_tp_opts to;
  td_tp_opts_init(&to);
  to.backend = o->cuda ? TD_EXEC_CUDA : TD_EXEC_CPU;
  to.variant = v;
  to.chunks_per_rank = o->chunks;
  to.compute_workers = o->compute_workers;
  to.comm_workers = o->comm_workers;
  switch (o->kind) {
  case TD_TP_AG_GEMM: return td_ag_gemm_create(t, bc->s.m, bc->s.n, bc->s.k, o->dt, &to, op);
  case TD_TP_GEMM_RS: return td_gemm_rs_create(t, bc->s.m, bc->s.n, bc->s.k, o->dt, &to, op);
  case TD_TP_GEMM_AR: return td_gemm_ar_create(t, bc->s.m, bc->s.n, bc->s.k, o->dt, &to, op);
  default: return td_ll_all_reduce_create(t, bc->s.count, o->dt, &to, op);
  }
}

static td_status bo_call(td_tp_kind kind, td_tp_op *op, void *c, const void *a, const void *b) {
  switch (kind) {
  case TD_TP_AG_GEMM: return td_ag_gemm(op, c, a, b);
  case TD_TP_GEMM_RS: return td_gemm_rs(op, c, a, b);
  case TD_TP_GEMM_AR: return td_gemm_ar(op, c, a, b);
  default: return td_ll_all_reduce(op, c, a);
  }
}

/* Largest |x - y| / max |y| over a sample of C's rows (y = the baseline). */
static double bo_diff(const bo_case *bc, const td_tp_layout *lc, const void *x, const void *y) {
  const bo_opts *o = bc->o;
  td_dtype dt = o->dt;
  int64_t rows = lc->rows < BO_SAMPLE_ROWS ? lc->rows : BO_SAMPLE_ROWS;
  size_t n = (size_t)lc->cols, es = td_dtype_size(dt);
  char *hx = malloc(n * es + 1), *hy = malloc(n * es + 1);
  double err = 0, ref = 1e-30;
  for (int64_t i = 0; hx && hy && i < rows; i++) {
    int64_t row = rows > 1 ? i * (lc->rows - 1) / (rows - 1) : 0;
    if (bo_rows_to_host(o->cuda, hx, x, row, 1, lc->cols, lc->ld, dt) ||
        bo_rows_to_host(o->cuda, hy, y, row, 1, lc->cols, lc->ld, dt)) {
      err = INFINITY;
      break;
    }
    for (size_t j = 0; j < n; j++) {
      double a = dt == TD_F32 ? ((float *)hx)[j] : dt == TD_BF16 ? td_bf16_to_f32(((uint16_t *)hx)[j])
                                                                  : td_f16_to_f32(((uint16_t *)hx)[j]);
      double b = dt == TD_F32 ? ((float *)hy)[j] : dt == TD_BF16 ? td_bf16_to_f32(((uint16_t *)hy)[j])
                                                                  : td_f16_to_f32(((uint16_t *)hy)[j]);
      if (fabs(b) > ref)
        ref = fabs(b);
      double e = isnan(a) || isnan(b) ? INFINITY : fabs(a - b);
      if (e > err)
        err = e;
    }
  }
  free(hx);
  free(hy);
  return err / ref;
}

/* The sides from outside tdist come first; the first tdist side (auto) follows them. */
static int bo_first_tdist(const bo_case *bc) {
  int s = 0;
  while (s < bc->nsides - 1 && bc->side[s].mode >= 0)
    s++;
  return s;
}

static td_status bo_rank(td_world *w, int rank, void *arg) {
  bo_case *bc = arg;
  const bo_opts *o = bc->o;
  td_team *t = td_world_team(w);
  int n = td_world_size(w), ns = bc->nsides;
  if (bo_set_device(o->cuda, rank)) {
    if (rank == 0)
      snprintf(bc->msg, sizeof bc->msg, "no usable CUDA device for rank %d", rank);
    __atomic_store_n(&bc->fatal, 1, __ATOMIC_RELAXED); /* any rank may: read after the ranks joined */
    return TD_ERR_CUDA;
  }
  td_tp_op *op[BO_MAX_SIDES] = {0};
  void *c[BO_MAX_SIDES] = {0};
  bo_base *base[BO_MAX_SIDES] = {0}; /* the sides from outside tdist */
  td_status st = TD_OK;
  /* The team's one-time collective block (control and scratch, allocated by
   * its first collective) would otherwise be charged to the first side
   * created: one tiny collective allocates it before anything is measured. */
  float warm = 1.0f;
  if (td_all_reduce(t, &warm, &warm, 1, TD_F32, TD_SUM) != TD_OK) {
    if (rank == 0)
      snprintf(bc->msg, sizeof bc->msg, "the team's first collective failed: %s", td_last_error());
    __atomic_store_n(&bc->fatal, 1, __ATOMIC_RELAXED);
    return TD_ERR_STATE;
  }
  /* Sides are created one at a time between barriers, so rank 0 can read the memory each adds. */
  for (int s = 1; s < ns; s++) {
    if (bc->side[s].mode >= 0)
      continue;
    size_t before = 0;
    if (td_team_sync(t) != TD_OK)
      return TD_ERR_TIMEOUT;
    if (rank == 0)
      before = bo_mem_used(o->cuda, w);
    td_status cs = bo_create(bc, t, bc->side[s].forced, &op[s]);
    if (cs != TD_OK && rank == 0) {
      bc->side[s].ok = 0;
      snprintf(bc->side[s].msg, sizeof bc->side[s].msg, "%s: %s", td_status_name(cs), td_last_error());
    }
    if (td_team_sync(t) != TD_OK)
      return TD_ERR_TIMEOUT;
    if (rank == 0 && cs == TD_ERR_HEAP_EXHAUSTED) {
      /* The sides share one heap (alive together, alternating call by call):
       * say what the earlier ones hold, or a side that fits alone reads as a
       * contradiction of the row above it. Read between the barriers, where
       * no rank allocates (as bo_mem_used below). */
      size_t held = 0, heap = 0, n0 = strlen(bc->side[s].msg);
      td_symm_usage(w, &held, &heap);
      snprintf(bc->side[s].msg + n0, sizeof bc->side[s].msg - n0, " (the sides made before this one hold %zu "
               "of the heap's %zu bytes on this rank: a case's sides are alive together, as they alternate call "
               "by call)", held, heap);
    }
    if (rank == 0 && cs == TD_OK) {
      size_t after = bo_mem_used(o->cuda, w);
      bc->side[s].mem_bytes = after > before ? (after - before) / (o->cuda ? (size_t)n : 1) : 0;
      td_tp_choices(op[s], &bc->side[s].ran, NULL, NULL, NULL);
      td_tp_schedule(op[s], bc->side[s].schedule, sizeof bc->side[s].schedule);
      bc->side[s].created = 1;
    }
  }
  const td_tp_op *lay = NULL;
  for (int s = 1; s < ns && !lay; s++)
    lay = op[s];
  td_tp_layout la, lb, lc;
  void *a = NULL, *b = NULL;
  if (!lay) {
    st = TD_ERR_INVALID_ARG;
    if (rank == 0) {
      snprintf(bc->msg, sizeof bc->msg, "no tdist side could be created (see their rows)");
      bc->side[0].ok = 0; /* the baseline takes its operand layouts from a tdist side */
      snprintf(bc->side[0].msg, sizeof bc->side[0].msg, "not run: it needs a tdist side's operand layouts and "
               "none could be created");
    }
  } else {
    td_tp_operand(lay, TD_TP_A, rank, &la);
    td_tp_operand(lay, TD_TP_B, rank, &lb);
    td_tp_operand(lay, TD_TP_C, rank, &lc);
    a = bo_alloc(o->cuda, la.bytes);
    b = bo_alloc(o->cuda, lb.bytes);
    for (int s = 0; s < ns; s++)
      c[s] = bo_alloc(o->cuda, lc.bytes);
    int bad = !a || !b;
    for (int s = 0; s < ns; s++)
      bad |= !c[s];
    /* Weights scaled by 1/sqrt(K) keep C around 1 whatever the shape. */
    double bscale = o->kind == TD_TP_ALL_REDUCE ? 1.0 : 1.0 / sqrt((double)bc->s.k);
    if (bad || bo_fill(o->cuda, a, la.bytes, o->dt, 17 + (uint64_t)rank, 1.0) ||
        (lb.bytes && bo_fill(o->cuda, b, lb.bytes, o->dt, 1000 + (uint64_t)rank, bscale)))
      st = TD_ERR_NO_MEMORY;
  }
  char msg[2048] = "";
  for (int s = 0; s < ns && st == TD_OK; s++) {
    if (bc->side[s].mode < 0)
      continue;
    size_t before = 0;
    td_team_sync(t);
    if (rank == 0)
      before = bo_mem_used(o->cuda, w);
    int rc = bo_base_create(o->cuda, (bo_base_mode)bc->side[s].mode, o->kind, &bc->s, o->dt, t, lay, a, b, c[s],
                            &base[s], msg, sizeof msg);
    td_team_sync(t);
    if (rank == 0) {
      bc->side[s].ok = rc == 0;
      bc->side[s].skipped = rc == 1; /* decided alike on every rank */
      if (rc)
        snprintf(bc->side[s].msg, sizeof bc->side[s].msg, "%s", msg);
      else {
        size_t after = bo_mem_used(o->cuda, w);
        bc->side[s].mem_bytes = after > before ? (after - before) / (o->cuda ? (size_t)n : 1) : 0;
      }
    }
  }
  /* Warm-up, then timed calls; sides alternate call by call. Every rank knows
   * which sides exist from the op handles (created collectively). */
  int total = o->warmup + o->iters;
  for (int it = 0; it < total && st == TD_OK; it++)
    for (int s = 0; s < ns && st == TD_OK; s++) {
      int outside = bc->side[s].mode >= 0;
      if (outside ? !base[s] : !op[s])
        continue;
      st = td_team_sync(t);
      double t0 = bo_now();
      if (st == TD_OK && outside)
        st = bo_base_run(base[s], msg, sizeof msg) ? TD_ERR_INTERNAL : TD_OK;
      else if (st == TD_OK)
        st = bo_call(o->kind, op[s], c[s], a, b);
      double dt = bo_now() - t0;
      if (it >= o->warmup)
        bc->t[((size_t)s * (size_t)o->iters + (size_t)(it - o->warmup)) * (size_t)n + (size_t)rank] = dt;
      if (s > 0 && bc->side[s].forced == TD_TP_FUSED) {
        /* the fused side is new: when it fails on any rank it is dropped (all
         * ranks agree) and the other sides go on */
        int32_t bad = st != TD_OK, any = 0;
        char fm[2048] = "";
        if (bad)
          snprintf(fm, sizeof fm, "%s", td_last_error());
        if (td_all_reduce(t, &any, &bad, 1, TD_I32, TD_MAX) == TD_OK && any) {
          if (rank == 0) {
            bc->side[s].ok = 0;
            snprintf(bc->side[s].msg, sizeof bc->side[s].msg, "%s", bad ? fm : "failed on another rank");
          }
          td_tp_destroy(op[s]);
          op[s] = NULL;
          st = TD_OK;
        }
      }
      if (st != TD_OK && rank == 0)
        snprintf(bc->msg, sizeof bc->msg, "side %s: %s", bc->side[s].name, outside ? msg : td_last_error());
    }
  /* Compare each side's C with the baseline's (or with auto's when there is
   * no baseline); gemm only computes no operator result. */
  int refside = base[0] ? 0 : bo_first_tdist(bc);
  for (int s = 1; s < ns && st == TD_OK; s++) {
    int outside = bc->side[s].mode >= 0;
    if (s == refside || (outside ? !base[s] || bc->side[s].mode == BO_BASE_GEMM : !op[s]))
      continue;
    bc->diff[s][rank] = bo_diff(bc, &lc, c[s], c[refside]);
  }
  td_team_sync(t);
  for (int s = 0; s < ns; s++)
    bo_base_destroy(base[s]);
  for (int s = 1; s < ns; s++)
    td_tp_destroy(op[s]);
  for (int s = 0; s < ns; s++)
    bo_free(o->cuda, c[s]);
  bo_free(o->cuda, a);
  bo_free(o->cuda, b);
  if (st != TD_OK)
    __atomic_store_n(&bc->fatal, 1, __ATOMIC_RELAXED); /* any rank may: read after the ranks joined */
  return st;
}

static void bo_add_side(bo_case *bc, const char *name, td_tp_variant v) {
  bo_side *s = &bc->side[bc->nsides++];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->forced = v;
  s->mode = -1;
  s->ok = 1;
}

static void bo_add_outside(bo_case *bc, bo_base_mode mode) {
  bo_add_side(bc, bo_base_mode_name(mode), (td_tp_variant)-1);
  bc->side[bc->nsides - 1].mode = (int)mode;
}

static double bo_flops(const bo_opts *o, const bo_shape *s) {
  return o->kind == TD_TP_ALL_REDUCE ? 0.0 : 2.0 * (double)s->m * (double)s->n * (double)s->k;
}

/* A case's sides: the baseline (and on cuda NCCL + cuBLAS, and its GEMM
 * alone), tdist auto, then each variant of --variants. */
static void bo_case_sides(bo_case *bc) {
  const bo_opts *o = bc->o;
  bo_add_outside(bc, BO_BASE_SEQ);
  if (o->cuda) { /* NCCL + cuBLAS (skipped with the reason when ranks share a GPU), and its GEMM alone */
    bo_add_outside(bc, BO_BASE_NCCL);
    if (o->kind != TD_TP_ALL_REDUCE)
      bo_add_outside(bc, BO_BASE_GEMM);
  }
  bo_add_side(bc, "tdist auto", TD_TP_AUTO);
  char list[160];
  snprintf(list, sizeof list, "%s", o->variants);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && bc->nsides < BO_MAX_SIDES;
       tok = strtok_r(NULL, ",", &save)) {
    td_tp_variant v;
    if (td_tp_variant_parse(tok, &v) == TD_OK && v != TD_TP_AUTO) {
      char nm[32];
      snprintf(nm, sizeof nm, "tdist %s", tok);
      bo_add_side(bc, nm, v);
    }
  }
}

/* bo_fit_check for a case whose sides are set (bo_case_sides). */
static int bo_case_fit(const bo_case *bc, char *msg, size_t cap, bo_fit *fit) {
  const bo_opts *o = bc->o;
  td_tp_variant tv[BO_MAX_SIDES];
  const char *tn[BO_MAX_SIDES];
  int ntd = 0;
  for (int s = 0; s < bc->nsides; s++)
    if (bc->side[s].mode < 0)
      tv[ntd] = bc->side[s].forced, tn[ntd++] = bc->side[s].name;
  return bo_fit_check(o->kind, &bc->s, o->dt, o->ranks, o->cuda, tv, tn, ntd, bc->nsides, msg, cap, fit);
}

static int bo_run_case(const bo_opts *o, const bo_shape *shape, cJSON *results) {
  bo_case bc;
  memset(&bc, 0, sizeof bc);
  bc.o = o;
  bc.s = *shape;
  bo_case_sides(&bc);
  bc.t = calloc((size_t)bc.nsides * (size_t)o->iters * (size_t)o->ranks, sizeof *bc.t);
  if (!bc.t)
    return 1;
  /* Every case was checked before the first ran (bo_cases_fit: one that
   * cannot fit is a usage error); checked again here for the heap the case's
   * world gets, and so that no case can reach the allocations without it. */
  td_status st = TD_OK;
  bo_fit fit;
  char why[sizeof bc.msg - 16];
  int refused = bo_case_fit(&bc, why, sizeof why, &fit);
  double heap_need = fit.heap_need;
  size_t heap_auto = fit.heap_auto;
  if (refused)
    snprintf(bc.msg, sizeof bc.msg, "not run: %s", why);
  if (refused) {
    st = TD_ERR_NO_MEMORY;
    for (int s = 0; s < bc.nsides; s++)
      bc.side[s].ok = 0;
  } else {
    td_world_opts wo;
    td_world_opts_init(&wo);
    if (heap_auto) {
      wo.heap_size = heap_auto;
      fprintf(stderr, "tdist bench: TD_SYMM_HEAP_SIZE is unset and this case's sides need %.0f bytes of symmetric "
              "heap per rank, more than the default heap: its ranks get %zuM each\n", heap_need,
              heap_auto >> 20);
    }
    st = td_local_world_run(o->ranks, &wo, bo_rank, &bc);
  }
  for (int s = 0; s < bc.nsides; s++)
    for (int r = 0; r < o->ranks; r++)
      if (!(bc.diff[s][r] <= bc.side[s].max_rel_diff)) /* NaN counts */
        bc.side[s].max_rel_diff = bc.diff[s][r];
  double *per = malloc(sizeof(double) * (size_t)o->iters);
  for (int s = 0; s < bc.nsides && per; s++) {
    for (int it = 0; it < o->iters; it++) {
      per[it] = 0;
      for (int r = 0; r < o->ranks; r++) {
        double v = bc.t[((size_t)s * (size_t)o->iters + (size_t)it) * (size_t)o->ranks + (size_t)r];
        per[it] = v > per[it] ? v : per[it];
      }
    }
    qsort(per, (size_t)o->iters, sizeof *per, bo_cmp);
    bc.side[s].p50 = per[o->iters / 2];
    bc.side[s].p99 = per[(int)ceil(0.99 * (o->iters - 1))];
  }
  free(per);
  double flops = bo_flops(o, &bc.s), base50 = bc.side[0].ok ? bc.side[0].p50 : 0, nccl50 = 0, gemm50 = 0;
  for (int s = 0; s < bc.nsides; s++) {
    if (bc.side[s].mode == BO_BASE_NCCL && bc.side[s].ok && st == TD_OK)
      nccl50 = bc.side[s].p50;
    if (bc.side[s].mode == BO_BASE_GEMM && bc.side[s].ok && st == TD_OK)
      gemm50 = bc.side[s].p50;
  }
  cJSON *jc = cJSON_CreateObject();
  cJSON_AddStringToObject(jc, "case", bc.s.name);
  if (o->kind == TD_TP_ALL_REDUCE) {
    cJSON_AddNumberToObject(jc, "count", (double)bc.s.count);
    cJSON_AddNumberToObject(jc, "bytes", (double)(bc.s.count * td_dtype_size(o->dt)));
  } else {
    cJSON_AddNumberToObject(jc, "M", (double)bc.s.m);
    cJSON_AddNumberToObject(jc, "N", (double)bc.s.n);
    cJSON_AddNumberToObject(jc, "K", (double)bc.s.k);
  }
  if (st != TD_OK)
    cJSON_AddStringToObject(jc, "error", bc.msg[0] ? bc.msg : td_last_error());
  { /* the sides are alive together: what the case holds per rank is their sum */
    double all = 0;
    for (int s = 0; s < bc.nsides; s++)
      all += (double)bc.side[s].mem_bytes;
    if (refused) /* nothing was made, so nothing held: null, not a 0 beside a message naming gigabytes */
      cJSON_AddNullToObject(jc, "memory_bytes_all_sides_per_rank");
    else
      cJSON_AddNumberToObject(jc, "memory_bytes_all_sides_per_rank", all);
    if (heap_need > 0) /* the estimate the refusal is based on (operands, executors, the team's block) */
      cJSON_AddNumberToObject(jc, "heap_bytes_needed_per_rank", heap_need);
    if (heap_auto) /* the heap the bench chose for the case, TD_SYMM_HEAP_SIZE being unset */
      cJSON_AddNumberToObject(jc, "heap_bytes_per_rank_auto", (double)heap_auto);
  }
  cJSON *js = cJSON_AddArrayToObject(jc, "sides");
  for (int s = 0; s < bc.nsides; s++) {
    bo_side *sd = &bc.side[s];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "side", sd->name);
    int outside = sd->mode >= 0, gemm_only = sd->mode == BO_BASE_GEMM;
    /* A tdist side never created ran nothing: its forced variant, or '-' for auto (not "auto"). */
    const char *variant = outside         ? bo_base_mode_variant((bo_base_mode)sd->mode)
                          : sd->created   ? td_tp_variant_name(sd->ran)
                          : sd->forced > 0 ? td_tp_variant_name(sd->forced)
                                           : "-";
    cJSON_AddStringToObject(j, "variant", !outside ? variant
                                          : sd->mode == BO_BASE_NCCL ? "NCCL collective + cuBLAS GEMM (outside tdist)"
                                          : gemm_only ? "cuBLAS GEMM alone, no communication (outside tdist)"
                                                      : "sequential (outside tdist)");
    if (!outside && sd->created)
      cJSON_AddStringToObject(j, "schedule", sd->schedule);
    if (!sd->ok || st != TD_OK) {
      cJSON_AddStringToObject(j, sd->skipped ? "skipped" : "error", sd->msg[0]   ? sd->msg
                                                                    : bc.msg[0] ? bc.msg
                                                                                : "case failed");
      /* a missing baseline is said once above the table (no_base_note) */
      const char *why = s == 0 && o->no_base_note ? "none (see above)" : sd->msg[0] ? sd->msg : bc.msg;
      printf("| %-22s | %-20s | %-12s | n/a | n/a | n/a | n/a | n/a | n/a | n/a | %s |\n", bc.s.name, sd->name,
             variant, why);
    } else {
      double tf = flops > 0 ? flops / sd->p50 * 1e-12 : 0;
      /* all_reduce: algorithm bandwidth in GB/s in the same column. */
      double rate = o->kind == TD_TP_ALL_REDUCE ? (double)(bc.s.count * td_dtype_size(o->dt)) / sd->p50 * 1e-9 : tf;
      if (o->kind == TD_TP_ALL_REDUCE) {
        cJSON_AddNumberToObject(j, "algbw_gb_s", rate);
        /* nccl-tests' bus bandwidth, comparable with td_link_bench --nccl and the link rate */
        cJSON_AddNumberToObject(j, "busbw_gb_s", rate * 2.0 * (o->ranks - 1) / (o->ranks > 1 ? o->ranks : 1));
      }
      /* Without a baseline there is no speedup, and the differences are
       * against tdist auto: none for auto itself (it would be 0 by
       * construction), so those cells say so instead of a number. */
      int refside = bc.side[0].ok ? 0 : bo_first_tdist(&bc);
      char spt[16] = "-", snc[16] = "-", dft[16] = "n/a";
      cJSON_AddNumberToObject(j, "p50_s", sd->p50);
      cJSON_AddNumberToObject(j, "p99_s", sd->p99);
      cJSON_AddNumberToObject(j, "tflops", tf);
      if (base50 > 0 && !gemm_only) {
        cJSON_AddNumberToObject(j, "speedup_vs_baseline", base50 / sd->p50);
        snprintf(spt, sizeof spt, "%6.3f", base50 / sd->p50);
      }
      if (nccl50 > 0 && !gemm_only && sd->mode != BO_BASE_NCCL) {
        cJSON_AddNumberToObject(j, "speedup_vs_nccl_cublas", nccl50 / sd->p50);
        snprintf(snc, sizeof snc, "%6.3f", nccl50 / sd->p50);
      }
      /* a tdist side's time over the GEMM's alone: the GEMM-time goal of
       * operators whose communication is local (1.05 = 5% above it) */
      char gnote[48] = "";
      if (gemm50 > 0 && !outside) {
        cJSON_AddNumberToObject(j, "time_vs_gemm_only", sd->p50 / gemm50);
        snprintf(gnote, sizeof gnote, "%.3fx the GEMM alone", sd->p50 / gemm50);
      }
      cJSON_AddNumberToObject(j, "memory_bytes_per_rank", (double)sd->mem_bytes);
      if (s != refside && s != 0 && !gemm_only) {
        cJSON_AddNumberToObject(j, "max_rel_diff", sd->max_rel_diff);
        cJSON_AddStringToObject(j, "diff_against", refside ? "tdist auto" : "baseline");
        snprintf(dft, sizeof dft, "%8.2e", sd->max_rel_diff);
      }
      printf("| %-22s | %-20s | %-12s | %9.3f | %9.3f | %7.3f | %6s | %7s | %8.1f | %8s | %s |\n", bc.s.name,
             sd->name, variant, sd->p50 * 1e3, sd->p99 * 1e3, rate, spt, snc, (double)sd->mem_bytes / 1048576.0, dft,
             gemm_only ? "GEMM alone (floor term)" : gnote);
    }
    cJSON_AddItemToArray(js, j);
  }
  fflush(stdout);
  cJSON_AddItemToArray(results, jc);
  free(bc.t);
  /* A side that failed fails the run; only the baseline missing by design
   * (no_base_note: cpu without f32) is not a failure. */
  int failed = st != TD_OK;
  for (int s = 0; s < bc.nsides; s++)
    if (!bc.side[s].ok && !bc.side[s].skipped && !(s == 0 && o->no_base_note))
      failed = 1;
  return failed;
}

/* (N, K) of the field's layer set; N and K are global, sharded by the operator. */
/* cpu = 1: the CPU-sized set, the default of --backend cpu (the GPU-sized
 * models take hours on a few cores); 'all' means the cpu = 0 ones. */
static const struct { const char *name; int64_t n, k; int cpu; } bo_models[] = {
    {"llama3.1-8b", 14336, 4096, 0},  {"llama3.1-70b", 28672, 8192, 0}, {"llama3.1-405b", 53248, 16384, 0},
    {"qwen2-72b", 29568, 8192, 0},    {"gpt3-175b", 49152, 12288, 0},   {"cpu-small", 2048, 1024, 1},
    {"cpu-medium", 4096, 2048, 1},
};

/* Whether `name` is one token of the comma-separated list. */
static int bo_in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *q = strchr(p, ',');
    size_t len = q ? (size_t)(q - p) : strlen(p);
    if (len == n && !strncmp(p, name, n))
      return 1;
    p = q ? q + 1 : NULL;
  }
  return 0;
}

/* Every token of --models names a model, 'all' or 'check', none twice and
 * none that 'all' already holds (a case would run twice); no empty item.
 * Prints the first problem and returns 0. */
static int bo_models_valid(const char *cmd, const char *list) {
  char buf[256];
  size_t len = strlen(list);
  if (!len || len >= sizeof buf || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,")) {
    fprintf(stderr, "%s: --models expects a comma-separated list of all, check or model names (llama3.1-8b, "
            "llama3.1-70b, llama3.1-405b, qwen2-72b, gpt3-175b, cpu-small, cpu-medium), got '%s'\n", cmd, list);
    return 0;
  }
  memcpy(buf, list, len + 1);
  int all = bo_in_list(list, "all");
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int found = !strcmp(t, "all") || !strcmp(t, "check"), in_all = !strcmp(t, "check");
    for (size_t i = 0; i < sizeof bo_models / sizeof bo_models[0]; i++)
      if (!strcmp(t, bo_models[i].name))
        found = 1, in_all = !bo_models[i].cpu;
    if (!found) {
      fprintf(stderr, "%s: --models expects all, check or model names (llama3.1-8b, llama3.1-70b, "
              "llama3.1-405b, qwen2-72b, gpt3-175b, cpu-small, cpu-medium), got '%s'\n", cmd, t);
      return 0;
    }
    /* the token's first occurrence is where t starts in the list iff it is not repeated */
    size_t off = (size_t)(t - buf), tl = strlen(t);
    for (const char *p = list; p < list + off;) {
      const char *q = strchr(p, ',');
      if ((size_t)(q - p) == tl && !strncmp(p, t, tl)) {
        fprintf(stderr, "%s: --models names %s twice\n", cmd, t);
        return 0;
      }
      p = q + 1;
    }
    if (all && in_all) {
      fprintf(stderr, "%s: --models: all already includes %s; give one or the other\n", cmd, t);
      return 0;
    }
  }
  return 1;
}

/* --sizes: a comma-separated list of byte sizes (K, M, G suffixes), no empty
 * item, each a whole number of `dt` elements, none twice, at most `max`.
 * Checked once the dtype is known (--dtype may come later; cuda defaults to
 * bf16). Prints the first problem and returns 0. */
static int bo_sizes_valid(const char *cmd, const char *list, td_dtype dt, int max) {
  size_t es = td_dtype_size(dt), len = strlen(list), seen[BO_MAX_SHAPES];
  char buf[1024]; /* room for 64 sizes of several characters (bo_shapes reads the same list) */
  int n = 0;
  if (!len || len >= sizeof buf || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,")) {
    fprintf(stderr, "%s: --sizes expects a comma-separated list of byte sizes (e.g. 8K,64K,4M; each a whole "
            "number of %s elements, %zu bytes each), got '%s'\n", cmd, td_dtype_name(dt), es, list);
    return 0;
  }
  int items = 1;
  for (const char *p = list; *p; p++)
    items += *p == ',';
  if (items > max) {
    fprintf(stderr, "%s: --sizes gives %d sizes; at most %d cases in one run\n", cmd, items, max);
    return 0;
  }
  memcpy(buf, list, len + 1);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    size_t bytes;
    /* every all_reduce side holds at least twice the size in symmetric heap
     * (bench_ops_fit.c) and no heap exceeds TD_SYMM_HEAP_SIZE's maximum, 1 TiB */
    if (td_bench_bytes_arg(cmd, "--sizes", t, list, BO_MAX_SIZE_BYTES, "every all_reduce side holds twice the "
                           "size in symmetric heap, and TD_SYMM_HEAP_SIZE is at most 1 TiB", &bytes))
      return 0;
    if (bytes < es || bytes % es) {
      int in = strcmp(t, list) != 0;
      fprintf(stderr, "%s: --sizes %s%s%s%s: %zu bytes is %s %s element%s (%zu bytes each); give a multiple of %zu\n",
              cmd, t, in ? " (in '" : "", in ? list : "", in ? "')" : "", bytes,
              bytes < es ? "less than one" : "not a whole number of", td_dtype_name(dt), bytes < es ? "" : "s", es,
              es);
      return 0;
    }
    for (int i = 0; i < n; i++)
      if (seen[i] == bytes) {
        fprintf(stderr, "%s: --sizes names %zu bytes twice ('%s')\n", cmd, bytes, list);
        return 0;
      }
    seen[n++] = bytes;
  }
  return 1;
}

/* The cases of the run into out (at most BO_MAX_SHAPES written). Returns
 * their number, which may exceed BO_MAX_SHAPES (the caller refuses that),
 * or -1 on a malformed --sizes. */
static int bo_shapes(const bo_opts *o, bo_shape *out) {
  int ns = 0;
  if (o->kind == TD_TP_ALL_REDUCE) {
    char list[1024]; /* as bo_sizes_valid's, which checked the list fits */
    snprintf(list, sizeof list, "%s", o->sizes);
    for (char *tok = strtok(list, ","); tok && ns < BO_MAX_SHAPES; tok = strtok(NULL, ",")) {
      size_t bytes;
      if (td_bench_parse_bytes(tok, &bytes) || bytes < td_dtype_size(o->dt))
        return -1;
      out[ns].count = bytes / td_dtype_size(o->dt);
      snprintf(out[ns].name, sizeof out[ns].name, "%s", tok);
      ns++;
    }
    return ns;
  }
  if (o->m > 0) { /* one explicit shape */
    out[0] = (bo_shape){.m = o->m, .n = o->n, .k = o->k};
    snprintf(out[0].name, sizeof out[0].name, "custom");
    return 1;
  }
  for (size_t i = 0; i < sizeof bo_models / sizeof bo_models[0]; i++) {
    if (!bo_in_list(o->models, bo_models[i].name) && !(bo_in_list(o->models, "all") && !bo_models[i].cpu))
      continue;
    for (int j = 0; j < o->nms; j++, ns++) {
      if (ns >= BO_MAX_SHAPES)
        continue; /* counted only: the caller refuses more than BO_MAX_SHAPES */
      out[ns] = (bo_shape){.m = o->ms[j], .n = bo_models[i].n, .k = bo_models[i].k};
      snprintf(out[ns].name, sizeof out[ns].name, "%s", bo_models[i].name);
    }
  }
  if (bo_in_list(o->models, "check") || bo_in_list(o->models, "all")) { /* the correctness case */
    if (ns < BO_MAX_SHAPES) {
      out[ns] = (bo_shape){.m = 4091 * (int64_t)o->ranks, .n = 5120, .k = 1024};
      snprintf(out[ns].name, sizeof out[ns].name, "check 4091xR");
    }
    ns++;
  }
  return ns;
}

/* --variants: a comma-separated list, no empty item, no repeat, each a
 * variant the operator takes (fused on cuda only), or 'none' alone. Checked
 * while parsing so a side that cannot exist is refused, not shown as an
 * error row. Prints the first problem and returns 0. */
static int bo_variants_valid(const char *cmd, td_tp_kind kind, int cuda, const char *list) {
  unsigned mask = kind == TD_TP_AG_GEMM ? 1u << TD_TP_SEQUENTIAL | 1u << TD_TP_SM | 1u << TD_TP_COPY_ENGINE |
                                              1u << TD_TP_RING
                  : kind == TD_TP_GEMM_RS ? 1u << TD_TP_SEQUENTIAL | 1u << TD_TP_SM
                  : kind == TD_TP_GEMM_AR ? 1u << TD_TP_SEQUENTIAL | 1u << TD_TP_ONE_SHOT | 1u << TD_TP_TWO_SHOT
                                          : 1u << TD_TP_ONE_SHOT | 1u << TD_TP_TWO_SHOT;
  if (cuda)
    mask |= 1u << TD_TP_FUSED;
  char allowed[160] = "", names[160] = "none"; /* names: the same as a plain list, for the "did you mean" */
  for (int v = 1; v < TD_TP_VARIANT_COUNT; v++)
    if (mask & (1u << v)) {
      snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s, ", td_tp_variant_name(v));
      snprintf(names + strlen(names), sizeof names - strlen(names), ",%s", td_tp_variant_name(v));
    }
  snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "or none alone%s",
           cuda ? "" : "; fused needs --backend cuda");
  char buf[160];
  size_t len = strlen(list);
  if (!len || len >= sizeof buf || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,")) {
    fprintf(stderr, "%s: --variants expects a comma-separated list of variants (%s), got '%s'\n", cmd, allowed,
            list);
    return 0;
  }
  memcpy(buf, list, len + 1);
  unsigned seen = 0;
  int n = 0, none = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
    td_tp_variant v;
    if (!strcmp(t, "none")) {
      none = 1;
      continue;
    }
    if (td_tp_variant_parse(t, &v) != TD_OK) { /* the library lists every operator's variants: list this one's */
      char near[96], hint[128] = "";
      if (td__suggest(t, names, NULL, near, sizeof near))
        snprintf(hint, sizeof hint, " (did you mean %s?)", near);
      fprintf(stderr, "%s: --variants: variant '%s' is unknown; allowed for %s: %s%s\n", cmd, t,
              td_tp_kind_name(kind), allowed, hint);
      return 0;
    }
    if (v == TD_TP_AUTO || !(mask & (1u << v))) {
      fprintf(stderr, "%s: --variants: %s does not apply to %s here; allowed: %s\n", cmd, t, td_tp_kind_name(kind),
              allowed);
      return 0;
    }
    if (seen & (1u << v)) {
      fprintf(stderr, "%s: --variants names %s twice\n", cmd, t);
      return 0;
    }
    seen |= 1u << v;
  }
  if (none && n > 1) {
    fprintf(stderr, "%s: --variants none (baseline and auto only) cannot be combined with other variants, got "
            "'%s'\n", cmd, list);
    return 0;
  }
  return 1;
}

/* Every case against the heap and this machine before the first one runs: a
 * case that cannot fit can never run as asked, so it is a usage error (exit
 * 2) said at once, not a row of "not run" after the cases before it took
 * their time. Each case that cannot fit is named with what it needs, the
 * limit and the remedies that apply; then one line for them all. Returns
 * the number refused. */
static int bo_cases_fit(const bo_opts *o, const bo_shape *shapes, int ns, const char *cmd) {
  bo_case *bc = malloc(sizeof *bc);
  if (!bc)
    return 0; /* each case is checked again before it allocates (bo_run_case) */
  int refused = 0, all_heap = 1;
  double ask_max = 0;
  for (int i = 0; i < ns; i++) {
    memset(bc, 0, sizeof *bc);
    bc->o = o;
    bc->s = shapes[i];
    bo_case_sides(bc);
    bo_fit fit;
    if (!bo_case_fit(bc, bc->msg, sizeof bc->msg, &fit))
      continue;
    refused++;
    if (fit.heap_ask > 0)
      ask_max = fit.heap_ask > ask_max ? fit.heap_ask : ask_max;
    else
      all_heap = 0;
    const bo_shape *sh = &shapes[i];
    if (o->kind == TD_TP_ALL_REDUCE)
      fprintf(stderr, "%s: --sizes %s: %s\n", cmd, sh->name, bc->msg);
    else if (o->m > 0)
      fprintf(stderr, "%s: --shape %lldx%lldx%lld: %s\n", cmd, (long long)sh->m, (long long)sh->n,
              (long long)sh->k, bc->msg);
    else
      fprintf(stderr, "%s: case %s M=%lld (M=%lld N=%lld K=%lld): %s\n", cmd, sh->name, (long long)sh->m,
              (long long)sh->m, (long long)sh->n, (long long)sh->k, bc->msg);
  }
  free(bc);
  char heap[96] = "";
  if (refused > 1 && all_heap) /* each fits here with a larger heap: the largest they ask for holds them all */
    snprintf(heap, sizeof heap, "; TD_SYMM_HEAP_SIZE=%.0fM holds every one", ask_max / 1048576.0);
  if (refused && ns > 1) /* one case: its line says it all */
    fprintf(stderr, "%s: %d of %d cases cannot fit (above), so none was run (every case is checked before the first "
            "runs)%s\n", cmd, refused, ns, heap);
  return refused;
}

static void bo_usage(FILE *f, const char *kind) {
  fprintf(f,
          "usage: tdist bench %s [--backend cpu|cuda] [--ranks N] [--json FILE] [--dtype f32|bf16|f16]\n"
          "         [--iters I] [--warmup W] [--variants LIST] [--chunks C]\n"
          "         [--compute-workers W] [--comm-workers W]   (SM split on cuda, threads on cpu)\n"
          "         [--models all|check|NAME,...] [--m LIST] | [--shape MxNxK]   (GEMM operators)\n"
          "         [--sizes LIST]                                              (all_reduce)\n"
          "Sides: the sequential baseline, tdist auto, and each variant of --variants (no repeats; only\n"
          "the operator's variants, else exit 2; a side failing at run time exits 1; default: every\n"
          "variant but fused, which --variants ...,fused adds on cuda; 'none': baseline and auto only;\n"
          "on cuda auto is fused wherever it applies). Models: llama3.1-8b,\n"
          "llama3.1-70b, llama3.1-405b, qwen2-72b,\n"
          "gpt3-175b (N, K global) with M from --m (default 1024,4096,8192), and 'check' (M = 4091 x\n"
          "ranks, N = 5120, K = 1024); 'all' is these. On --backend cpu the default is instead the\n"
          "CPU-sized set cpu-small (N 2048, K 1024) and cpu-medium (N 4096, K 2048) with M 512,2048\n"
          "(the models above take hours on a few cores; ask for them with --models). On cpu, --m without\n"
          "--models sets the M of the CPU-sized set.\n"
          "all_reduce sizes default 8K,64K,512K,4M,64M. Ranges: --ranks 1..64, --iters 1..100000,\n"
          "--warmup 0..10000, --chunks 0..64, --compute-workers/--comm-workers 0..1024 (0, the default:\n"
          "the executor chooses, as TD_CPU_COMPUTE_WORKERS=0; tdist run takes 1..1024 and chooses when\n"
          "the option is absent), --sizes items at most 512G. Defaults: --backend cpu, --ranks 2.\n"
          "--m and --shape dims 1..1048576 (gemm_rs and gemm_ar: K >= --ranks, as they split K over the\n"
          "ranks), --m at most 32 values, at most 64 cases in one run (models x\n"
          "M, or sizes); no item twice in --m, --sizes or --models, and each option given once. --sizes\n"
          "items are bytes with an optional K, M or G (powers of 1024), whole numbers of dtype elements.\n"
          "--shape/--m/--models apply to the GEMM operators only,\n"
          "--sizes to all_reduce only. A line on stderr reports each case as it starts.\n"
          "Ranks are threads of one process; on cuda rank r uses GPU r %% GPUs (all of them GPU D with\n"
          "TD_CUDA_DEVICE=D); the GPUs are checked before the first case (exit 2). Sides from outside\n"
          "tdist on cuda: the sequential baseline (peer copies + cuBLAS), nccl+cublas (NCCL collective\n"
          "+ cuBLAS GEMM; skipped when ranks share a GPU) and gemm only (its GEMM alone, the floor's\n"
          "GEMM term; each tdist side's note gives its time over it, JSON time_vs_gemm_only); 'vs nccl'\n"
          "is each side's speedup over nccl+cublas. Ranks sharing a GPU\n"
          "measure correctness and overhead, not interconnect speed.\n"
          "Before the first case runs, every case's sides' symmetric memory (alive together: they\n"
          "alternate call by call, so it adds up) is checked against TD_SYMM_HEAP_SIZE and its 1024G\n"
          "maximum, and the operands with it against host memory on cpu (TD_RUN_HOST_MEMORY, else\n"
          "physical) or each rank's share of its GPU on cuda: a case that cannot fit is refused with\n"
          "what it needs, the limit and the remedies that apply (exit 2, nothing run). On cpu with\n"
          "TD_SYMM_HEAP_SIZE unset, a case needing more than the default 256 MiB (up to 2 GiB) gets the heap\n"
          "it needs instead, said on stderr. On cpu, ranks x workers over %d x the cores draws a note on\n"
          "stderr.\n"
          "Exit status: 0 all cases ran; 1 a case or side failed; 2 a bad option or variable, a case\n"
          "that cannot fit, or no usable GPU (checked before any case, so nothing ran; tdist run\n"
          "reports a missing GPU as 1 since it fails when its executor starts).\n",
          kind, BO_OVERSUB_FACTOR);
}

/* Integer options: name, range, and where the value goes. */
typedef struct bo_int_opt {
  const char *name;
  long long lo, hi;
  int *dst;
} bo_int_opt;

static int bo_main(td_tp_kind kind, int argc, char **argv) {
  bo_opts o = {.kind = kind, .ranks = 2, .iters = 20, .warmup = 3, .dt = TD_F32, .models = "all",
               .sizes = "8K,64K,512K,4M,64M"};
  o.variants = kind == TD_TP_AG_GEMM   ? "sequential,sm,copy_engine,ring"
               : kind == TD_TP_GEMM_RS ? "sequential,sm"
               : kind == TD_TP_GEMM_AR ? "sequential,one_shot,two_shot"
                                       : "one_shot,two_shot";
  char cmd[64];
  snprintf(cmd, sizeof cmd, "tdist bench %s", argv[0]);
  const bo_int_opt ints[] = {{"--ranks", 1, 64, &o.ranks},
                             {"--iters", 1, 100000, &o.iters},
                             {"--warmup", 0, 10000, &o.warmup},
                             {"--chunks", 0, 64, &o.chunks},
                             {"--compute-workers", 0, 1024, &o.compute_workers},
                             {"--comm-workers", 0, 1024, &o.comm_workers}};
  int dtype_set = 0, models_set = 0, gemm_only = 0, ar_only = 0;
  const char *gemm_opt = NULL;
  const td_cli_options *table = &td_cli_options_bench_ops; /* cli_options.c: the table --help is checked against */
  td_cli_seen seen = {0}; /* each option at most once, as every subcommand (no silent last-one-wins) */
  for (int i = 1; i < argc; i++) {
    char nbuf[64];
    const char *a, *v;
    int inl;
    int known = td_cli_arg(argc, argv, i, table->valued, table->nvalued, nbuf, sizeof nbuf, &a, &v, &inl);
    if (inl && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
      fprintf(stderr, "tdist bench %s: option %s takes no value\n", argv[0], a);
      return 2;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      bo_usage(stdout, argv[0]);
      return 0;
    }
    if (!known && a[0] != '-') { /* a word, not a misspelt option: say what the kind takes */
      td_cli_positional(cmd, a, table->valued, table->nvalued, table->flags, table->nflags);
      return 2;
    }
    if (!known) {
      char hint[200];
      fprintf(stderr, "tdist bench %s: unknown option %s%s\n", argv[0], a,
              td_cli_option_hint(a, &td_cli_options_bench_ops, hint, sizeof hint));
      bo_usage(stderr, argv[0]);
      return 2;
    }
    if (!v) {
      fprintf(stderr, "tdist bench %s: %s needs a value\n", argv[0], a);
      return 2;
    }
    i += !inl;
    if (!td_cli_once(cmd, &seen, a, NULL))
      return 2;
    const bo_int_opt *io = NULL;
    for (size_t j = 0; j < sizeof ints / sizeof ints[0]; j++)
      if (!strcmp(a, ints[j].name))
        io = &ints[j];
    if (io) {
      long long x;
      if (!td_cli_int(cmd, a, v, io->lo, io->hi, &x))
        return 2;
      *io->dst = (int)x;
    } else if (!strcmp(a, "--backend")) {
      if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
        fprintf(stderr, "tdist bench %s: --backend %s: use cpu or cuda\n", argv[0], v);
        return 2;
      }
      o.cuda = !strcmp(v, "cuda");
    } else if (!strcmp(a, "--json")) {
      o.json = v;
    } else if (!strcmp(a, "--dtype")) {
      /* the operators take these three only; others would fail at run time */
      if (td_dtype_parse(v, &o.dt) != TD_OK || (o.dt != TD_F32 && o.dt != TD_BF16 && o.dt != TD_F16)) {
        fprintf(stderr, "tdist bench %s: --dtype expects f32, bf16 or f16, got '%s'\n", argv[0], v);
        return 2;
      }
      dtype_set = 1;
    } else if (!strcmp(a, "--variants")) {
      o.variants = v;
    } else if (!strcmp(a, "--models")) {
      if (!bo_models_valid(cmd, v))
        return 2;
      o.models = v, models_set = 1, gemm_only = 1, gemm_opt = a;
    } else if (!strcmp(a, "--m")) {
      if (!td_cli_int_list(cmd, a, v, ',', 1, 1 << 20, "a comma-separated list of integers", "value", o.ms, 1,
                           BO_MAX_SHAPES / 2, &o.nms))
        return 2;
      for (int x = 0; x < o.nms; x++)
        for (int y = 0; y < x; y++)
          if (o.ms[x] == o.ms[y]) {
            fprintf(stderr, "tdist bench %s: --m names %lld twice ('%s')\n", argv[0], o.ms[x], v);
            return 2;
          }
      gemm_only = 1, gemm_opt = a;
    } else if (!strcmp(a, "--sizes")) {
      o.sizes = v, ar_only = 1; /* checked below, once the dtype is known */
    } else if (!strcmp(a, "--shape")) {
      long long d[3];
      int nd = 0;
      if (!td_cli_int_list(cmd, a, v, 'x', 1, 1 << 20, "MxNxK", "dim", d, 3, 3, &nd))
        return 2;
      o.m = d[0], o.n = d[1], o.k = d[2], gemm_only = 1, gemm_opt = a;
    } else {
      char hint[200];
      fprintf(stderr, "tdist bench %s: unknown option %s%s\n", argv[0], a,
              td_cli_option_hint(a, &td_cli_options_bench_ops, hint, sizeof hint));
      bo_usage(stderr, argv[0]);
      return 2;
    }
  }
  if (kind == TD_TP_ALL_REDUCE && gemm_only) {
    fprintf(stderr, "tdist bench %s: %s applies to the GEMM operators only; all_reduce takes --sizes\n", argv[0],
            gemm_opt);
    return 2;
  }
  if (kind != TD_TP_ALL_REDUCE && ar_only) {
    fprintf(stderr, "tdist bench %s: --sizes applies to all_reduce only; the GEMM operators take --shape, --m "
            "or --models\n", argv[0]);
    return 2;
  }
  if (o.m > 0 && (o.nms || models_set)) {
    fprintf(stderr, "tdist bench %s: --shape gives one shape; it cannot be combined with --m or --models\n",
            argv[0]);
    return 2;
  }
  /* On cpu the CPU-sized set is the default, also with --m alone (which then
   * sets its M): the GPU-sized models only when asked for with --models. */
  int cpu_default = !o.cuda && kind != TD_TP_ALL_REDUCE && !models_set && !o.m;
  int cpu_ms_given = cpu_default && o.nms;
  if (cpu_default)
    o.models = "cpu-small,cpu-medium";
  if (!o.nms) {
    const long long gpu_ms[] = {1024, 4096, 8192}, cpu_ms[] = {512, 2048};
    const long long *dm = cpu_default ? cpu_ms : gpu_ms;
    o.nms = cpu_default ? 2 : 3;
    for (int j = 0; j < o.nms; j++)
      o.ms[j] = dm[j];
  }
  if (!dtype_set && o.cuda)
    o.dt = TD_BF16;
  if (kind == TD_TP_ALL_REDUCE && !bo_sizes_valid(cmd, o.sizes, o.dt, BO_MAX_SHAPES))
    return 2;
  if (!bo_variants_valid(cmd, kind, o.cuda, o.variants))
    return 2;
#ifndef TD_HAVE_GEMM_CUDA
  if (o.cuda) {
    fprintf(stderr, "tdist bench %s: this build has no CUDA backend; use --backend cpu\n", argv[0]);
    return 2;
  }
#endif
  if (td_cli_check_output("tdist bench", "--json", o.json))
    return 2;
  bo_shape shapes[BO_MAX_SHAPES];
  int ns = bo_shapes(&o, shapes);
  if (ns <= 0) {
    fprintf(stderr, "tdist bench %s: no shape selected (--models, --m, --shape or --sizes malformed)\n", argv[0]);
    return 2;
  }
  if (ns > BO_MAX_SHAPES) { /* models x M (+ check): refused whole, not cut short */
    fprintf(stderr, "tdist bench %s: --models x --m selects %d cases; at most %d in one run\n", argv[0], ns,
            BO_MAX_SHAPES);
    return 2;
  }
  /* gemm_rs and gemm_ar split the contraction K over the ranks (each rank
   * multiplies its columns of A by its rows of B, then the partial sums are
   * reduced): every rank needs at least one, so K >= ranks (K need not divide).
   * The operator refuses it when created; refused here, before any setup. */
  if (kind == TD_TP_GEMM_RS || kind == TD_TP_GEMM_AR)
    for (int i = 0; i < ns; i++)
      if (shapes[i].k < o.ranks) {
        char what[96];
        if (o.m > 0)
          snprintf(what, sizeof what, "--shape %lldx%lldx%lld", (long long)o.m, (long long)o.n, (long long)o.k);
        else
          snprintf(what, sizeof what, "case %s", shapes[i].name);
        fprintf(stderr, "tdist bench %s: %s: K=%lld is split over --ranks %d and every rank needs at least one "
                "element of it (%s splits the contraction dim K over the ranks; the parts need not be equal): give "
                "K >= %d, or --ranks <= %lld\n", argv[0], what, (long long)shapes[i].k, o.ranks, argv[0], o.ranks,
                (long long)shapes[i].k);
        return 2;
      }
  /* cuda: the GPUs checked once, before the first case (a missing driver or
   * a bad TD_CUDA_DEVICE is one line here, not an error row per case and
   * side), and the devices the ranks will use, which the environment
   * describes. */
  int devices[64] = {0};
  char dmsg[256] = "";
  if (bo_devices(o.cuda, o.ranks, devices, dmsg, sizeof dmsg)) {
    fprintf(stderr, "tdist bench %s: --backend cuda: %s\n", argv[0], dmsg);
    return 2;
  }
  if (bo_cases_fit(&o, shapes, ns, cmd))
    return 2;
  int ngpus = 0;
  for (int r = 0; r < o.ranks; r++) {
    int seen = 0;
    for (int q = 0; q < r; q++)
      seen |= devices[q] == devices[r];
    ngpus += !seen;
  }
  o.no_base_note = !o.cuda && o.dt != TD_F32 && kind != TD_TP_ALL_REDUCE;
  bo_oversub_warn(cmd, o.cuda, o.ranks, o.compute_workers, o.comm_workers);
  cJSON *root = cJSON_CreateObject(), *env = cJSON_AddObjectToObject(root, "environment");
  bo_env(o.cuda, o.ranks, devices, env);
  cJSON_AddStringToObject(root, "operator", td_tp_kind_name(kind));
  cJSON_AddStringToObject(root, "backend", o.cuda ? "cuda" : "cpu");
  cJSON_AddNumberToObject(root, "ranks", o.ranks);
  cJSON_AddStringToObject(root, "dtype", td_dtype_name(o.dt));
  cJSON_AddNumberToObject(root, "iters", o.iters);
  char note[512] = "ranks are threads of one process";
  if (o.cuda)
    snprintf(note, sizeof note, "ranks are threads of one process on %d GPU(s) (see environment.placement)%s",
             ngpus, ngpus < o.ranks ? "; ranks sharing a GPU measure correctness and overhead, not interconnect "
                                      "speed" : "");
  snprintf(note + strlen(note), sizeof note - strlen(note), "; the sides of a case are alive together (they "
           "alternate call by call), so their memory adds up (results[].memory_bytes_all_sides_per_rank)");
  cJSON_AddStringToObject(root, "note", note);
  cJSON *results = cJSON_AddArrayToObject(root, "results");
  printf("# tdist bench %s: backend %s, %d ranks, %s, %d iters (p50/p99 of the slowest rank per call)\n",
         argv[0], o.cuda ? "cuda" : "cpu", o.ranks, td_dtype_name(o.dt), o.iters);
  if (cpu_default) {
    char mlist[256] = "";
    for (int j = 0; j < o.nms; j++)
      snprintf(mlist + strlen(mlist), sizeof mlist - strlen(mlist), "%s%lld", j ? "," : "", o.ms[j]);
    printf("cpu backend: the CPU-sized default shapes (cpu-small, cpu-medium; M %s%s), %d cases; the GPU-sized "
           "models run with --models all\n", mlist, cpu_ms_given ? " from --m" : "", ns);
  }
  printf("the sides of a case are alive together (they alternate call by call), so their memory adds up: a "
         "case holds the sum of its MiB/rank column per rank\n");
  if (o.no_base_note)
    printf("no baseline on cpu for %s (OpenBLAS sgemm is f32 only): speedup '-'; max rel diff is against tdist "
           "auto ('n/a' on auto itself)\n", td_dtype_name(o.dt));
  printf("\n");
  printf("| case | side | variant | p50 ms | p99 ms | %s | speedup | vs nccl | MiB/rank | max rel diff | note |\n",
         kind == TD_TP_ALL_REDUCE ? "GB/s" : "TFLOP/s");
  printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  int rc = 0;
  for (int i = 0; i < ns; i++) {
    char label[40];
    if (kind != TD_TP_ALL_REDUCE)
      snprintf(label, sizeof label, "%.20s M=%lld", shapes[i].name, (long long)shapes[i].m);
    else
      snprintf(label, sizeof label, "%.30s", shapes[i].name);
    snprintf(shapes[i].name, sizeof shapes[i].name, "%s", label);
    if (kind != TD_TP_ALL_REDUCE)
      fprintf(stderr, "tdist bench %s: case %d/%d: %s (M=%lld N=%lld K=%lld) ...\n", argv[0], i + 1, ns,
              shapes[i].name, (long long)shapes[i].m, (long long)shapes[i].n, (long long)shapes[i].k);
    else
      fprintf(stderr, "tdist bench %s: case %d/%d: %s ...\n", argv[0], i + 1, ns, shapes[i].name);
    fflush(stderr);
    rc |= bo_run_case(&o, &shapes[i], results);
  }
  if (o.json) {
    char *text = cJSON_Print(root);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "tdist bench %s", argv[0]);
    if (td_cli_write_text(cmd, o.json, text))
      rc = 1;
    free(text);
  }
  cJSON_Delete(root);
  return rc ? 1 : 0;
}

int td_bench_ag_gemm(int argc, char **argv) { return bo_main(TD_TP_AG_GEMM, argc, argv); }
int td_bench_gemm_rs(int argc, char **argv) { return bo_main(TD_TP_GEMM_RS, argc, argv); }
int td_bench_gemm_ar(int argc, char **argv) { return bo_main(TD_TP_GEMM_AR, argc, argv); }
int td_bench_all_reduce(int argc, char **argv) { return bo_main(TD_TP_ALL_REDUCE, argc, argv); }
