/* SPDX-License-Identifier: Apache-2.0
 * Compiler: explain and predict. Simulates a compiled plan with the perf
 * model the way the executor runs it (per rank and worker class, workers take
 * tasks in schedule order; a task starts when its worker is free, its local
 * deps are done and its waits are met by raises already simulated), then
 * prints each rank's schedule with the predicted start/end of every task and
 * the predicted share of communication hidden under compute.
 * Compute tasks are slowed by the oversubscription of cores (ranks x compute
 * workers over cores), as on a CPU box running every rank.
 * The simulation is also a static check: a wait that no raise ever meets is
 * reported (TD_ERR_SCHEDULE naming rank, task and signal). */
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "compiler/compiler.h"
#include "core/error.h"
#include "exec/backend.h"
#include "exec/gemm_queue_cfg.h"

typedef struct td__raise_ev {
  double t;
  uint64_t value;
} td__raise_ev;

typedef struct td__sim {
  const td_plan *plan;
  int n;
  double **start, **end;       /* [rank][task]; end < 0: not simulated */
  td__raise_ev **ev;           /* [signal * n + rank] */
  uint32_t *nev, *evcap;
  double hidden_s, comm_s, makespan_s;
  double *rank_comm, *rank_hidden, *rank_end;
} td__sim;

static int td__class(const td_task *t) { return t->worker == TD_WORKER_COMPUTE ? 0 : 1; }

/* Time at which rank's copy of signal reaches `value` with the raises known so far; -1 if never. */
static double td__wait_time(const td__sim *S, uint32_t sig, int rank, uint64_t value) {
  const td__raise_ev *e = S->ev[(size_t)sig * S->n + rank];
  uint32_t n = S->nev[(size_t)sig * S->n + rank];
  double t = 0;
  uint64_t sum = 0;
  /* events are few per (signal, rank): repeated min-selection */
  char used[256] = {0};
  if (value == 0)
    return 0;
  if (n > 256)
    n = 256;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++)
      if (!used[i] && (best == UINT32_MAX || e[i].t < e[best].t))
        best = i;
    used[best] = 1;
    sum += e[best].value;
    t = e[best].t;
    if (sum >= value)
      return t;
  }
  return -1;
}

static void td__sim_free(td__sim *S) {
  for (int r = 0; r < S->n; r++) {
    if (S->start)
      free(S->start[r]);
    if (S->end)
      free(S->end[r]);
  }
  free(S->start);
  free(S->end);
  if (S->ev)
    for (size_t i = 0; i < (size_t)td_plan_nsignals(S->plan) * S->n; i++)
      free(S->ev[i]);
  free(S->ev);
  free(S->nev);
  free(S->evcap);
  free(S->rank_comm);
  free(S->rank_hidden);
  free(S->rank_end);
}

static td_status td__simulate(const td_compiled *c, td__sim *S) {
  const td_plan *plan = c->plan;
  int n = c->n;
  memset(S, 0, sizeof *S);
  S->plan = plan;
  S->n = n;
  size_t nsig = td_plan_nsignals(plan);
  S->start = calloc((size_t)n, sizeof *S->start);
  S->end = calloc((size_t)n, sizeof *S->end);
  S->ev = calloc(nsig * n + 1, sizeof *S->ev);
  S->nev = calloc(nsig * n + 1, sizeof *S->nev);
  S->evcap = calloc(nsig * n + 1, sizeof *S->evcap);
  S->rank_comm = calloc((size_t)n, sizeof(double));
  S->rank_hidden = calloc((size_t)n, sizeof(double));
  S->rank_end = calloc((size_t)n, sizeof(double));
  int W[2] = {c->compute_workers, c->comm_workers};
  /* per rank and class: ordered task lists, cursor, worker free times */
  uint32_t **list = calloc((size_t)n * 2, sizeof *list), *cnt = calloc((size_t)n * 2, sizeof *cnt),
           *cur = calloc((size_t)n * 2, sizeof *cur);
  double *freeat = calloc((size_t)n * 2 * 64, sizeof *freeat);
  td_status st = TD_OK;
  if (!S->start || !S->end || !S->ev || !S->nev || !S->evcap || !list || !cnt || !cur || !freeat ||
      !S->rank_comm || !S->rank_hidden || !S->rank_end)
    st = td__error(TD_ERR_NO_MEMORY, "explain: out of memory");
  uint32_t total = 0;
  for (int r = 0; r < n && st == TD_OK; r++) {
    const td_schedule *s = td_plan_schedule(plan, r);
    S->start[r] = calloc(s->ntasks + 1, sizeof(double));
    S->end[r] = malloc(sizeof(double) * (s->ntasks + 1));
    list[2 * r] = malloc(sizeof(uint32_t) * (s->ntasks + 1));
    list[2 * r + 1] = malloc(sizeof(uint32_t) * (s->ntasks + 1));
    if (!S->start[r] || !S->end[r] || !list[2 * r] || !list[2 * r + 1]) {
      st = td__error(TD_ERR_NO_MEMORY, "explain: out of memory");
      break;
    }
    for (uint32_t i = 0; i < s->ntasks; i++) {
      S->end[r][i] = -1;
      int k = td__class(&s->tasks[i]);
      list[2 * r + k][cnt[2 * r + k]++] = i;
    }
    total += s->ntasks;
  }
  for (int k = 0; k < 2; k++)
    if (W[k] < 1)
      W[k] = 1;
    else if (W[k] > 64)
      W[k] = 64;
  /* More compute workers than cores (ranks are threads of one machine): each
   * runs at cores / workers of its speed. Comm workers mostly wait, so they
   * are not counted. */
  int cores = c->model.cores > 0 ? c->model.cores : (int)sysconf(_SC_NPROCESSORS_ONLN);
  double share = cores > 0 && n * W[0] > cores ? (double)(n * W[0]) / cores : 1.0;
  for (uint32_t done = 0; done < total && st == TD_OK; done++) {
    double best = -1;
    int br = -1, bk = -1, bw = -1;
    for (int r = 0; r < n; r++) {
      const td_schedule *s = td_plan_schedule(plan, r);
      for (int k = 0; k < 2; k++) {
        if (cur[2 * r + k] >= cnt[2 * r + k])
          continue;
        const td_task *t = &s->tasks[list[2 * r + k][cur[2 * r + k]]];
        int w = 0;
        for (int i = 1; i < W[k]; i++)
          if (freeat[(2 * r + k) * 64 + i] < freeat[(2 * r + k) * 64 + w])
            w = i;
        double t0 = freeat[(2 * r + k) * 64 + w];
        int ok = 1;
        for (uint32_t d = 0; d < t->dep_count && ok; d++) {
          double e = S->end[r][s->deps[t->dep_first + d]];
          if (e < 0)
            ok = 0;
          else if (e > t0)
            t0 = e;
        }
        for (uint32_t d = 0; d < t->wait_count && ok; d++) {
          const td_wait *wt = &s->waits[t->wait_first + d];
          double e = td__wait_time(S, wt->signal, r, wt->value);
          if (e < 0)
            ok = 0;
          else if (e > t0)
            t0 = e;
        }
        if (ok && (best < 0 || t0 < best))
          best = t0, br = r, bk = k, bw = w;
      }
    }
    if (br < 0) { /* nothing can start: name the first stuck task */
      for (int r = 0; r < n; r++)
        for (int k = 0; k < 2; k++)
          if (cur[2 * r + k] < cnt[2 * r + k]) {
            uint32_t i = list[2 * r + k][cur[2 * r + k]];
            const td_task *t = &td_plan_schedule(plan, r)->tasks[i];
            st = td__error(TD_ERR_SCHEDULE, "explain: rank %d task %u (%s) can never start: a wait on "
                           "signal '%s' or a dependency is never met", r, i, t->label,
                           t->wait_count ? td_plan_signal_name(plan, td_plan_schedule(plan, r)
                                                                      ->waits[t->wait_first].signal) : "-");
            goto out;
          }
    }
    const td_schedule *s = td_plan_schedule(plan, br);
    uint32_t i = list[2 * br + bk][cur[2 * br + bk]++];
    const td_task *t = &s->tasks[i];
    double dur = td__model_task_seconds(&c->model, plan, t);
    if (bk == 0)
      dur *= share; /* compute workers of all ranks sharing fewer cores */
    if (!(dur >= 0 && best + dur < 1e30)) { /* NaN or huge: constants out of range (model given in C) */
      st = td__error(TD_ERR_INVALID_ARG, "explain: rank %d task %u (%s): predicted time %g s is not a finite "
                     "time; the perf model's constants must be positive finite numbers (alpha_s %g, "
                     "beta_bytes_s %g, flops_s %g, mem_bytes_s %g, task_overhead_s %g, transcendental_s %g)",
                     br, i, t->label, best + dur, c->model.alpha_s, c->model.beta_bytes_s, c->model.flops_s,
                     c->model.mem_bytes_s, c->model.task_overhead_s, c->model.transcendental_s);
      goto out;
    }
    S->start[br][i] = best;
    S->end[br][i] = best + dur;
    freeat[(2 * br + bk) * 64 + bw] = best + dur;
    for (uint32_t x = 0; x < t->raise_count; x++) {
      const td_raise *rs = &s->raises[t->raise_first + x];
      int peer = rs->peer == TD_PEER_SELF ? br : rs->peer;
      size_t slot = (size_t)rs->signal * n + peer;
      if (S->nev[slot] == S->evcap[slot]) {
        uint32_t cap = S->evcap[slot] ? S->evcap[slot] * 2 : 4;
        td__raise_ev *e = realloc(S->ev[slot], sizeof *e * cap);
        if (!e) {
          st = td__error(TD_ERR_NO_MEMORY, "explain: out of memory");
          goto out;
        }
        S->ev[slot] = e;
        S->evcap[slot] = cap;
      }
      S->ev[slot][S->nev[slot]++] = (td__raise_ev){best + dur, rs->value};
    }
  }
  /* hidden share: comm time covered by the union of compute intervals, per rank */
  for (int r = 0; r < n && st == TD_OK; r++) {
    const td_schedule *s = td_plan_schedule(plan, r);
    for (uint32_t i = 0; i < s->ntasks; i++) {
      if (S->end[r][i] > S->rank_end[r])
        S->rank_end[r] = S->end[r][i];
      if (td__class(&s->tasks[i]) != 1)
        continue;
      double a = S->start[r][i], b = S->end[r][i];
      S->rank_comm[r] += b - a;
      /* merge overlaps with compute tasks (quadratic, fine for explain sizes) */
      double covered = 0, from = a;
      while (from < b) {
        double best_end = from;
        for (uint32_t j = 0; j < s->ntasks; j++)
          if (td__class(&s->tasks[j]) == 0 && S->start[r][j] <= from && S->end[r][j] > best_end)
            best_end = S->end[r][j];
        if (best_end > from) {
          double e = best_end < b ? best_end : b;
          covered += e - from;
          from = e;
        } else {
          double next = b;
          for (uint32_t j = 0; j < s->ntasks; j++)
            if (td__class(&s->tasks[j]) == 0 && S->start[r][j] > from && S->start[r][j] < next)
              next = S->start[r][j];
          from = next;
        }
      }
      S->rank_hidden[r] += covered;
    }
    S->comm_s += S->rank_comm[r];
    S->hidden_s += S->rank_hidden[r];
    if (S->rank_end[r] > S->makespan_s)
      S->makespan_s = S->rank_end[r];
  }
out:
  for (int i = 0; i < 2 * n && list; i++)
    free(list[i]);
  free(list);
  free(cnt);
  free(cur);
  free(freeat);
  if (st != TD_OK)
    td__sim_free(S);
  return st;
}

td_status td_compiled_predict(const td_compiled *c, td_prediction *out) {
  if (!c || !out)
    return td__error(TD_ERR_INVALID_ARG, "predict: compiled or out is NULL");
  td__sim S;
  TD_CHECK(td__simulate(c, &S));
  out->makespan_s = S.makespan_s;
  out->comm_s = S.comm_s;
  out->hidden_share = S.comm_s > 0 ? S.hidden_s / S.comm_s : 0;
  td__sim_free(&S);
  return TD_OK;
}

static const char *td__kind_name(td_task_kind k) {
  static const char *const names[] = {"nop", "gemm", "copy", "reduce", "ewise", "rmsnorm"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static const char *td__buf_kind(td_buffer_kind k) {
  static const char *const names[] = {"input", "weight", "output", "symm", "local"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* cpu executor: every symm buffer and the signal words are td_symm_alloc'd
 * with 64-byte alignment (src/exec/cpu/cpu_exec.c), one after another. */
#define TD__SYMM_ROUND(b) (((b) + 63) & ~(uint64_t)63)

/* td_exec_create's own block, allocated before the plan's buffers: the
 * agreement slots (td__agree_block_bytes, exec_agree.c). */
uint64_t td__exec_control_bytes(int nranks) { return TD__SYMM_ROUND((uint64_t)td__agree_block_bytes(nranks)); }

uint64_t td__compiled_symm_bytes(const td_compiled *c, int *nbuffers, uint32_t *nsignals) {
  const td_plan *plan = td_compiled_plan(c);
  uint64_t total = 0;
  int nsymm = 0;
  for (int32_t b = 0; b < td_plan_nbuffers(plan); b++) {
    const td_buffer_desc *d = td_plan_buffer(plan, b);
    if (d->kind != TD_BUF_SYMM)
      continue;
    uint64_t bytes = (uint64_t)(d->rows * d->cols) * td_dtype_size(d->dtype);
    total += TD__SYMM_ROUND(bytes ? bytes : 1);
    nsymm++;
  }
  uint32_t ns = td_plan_nsignals(plan);
  total += TD__SYMM_ROUND((uint64_t)(ns ? ns : 1) * sizeof(uint64_t));
  total += td__exec_control_bytes(c->n);
  if (nbuffers)
    *nbuffers = nsymm;
  if (nsignals)
    *nsignals = ns;
  return total;
}

td_status td_compiled_explain(const td_compiled *c, FILE *out) {
  if (!c || !out)
    return td__error(TD_ERR_INVALID_ARG, "explain: compiled or out is NULL");
  td__sim S;
  TD_CHECK(td__simulate(c, &S));
  const td_plan *plan = c->plan;
  const td_program *p = c->program;
  fprintf(out, "program %s: %d ranks\n", p->file[0] ? p->file : "(built in C)", c->n);
  for (td_value v = 0; v < p->nvals; v++) {
    char lab[40], lay[24];
    int64_t R, C;
    td__val_shape(p, v, &R, &C);
    fprintf(out, "  %-10s %-14s %-4s [%lld, %lld] %s%s\n", td__val_label(p, v, lab, sizeof lab),
            td_op_name(p->vals[v].op), td_dtype_name(p->vals[v].dtype), (long long)R, (long long)C,
            td_layout_format(p->vals[v].layout, lay, sizeof lay), p->vals[v].is_output ? "  (output)" : "");
  }
  fprintf(out, "choices: %d compute + %d comm workers per rank, %d chunk%s per rank part, tiles %lld rows x %s cols\n",
          c->compute_workers, c->comm_workers, c->chunks, c->chunks > 1 ? "s" : "", (long long)c->tile_rows,
          c->tile_cols ? "tile_cols" : "all");
  if (c->gq.on)
    fprintf(out, "gemm: kernel queue on %s: whole-row-block GEMMs as Hopper GEMM kernels; tile configuration %d "
            "from the tuning cache, %d by the default rule%s%s; %d on sub-tile grids (layout)\n",
            c->gq.gpu[0] ? c->gq.gpu : "the target GPU", c->gq.cached, c->gq.rule, c->gq.first[0] ? ", first: " : "",
            c->gq.first, c->gq.plain);
  else if (c->gq.why[0])
    fprintf(out, "gemm: persistent-kernel tiles (no kernel queue: %s)\n", c->gq.why);
  int cores = c->model.cores > 0 ? c->model.cores : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && c->n * (c->compute_workers + c->comm_workers) > cores)
    fprintf(out, "note: %d ranks x %d workers > %d cores: comm workers share cores with compute workers, so\n"
            "      hidden communication still costs CPU time (the prediction assumes it does not)\n",
            c->n, c->compute_workers + c->comm_workers, cores);
  fprintf(out, "model: alpha %.2f us, beta %.2f GB/s, %.1f GFLOP/s per worker, memory %.2f GB/s, task %.2f us\n",
          c->model.alpha_s * 1e6, c->model.beta_bytes_s / 1e9, c->model.flops_s / 1e9,
          c->model.mem_bytes_s / 1e9, c->model.task_overhead_s * 1e6);
  fprintf(out, "buffers:\n");
  for (int32_t b = 0; b < td_plan_nbuffers(plan); b++) {
    const td_buffer_desc *d = td_plan_buffer(plan, b);
    fprintf(out, "  b%-3d %-20s %-6s %-4s %lld x %lld\n", (int)b, d->name, td__buf_kind(d->kind),
            td_dtype_name(d->dtype), (long long)d->rows, (long long)d->cols);
  }
  { /* what TD_SYMM_HEAP_SIZE must hold on the cpu backend (tdist run refuses a plan that does not fit) */
    int nsymm = 0;
    uint32_t ns = 0;
    uint64_t symm = td__compiled_symm_bytes(c, &nsymm, &ns);
    fprintf(out, "symmetric: %llu bytes per rank (%.2f MiB: %d symm buffer%s + %u signal words + the executor's %llu-byte "
            "control block, 64-byte aligned; on cpu, TD_SYMM_HEAP_SIZE must hold it)\n", (unsigned long long)symm,
            (double)symm / 1048576.0, nsymm, nsymm == 1 ? "" : "s", ns,
            (unsigned long long)td__exec_control_bytes(c->n));
  }
  for (int r = 0; r < c->n; r++) {
    const td_schedule *s = td_plan_schedule(plan, r);
    fprintf(out, "\nrank %d: %u tasks\n", r, s->ntasks);
    fprintf(out, "  %4s %-7s %-7s %-24s %10s %10s  %s\n", "#", "worker", "kind", "label", "start_us", "end_us",
            "deps / waits / raises");
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      fprintf(out, "  %4u %-7s %-7s %-24s %10.1f %10.1f ", i, t->worker == TD_WORKER_COMPUTE ? "compute" : "comm",
              td__kind_name(t->kind), t->label, S.start[r][i] * 1e6, S.end[r][i] * 1e6);
      if (t->dep_count) {
        fprintf(out, " deps");
        for (uint32_t d = 0; d < t->dep_count && d < 6; d++)
          fprintf(out, "%s%u", d ? "," : " ", s->deps[t->dep_first + d]);
        if (t->dep_count > 6)
          fprintf(out, ",..(%u)", t->dep_count);
      }
      for (uint32_t w = 0; w < t->wait_count && w < 4; w++) {
        const td_wait *wt = &s->waits[t->wait_first + w];
        fprintf(out, " wait %s>=%llu", td_plan_signal_name(plan, wt->signal), (unsigned long long)wt->value);
      }
      if (t->wait_count > 4)
        fprintf(out, " ..(%u waits)", t->wait_count);
      if (t->kind == TD_TASK_GEMM && (t->op & TD_GEMM_QUEUE)) {
        td__gemm_qcfg q;
        char cfg[48] = "sub-tile grid";
        if (td__gemm_qcfg_unpack(t->op, &q) == 1)
          td__gemm_qcfg_format(&q, cfg, sizeof cfg);
        fprintf(out, " queue[%s]", cfg);
      }
      for (uint32_t x = 0; x < t->raise_count; x++) {
        const td_raise *rs = &s->raises[t->raise_first + x];
        fprintf(out, " raise %s@%d+%llu", td_plan_signal_name(plan, rs->signal),
                rs->peer == TD_PEER_SELF ? r : rs->peer, (unsigned long long)rs->value);
      }
      fputc('\n', out);
    }
    /* A text Gantt chart of the prediction: one row per worker class, 64
     * columns over the launch; each column shows the kind of task running
     * there (G gemm, E element-wise, C copy/put, R reduce, N rmsnorm, - nop, . idle). */
    enum { W = 64 };
    for (int k = 0; k < 2 && S.makespan_s > 0; k++) {
      char row[W + 1];
      memset(row, '.', W);
      row[W] = 0;
      for (uint32_t i = 0; i < s->ntasks; i++) {
        const td_task *t = &s->tasks[i];
        if (td__class(t) != k)
          continue;
        /* Clamped: the simulation keeps times finite, but a column must never leave the row. */
        double f0 = S.start[r][i] / S.makespan_s * W, f1 = S.end[r][i] / S.makespan_s * W;
        int c0 = f0 > 0 ? (f0 < W - 1 ? (int)f0 : W - 1) : 0, c1 = f1 > 0 ? (f1 < W - 1 ? (int)f1 : W - 1) : 0;
        static const char sym[] = "-GCREN";
        for (int col = c0; col <= c1; col++)
          row[col] = (unsigned)t->kind < 6 ? sym[t->kind] : '?';
      }
      fprintf(out, "  %-7s |%s|\n", k == 0 ? "compute" : "comm", row);
    }
    fprintf(out, "  predicted: ends at %.1f us; communication %.1f us, %.0f%% hidden under compute\n",
            S.rank_end[r] * 1e6, S.rank_comm[r] * 1e6,
            S.rank_comm[r] > 0 ? 100.0 * S.rank_hidden[r] / S.rank_comm[r] : 0.0);
  }
  fprintf(out, "\npredicted launch: %.1f us; communication %.1f us over all ranks, %.0f%% hidden under compute\n",
          S.makespan_s * 1e6, S.comm_s * 1e6, S.comm_s > 0 ? 100.0 * S.hidden_s / S.comm_s : 0.0);
  td__sim_free(&S);
  return TD_OK;
}
