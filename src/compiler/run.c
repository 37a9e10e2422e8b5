/* SPDX-License-Identifier: Apache-2.0
 * Compiler: running a program on a local world and checking it. Compiles the
 * program, makes seeded random global inputs, slices each rank's part into
 * buffers laid out as the plan says (padded to the largest part), runs the
 * plan on one executor per rank (threads of this process), times the
 * launches, reads the trace summary, and compares every output with the f64
 * reference. This is what `tdist run` and the compiler tests use. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compiler/compiler.h"
#include "core/error.h"
#include "core/format.h"
#include "exec/backend.h" /* td__exec_create_cause, td__status_secondary */
#include "tdist/config.h"
#include "tdist/exec.h"
#include "tdist/world.h"

#ifdef TD_HAVE_CUDA_EXEC
#include <cuda_runtime.h>
#endif

typedef struct td__rank_failure {
  td_status status; /* TD_OK: this rank did not fail */
  int consequence;  /* td_exec_create failed here because another rank's step failed */
  unsigned seq;     /* 1 for the first failure of the run, 2 for the next, ... */
  char msg[1024];
} td__rank_failure;

typedef struct td__run {
  const td_compiled *c;
  const td_program_run_opts *o;
  void ***bufs;      /* [rank][buffer] caller-bound memory, NULL for executor-owned */
  double *times;     /* [iter * n + rank] seconds */
  int64_t *comm_ns, *hidden_ns;
  /* Every rank's failure, in the order they happened: a failing rank takes
   * its number before it takes part in td_exec_destroy, so its peers' later
   * failures (a peer-failed, call-order or timeout message) come after it.
   * td_local_world_run would report whichever rank returned first, which is
   * not the cause; td__run_cause picks it. Each rank writes only its own
   * entry; they are read after td_local_world_run joined the ranks. */
  td__rank_failure *fail; /* [n] */
  _Atomic unsigned nfail;
} td__run;

static void td__run_failed(td__run *R, int rank, td_status st, int consequence) {
  td__rank_failure *f = &R->fail[rank];
  if (f->status != TD_OK)
    return; /* the rank's first failure stands */
  f->status = st;
  f->consequence = consequence;
  f->seq = atomic_fetch_add(&R->nfail, 1) + 1;
  snprintf(f->msg, sizeof f->msg, "%s", td_last_error());
}

static int td__failure_class(const td__rank_failure *f) {
  return f->consequence ? 3 : td__status_secondary(f->status);
}

/* The failure to report: the earliest of the lowest class (an originating
 * status before a timeout before a peer's failure or a call mismatch, and a
 * create that failed only because another rank's step did last), so a rank
 * whose own step failed is named even when a peer's consequence came first.
 * Sets the message; returns its status (TD_OK when none failed). */
static td_status td__run_cause(const td__run *R, int n) {
  int best = -1, first = -1;
  for (int r = 0; r < n; r++) {
    const td__rank_failure *f = &R->fail[r];
    if (f->status == TD_OK)
      continue;
    if (first < 0 || f->seq < R->fail[first].seq)
      first = r;
    if (best < 0 || td__failure_class(f) < td__failure_class(&R->fail[best]) ||
        (td__failure_class(f) == td__failure_class(&R->fail[best]) && f->seq < R->fail[best].seq))
      best = r;
  }
  if (best < 0)
    return TD_OK;
  const td__rank_failure *b = &R->fail[best];
  if (best == first)
    return td__error(b->status, "rank %d failed first, with %s: %s", best, td_status_name(b->status), b->msg);
  return td__error(b->status, "rank %d failed with %s: %s [the cause; rank %d failed earlier, with %s, as a "
                   "consequence]", best, td_status_name(b->status), b->msg, first,
                   td_status_name(R->fail[first].status));
}

static uint64_t td__splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double td__uniform(uint64_t *s) { return (double)(td__splitmix(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0; }

static void td__store(void *buf, td_dtype dt, size_t i, double x) {
  switch (dt) {
  case TD_BF16: ((uint16_t *)buf)[i] = td_f32_to_bf16((float)x); break;
  case TD_F16: ((uint16_t *)buf)[i] = td_f32_to_f16((float)x); break;
  default: ((float *)buf)[i] = (float)x; break;
  }
}

static double td__load(const void *buf, td_dtype dt, size_t i) {
  switch (dt) {
  case TD_BF16: return td_bf16_to_f32(((const uint16_t *)buf)[i]);
  case TD_F16: return td_f16_to_f32(((const uint16_t *)buf)[i]);
  default: return ((const float *)buf)[i];
  }
}

static double td__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static td_status td__rank_main(td_world *world, int rank, void *arg) {
  td__run *R = arg;
  const td_plan *plan = td_compiled_plan(R->c);
  td_exec_opts eo;
  td_exec_opts_init(&eo);
  if (R->o->backend && !strcmp(R->o->backend, "cuda"))
    eo.backend = TD_EXEC_CUDA;
  td_compiled_choices(R->c, &eo.compute_workers, &eo.comm_workers, NULL, NULL, NULL);
  eo.trace = 1;
  td_exec *ex = NULL;
  td_status st = td_exec_create(plan, td_world_team(world), &eo, &ex);
  if (st != TD_OK) {
    /* Every rank returns the failing rank's status; only that rank is the cause. */
    int cause = td__exec_create_cause();
    td__run_failed(R, rank, st, cause >= 0 && cause != rank);
    return st;
  }
  int nb = td_plan_nbuffers(plan);
  void **mem = R->bufs[rank]; /* what gets bound: host buffers, or device copies on cuda */
#ifdef TD_HAVE_CUDA_EXEC
  void **dev = NULL;
  if (eo.backend == TD_EXEC_CUDA) { /* td_exec_create made this rank's GPU current on this thread */
    dev = calloc((size_t)nb, sizeof *dev);
    if (!dev)
      st = td__error(TD_ERR_NO_MEMORY, "run: out of memory");
    for (int32_t b = 0; b < nb && st == TD_OK; b++) {
      if (!R->bufs[rank][b])
        continue;
      const td_buffer_desc *d = td_plan_buffer(plan, b);
      size_t bytes = (size_t)(d->rows * d->cols) * td_dtype_size(d->dtype);
      cudaError_t ce = cudaMalloc(&dev[b], bytes);
      if (ce == cudaSuccess)
        ce = cudaMemcpy(dev[b], R->bufs[rank][b], bytes, cudaMemcpyHostToDevice);
      if (ce != cudaSuccess)
        st = td__error(TD_ERR_CUDA, "run: rank %d: device copy of buffer %s failed: %s", rank, d->name,
                       cudaGetErrorString(ce));
    }
    mem = dev;
  }
#endif
  for (int32_t b = 0; b < nb && st == TD_OK; b++)
    if (R->bufs[rank][b])
      st = td_exec_bind(ex, b, mem[b]);
  if (st == TD_OK)
    st = td_exec_run(ex); /* warm-up */
  for (int it = 0; it < R->o->iters && st == TD_OK; it++) {
    double t0 = td__now();
    st = td_exec_run(ex);
    R->times[(size_t)it * (size_t)td_plan_nranks(plan) + (size_t)rank] = td__now() - t0;
  }
  if (st == TD_OK) {
    td_trace_summary sum;
    if (td_exec_trace_summary(ex, &sum) == TD_OK) {
      R->comm_ns[rank] = sum.comm_ns;
      R->hidden_ns[rank] = sum.comm_hidden_ns;
    }
    if (R->o->trace_path)
      st = td_exec_trace_write(ex, R->o->trace_path);
  }
#ifdef TD_HAVE_CUDA_EXEC
  if (dev) { /* outputs back to the host buffers the check reads */
    for (int32_t b = 0; b < nb; b++) {
      const td_buffer_desc *d = td_plan_buffer(plan, b);
      if (st == TD_OK && dev[b] && d->kind == TD_BUF_OUTPUT) {
        cudaError_t ce = cudaMemcpy(R->bufs[rank][b], dev[b], (size_t)(d->rows * d->cols) * td_dtype_size(d->dtype),
                                    cudaMemcpyDeviceToHost);
        if (ce != cudaSuccess)
          st = td__error(TD_ERR_CUDA, "run: rank %d: copying output %s back failed: %s", rank, d->name,
                         cudaGetErrorString(ce));
      }
    }
  }
#endif
  if (st != TD_OK)
    td__run_failed(R, rank, st, 0);
  td_status st2 = td_exec_destroy(ex);
  if (st == TD_OK && st2 != TD_OK)
    td__run_failed(R, rank, st2, 0);
#ifdef TD_HAVE_CUDA_EXEC
  for (int32_t b = 0; dev && b < nb; b++)
    if (dev[b])
      cudaFree(dev[b]);
  free(dev);
#endif
  return st != TD_OK ? st : st2;
}

static int td__cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The larger of err and |y - want|, where a NaN difference (inf - inf, or a
 * NaN on either side) counts as infinite: a NaN must neither hide nor be
 * overwritten by a later finite difference. */
static double td__worse(double err, double y, double want) {
  double e = fabs(y - want);
  if (isnan(e))
    e = INFINITY;
  return e > err ? e : err;
}

static double td__tolerance(td_dtype dt) { return dt == TD_BF16 ? 3e-2 : dt == TD_F16 ? 5e-3 : 1e-4; }

/* The plan's symmetric buffers and signal words against the heap the local
 * world will have (TD_SYMM_HEAP_SIZE), before any operand is allocated: a
 * plan that cannot fit would otherwise fail only after every rank's inputs
 * were made (gigabytes and seconds for large dims), and would name only the
 * first buffer that did not fit, not the total to ask for. */
static td_status td__symm_fits(const td_compiled *c, int overlap) {
  int64_t heap = 0;
  TD_CHECK(td_config_int("TD_SYMM_HEAP_SIZE", &heap));
  int nsymm = 0;
  uint32_t ns = 0;
  uint64_t need = td__compiled_symm_bytes(c, &nsymm, &ns);
  if (need <= (uint64_t)heap)
    return TD_OK;
  /* need counts everything td_exec_create takes (its control block too), so
   * a heap of exactly `ask` MiB is enough; past the largest heap the config
   * accepts, no value is, and saying so beats suggesting one it refuses. */
  uint64_t ask = (need + ((uint64_t)1 << 20) - 1) >> 20;
  char have[160];
  if (ask > ((uint64_t)1 << 20))
    snprintf(have, sizeof have, ", more than the largest symmetric heap TD_SYMM_HEAP_SIZE allows (1024G); use "
             "smaller dims or more ranks");
  else
    snprintf(have, sizeof have, " but the symmetric heap holds %lld bytes per rank; set TD_SYMM_HEAP_SIZE=%lluM (or "
             "more), or use smaller dims or more ranks", (long long)heap, (unsigned long long)ask);
  return td__error(TD_ERR_HEAP_EXHAUSTED, "the %s plan needs %llu bytes of symmetric memory per rank (%d symm "
                   "buffer%s, %u signal words and the executor's %llu-byte control block, each rounded up to 64 "
                   "bytes)%s", overlap ? "overlapped" : "sequential", (unsigned long long)need, nsymm,
                   nsymm == 1 ? "" : "s", ns, (unsigned long long)td__exec_control_bytes(c->n), have);
}

/* This machine's memory in bytes (physical, as the kernel reports it; 0 when
 * unknown), or TD_RUN_HOST_MEMORY: a smaller budget for a shared machine, and
 * how tests reach the refusal below without a machine that small. */
static td_status td__host_memory(double *out, int *from_config) {
  int64_t v = 0;
  if (getenv("TD_RUN_HOST_MEMORY") && *getenv("TD_RUN_HOST_MEMORY")) /* no default: the machine's */
    TD_CHECK(td_config_int("TD_RUN_HOST_MEMORY", &v));
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  *out = v > 0 ? (double)v : pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
  *from_config = v > 0;
  return TD_OK;
}

/* The host memory a run takes at least (every rank's operand buffers; the
 * f64 inputs of the reference and, with --check, its f64 values; on cpu the
 * plan's symmetric buffers of every rank), against the machine's, before
 * anything is allocated: a run that cannot fit would otherwise page for
 * minutes or be killed by the kernel, with no word on why. */
static td_status td__host_fits(const td_program *p, const td_compiled *c, const td_program_run_opts *o,
                               int cuda) {
  const td_plan *plan = td_compiled_plan(c);
  const int n = o->nranks;
  double bufs = 0, inputs = 0, ref = 0, symm = 0;
  for (int32_t b = 0; b < td_plan_nbuffers(plan); b++) {
    const td_buffer_desc *d = td_plan_buffer(plan, b);
    if (d->kind == TD_BUF_INPUT || d->kind == TD_BUF_WEIGHT || d->kind == TD_BUF_OUTPUT)
      bufs += (double)n * (double)d->rows * (double)d->cols * (double)td_dtype_size(d->dtype);
  }
  for (td_value v = 0; v < p->nvals; v++) {
    int64_t Rw, Cw;
    td__val_shape(p, v, &Rw, &Cw);
    double cnt = (double)Rw * (double)Cw * sizeof(double);
    const td__val *V = &p->vals[v];
    if (V->op == TD_OP_INPUT || V->op == TD_OP_WEIGHT)
      inputs += cnt * (V->layout.kind == TD_LAYOUT_PARTIAL ? 1.0 + n : 1.0);
    if (o->check)
      ref += cnt;
  }
  if (!cuda) {
    int nsymm = 0;
    uint32_t ns = 0;
    symm = (double)n * (double)td__compiled_symm_bytes(c, &nsymm, &ns);
  }
  const double need = bufs + inputs + ref + symm;
  double have = 0;
  int configured = 0;
  TD_CHECK(td__host_memory(&have, &configured));
  if (have <= 0 || need <= have)
    return TD_OK;
  char parts[256];
  int k = snprintf(parts, sizeof parts, "the %d rank%s operands %.0f, the reference's f64 inputs %.0f", n,
                   n == 1 ? "'s" : "s'", bufs,
                   inputs);
  if (o->check && k > 0 && (size_t)k < sizeof parts)
    k += snprintf(parts + k, sizeof parts - (size_t)k, ", its f64 values for --check %.0f", ref);
  if (!cuda && k > 0 && (size_t)k < sizeof parts)
    snprintf(parts + k, sizeof parts - (size_t)k, ", the symmetric buffers %.0f", symm);
  /* Dropping --check is a remedy only where the run then fits. */
  const int without_check = o->check && need - ref <= have;
  char nh[32], hh[32];
  td__format_bytes(need, nh, sizeof nh);
  td__format_bytes(have, hh, sizeof hh);
  return td__error(TD_ERR_NO_MEMORY, "the %s plan's run needs at least %.0f bytes (%s) of host memory (%s) "
                   "but %s %.0f bytes (%s); use smaller dims%s",
                   o->overlap ? "overlapped" : "sequential", need, nh, parts,
                   configured ? "TD_RUN_HOST_MEMORY allows" : "this machine has", have, hh,
                   without_check ? ", or run without --check (the reference's values)" : " (every rank of a run "
                              "lives on this machine, so more ranks do not help)");
}

td_status td_program_run(const td_program *p, const td_program_run_opts *o, td_program_run_result *out) {
  if (!p || !o || !out)
    return td__error(TD_ERR_INVALID_ARG, "run: program, opts or result is NULL");
  int cuda = o->backend && !strcmp(o->backend, "cuda");
  if (o->backend && strcmp(o->backend, "cpu") != 0 && !cuda)
    return td__error(TD_ERR_INVALID_ARG, "run: unknown backend '%s' (cpu or cuda)", o->backend);
#ifndef TD_HAVE_CUDA_EXEC
  if (cuda)
    return td__error(TD_ERR_UNSUPPORTED, "run: backend 'cuda' needs a build with the CUDA executor "
                     "(configure with TD_WITH_CUDA=ON where nvcc is present)");
#endif
  if (o->nranks < 1 || o->iters < 1)
    return td__error(TD_ERR_INVALID_ARG, "run: nranks (%d) and iters (%d) must be >= 1", o->nranks, o->iters);
  td_compile_opts co;
  if (o->compile)
    co = *o->compile;
  else
    td_compile_opts_init(&co);
  co.nranks = o->nranks;
  co.overlap = o->overlap;
  if (cuda)
    co.backend_cuda = 1; /* buffers in the program's dtypes */
  td_perf_model model;
  if (!co.model) { /* a broken calibration file is refused here, not silently skipped */
    TD_CHECK(td_perf_model_load_checked(&model));
    co.model = &model;
  }
  td_compiled *c = NULL;
  td_status cst = td_program_compile(p, &co, &c);
  if (cst != TD_OK) { /* nothing ran: say which plan did not compile */
    td__error_prefix("compiling the %s plan: ", o->overlap ? "overlapped" : "sequential");
    return cst;
  }
  /* host memory first: a heap value it would suggest is no use when the run
   * cannot fit the machine anyway */
  cst = td__host_fits(p, c, o, cuda);
  if (cst == TD_OK && !cuda) /* cuda keeps symm buffers in a device arena, not on the host heap */
    cst = td__symm_fits(c, o->overlap);
  if (cst != TD_OK) {
    td_compiled_destroy(c);
    return cst;
  }
  const td_plan *plan = td_compiled_plan(c);
  int n = o->nranks, nb = td_plan_nbuffers(plan);
  td_value nv = p->nvals;
  td__run R = {.c = c, .o = o};
  double **global = calloc((size_t)nv, sizeof *global); /* reference inputs */
  double **ref = calloc((size_t)nv, sizeof *ref);
  double **parts = calloc((size_t)nv * n, sizeof *parts); /* partial inputs: each rank's addend */
  R.bufs = calloc((size_t)n, sizeof *R.bufs);
  R.times = calloc((size_t)o->iters * n, sizeof *R.times);
  R.comm_ns = calloc((size_t)n, sizeof *R.comm_ns);
  R.hidden_ns = calloc((size_t)n, sizeof *R.hidden_ns);
  R.fail = calloc((size_t)n, sizeof *R.fail);
  td_status st = TD_OK;
  if (!global || !ref || !parts || !R.bufs || !R.times || !R.comm_ns || !R.hidden_ns || !R.fail)
    st = td__error(TD_ERR_NO_MEMORY, "run: out of memory");
  for (int r = 0; r < n && st == TD_OK; r++) {
    R.bufs[r] = calloc((size_t)nb, sizeof **R.bufs);
    for (int32_t b = 0; b < nb && R.bufs[r]; b++) {
      const td_buffer_desc *d = td_plan_buffer(plan, b);
      if (d->kind == TD_BUF_INPUT || d->kind == TD_BUF_WEIGHT || d->kind == TD_BUF_OUTPUT) {
        R.bufs[r][b] = calloc((size_t)(d->rows * d->cols), td_dtype_size(d->dtype));
        if (!R.bufs[r][b])
          st = td__error(TD_ERR_NO_MEMORY, "run: out of memory for buffer %s", d->name);
      }
    }
    if (!R.bufs[r])
      st = td__error(TD_ERR_NO_MEMORY, "run: out of memory");
  }
  /* Inputs from files first (checked against the program), then seeded random data. */
  for (int i = 0; i < o->ninputs && st == TD_OK; i++) {
    td_value v = -1;
    for (td_value u = 0; u < nv; u++)
      if ((p->vals[u].op == TD_OP_INPUT || p->vals[u].op == TD_OP_WEIGHT) &&
          !strcmp(p->vals[u].name, o->input_names[i]))
        v = u;
    if (v < 0) {
      /* Say what the name is when the program has it (an output, or a value
       * it computes: data it makes, not data it reads), and what can be fed. */
      td_value other = -1;
      for (td_value u = 0; u < nv; u++)
        if (p->vals[u].name[0] && !strcmp(p->vals[u].name, o->input_names[i]))
          other = u;
      char list[512] = "";
      size_t len = 0;
      for (td_value u = 0; u < nv && len < sizeof list; u++)
        if (p->vals[u].op == TD_OP_INPUT || p->vals[u].op == TD_OP_WEIGHT)
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%s %s", len ? ", " : "",
                                  p->vals[u].op == TD_OP_WEIGHT ? "weight" : "input", p->vals[u].name);
      const char *what = other < 0 ? NULL : p->vals[other].is_output ? "an output of the program"
                                                                     : "a value the program computes";
      if (what)
        st = td__error(TD_ERR_INVALID_ARG, "--input %s: %s is %s, not an input: only inputs and weights come from "
                       "files (this program's: %s)", o->input_names[i], o->input_names[i], what,
                       list[0] ? list : "none");
      else
        st = td__error(TD_ERR_INVALID_ARG, "--input %s: the program has no input or weight of that name (its "
                       "inputs and weights: %s)", o->input_names[i], list[0] ? list : "none");
      break;
    }
    if (p->vals[v].layout.kind == TD_LAYOUT_PARTIAL) {
      st = td__error(TD_ERR_INVALID_ARG, "--input %s: a partial(sum) %s takes random addends per rank; "
                     "it cannot come from a file", o->input_names[i],
                     p->vals[v].op == TD_OP_WEIGHT ? "weight" : "input");
      break;
    }
    int64_t fr, fc, Rw, Cw;
    double *data = NULL;
    st = td__npy_load(o->input_paths[i], &fr, &fc, &data);
    if (st != TD_OK) {
      td__error_prefix("--input %s: ", o->input_names[i]);
      break;
    }
    td__val_shape(p, v, &Rw, &Cw);
    if (fr != Rw || fc != Cw) {
      free(data);
      /* name the dims that differ, file first: "rows (M: 3 vs 4)" */
      char diff[2][160], dims[400] = "";
      td__dimref file_dim[2] = {{-1, fr}, {-1, fc}};
      for (int d = 0; d < 2; d++)
        if ((d ? fc : fr) != (d ? Cw : Rw))
          snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%s (%s)", dims[0] ? " and " : "",
                   d ? "columns" : "rows", td__dim_diff(p, file_dim[d], p->vals[v].shape[d], diff[d], sizeof diff[d]));
      st = td__error(TD_ERR_SHAPE, "--input %s: '%s' holds [%lld, %lld] but %s is [%lld, %lld]: the file's %s differ",
                     o->input_names[i], o->input_paths[i], (long long)fr, (long long)fc, o->input_names[i],
                     (long long)Rw, (long long)Cw, dims);
      break;
    }
    free(global[v]);
    global[v] = data;
  }
  /* Inputs: seeded, uniform in [-1, 1), weights scaled by 1/sqrt(rows) so activations stay O(1). */
  uint64_t seed = o->seed * 0x2545f4914f6cdd1dull + 1;
  for (td_value v = 0; v < nv && st == TD_OK; v++) {
    const td__val *V = &p->vals[v];
    if (V->op != TD_OP_INPUT && V->op != TD_OP_WEIGHT)
      continue;
    int64_t Rw, Cw;
    td__val_shape(p, v, &Rw, &Cw);
    size_t cnt = (size_t)(Rw * Cw);
    double scale = V->op == TD_OP_WEIGHT && Rw > 1 ? 1.0 / sqrt((double)Rw) : 1.0;
    if (V->op == TD_OP_WEIGHT && Rw == 1) /* a norm weight: around 1 */
      scale = 0.5;
    int from_file = global[v] != NULL;
    if (!from_file)
      global[v] = calloc(cnt ? cnt : 1, sizeof(double));
    if (!global[v]) {
      st = td__error(TD_ERR_NO_MEMORY, "run: out of memory");
      break;
    }
    int partial = V->layout.kind == TD_LAYOUT_PARTIAL;
    for (int r = 0; r < (partial ? n : 1) && st == TD_OK && !from_file; r++) {
      double *g = partial ? (parts[v * n + r] = malloc(sizeof(double) * (cnt ? cnt : 1))) : global[v];
      if (!g) {
        st = td__error(TD_ERR_NO_MEMORY, "run: out of memory");
        break;
      }
      for (size_t i = 0; i < cnt; i++) {
        double x = td__uniform(&seed) * scale + (V->op == TD_OP_WEIGHT && Rw == 1 ? 1.0 : 0.0);
        if (partial) { /* the reference sees the sum of the stored addends */
          float tmp;
          td__store(&tmp, V->dtype, 0, x);
          x = td__load(&tmp, V->dtype, 0);
          global[v][i] += x;
        }
        g[i] = x;
      }
    }
    int32_t b = td_compiled_buffer(c, v);
    for (int r = 0; r < n && st == TD_OK; r++) {
      int64_t r0, rows, c0, cols;
      td_compiled_local_shape(c, v, r, &r0, &rows, &c0, &cols);
      const td_buffer_desc *d = td_plan_buffer(plan, b);
      const double *src = partial ? parts[v * n + r] : global[v];
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
          { /* round to the value's dtype, store in the buffer's (f32 for prepacked weights) */
            float tmp;
            td__store(&tmp, V->dtype, 0, src[(r0 + i) * Cw + c0 + j]);
            td__store(R.bufs[r][b], d->dtype, (size_t)(i * d->cols + j), td__load(&tmp, V->dtype, 0));
          }
    }
  }
  if (st == TD_OK) {
    td_world_opts wo;
    td_world_opts_init(&wo);
    st = td_local_world_run(n, &wo, td__rank_main, &R);
    if (st != TD_OK && atomic_load(&R.nfail) > 0) /* the cause, not the rank that returned first */
      st = td__run_cause(&R, n);
  }
  td_program_run_result res = {0, -1, 0, 0, 1, 0};
  if (st == TD_OK) {
    double *med = malloc(sizeof(double) * (size_t)o->iters);
    for (int it = 0; med && it < o->iters; it++) {
      med[it] = 0;
      for (int r = 0; r < n; r++)
        if (R.times[(size_t)it * n + r] > med[it])
          med[it] = R.times[(size_t)it * n + r];
    }
    if (med) {
      qsort(med, (size_t)o->iters, sizeof *med, td__cmp_double);
      res.seconds = med[o->iters / 2];
      free(med);
    }
    int64_t comm = 0, hid = 0;
    for (int r = 0; r < n; r++)
      comm += R.comm_ns[r], hid += R.hidden_ns[r];
    res.comm_hidden = comm > 0 ? (double)hid / (double)comm : -1;
  }
  if (st == TD_OK && o->check) {
    for (td_value v = 0; v < nv; v++) { /* inf or NaN in the data: the errors below are then inf */
      int64_t Rw, Cw;
      td__val_shape(p, v, &Rw, &Cw);
      for (int64_t i = 0; global[v] && i < Rw * Cw && !res.nonfinite; i++) /* partial addends are random */
        res.nonfinite = !isfinite(global[v][i]);
    }
    st = td_program_reference(p, (const double *const *)global, ref);
    double worst = 0, tol = 0;
    for (td_value v = 0; v < nv && st == TD_OK; v++) {
      const td__val *V = &p->vals[v];
      if (!V->is_output)
        continue;
      int64_t Rw, Cw;
      td__val_shape(p, v, &Rw, &Cw);
      double maxref = 1e-30, maxerr = 0;
      for (int64_t i = 0; i < Rw * Cw; i++) {
        if (fabs(ref[v][i]) > maxref)
          maxref = fabs(ref[v][i]);
        if (!isfinite(ref[v][i]))
          res.nonfinite = 1;
      }
      int32_t b = td_compiled_buffer(c, v);
      const td_buffer_desc *d = td_plan_buffer(plan, b);
      int partial = V->layout.kind == TD_LAYOUT_PARTIAL;
      double *sum = partial ? calloc((size_t)(Rw * Cw), sizeof(double)) : NULL;
      for (int r = 0; r < n; r++) {
        int64_t r0, rows, c0, cols;
        td_compiled_local_shape(c, v, r, &r0, &rows, &c0, &cols);
        for (int64_t i = 0; i < rows; i++)
          for (int64_t j = 0; j < cols; j++) {
            double y = td__load(R.bufs[r][b], V->dtype, (size_t)(i * d->cols + j));
            int64_t g = (r0 + i) * Cw + c0 + j;
            if (sum)
              sum[g] += y;
            else
              maxerr = td__worse(maxerr, y, ref[v][g]);
          }
      }
      for (int64_t g = 0; sum && g < Rw * Cw; g++)
        maxerr = td__worse(maxerr, sum[g], ref[v][g]);
      free(sum);
      double rel = maxerr / maxref;
      if (isnan(rel)) /* inf / inf: an infinite reference */
        rel = INFINITY;
      if (rel > worst)
        worst = rel;
      if (td__tolerance(V->dtype) > tol)
        tol = td__tolerance(V->dtype);
      if (!(rel <= td__tolerance(V->dtype)))
        res.pass = 0;
    }
    res.max_rel_error = worst;
    res.tolerance = tol;
  }
  for (td_value v = 0; v < nv; v++) {
    if (global)
      free(global[v]);
    if (ref)
      free(ref[v]);
    for (int r = 0; parts && r < n; r++)
      free(parts[v * n + r]);
  }
  for (int r = 0; R.bufs && r < n; r++) {
    for (int32_t b = 0; R.bufs[r] && b < nb; b++)
      free(R.bufs[r][b]);
    free(R.bufs[r]);
  }
  free(R.bufs);
  free(R.times);
  free(R.comm_ns);
  free(R.hidden_ns);
  free(R.fail);
  free(global);
  free(ref);
  free(parts);
  td_compiled_destroy(c);
  if (st == TD_OK)
    *out = res;
  return st;
}
