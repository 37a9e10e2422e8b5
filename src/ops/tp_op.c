/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: what every tensor-parallel operator shares. Creating one
 * checks the arguments collectively (tp_check.c), compiles the operator's
 * program with the compile options of its variant (TD_TP_AUTO: every
 * candidate is compiled and the perf model's predicted makespan picks one;
 * rank 0's pick is broadcast so that all ranks run the same plan), rewrites
 * the plan for the copy engine when asked (tp_plan_ce.c) and creates the
 * executor of the chosen backend. A call binds the caller's buffers (only
 * when a pointer changed) and runs one launch, so repeated calls never reset
 * anything: the executor's epochs do that job. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/ops_internal.h"
#include "prim/prim_internal.h"
#include "tdist/coll.h"

td_status td__tp_check(td_team *team, const td__tp_desc *d, const td_tp_opts *o, int have_out);
td_status td__tp_plan_copy_engine(const td_plan *src, td_plan **out);

void td_tp_opts_init(td_tp_opts *opts) {
  if (opts)
    memset(opts, 0, sizeof *opts);
}

void td__tp_dim(char *buf, size_t size, int64_t v) { snprintf(buf, size, "%" PRId64, v); }

td_status td__tp_row_parallel_matmul(const td__tp_desc *d, td_program *p, td_value *a, td_value *b,
                                     td_value *prod) {
  char m[24], n[24], k[24];
  td__tp_dim(m, sizeof m, d->m), td__tp_dim(n, sizeof n, d->n), td__tp_dim(k, sizeof k, d->k);
  TD_CHECK(td_program_input(p, "a", 0, d->dtype, m, k, (td_layout){TD_LAYOUT_SHARD, 1}, a));
  TD_CHECK(td_program_input(p, "b", 0, d->dtype, k, n, (td_layout){TD_LAYOUT_SHARD, 0}, b));
  return td_program_matmul(p, *a, *b, 0, prod);
}

static const char *const td__kind_names[TD_TP_KIND_COUNT] = {"ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"};
static const char *const td__variant_names[TD_TP_VARIANT_COUNT] = {"auto", "sequential", "sm", "copy_engine",
                                                                   "ring", "one_shot", "two_shot", "fused"};

const char *td_tp_kind_name(td_tp_kind kind) {
  return (int)kind >= 0 && kind < TD_TP_KIND_COUNT ? td__kind_names[kind] : "invalid";
}

const char *td_tp_variant_name(td_tp_variant v) {
  return (int)v >= 0 && v < TD_TP_VARIANT_COUNT ? td__variant_names[v] : "invalid";
}

td_status td_tp_variant_parse(const char *name, td_tp_variant *out) {
  for (int v = 0; name && v < TD_TP_VARIANT_COUNT; v++)
    if (!strcmp(name, td__variant_names[v])) {
      if (out)
        *out = (td_tp_variant)v;
      return TD_OK;
    }
  return td__error(TD_ERR_INVALID_ARG, "variant '%s' is unknown; use auto, sequential, sm, copy_engine, ring, "
                   "one_shot, two_shot or fused", name ? name : "(null)");
}

/* The perf model of cuda plans: the compiler's defaults and calibration file
 * describe one CPU core, so cuda plans get constants measured on the H200
 * (docs/perf.md, 2026-11-29) for the persistent executor's blocks: the simple
 * GEMM tile at ~0.48 TFLOP/s per block (54 TFLOP/s over ~112 compute blocks),
 * SM copies at ~5.6 GB/s per block, reductions reading peer memory at
 * ~1 GB/s, ~10 us per chunk put + signal, 2 us per task, 132 SMs. With them
 * AUTO makes the choices the measurements favour (overlapped over sequential;
 * two-shot over one-shot past a few KiB). */
static void td__cuda_model(td_perf_model *m) {
  td_perf_model_load(m); /* fills every field, including ones added later */
  m->alpha_s = 1e-5;
  m->beta_bytes_s = 5.6e9;
  m->flops_s = 4.8e11;
  m->mem_bytes_s = 1e9;
  m->task_overhead_s = 2e-6;
  m->cores = 132;
}

/* Compile options of one variant. `model` must outlive the compile. */
static void td__variant_compile_opts(const td__tp_desc *d, int nranks, const td_tp_opts *o, td_tp_variant v,
                                     td_perf_model *model, td_compile_opts *co) {
  td_compile_opts_init(co);
  co->nranks = nranks;
  co->chunks_per_rank = o->chunks_per_rank;
  co->tile_rows = o->tile_rows;
  co->tile_cols = o->tile_cols;
  co->compute_workers = o->compute_workers;
  co->comm_workers = o->comm_workers;
  co->backend_cuda = o->backend == TD_EXEC_CUDA;
  if (co->backend_cuda) {
    /* GPU tiles: one persistent block runs a tile; 128 x 128 is the simple
     * GEMM's block tile, so smaller tiles waste its tensor cores. */
    if (!co->tile_rows)
      co->tile_rows = 128;
    if (!co->tile_cols)
      co->tile_cols = 256;
    td__cuda_model(model);
    co->model = model;
  }
  (void)d;
  co->overlap = v != TD_TP_SEQUENTIAL;
  co->ring = v == TD_TP_RING;
  if (v == TD_TP_ONE_SHOT)
    co->one_shot_bytes = INT64_MAX;
  else if (v == TD_TP_TWO_SHOT)
    co->one_shot_bytes = 0;
}

static td_status td__compile_variant(const td__tp_desc *d, int nranks, const td_tp_opts *o, const td_program *p,
                                     td_tp_variant v, td_compiled **out) {
  td_compile_opts co;
  td_perf_model model;
  td__variant_compile_opts(d, nranks, o, v, &model, &co);
  td_status st = td_program_compile(p, &co, out);
  if (st != TD_OK)
    td__error_prefix("%s (variant %s): ", td_tp_kind_name(d->kind), td_tp_variant_name(v));
  return st;
}

td_status td__tp_auto_variant(const td__tp_desc *d, int nranks, const td_tp_opts *o, const td_program *p,
                              td_tp_variant *out, double *predicted) {
  td_tp_variant pick = d->auto_candidates[0];
  double best = -1;
  for (int i = 0; i < 4 && d->auto_candidates[i] != TD_TP_AUTO; i++) {
    td_compiled *c = NULL;
    td_prediction pr;
    if (td__compile_variant(d, nranks, o, p, d->auto_candidates[i], &c) != TD_OK ||
        td_compiled_predict(c, &pr) != TD_OK) {
      td_compiled_destroy(c);
      continue; /* a candidate the model cannot judge is skipped */
    }
    if (predicted)
      predicted[i] = pr.makespan_s;
    if (best < 0 || pr.makespan_s < best)
      best = pr.makespan_s, pick = d->auto_candidates[i];
    td_compiled_destroy(c);
  }
  *out = pick;
  return TD_OK;
}

/* Picks the variant for TD_TP_AUTO. On cuda the fused variant wins wherever
 * it applies (td__tp_fused_auto: every rank decides from the same exchanged
 * probes); otherwise the candidate with the smallest predicted makespan
 * (ties go to the earlier, preferred one), decided by rank 0 and broadcast,
 * so every rank runs the same plan. */
static td_status td__choose(td_tp_op *op, const td_program *p, td_tp_variant *chosen) {
  int fused = 0;
  TD_CHECK(td__tp_fused_auto(op->team, &op->d, &op->opts, &fused));
  if (fused) {
    *chosen = TD_TP_FUSED;
    return TD_OK;
  }
  td_tp_variant v = op->d.auto_candidates[0];
  if (op->rank == 0)
    td__tp_auto_variant(&op->d, op->nranks, &op->opts, p, &v, NULL);
  int32_t pick = (int32_t)v;
  TD_CHECK(td_broadcast(op->team, &pick, &pick, 1, TD_I32, 0));
  *chosen = (td_tp_variant)pick;
  return TD_OK;
}

static td_status td__tp_build(td_tp_op *op) {
  td_program *p = NULL;
  TD_CHECK(td_program_create(&p));
  td_status st = op->d.build(&op->d, p, op->vals);
  td_tp_variant v = op->opts.variant;
  if (st == TD_OK && v == TD_TP_AUTO)
    st = td__choose(op, p, &v);
  /* fused: the sequential plan gives the operands' layouts; no executor runs it */
  if (st == TD_OK)
    st = td__compile_variant(&op->d, op->nranks, &op->opts, p, v == TD_TP_FUSED ? TD_TP_SEQUENTIAL : v,
                             &op->compiled);
  td_program_destroy(p);
  if (st != TD_OK)
    return st;
  op->variant = v;
  op->plan = td_compiled_plan(op->compiled);
  if (v == TD_TP_COPY_ENGINE) {
    TD_CHECK(td__tp_plan_copy_engine(op->plan, &op->plan_ce));
    op->plan = op->plan_ce;
  }
  for (int i = 0; i < 3; i++)
    op->bufs[i] = op->vals[i] >= 0 ? td_compiled_buffer(op->compiled, op->vals[i]) : -1;
  int64_t tr, tc;
  td_compiled_choices(op->compiled, &op->compute_workers, &op->comm_workers, &op->chunks, &tr, &tc);
  td_prediction pr;
  op->predicted_s = td_compiled_predict(op->compiled, &pr) == TD_OK ? pr.makespan_s : -1;
  return TD_OK;
}

td_status td__tp_create(td_team *team, const td__tp_desc *d, const td_tp_opts *opts, td_tp_op **out) {
  const char *kn = td_tp_kind_name(d->kind);
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", kn);
  td_tp_opts o;
  if (opts)
    o = *opts;
  else
    td_tp_opts_init(&o);
  /* A NULL out is this rank's bug: it still joins the check so peers fail too. */
  td__tp_desc dd = *d;
  td_status st = td__tp_check(team, &dd, &o, out != NULL);
  if (st != TD_OK)
    return st;
  if (o.variant == TD_TP_FUSED) /* same answer on every rank: the arguments are equal */
    TD_CHECK(td__tp_fused_check(&dd, td_team_size(team), &o));
  td_tp_op *op = calloc(1, sizeof *op);
  if (!op)
    return td__error(TD_ERR_NO_MEMORY, "%s: out of memory", kn);
  op->d = dd;
  op->team = team;
  op->nranks = td_team_size(team);
  op->rank = td_team_rank(team);
  op->opts = o;
  st = td__tp_build(op);
  if (st == TD_OK && op->variant == TD_TP_FUSED) {
    st = td__tp_fused_create(op);
    if (st != TD_OK)
      td__error_prefix("%s (variant fused): ", kn);
  } else if (st == TD_OK) {
    td_exec_opts eo;
    td_exec_opts_init(&eo);
    eo.backend = o.backend;
    eo.timeout_ms = o.timeout_ms;
    eo.cuda_stream = o.cuda_stream;
    if (o.backend == TD_EXEC_CPU) {
      eo.compute_workers = o.compute_workers ? o.compute_workers : op->compute_workers;
      eo.comm_workers = o.comm_workers ? o.comm_workers : op->comm_workers;
    } else { /* cuda: blocks per role; 0 = the executor's co-residency-aware split */
      eo.compute_workers = o.compute_workers;
      eo.comm_workers = o.comm_workers;
    }
    op->compute_workers = eo.compute_workers;
    op->comm_workers = eo.comm_workers;
    st = td_exec_create(op->plan, team, &eo, &op->exec);
    if (st != TD_OK)
      td__error_prefix("%s: ", kn);
  }
  if (st != TD_OK) {
    td_compiled_destroy(op->compiled);
    td_plan_destroy(op->plan_ce);
    free(op);
    return st;
  }
  /* The operator keeps the team: td_team_destroy refuses until it is gone.
   * Its own executor is counted as part of it, not as a second user. */
  td__team_users_add(team, TD__TEAM_USER_OPERATOR, 1);
  if (op->exec)
    td__team_users_add(team, TD__TEAM_USER_EXECUTOR, -1);
  *out = op;
  return TD_OK;
}

/* Bytes operand i of this rank occupies (0 when the operator has none). */
static size_t td__tp_operand_bytes(const td_tp_op *op, int i) {
  if (op->bufs[i] < 0)
    return 0;
  const td_buffer_desc *bd = td_plan_buffer(op->plan, op->bufs[i]);
  return (size_t)bd->rows * (size_t)bd->cols * td_dtype_size(bd->dtype);
}

/* What this rank alone can tell about a call's operands: none NULL, and C
 * (written) sharing no byte with A or B (read). An overlap makes every
 * variant compute from operands it has already overwritten (or, for the
 * overlapped plans, from chunks peers are still reading), so it is refused
 * rather than run. */
static td_status td__tp_call_check(const td_tp_op *op, const void *const ptr[3]) {
  const char *kn = td_tp_kind_name(op->d.kind);
  int ar = op->d.kind == TD_TP_ALL_REDUCE;
  const char *names[3] = {ar ? "src" : "A", "B", ar ? "dst" : "C"};
  for (int i = 0; i < 3; i++)
    if (op->bufs[i] >= 0 && !ptr[i])
      return td__error(TD_ERR_INVALID_ARG, "%s: operand %s is NULL on rank %d; pass a buffer of %zu bytes "
                       "(td_tp_operand)", kn, names[i], op->rank, td__tp_operand_bytes(op, i));
  uintptr_t c0 = (uintptr_t)ptr[2];
  size_t cn = td__tp_operand_bytes(op, 2);
  for (int i = 0; i < 2; i++) {
    uintptr_t x0 = (uintptr_t)ptr[i];
    size_t xn = td__tp_operand_bytes(op, i);
    if (xn && cn && x0 < c0 + cn && c0 < x0 + xn)
      /* "pass separate buffers" early: peers relay the first 199 characters (td__tp_call_rec) */
      return td__error(TD_ERR_INVALID_ARG, "%s: rank %d: operand %s [%p, %p) (%zu bytes) overlaps operand %s "
                       "[%p, %p) (%zu bytes); pass separate buffers (%s is written while %s is read, so in-place "
                       "calls are refused)", kn, op->rank, names[2], ptr[2], (void *)(c0 + cn), cn, names[i],
                       ptr[i], (void *)(x0 + xn), xn, names[2], names[i]);
  }
  /* The fused GEMMs move 16-byte pieces (TMA, vector stores); checked here so
   * that a misaligned operand is refused on every rank, not left to one
   * rank's fused call while its peers wait at the first barrier. */
  if (op->fused && op->d.kind != TD_TP_ALL_REDUCE)
    for (int i = 0; i < 3; i++)
      if (op->bufs[i] >= 0 && (uintptr_t)ptr[i] % 16 != 0)
        return td__error(TD_ERR_INVALID_ARG, "%s (fused): rank %d: operand %s at %p is not 16-byte aligned; the "
                         "fused variant needs 16-byte aligned operands (cudaMalloc returns such)", kn, op->rank,
                         names[i], ptr[i]);
  return TD_OK;
}

/* The verdict of one call, exchanged so that a bad operand on one rank makes
 * every rank refuse the call (nothing started, the operator stays usable)
 * instead of leaving the others to wait for it until their deadline. */
typedef struct td__tp_call_rec {
  int32_t status;
  uint32_t pad;
  td__tp_ranges ops; /* this rank's operands as byte ranges */
  char msg[200]; /* the record stays within the collectives' inline size (256 bytes): one step per call */
} td__tp_call_rec;
_Static_assert(sizeof(td__tp_call_rec) <= 256, "the operand-check record must fit the collectives' inline size");

/* Ranks that are threads of one process: no rank's output may overlap
 * another rank's operand (td__tp_cross_overlap). Every rank decides from the
 * same exchanged records, so all refuse alike and nothing has run. Ranks in
 * processes of their own have address spaces of their own: nothing to compare. */
static td_status td__tp_cross_check(const td_tp_op *op, const td__tp_call_rec *all) {
  const char *kn = td_tp_kind_name(op->d.kind);
  if (strcmp(td_world_transport(td_team_world(op->team)), "local") != 0)
    return TD_OK;
  int p = 0, q = 0, qi = 0;
  if (!td__tp_cross_overlap(op->nranks, &all[0].ops, sizeof *all, &p, &q, &qi))
    return TD_OK;
  const int ar = op->d.kind == TD_TP_ALL_REDUCE;
  const char *names[3] = {ar ? "src" : "A", "B", ar ? "dst" : "C"};
  const td__tp_ranges *x = &all[p].ops, *y = &all[q].ops;
  return td__error(TD_ERR_INVALID_ARG, "%s: rank %d's operand %s [0x%" PRIx64 ", 0x%" PRIx64 ") (%" PRIu64 " bytes) "
                   "overlaps rank %d's operand %s [0x%" PRIx64 ", 0x%" PRIx64 ") (%" PRIu64 " bytes); the ranks are "
                   "threads of one process and %s, so every rank refused the call: pass separate buffers", kn, p, names[2],
                   x->lo[2], x->lo[2] + x->len[2], x->len[2], q, names[qi], y->lo[qi], y->lo[qi] + y->len[qi],
                   y->len[qi], qi == 2 ? "both are written" : "one is written while the other is read");
}

static td_status td__tp_call_agree(td_tp_op *op, td_status mine, const void *const *ptr) {
  const char *kn = td_tp_kind_name(op->d.kind);
  td__tp_call_rec rec, *all = calloc((size_t)op->nranks, sizeof *all);
  if (!all) /* peers meet the exchange's deadline, which names this rank */
    return td__error(TD_ERR_NO_MEMORY, "%s: rank %d: out of memory for the operand check", kn, op->rank);
  memset(&rec, 0, sizeof rec);
  rec.status = (int32_t)mine;
  if (mine != TD_OK && snprintf(rec.msg, sizeof rec.msg, "%s", td_last_error()) >= (int)sizeof rec.msg)
    memcpy(rec.msg + sizeof rec.msg - 4, "...", 4); /* cut to fit the record: say so */
  for (int i = 0; ptr && i < 3; i++)
    if (ptr[i]) {
      rec.ops.lo[i] = (uint64_t)(uintptr_t)ptr[i];
      rec.ops.len[i] = (uint64_t)td__tp_operand_bytes(op, i);
    }
  td_status st = td_all_gather(op->team, all, &rec, sizeof rec, TD_U8);
  if (st != TD_OK) {
    free(all);
    op->failed = 1; /* the team is broken: peers may be anywhere */
    td__error_prefix("%s: exchanging the operand check: ", kn);
    return st;
  }
  st = mine;
  for (int r = 0; r < op->nranks && st == TD_OK; r++)
    if (all[r].status != TD_OK)
      st = td__error((td_status)all[r].status, "%s: rank %d refused the call, so this rank did too: %s", kn, r,
                     all[r].msg);
  if (st == TD_OK)
    st = td__tp_cross_check(op, all);
  free(all);
  return st;
}

td_status td__tp_run(td_tp_op *op, td_tp_kind kind, void *c, const void *a, const void *b) {
  if (!op)
    return td__error(TD_ERR_INVALID_ARG, "%s: op is NULL", td_tp_kind_name(kind));
  const char *kn = td_tp_kind_name(kind);
  if (op->d.kind != kind) {
    /* refused on every rank (through the operand-check exchange below), not
     * only here, so the peers in their matching calls do not wait for this one */
    td_status bad = td__error(TD_ERR_INVALID_ARG, "%s: the operator was created as %s; call td_%s%s with it", kn,
                              td_tp_kind_name(op->d.kind), op->d.kind == TD_TP_ALL_REDUCE ? "ll_" : "",
                              td_tp_kind_name(op->d.kind));
    if (op->nranks > 1 && !op->failed)
      return td__tp_call_agree(op, bad, NULL);
    return bad;
  }
  if (op->failed)
    return td__error(TD_ERR_STATE, "%s: an earlier call failed; the operator can only be destroyed", kn);
  const void *ptr[3] = {a, b, c};
  td_status st = td__tp_call_check(op, ptr);
  if (op->fused && st == TD_OK) /* read by the peers only after the exchange below */
    st = td__tp_fused_publish(op, c, a, b);
  if (op->nranks > 1 && (st = td__tp_call_agree(op, st, ptr)) != TD_OK)
    return st;
  if (st != TD_OK)
    return st;
  if (op->fused) {
    st = td__tp_fused_run(op, c, a, b);
    if (st != TD_OK && st != TD_ERR_INVALID_ARG) {
      op->failed = 1;
      td__error_prefix("%s: ", kn);
    }
    return st;
  }
  for (int i = 0; i < 3; i++)
    if (op->bufs[i] >= 0 && ptr[i] != op->bound[i]) {
      st = td_exec_bind(op->exec, op->bufs[i], (void *)ptr[i]);
      if (st != TD_OK)
        return st;
      op->bound[i] = ptr[i];
    }
  st = td_exec_run(op->exec);
  if (st != TD_OK) {
    op->failed = 1;
    td__error_prefix("%s: ", kn);
  }
  return st;
}

td_status td_tp_operand(const td_tp_op *op, td_tp_operand_id which, int rank, td_tp_layout *out) {
  if (!op || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_tp_operand: op or out is NULL");
  if ((int)which < 0 || which > TD_TP_C || rank < 0 || rank >= op->nranks)
    return td__error(TD_ERR_INVALID_ARG, "td_tp_operand: operand %d (0..2) or rank %d (0..%d) out of range",
                     (int)which, rank, op->nranks - 1);
  td_tp_layout l = {0};
  int32_t b = op->bufs[which];
  if (b >= 0) {
    const td_buffer_desc *bd = td_plan_buffer(op->plan, b);
    l.bytes = (size_t)bd->rows * (size_t)bd->cols * td_dtype_size(bd->dtype);
    if (op->d.kind == TD_TP_ALL_REDUCE) { /* a flat vector to the caller */
      l.rows = 1, l.cols = l.ld = (int64_t)op->d.count;
    } else {
      td_compiled_local_shape(op->compiled, op->vals[which], rank, &l.row0, &l.rows, &l.col0, &l.cols);
      l.ld = bd->cols;
    }
  }
  *out = l;
  return TD_OK;
}

const char *td_tp_schedule(const td_tp_op *op, char *buf, size_t cap) {
  if (!op || !buf || cap == 0)
    return buf;
  if (op->fused) {
    char what[160];
    td__tp_fused_describe(op, what, sizeof what);
    snprintf(buf, cap, "%s: %s", td_tp_variant_name(op->variant), what);
  } else
    snprintf(buf, cap, "%s: %d chunk%s per rank, %d compute + %d comm workers", td_tp_variant_name(op->variant),
             op->chunks, op->chunks == 1 ? "" : "s", op->compute_workers, op->comm_workers);
  return buf;
}

void td_tp_choices(const td_tp_op *op, td_tp_variant *variant, int *chunks, int *compute_workers,
                   int *comm_workers) {
  if (!op)
    return;
  if (variant)
    *variant = op->variant;
  if (chunks)
    *chunks = op->chunks;
  if (compute_workers)
    *compute_workers = op->compute_workers;
  if (comm_workers)
    *comm_workers = op->comm_workers;
}

double td_tp_predicted_seconds(const td_tp_op *op) { return op ? op->predicted_s : -1; }

td_status td_tp_destroy(td_tp_op *op) {
  if (!op)
    return TD_OK;
  td__team_users_add(op->team, TD__TEAM_USER_OPERATOR, -1);
  if (!op->fused && op->exec)
    td__team_users_add(op->team, TD__TEAM_USER_EXECUTOR, 1); /* td_exec_destroy takes it off */
  td_status st = op->fused ? td__tp_fused_destroy(op) : td_exec_destroy(op->exec);
  td_compiled_destroy(op->compiled);
  td_plan_destroy(op->plan_ce);
  free(op);
  return st;
}
