/* SPDX-License-Identifier: Apache-2.0
 * Plan validation (executor layer): everything an executor relies on is
 * checked once here, so executors do no checks per task.
 *
 * Checks, in order, each failing with TD_ERR_SCHEDULE and a message that
 * names the rank, the task index and label, and the fault:
 *  1. every task: known kind and worker class; every used view names a known
 *     buffer, lies inside it, and is a peer view only on a TD_BUF_SYMM
 *     buffer with a peer in range; the views have the shapes and dtypes the
 *     kind needs; nothing writes a TD_BUF_INPUT/WEIGHT buffer; dependencies
 *     point to earlier tasks; waits and raises name known signals and ranks.
 *  2. per-launch signal totals T[signal][rank] (sum of the raises aimed at
 *     that rank's copy); each wait's value must be <= T, or no launch could
 *     ever satisfy it.
 *  3. deadlock freedom, by simulation: every rank runs one worker per class
 *     (compute; comm with the copy-engine tasks queued with it, which is how
 *     the CPU executor runs them), each taking its tasks strictly in schedule
 *     order and blocking on the first whose dependencies or waits do not
 *     hold. If some task never runs, there is a cycle of local dependencies,
 *     worker-class order and signal waits across ranks. This is conservative:
 *     it may refuse a plan that would only complete with more workers, but a
 *     plan it accepts completes with any worker counts >= 1 (extra workers
 *     only start tasks earlier). EQ waits are treated as GE here; that no
 *     raise overshoots an EQ wait before it is observed is the plan author's
 *     promise. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/gemm_queue_cfg.h"
#include "exec/schedule_internal.h"

#define TD__TASK_FMT "rank %d task %u '%s': "

static int td__is_float(td_dtype d) { return d == TD_F32 || d == TD_F16 || d == TD_BF16; }

static const char *td__view_name(int which) { return which == 0 ? "a" : which == 1 ? "b" : "c"; }

static const td_view *td__task_view(const td_task *t, int which) {
  return which == 0 ? &t->a : which == 1 ? &t->b : &t->c;
}

/* Checks one view that the task uses; `write` when the task writes it. */
static td_status td__check_view(const td_plan *p, int r, uint32_t i, const td_task *t, int which,
                                int write) {
  const td_view *v = td__task_view(t, which);
  const char *vn = td__view_name(which);
  if (v->buf < 0 || v->buf >= p->nbufs)
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "view %s names unknown buffer %d; the plan has %d buffers",
                     r, i, t->label, vn, v->buf, p->nbufs);
  const td_buffer_desc *b = &p->bufs[v->buf];
  if (v->peer != TD_PEER_SELF) {
    if (v->peer < 0 || v->peer >= p->nranks)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "view %s names peer %d; allowed -1 (self) or 0 to %d", r,
                       i, t->label, vn, v->peer, p->nranks - 1);
    if (b->kind != TD_BUF_SYMM)
      return td__error(TD_ERR_SCHEDULE,
                       TD__TASK_FMT "view %s reads peer %d's copy of buffer '%s', which is %s; only symm "
                       "buffers have peer copies", r, i, t->label, vn, v->peer, b->name,
                       td__buffer_kind_name(b->kind));
  }
  /* Bounds by subtraction only: row0 + rows may overflow int64 (the plan text
   * can hold any int64), and the message prints start and extent, not the sum. */
  if (v->row0 < 0 || v->col0 < 0 || v->rows < 0 || v->cols < 0 || v->row0 > b->rows ||
      v->rows > b->rows - v->row0 || v->col0 > b->cols || v->cols > b->cols - v->col0)
    return td__error(TD_ERR_SCHEDULE,
                     TD__TASK_FMT "view %s (rows %" PRId64 " +%" PRId64 ", cols %" PRId64 " +%" PRId64 ") lies "
                     "outside buffer '%s' (%" PRId64 " x %" PRId64 "); start and extent must be >= 0 and end "
                     "within the buffer", r, i, t->label, vn, v->row0, v->rows, v->col0, v->cols, b->name,
                     b->rows, b->cols);
  if (write && (b->kind == TD_BUF_INPUT || b->kind == TD_BUF_WEIGHT))
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "writes buffer '%s', which is %s (read-only)", r, i,
                     t->label, b->name, td__buffer_kind_name(b->kind));
  return TD_OK;
}

static td_dtype td__vdtype(const td_plan *p, const td_view *v) { return p->bufs[v->buf].dtype; }

static td_status td__same_shape(const td_plan *p, int r, uint32_t i, const td_task *t, int x, int y) {
  const td_view *a = td__task_view(t, x), *b = td__task_view(t, y);
  if (a->rows != b->rows || a->cols != b->cols)
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "%s needs views %s and %s of one shape; got %" PRId64
                     " x %" PRId64 " and %" PRId64 " x %" PRId64, r, i, t->label, td__task_kind_name(t->kind),
                     td__view_name(x), td__view_name(y), a->rows, a->cols, b->rows, b->cols);
  return TD_OK;
}

static td_status td__need_float(const td_plan *p, int r, uint32_t i, const td_task *t, int which) {
  td_dtype d = td__vdtype(p, td__task_view(t, which));
  if (!td__is_float(d))
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "%s needs view %s in f32, f16 or bf16; buffer is %s", r, i,
                     t->label, td__task_kind_name(t->kind), td__view_name(which), td_dtype_name(d));
  return TD_OK;
}

static td_status td__check_gemm(const td_plan *p, int r, uint32_t i, const td_task *t) {
  /* TD_GEMM_QUEUE may carry a packed tile configuration above TD_GEMM_CFG_SHIFT. */
  const uint32_t known = TD_GEMM_TRANS_A | TD_GEMM_TRANS_B | TD_GEMM_ACCUMULATE | TD_GEMM_QUEUE | TD_GEMM_GELU;
  const uint32_t low = t->op & ((1u << TD_GEMM_CFG_SHIFT) - 1u);
  if ((low & ~known) || ((t->op >> TD_GEMM_CFG_SHIFT) && !(t->op & TD_GEMM_QUEUE)))
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "gemm flags 0x%x have unknown bits; allowed TRANS_A (1), "
                     "TRANS_B (2), ACCUMULATE (4), QUEUE (8), GELU (16) and, with QUEUE, a tile configuration from "
                     "bit %d",
                     r, i, t->label, t->op, TD_GEMM_CFG_SHIFT);
  td__gemm_qcfg qcfg;
  if (td__gemm_qcfg_unpack(t->op, &qcfg) < 0)
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "gemm flags 0x%x: the queue tile configuration (bits %d "
                     "and up) is malformed; see src/exec/gemm_queue_cfg.h for its fields and ranges", r, i,
                     t->label, t->op, TD_GEMM_CFG_SHIFT);
  int64_t m = t->c.rows, n = t->c.cols;
  int64_t am = (t->op & TD_GEMM_TRANS_A) ? t->a.cols : t->a.rows;
  int64_t k = (t->op & TD_GEMM_TRANS_A) ? t->a.rows : t->a.cols;
  int64_t bk = (t->op & TD_GEMM_TRANS_B) ? t->b.cols : t->b.rows;
  int64_t bn = (t->op & TD_GEMM_TRANS_B) ? t->b.rows : t->b.cols;
  if (am != m || bn != n || bk != k)
    return td__error(TD_ERR_SCHEDULE,
                     TD__TASK_FMT "gemm shapes do not agree: c %" PRId64 " x %" PRId64 ", op(a) %" PRId64
                     " x %" PRId64 ", op(b) %" PRId64 " x %" PRId64 "; need op(a) M x K, op(b) K x N, c M x N",
                     r, i, t->label, m, n, am, k, bk, bn);
  for (int w = 0; w < 3; w++)
    TD_CHECK(td__need_float(p, r, i, t, w));
  /* BLAS libraries (OpenBLAS with 32-bit blasint, cuBLAS) take int sizes and
   * leading dimensions; larger ones would be truncated, so refuse them here. */
  const int64_t dims[6] = {m, n, k, p->bufs[t->a.buf].cols, p->bufs[t->b.buf].cols, p->bufs[t->c.buf].cols};
  static const char *const dn[6] = {"M", "N", "K", "a's row stride (buffer cols)", "b's row stride (buffer cols)",
                                    "c's row stride (buffer cols)"};
  for (int d = 0; d < 6; d++)
    if (dims[d] > INT32_MAX)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "gemm %s is %" PRId64 "; GEMM tiles take at most %d (BLAS "
                       "int); split the task or the buffer", r, i, t->label, dn[d], dims[d], INT32_MAX);
  return TD_OK;
}

/* Shapes and dtypes per task kind (views already known to be in range). */
static td_status td__check_kind(const td_plan *p, int r, uint32_t i, const td_task *t) {
  switch (t->kind) {
  case TD_TASK_NOP:
    return TD_OK;
  case TD_TASK_GEMM:
    return td__check_gemm(p, r, i, t);
  case TD_TASK_COPY:
    TD_CHECK(td__same_shape(p, r, i, t, 0, 2));
    if (td__vdtype(p, &t->a) != td__vdtype(p, &t->c))
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "copy needs a and c of one dtype; got %s and %s (use an "
                       "ewise copy to convert)", r, i, t->label, td_dtype_name(td__vdtype(p, &t->a)),
                       td_dtype_name(td__vdtype(p, &t->c)));
    return TD_OK;
  case TD_TASK_REDUCE: {
    TD_CHECK(td__same_shape(p, r, i, t, 0, 2));
    td_dtype d = td__vdtype(p, &t->c);
    if (t->op >= TD_RED_OP_COUNT)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "reduce op %u is unknown; allowed sum, max, min, prod", r,
                       i, t->label, t->op);
    if (td__vdtype(p, &t->a) != d || d == TD_U8)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "reduce needs a and c of one dtype other than u8; got %s "
                       "and %s", r, i, t->label, td_dtype_name(td__vdtype(p, &t->a)), td_dtype_name(d));
    return TD_OK;
  }
  case TD_TASK_EWISE:
    if (t->op >= TD_EW_OP_COUNT)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "ewise op %u is unknown; allowed add, mul, gelu, silu, "
                       "scale, copy", r, i, t->label, t->op);
    TD_CHECK(td__same_shape(p, r, i, t, 0, 2));
    TD_CHECK(td__need_float(p, r, i, t, 0));
    TD_CHECK(td__need_float(p, r, i, t, 2));
    if (t->op == TD_EW_ADD || t->op == TD_EW_MUL) {
      TD_CHECK(td__same_shape(p, r, i, t, 1, 2));
      TD_CHECK(td__need_float(p, r, i, t, 1));
    }
    return TD_OK;
  case TD_TASK_RMSNORM:
    TD_CHECK(td__same_shape(p, r, i, t, 0, 2));
    for (int w = 0; w < 3; w++)
      TD_CHECK(td__need_float(p, r, i, t, w));
    if (t->b.rows != 1 || t->b.cols != t->a.cols)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "rmsnorm needs weight view b of 1 x %" PRId64 "; got %"
                       PRId64 " x %" PRId64, r, i, t->label, t->a.cols, t->b.rows, t->b.cols);
    if (!(t->alpha >= 0.0f))
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "rmsnorm epsilon (alpha) %g must be >= 0", r, i, t->label,
                       (double)t->alpha);
    return TD_OK;
  default:
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "unknown task kind %d", r, i, t->label, (int)t->kind);
  }
}

/* Which views a kind reads (bit 0 a, 1 b, 2 c) and writes (c). */
unsigned td__task_views_used(const td_task *t) {
  switch (t->kind) {
  case TD_TASK_GEMM:
  case TD_TASK_RMSNORM:
    return 7;
  case TD_TASK_COPY:
  case TD_TASK_REDUCE:
    return 5;
  case TD_TASK_EWISE:
    return (t->op == TD_EW_ADD || t->op == TD_EW_MUL) ? 7 : 5;
  default:
    return 0;
  }
}

static td_status td__check_task(const td_plan *p, int r, uint32_t i) {
  const td_schedule *s = &p->scheds[r];
  const td_task *t = &s->tasks[i];
  if ((unsigned)t->kind >= TD_TASK_KIND_COUNT)
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "unknown task kind %d", r, i, t->label, (int)t->kind);
  if ((unsigned)t->worker >= TD_WORKER_CLASS_COUNT)
    return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "unknown worker class %d", r, i, t->label, (int)t->worker);
  unsigned used = td__task_views_used(t);
  for (int w = 0; w < 3; w++)
    if (used & (1u << w))
      TD_CHECK(td__check_view(p, r, i, t, w, w == 2));
  TD_CHECK(td__check_kind(p, r, i, t));
  for (uint32_t d = 0; d < t->dep_count; d++) {
    uint32_t dep = s->deps[t->dep_first + d];
    if (dep >= i)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "depends on task %u, which is not earlier in the schedule;"
                       " dependencies must point to earlier tasks", r, i, t->label, dep);
  }
  for (uint32_t w = 0; w < t->wait_count; w++) {
    const td_wait *wt = &s->waits[t->wait_first + w];
    if (wt->signal >= p->nsignals)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "waits on unknown signal %u; the plan has %u signals", r,
                       i, t->label, wt->signal, p->nsignals);
    if (wt->cmp != TD_CMP_GE && wt->cmp != TD_CMP_EQ)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "waits on signal '%s' with comparison %s; allowed ge, eq",
                       r, i, t->label, p->signal_names[wt->signal], td_cmp_name(wt->cmp));
  }
  for (uint32_t k = 0; k < t->raise_count; k++) {
    const td_raise *rs = &s->raises[t->raise_first + k];
    if (rs->signal >= p->nsignals)
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "raises unknown signal %u; the plan has %u signals", r, i,
                       t->label, rs->signal, p->nsignals);
    if (rs->peer != TD_PEER_SELF && (rs->peer < 0 || rs->peer >= p->nranks))
      return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "raises signal '%s' on peer %d; allowed -1 (self) or 0 to "
                       "%d", r, i, t->label, p->signal_names[rs->signal], rs->peer, p->nranks - 1);
  }
  return TD_OK;
}

static td_status td__compute_totals(td_plan *p, uint64_t *tot) {
  for (int r = 0; r < p->nranks; r++) {
    const td_schedule *s = &p->scheds[r];
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      for (uint32_t k = 0; k < t->raise_count; k++) {
        const td_raise *rs = &s->raises[t->raise_first + k];
        int owner = rs->peer == TD_PEER_SELF ? r : rs->peer;
        uint64_t *slot = &tot[(size_t)rs->signal * (size_t)p->nranks + (size_t)owner];
        if (rs->value > TD_SIGNAL_TOTAL_MAX || rs->value > TD_SIGNAL_TOTAL_MAX - *slot)
          return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "raises of signal '%s' on rank %d add up to more than "
                           "%llu (2^23) per launch; the cap keeps (launch - 1) * total + value below 2^63 "
                           "for 2^40 launches", r, i, t->label, p->signal_names[rs->signal], owner,
                           (unsigned long long)TD_SIGNAL_TOTAL_MAX);
        *slot += rs->value;
      }
    }
  }
  for (int r = 0; r < p->nranks; r++) {
    const td_schedule *s = &p->scheds[r];
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      for (uint32_t w = 0; w < t->wait_count; w++) {
        const td_wait *wt = &s->waits[t->wait_first + w];
        uint64_t total = tot[(size_t)wt->signal * (size_t)p->nranks + (size_t)r];
        if (wt->value > total)
          return td__error(TD_ERR_SCHEDULE, TD__TASK_FMT "waits for signal '%s' %s %" PRIu64 ", but all ranks' "
                           "raises add only %" PRIu64 " to rank %d's copy per launch; the wait can never be "
                           "satisfied", r, i, t->label, p->signal_names[wt->signal], td_cmp_name(wt->cmp),
                           wt->value, total, r);
      }
    }
  }
  return TD_OK;
}

/* The per-class queues of the simulation: 0 = compute, 1 = comm + copy engine. */
static int td__sim_queue(td_worker_class c) { return c == TD_WORKER_COMPUTE ? 0 : 1; }

static td_status td__simulate(const td_plan *p) {
  int n = p->nranks;
  size_t total = 0;
  for (int r = 0; r < n; r++)
    total += p->scheds[r].ntasks;
  uint8_t *done = calloc(total ? total : 1, 1);
  uint32_t *heads = calloc((size_t)n * 2, sizeof *heads);
  size_t *base = calloc((size_t)n, sizeof *base);
  uint64_t *sig = calloc((size_t)p->nsignals * (size_t)n + 1, sizeof *sig);
  if (!done || !heads || !base || !sig) {
    free(done), free(heads), free(base), free(sig);
    return td__error(TD_ERR_NO_MEMORY, "td_plan_validate: out of memory simulating %zu tasks", total);
  }
  for (int r = 1; r < n; r++)
    base[r] = base[r - 1] + p->scheds[r - 1].ntasks;
  size_t ndone = 0;
  for (int progress = 1; progress;) {
    progress = 0;
    for (int r = 0; r < n; r++) {
      const td_schedule *s = &p->scheds[r];
      for (int q = 0; q < 2; q++) {
        uint32_t *h = &heads[r * 2 + q];
        for (;;) {
          while (*h < s->ntasks && td__sim_queue(s->tasks[*h].worker) != q)
            (*h)++;
          if (*h >= s->ntasks)
            break;
          const td_task *t = &s->tasks[*h];
          int ready = 1;
          for (uint32_t d = 0; ready && d < t->dep_count; d++)
            ready = done[base[r] + s->deps[t->dep_first + d]];
          for (uint32_t w = 0; ready && w < t->wait_count; w++) {
            const td_wait *wt = &s->waits[t->wait_first + w];
            ready = sig[(size_t)wt->signal * (size_t)n + (size_t)r] >= wt->value;
          }
          if (!ready)
            break;
          for (uint32_t k = 0; k < t->raise_count; k++) {
            const td_raise *rs = &s->raises[t->raise_first + k];
            int owner = rs->peer == TD_PEER_SELF ? r : rs->peer;
            sig[(size_t)rs->signal * (size_t)n + (size_t)owner] += rs->value;
          }
          done[base[r] + *h] = 1;
          ndone++;
          (*h)++;
          progress = 1;
        }
      }
    }
  }
  td_status st = TD_OK;
  if (ndone < total) {
    /* Report the first stuck head, then list the other stuck heads. */
    char others[512] = "";
    size_t len = 0;
    int fr = -1;
    uint32_t fi = 0;
    for (int r = 0; r < n; r++)
      for (int q = 0; q < 2; q++) {
        uint32_t h = heads[r * 2 + q];
        if (h >= p->scheds[r].ntasks)
          continue;
        if (fr < 0) {
          fr = r, fi = h;
        } else if (len < sizeof others - 64) {
          int w = snprintf(others + len, sizeof others - len, "%s rank %d task %u '%s'", len ? ";" : "", r, h,
                           p->scheds[r].tasks[h].label);
          len += w > 0 ? (size_t)w : 0;
        }
      }
    const td_schedule *s = &p->scheds[fr];
    const td_task *t = &s->tasks[fi];
    char why[160] = "";
    for (uint32_t d = 0; !why[0] && d < t->dep_count; d++) {
      uint32_t dep = s->deps[t->dep_first + d];
      if (!done[base[fr] + dep])
        snprintf(why, sizeof why, "its dependency task %u '%s' never finishes", dep, s->tasks[dep].label);
    }
    for (uint32_t w = 0; !why[0] && w < t->wait_count; w++) {
      const td_wait *wt = &s->waits[t->wait_first + w];
      uint64_t v = sig[(size_t)wt->signal * (size_t)n + (size_t)fr];
      if (v < wt->value)
        snprintf(why, sizeof why, "its wait on signal '%s' for %" PRIu64 " stops at %" PRIu64,
                 p->signal_names[wt->signal], wt->value, v);
    }
    st = td__error(TD_ERR_SCHEDULE,
                   TD__TASK_FMT "deadlock: %s (a cycle of dependencies, per-class task order and signal waits "
                   "across ranks; checked with one worker per class); also stuck:%s", fr, fi, t->label, why,
                   len ? others : " none");
  }
  free(done), free(heads), free(base), free(sig);
  return st;
}

td_status td_plan_validate(td_plan *plan) {
  if (!plan)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_validate: plan is NULL");
  plan->validated = 0;
  for (int r = 0; r < plan->nranks; r++)
    for (uint32_t i = 0; i < plan->scheds[r].ntasks; i++)
      TD_CHECK(td__check_task(plan, r, i));
  uint64_t *tot = calloc((size_t)plan->nsignals * (size_t)plan->nranks + 1, sizeof *tot);
  if (!tot)
    return td__error(TD_ERR_NO_MEMORY, "td_plan_validate: out of memory for %u signal totals", plan->nsignals);
  td_status st = td__compute_totals(plan, tot);
  if (st == TD_OK)
    st = td__simulate(plan);
  if (st != TD_OK) {
    free(tot);
    return st;
  }
  free(plan->totals);
  plan->totals = tot;
  plan->validated = 1;
  return TD_OK;
}
