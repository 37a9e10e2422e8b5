/* SPDX-License-Identifier: Apache-2.0
 * Compiler middle: the lowering driver. Creates one plan buffer per value,
 * walks the ops in order (operands always precede their users), and hands each
 * op to its pattern file (lower_*.c). Holds the helpers the patterns share:
 * local extents of a sharded value, readiness maps (which local tasks or
 * signals make a row block of a value readable), task emission with
 * de-duplicated deps and waits, signal and buffer creation. Ends with
 * td_plan_validate, so a plan that leaves here is runnable. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "core/error.h"

void td_compile_opts_init(td_compile_opts *o) {
  memset(o, 0, sizeof *o);
  o->nranks = 1;
  o->overlap = 1;
  o->one_shot_bytes = -1;
}

static int td__sharded(const td_program *p, td_value v, int dim) {
  td_layout l = p->vals[v].layout;
  return l.kind == TD_LAYOUT_SHARD && l.dim == dim;
}

void td__local_extent(const td__lower *L, td_value v, int rank, int64_t *row0, int64_t *rows,
                      int64_t *col0, int64_t *cols) {
  int64_t R, C;
  td__val_shape(L->p, v, &R, &C);
  size_t off, len;
  *row0 = 0, *rows = R, *col0 = 0, *cols = C;
  if (td__sharded(L->p, v, 0)) {
    td_chunk_range((size_t)R, L->n, rank, &off, &len);
    *row0 = (int64_t)off, *rows = (int64_t)len;
  } else if (td__sharded(L->p, v, 1)) {
    td_chunk_range((size_t)C, L->n, rank, &off, &len);
    *col0 = (int64_t)off, *cols = (int64_t)len;
  }
}

static td__readymap *td__map(td__lower *L, td_value v, int rank) {
  return &L->ready[(size_t)v * (size_t)L->n + (size_t)rank];
}

static void td__ready_add(td__lower *L, td_value v, int rank, td__ready e) {
  td__readymap *m = td__map(L, v, rank);
  if (e.rows <= 0)
    return;
  if (m->n == m->cap) {
    uint32_t cap = m->cap ? m->cap * 2 : 16;
    td__ready *n = realloc(m->e, sizeof *n * cap);
    if (!n) {
      L->st = td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
      return;
    }
    m->e = n;
    m->cap = cap;
  }
  m->e[m->n++] = e;
}

void td__ready_task(td__lower *L, td_value v, int rank, int64_t row0, int64_t rows, uint32_t task) {
  if (task != UINT32_MAX)
    td__ready_add(L, v, rank, (td__ready){row0, rows, task, UINT32_MAX, 0});
}

void td__ready_signal(td__lower *L, td_value v, int rank, int64_t row0, int64_t rows,
                      uint32_t signal, uint64_t value) {
  td__ready_add(L, v, rank, (td__ready){row0, rows, UINT32_MAX, signal, value});
}

void td__ready_order(td__lower *L, td_value v, int rank, int64_t row0, int64_t rows) {
  td__readymap *m = td__map(L, v, rank);
  if (rows <= 0)
    return;
  if (m->norder == m->ordercap) {
    uint32_t cap = m->ordercap ? m->ordercap * 2 : 16;
    int64_t *n = realloc(m->order, sizeof *n * 2 * cap);
    if (!n) {
      L->st = td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
      return;
    }
    m->order = n;
    m->ordercap = cap;
  }
  m->order[2 * m->norder] = row0;
  m->order[2 * m->norder + 1] = rows;
  m->norder++;
}

uint32_t td__visit_order(td__lower *L, td_value v, int rank, int64_t *pairs, uint32_t max) {
  td__readymap *m = td__map(L, v, rank);
  uint32_t n = m->norder;
  if (n == 0 || n > max)
    return 0; /* callers fall back to the natural order */
  memcpy(pairs, m->order, sizeof *pairs * 2 * n);
  return n;
}

void td__need_clear(td__need *need) {
  need->ndeps = need->nwaits = 0;
}

void td__need_free(td__need *need) {
  free(need->deps);
  free(need->waits);
  memset(need, 0, sizeof *need);
}

void td__need_task(td__need *need, uint32_t task) {
  if (task == UINT32_MAX)
    return;
  for (uint32_t i = 0; i < need->ndeps; i++)
    if (need->deps[i] == task)
      return;
  if (need->ndeps == need->depcap) {
    uint32_t cap = need->depcap ? need->depcap * 2 : 32;
    uint32_t *n = realloc(need->deps, sizeof *n * cap);
    if (!n) {
      need->oom = 1;
      return;
    }
    need->deps = n;
    need->depcap = cap;
  }
  need->deps[need->ndeps++] = task;
}

void td__need_wait(td__need *need, uint32_t signal, uint64_t value) {
  for (uint32_t i = 0; i < need->nwaits; i++)
    if (need->waits[i].signal == signal) {
      if (need->waits[i].value < value)
        need->waits[i].value = value;
      return;
    }
  if (need->nwaits == need->waitcap) {
    uint32_t cap = need->waitcap ? need->waitcap * 2 : 32;
    td_wait *n = realloc(need->waits, sizeof *n * cap);
    if (!n) {
      need->oom = 1;
      return;
    }
    need->waits = n;
    need->waitcap = cap;
  }
  need->waits[need->nwaits++] = (td_wait){signal, TD_CMP_GE, value};
}

void td__need_rows(td__lower *L, td__need *need, td_value v, int rank, int64_t row0, int64_t rows,
                   int whole) {
  td__readymap *m = td__map(L, v, rank);
  for (uint32_t i = 0; i < m->n; i++) {
    const td__ready *e = &m->e[i];
    if (!whole && (e->row0 >= row0 + rows || e->row0 + e->rows <= row0))
      continue;
    if (e->signal == UINT32_MAX)
      td__need_task(need, e->task);
    else
      td__need_wait(need, e->signal, e->value);
  }
}

uint32_t td__emit(td__lower *L, int rank, td_task *task, const td__need *need,
                  const td_raise *raises, uint32_t nraises) {
  if (L->st != TD_OK)
    return UINT32_MAX;
  if (need && need->oom) {
    L->st = td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
    return UINT32_MAX;
  }
  enum { TD__MAX_TASKS = 1 << 20 };
  if (td_plan_schedule(L->plan, rank)->ntasks >= TD__MAX_TASKS) {
    L->st = td__error(TD_ERR_INVALID_ARG, "compile: rank %d's schedule would exceed %d tasks (tiles of %lld "
                      "rows are too small for these dims; raise the tile rows or lower the dims)",
                      rank, (int)TD__MAX_TASKS, (long long)L->tile_rows);
    return UINT32_MAX;
  }
  uint32_t idx;
  if (L->one_queue) /* model.c: no comm workers; schedule order is a safe single-queue order */
    task->worker = TD_WORKER_COMPUTE;
  td_status st = td_plan_add_task(L->plan, rank, task, need ? need->deps : NULL, need ? need->ndeps : 0,
                                  need ? need->waits : NULL, need ? need->nwaits : 0, raises, nraises, &idx);
  if (st != TD_OK) {
    L->st = st;
    return UINT32_MAX;
  }
  return idx;
}

void td__label(td_task *task, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(task->label, sizeof task->label, fmt, ap);
  va_end(ap);
}

uint32_t td__signal(td__lower *L, const char *fmt, ...) {
  char name[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  uint32_t idx = UINT32_MAX;
  if (L->st == TD_OK) {
    td_status st = td_plan_add_signal(L->plan, name, &idx);
    if (st != TD_OK)
      L->st = st;
  }
  return idx;
}

int32_t td__buffer(td__lower *L, const char *name, td_buffer_kind kind, td_dtype dtype, int64_t rows,
                   int64_t cols) {
  td_buffer_desc d = {0};
  snprintf(d.name, sizeof d.name, "%s", name);
  d.kind = kind;
  d.dtype = dtype;
  d.rows = rows < 1 ? 1 : rows;
  d.cols = cols < 1 ? 1 : cols;
  int32_t idx = -1;
  if (L->st == TD_OK) {
    td_status st = td_plan_add_buffer(L->plan, &d, &idx);
    if (st != TD_OK)
      L->st = st;
  }
  return idx;
}

td_view td__view(int32_t buf, int32_t peer, int64_t row0, int64_t col0, int64_t rows, int64_t cols) {
  td_view v = {buf, peer, row0, col0, rows, cols};
  return v;
}

static int td__is_coll(td_op_kind op) {
  return op == TD_OP_ALL_GATHER || op == TD_OP_REDUCE_SCATTER || op == TD_OP_ALL_REDUCE ||
         op == TD_OP_ALL_TO_ALL;
}

int td__fallback(const td__lower *L, td_value v) {
  const td__val *V = &L->p->vals[v];
  switch (V->op) {
  case TD_OP_ALL_GATHER:
    /* AG -> GEMM: some consumer multiplies it as its (untransposed) left operand. */
    for (td_value u = v + 1; u < L->p->nvals; u++) {
      const td__val *U = &L->p->vals[u];
      if (U->op == TD_OP_MATMUL && U->in[0] == v && !(U->flags & TD_MATMUL_TRANSPOSE_A))
        return 0;
    }
    return 1;
  case TD_OP_REDUCE_SCATTER:
  case TD_OP_ALL_REDUCE: /* GEMM -> RS / AR */
    return L->p->vals[V->in[0]].op != TD_OP_MATMUL || (L->p->vals[V->in[0]].flags & TD_MATMUL_TRANSPOSE_A);
  case TD_OP_ALL_TO_ALL:
    return 1;
  default:
    return 0;
  }
}

int td__whole(const td__lower *L, td_value v) {
  if (!L->o.overlap)
    return 1;
  if (td__is_coll(L->p->vals[v].op) && td__fallback(L, v))
    return 1;
  for (td_value u = v + 1; u < L->p->nvals; u++) {
    const td__val *U = &L->p->vals[u];
    if ((U->in[0] == v || U->in[1] == v) && td__is_coll(U->op) && td__fallback(L, u))
      return 1;
  }
  return 0;
}

/* The plan buffer of each value. Collective results that peers write into are
 * symmetric; an output among them gets a second (caller-bound) buffer filled
 * by a final copy (see td__lower_output_copy). */
static void td__make_buffers(td__lower *L) {
  for (td_value v = 0; v < L->p->nvals; v++) {
    const td__val *V = &L->p->vals[v];
    if (td__fused_gelu(L, v) >= 0) { /* its tiles write the gelu value's buffer */
      L->buf[v] = -1;
      continue;
    }
    int64_t R, C;
    td__val_shape(L->p, v, &R, &C);
    if (td__sharded(L->p, v, 0))
      R = (R + L->n - 1) / L->n;
    if (td__sharded(L->p, v, 1))
      C = (C + L->n - 1) / L->n;
    td_buffer_kind kind = V->op == TD_OP_INPUT ? TD_BUF_INPUT
                          : V->op == TD_OP_WEIGHT ? TD_BUF_WEIGHT
                          : V->is_output ? TD_BUF_OUTPUT : TD_BUF_LOCAL;
    /* cpu: prepack 16-bit weights that only GEMMs and norms read as f32 buffers
     * (the caller converts once when binding; exact, since the values are
     * 16-bit), instead of converting them inside every GEMM tile. */
    td_dtype bdt = V->dtype;
    if (V->op == TD_OP_WEIGHT && V->dtype != TD_F32 && !L->o.backend_cuda) {
      int only_gemm = 1;
      for (td_value u = v + 1; u < L->p->nvals; u++) {
        const td__val *U = &L->p->vals[u];
        if ((U->in[0] == v || U->in[1] == v) && U->op != TD_OP_MATMUL && U->op != TD_OP_RMSNORM)
          only_gemm = 0;
      }
      if (only_gemm)
        bdt = TD_F32;
    }
    /* cpu: a 16-bit GEMM's partial sums that only a reduce_scatter reads stay
     * in f32 (the GEMM tile computes in f32 anyway): no rounding of each
     * rank's addend, and the reduction runs on f32 without conversions. */
    if (V->op == TD_OP_MATMUL && V->layout.kind == TD_LAYOUT_PARTIAL && V->dtype != TD_F32 &&
        !L->o.backend_cuda && !V->is_output) {
      int only_rs = 1, uses = 0;
      for (td_value u = v + 1; u < L->p->nvals; u++) {
        const td__val *U = &L->p->vals[u];
        if (U->in[0] == v || U->in[1] == v) {
          uses++;
          if (U->op != TD_OP_REDUCE_SCATTER)
            only_rs = 0;
        }
      }
      if (only_rs && uses)
        bdt = TD_F32;
    }
    /* cpu: excess precision for local intermediates (as XLA allows by default):
     * a 16-bit value computed and read only by local compute tiles is stored
     * in f32, since the tiles compute in f32 anyway and rounding to 16 bits and
     * converting back costs time. Communicated values and outputs keep their
     * dtype. opts.exact_dtypes turns this off. */
    if (!L->o.backend_cuda && !L->o.exact_dtypes && V->dtype != TD_F32 && !V->is_output &&
        (V->op == TD_OP_MATMUL || V->op == TD_OP_ADD || V->op == TD_OP_MUL || V->op == TD_OP_GELU ||
         V->op == TD_OP_SILU || V->op == TD_OP_SCALE || V->op == TD_OP_RMSNORM)) {
      int local_only = 1, uses = 0;
      for (td_value u = v + 1; u < L->p->nvals; u++) {
        const td__val *U = &L->p->vals[u];
        if (U->in[0] == v || U->in[1] == v) {
          uses++;
          if (U->op == TD_OP_ALL_GATHER || U->op == TD_OP_ALL_REDUCE || U->op == TD_OP_ALL_TO_ALL)
            local_only = 0;
          if (U->op == TD_OP_REDUCE_SCATTER && V->op != TD_OP_MATMUL)
            local_only = 0;
        }
      }
      if (local_only && uses)
        bdt = TD_F32;
    }
    int peer_written = V->op == TD_OP_ALL_GATHER || V->op == TD_OP_ALL_TO_ALL || V->op == TD_OP_ALL_REDUCE;
    char name[40];
    td__val_label(L->p, v, name, sizeof name);
    if (peer_written) {
      L->symbuf[v] = td__buffer(L, name, TD_BUF_SYMM, V->dtype, R, C);
      L->buf[v] = V->is_output ? td__buffer(L, name, TD_BUF_OUTPUT, V->dtype, R, C) : L->symbuf[v];
    } else {
      L->buf[v] = td__buffer(L, name, kind, bdt, R, C);
    }
  }
}

/* Output values whose data lives in a symmetric buffer: copy it, block by
 * block as it becomes ready, into the caller's buffer. */
static void td__lower_output_copy(td__lower *L, td_value v) {
  if (L->symbuf[v] < 0 || L->symbuf[v] == L->buf[v])
    return;
  td__need need = {0};
  for (int r = 0; r < L->n; r++) {
    int64_t r0, rows, c0, cols;
    td__local_extent(L, v, r, &r0, &rows, &c0, &cols);
    for (int64_t i = 0; i < rows && cols > 0; i += L->tile_rows) {
      int64_t m = rows - i < L->tile_rows ? rows - i : L->tile_rows;
      td__need_clear(&need);
      td__need_rows(L, &need, v, r, i, m, 0);
      td_task t = {.kind = TD_TASK_COPY, .worker = TD_WORKER_COMM};
      t.a = td__view(L->symbuf[v], TD_PEER_SELF, i, 0, m, cols);
      t.c = td__view(L->buf[v], TD_PEER_SELF, i, 0, m, cols);
      t.b.buf = -1;
      td__label(&t, "out %.12s r%lld", L->p->vals[v].name, (long long)i);
      td__emit(L, r, &t, &need, NULL, 0);
    }
  }
  td__need_free(&need);
}

static td_status td__lower_value(td__lower *L, td_value v) {
  switch (L->p->vals[v].op) {
  case TD_OP_INPUT:
  case TD_OP_WEIGHT: return TD_OK;
  case TD_OP_MATMUL: return td__lower_matmul(L, v);
  case TD_OP_ALL_GATHER: return td__lower_all_gather(L, v);
  case TD_OP_REDUCE_SCATTER: return td__lower_reduce_scatter(L, v);
  case TD_OP_ALL_REDUCE: return td__lower_all_reduce(L, v);
  case TD_OP_ALL_TO_ALL: return td__lower_all_to_all(L, v);
  default: return td__lower_ewise(L, v);
  }
}

static void td__lower_free(td__lower *L) {
  if (L->ready)
    for (size_t i = 0; i < (size_t)L->p->nvals * 2 * (size_t)L->n; i++) {
      free(L->ready[i].e);
      free(L->ready[i].order);
    }
  free(L->ready);
  for (int r = 0; L->rs_fold && r < L->n; r++)
    td__need_free(&L->rs_fold[r].need);
  free(L->rs_fold);
  free(L->symbuf);
  free(L->f32buf);
  td_plan_destroy(L->plan);
  free(L->buf);
}

td_status td_program_compile(const td_program *program, const td_compile_opts *opts, td_compiled **out) {
  if (!program || !out)
    return td__error(TD_ERR_INVALID_ARG, "compile: program or out is NULL");
  td__lower L = {0};
  L.p = program;
  if (opts)
    L.o = *opts;
  else
    td_compile_opts_init(&L.o);
  if (L.o.nranks < 1 || L.o.nranks > 4096)
    return td__error(TD_ERR_INVALID_ARG, "compile: nranks %d must be in 1..4096", L.o.nranks);
  if (L.o.chunks_per_rank < 0 || L.o.chunks_per_rank > 64 || L.o.tile_rows < 0 || L.o.tile_cols < 0 ||
      L.o.compute_workers < 0 || L.o.comm_workers < 0)
    return td__error(TD_ERR_INVALID_ARG, "compile: chunks_per_rank must be in 0..64 and tile sizes and "
                     "worker counts >= 0 (0 = chosen by the perf model)");
  TD_CHECK(td_program_check(program));
  L.n = L.o.nranks;
  if (L.o.model)
    L.model = *L.o.model;
  else
    td_perf_model_load(&L.model);
  size_t nv = (size_t)program->nvals;
  L.buf = malloc(sizeof *L.buf * (nv ? nv : 1));
  L.symbuf = malloc(sizeof *L.symbuf * (nv ? nv : 1));
  L.f32buf = malloc(sizeof *L.f32buf * (nv ? nv : 1));
  /* Twice the values: slot nvals + v holds the readiness of v's hidden intermediate. */
  L.ready = calloc(nv * 2 * (size_t)L.n + 1, sizeof *L.ready);
  L.rs_fold = calloc((size_t)L.n, sizeof *L.rs_fold);
  td_status st = td_plan_create(L.n, &L.plan);
  if (st == TD_OK && (!L.buf || !L.symbuf || !L.f32buf || !L.ready || !L.rs_fold))
    st = td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  if (st != TD_OK) {
    td__lower_free(&L);
    return st;
  }
  for (size_t i = 0; i < nv; i++)
    L.symbuf[i] = L.f32buf[i] = -1;
  td__model_choose(&L);
  /* Refuse early what would take minutes to lower: an upper bound of row tiles per rank. */
  double tiles = 0;
  for (td_value v = 0; v < program->nvals; v++) {
    int64_t R, C;
    td__val_shape(program, v, &R, &C);
    tiles += (double)R / (double)L.tile_rows + (double)L.n * L.chunks;
  }
  if (tiles > (double)(1 << 18)) {
    td__lower_free(&L);
    return td__error(TD_ERR_INVALID_ARG, "compile: about %.0f tiles per rank with tiles of %lld rows (at most "
                     "%d): raise the tile rows or lower the dims", tiles, (long long)L.tile_rows, 1 << 18);
  }
  td__make_buffers(&L);
  for (td_value v = 0; v < program->nvals && L.st == TD_OK; v++) {
    st = td__lower_value(&L, v);
    if (st != TD_OK && L.st == TD_OK)
      L.st = st;
  }
  for (td_value v = 0; v < program->nvals && L.st == TD_OK; v++)
    if (program->vals[v].is_output)
      td__lower_output_copy(&L, v);
  st = L.st;
  if (st == TD_OK && td_plan_validate(L.plan) != TD_OK) {
    td__error_prefix("compiler produced an invalid plan (a tdist bug): ");
    st = TD_ERR_SCHEDULE;
  }
  td_compiled *c = NULL;
  if (st == TD_OK) {
    c = calloc(1, sizeof *c);
    if (!c)
      st = td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  }
  if (st == TD_OK)
    st = td__program_copy(program, &c->program);
  if (st != TD_OK) {
    free(c);
    td__lower_free(&L);
    return st;
  }
  c->plan = L.plan;
  c->buf = L.buf;
  c->n = L.n;
  c->chunks = L.chunks;
  c->tile_rows = L.tile_rows;
  c->tile_cols = L.tile_cols;
  c->compute_workers = L.compute_workers;
  c->comm_workers = L.comm_workers;
  c->model = L.model;
  c->gq = L.gq;
  L.plan = NULL;
  L.buf = NULL;
  td__lower_free(&L);
  *out = c;
  return TD_OK;
}

void td_compiled_destroy(td_compiled *c) {
  if (!c)
    return;
  td_plan_destroy(c->plan);
  td_program_destroy(c->program);
  free(c->buf);
  free(c);
}

const td_plan *td_compiled_plan(const td_compiled *c) { return c ? c->plan : NULL; }

int32_t td_compiled_buffer(const td_compiled *c, td_value v) {
  return c && v >= 0 && v < c->program->nvals ? c->buf[v] : -1;
}

void td_compiled_local_shape(const td_compiled *c, td_value v, int rank, int64_t *row0, int64_t *rows,
                             int64_t *col0, int64_t *cols) {
  td__lower L = {0};
  L.p = c->program;
  L.n = c->n;
  td__local_extent(&L, v, rank, row0, rows, col0, cols);
}

void td_compiled_choices(const td_compiled *c, int *compute_workers, int *comm_workers, int *chunks,
                         int64_t *tile_rows, int64_t *tile_cols) {
  if (compute_workers)
    *compute_workers = c->compute_workers;
  if (comm_workers)
    *comm_workers = c->comm_workers;
  if (chunks)
    *chunks = c->chunks;
  if (tile_rows)
    *tile_rows = c->tile_rows;
  if (tile_cols)
    *tile_cols = c->tile_cols;
}
