/* SPDX-License-Identifier: Apache-2.0
 * Random task graphs and their sequential interpretation (see randgraph.h).
 *
 * Generation draws tasks one at a time in a global order, each on a random
 * rank, and tracks for every block of memory (buffer, owner rank, block) its
 * last writer and its readers since. A new task gets an ordering edge from
 * every earlier task it conflicts with (read after write, write after read
 * or write). An edge between tasks of one rank becomes a local dependency;
 * an edge across ranks becomes a signal: either one signal per (source task,
 * destination rank), raised once with a random value and waited with GE or
 * EQ, or one fan-in signal per destination task that all its remote sources
 * raise, waited for the sum. Every edge points forward in the global order,
 * so there is no cycle, and each class queue of each rank is in global order,
 * so the executor can always progress. All conflicting accesses are ordered,
 * so any execution that honours the edges computes what the global order
 * computes, which is what the interpreter runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "randgraph.h"
#include "tdist/exec.h"
#include "core/error.h"
#include "tile/tile.h"

enum { RG_MAX_TASKS = 48, RG_MAX_EDGES = 64 };

typedef struct {
  uint64_t s;
} rg_rng;

static uint64_t rg_next(rg_rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static int rg_int(rg_rng *r, int n) { return (int)(rg_next(r) % (uint64_t)n); }
static float rg_unit(rg_rng *r) { return (float)((double)(rg_next(r) >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

typedef struct {
  int rank;
  uint32_t local;
  td_task t;
  int nsrc;
  int src[RG_MAX_EDGES]; /* global ids of earlier tasks this one must follow */
  uint32_t ndeps, nwaits, nraises;
  uint32_t deps[RG_MAX_EDGES];
  td_wait waits[RG_MAX_EDGES];
  td_raise raises[RG_MAX_TASKS * 2];
} rg_task;

/* Conflict tracking per block. */
typedef struct {
  int writer;
  int nreaders;
  int readers[RG_MAX_TASKS];
} rg_block;

static const td_dtype rg_dtypes[RG_NBUFS] = {TD_F32, TD_F32, TD_F32, TD_F32, TD_F32, TD_F32, TD_BF16};
static const td_buffer_kind rg_kinds[RG_NBUFS] = {TD_BUF_INPUT, TD_BUF_WEIGHT, TD_BUF_OUTPUT, TD_BUF_LOCAL,
                                                  TD_BUF_SYMM,  TD_BUF_SYMM,   TD_BUF_SYMM};
static const char *rg_names[RG_NBUFS] = {"in", "w", "out", "loc", "s0", "s1", "h0"};

size_t rg_bytes(const rg_graph *g, int b) {
  size_t rows = b == RG_W ? (size_t)g->bn : (size_t)(g->nblocks * g->bm);
  return rows * (size_t)g->bn * td_dtype_size(rg_dtypes[b]);
}

/* A block view: rg buffer b (index into rg_*), owner rank, block. */
typedef struct {
  int b, owner, block;
} rg_ref;

static td_view rg_view(const rg_graph *g, int rank, rg_ref ref) {
  td_view v = {g->buf[ref.b], rg_kinds[ref.b] == TD_BUF_SYMM && ref.owner != rank ? ref.owner : TD_PEER_SELF,
               (int64_t)ref.block * g->bm, 0, g->bm, g->bn};
  return v;
}

static rg_ref rg_pick(rg_rng *r, const rg_graph *g, int rank, int writable, int want_dtype) {
  for (;;) {
    int b = writable ? RG_OUT + rg_int(r, RG_NBUFS - RG_OUT) : (rg_int(r, 6) == 0 ? RG_IN : RG_OUT + rg_int(r, RG_NBUFS - RG_OUT));
    if (want_dtype >= 0 && (int)rg_dtypes[b] != want_dtype)
      continue;
    rg_ref ref = {b, rank, rg_int(r, g->nblocks)};
    if (rg_kinds[b] == TD_BUF_SYMM && rg_int(r, 2))
      ref.owner = rg_int(r, g->nranks);
    return ref;
  }
}

static int rg_tracked(int b) { return b != RG_IN && b != RG_W; }

static void rg_add_src(rg_task *t, int src) {
  for (int i = 0; i < t->nsrc; i++)
    if (t->src[i] == src)
      return;
  if (t->nsrc < RG_MAX_EDGES)
    t->src[t->nsrc++] = src;
}

static rg_block *rg_blk(rg_block *blocks, const rg_graph *g, rg_ref ref) {
  return &blocks[((size_t)ref.b * (size_t)g->nranks + (size_t)ref.owner) * (size_t)g->nblocks + (size_t)ref.block];
}

static void rg_access(rg_block *blocks, const rg_graph *g, rg_task *t, int id, rg_ref ref, int write) {
  if (!rg_tracked(ref.b))
    return;
  rg_block *bl = rg_blk(blocks, g, ref);
  if (bl->writer >= 0)
    rg_add_src(t, bl->writer);
  if (write) {
    for (int i = 0; i < bl->nreaders; i++)
      if (bl->readers[i] != id)
        rg_add_src(t, bl->readers[i]);
    bl->writer = id;
    bl->nreaders = 0;
  } else if (bl->nreaders < RG_MAX_TASKS) {
    bl->readers[bl->nreaders++] = id;
  }
}

/* Draws task `id`'s kind, views and class; records its conflicts. */
static void rg_draw_task(rg_rng *r, rg_graph *g, rg_block *blocks, rg_task *tasks, int id) {
  rg_task *t = &tasks[id];
  int rank = t->rank;
  int dice = rg_int(r, 20);
  td_task_kind kind = dice < 1 ? TD_TASK_NOP : dice < 6 ? TD_TASK_COPY : dice < 9 ? TD_TASK_REDUCE
                      : dice < 14 ? TD_TASK_EWISE : dice < 16 ? TD_TASK_RMSNORM : TD_TASK_GEMM;
  td_task *k = &t->t;
  memset(k, 0, sizeof *k);
  k->kind = kind;
  k->alpha = 1.0f;
  k->a.buf = k->b.buf = k->c.buf = -1;
  snprintf(k->label, sizeof k->label, "g%d %s", id,
           (const char *[]){"nop", "gemm", "copy", "reduce", "ewise", "rmsnorm"}[kind]);
  int cls_dice = rg_int(r, 10);
  k->worker = cls_dice < 6 ? TD_WORKER_COMPUTE : cls_dice < 9 ? TD_WORKER_COMM : TD_WORKER_COPY_ENGINE;
  if (kind == TD_TASK_NOP) {
    if (id > 0)
      rg_add_src(t, rg_int(r, id));
    return;
  }
  rg_ref c = rg_pick(r, g, rank, 1, -1), a, b = {-1, 0, 0};
  switch (kind) {
  case TD_TASK_COPY:
  case TD_TASK_REDUCE:
    a = rg_pick(r, g, rank, 0, (int)rg_dtypes[c.b]);
    k->op = kind == TD_TASK_REDUCE ? (uint32_t)rg_int(r, 3) : 0; /* sum, max, min */
    break;
  case TD_TASK_EWISE:
    a = rg_pick(r, g, rank, 0, -1);
    k->op = (uint32_t)rg_int(r, TD_EW_OP_COUNT);
    k->alpha = 0.5f + (float)rg_int(r, 8) / 8.0f;
    if (k->op == TD_EW_ADD || k->op == TD_EW_MUL)
      b = rg_pick(r, g, rank, 0, -1);
    break;
  case TD_TASK_RMSNORM:
    a = rg_pick(r, g, rank, 0, -1);
    k->alpha = 1e-3f;
    k->b = (td_view){g->buf[RG_W], TD_PEER_SELF, rg_int(r, g->bn), 0, 1, g->bn};
    break;
  default: /* GEMM: c (bm x bn) = alpha op(a) (bm x bn) op(w) (bn x bn) */
    do
      a = rg_pick(r, g, rank, 0, -1);
    while (a.b == c.b && a.owner == c.owner && a.block == c.block);
    k->op = (uint32_t)((rg_int(r, 2) ? TD_GEMM_TRANS_B : 0) | (rg_int(r, 2) ? TD_GEMM_ACCUMULATE : 0) |
                       (g->bm == g->bn && rg_int(r, 2) ? TD_GEMM_TRANS_A : 0));
    k->alpha = 0.5f + (float)rg_int(r, 8) / 8.0f;
    k->b = (td_view){g->buf[RG_W], TD_PEER_SELF, 0, 0, g->bn, g->bn};
    break;
  }
  k->a = rg_view(g, rank, a);
  k->c = rg_view(g, rank, c);
  rg_access(blocks, g, t, id, a, 0);
  if (b.b >= 0) {
    k->b = rg_view(g, rank, b);
    rg_access(blocks, g, t, id, b, 0);
  }
  rg_access(blocks, g, t, id, c, 1);
}

/* Turns each task's sources into local dependencies and signal waits/raises. */
static td_status rg_wire(rg_rng *r, rg_graph *g, rg_task *tasks, int n) {
  for (int id = 0; id < n; id++) {
    rg_task *t = &tasks[id];
    int fan_in = rg_int(r, 2);
    uint32_t fan_sig = 0;
    uint64_t fan_total = 0;
    for (int i = 0; i < t->nsrc; i++) {
      rg_task *s = &tasks[t->src[i]];
      if (s->rank == t->rank) {
        t->deps[t->ndeps++] = s->local;
        continue;
      }
      uint64_t v = 1 + (uint64_t)rg_int(r, 3);
      char name[32];
      uint32_t sig;
      if (fan_in) {
        if (fan_total == 0) {
          snprintf(name, sizeof name, "fan-in g%d", id);
          TD_CHECK(td_plan_add_signal(g->plan, name, &fan_sig));
        }
        sig = fan_sig;
        fan_total += v;
      } else {
        snprintf(name, sizeof name, "g%d to g%d", t->src[i], id);
        TD_CHECK(td_plan_add_signal(g->plan, name, &sig));
        t->waits[t->nwaits++] = (td_wait){sig, rg_int(r, 3) ? TD_CMP_GE : TD_CMP_EQ, v};
      }
      s->raises[s->nraises++] = (td_raise){sig, t->rank, v};
    }
    if (fan_total)
      t->waits[t->nwaits++] = (td_wait){fan_sig, TD_CMP_GE, fan_total};
  }
  return TD_OK;
}

static void rg_interpret(rg_graph *g, rg_task *tasks, int n) {
  for (int run = 0; run < g->runs; run++)
    for (int id = 0; id < n; id++) {
      const rg_task *t = &tasks[id];
      td_tile_fn fn = td__tile_cpu_reference.fn[t->t.kind];
      if (!fn)
        continue;
      td_tile_args args;
      memset(&args, 0, sizeof args);
      args.op = t->t.op;
      args.alpha = t->t.alpha;
      const td_view *v[3] = {&t->t.a, &t->t.b, &t->t.c};
      td_tile_mat *m[3] = {&args.a, &args.b, &args.c};
      for (int w = 0; w < 3; w++) {
        if (v[w]->buf < 0)
          continue;
        int b = 0;
        while (g->buf[b] != v[w]->buf)
          b++;
        int owner = v[w]->peer == TD_PEER_SELF ? t->rank : v[w]->peer;
        int64_t cols = g->bn;
        m[w]->dtype = rg_dtypes[b];
        m[w]->ptr = (char *)g->expect[owner * RG_NBUFS + b] +
                    (size_t)(v[w]->row0 * cols + v[w]->col0) * td_dtype_size(rg_dtypes[b]);
        m[w]->rows = v[w]->rows;
        m[w]->cols = v[w]->cols;
        m[w]->ld = cols;
      }
      td_tile_ctx ctx = {0};
      fn(&ctx, &args);
      td__tile_ctx_free(&ctx);
    }
}

td_status rg_generate(uint64_t seed, int runs, rg_graph *g) {
  memset(g, 0, sizeof *g);
  rg_rng r = {seed * 0x2545f4914f6cdd1dull + 1};
  g->seed = seed;
  g->runs = runs;
  g->nranks = 1 + rg_int(&r, 8);
  g->bm = 1 + rg_int(&r, 4);
  g->bn = 1 + rg_int(&r, 5);
  g->nblocks = 1 + rg_int(&r, 3);
  g->compute_workers = 1 + rg_int(&r, 3);
  g->comm_workers = 1 + rg_int(&r, 2);
  int n = 1 + rg_int(&r, 6 * g->nranks + 6);
  if (n > RG_MAX_TASKS)
    n = RG_MAX_TASKS;
  g->ntasks = (uint32_t)n;
  TD_CHECK(td_plan_create(g->nranks, &g->plan));
  for (int b = 0; b < RG_NBUFS; b++) {
    td_buffer_desc d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", rg_names[b]);
    d.kind = rg_kinds[b];
    d.dtype = rg_dtypes[b];
    d.rows = b == RG_W ? g->bn : g->nblocks * g->bm;
    d.cols = g->bn;
    TD_CHECK(td_plan_add_buffer(g->plan, &d, &g->buf[b]));
  }
  g->init = calloc((size_t)g->nranks * RG_NBUFS, sizeof *g->init);
  g->expect = calloc((size_t)g->nranks * RG_NBUFS, sizeof *g->expect);
  for (int i = 0; i < g->nranks * RG_NBUFS; i++) {
    int b = i % RG_NBUFS;
    size_t bytes = rg_bytes(g, b), count = bytes / td_dtype_size(rg_dtypes[b]);
    g->init[i] = malloc(bytes);
    g->expect[i] = malloc(bytes);
    for (size_t k = 0; k < count; k++) {
      float v = rg_unit(&r) * (b == RG_W ? 0.5f : 1.0f);
      if (rg_dtypes[b] == TD_F32)
        ((float *)g->init[i])[k] = v;
      else
        ((uint16_t *)g->init[i])[k] = td_f32_to_bf16(v);
    }
    memcpy(g->expect[i], g->init[i], bytes);
  }
  /* Weights are read-only and the same on every rank, as a model's would be. */
  for (int rk = 1; rk < g->nranks; rk++)
    memcpy(g->init[rk * RG_NBUFS + RG_W], g->init[RG_W], rg_bytes(g, RG_W)),
        memcpy(g->expect[rk * RG_NBUFS + RG_W], g->init[RG_W], rg_bytes(g, RG_W));
  rg_task *tasks = calloc(RG_MAX_TASKS, sizeof *tasks);
  size_t nblk = (size_t)RG_NBUFS * (size_t)g->nranks * (size_t)g->nblocks;
  rg_block *blocks = calloc(nblk, sizeof *blocks);
  for (size_t i = 0; i < nblk; i++)
    blocks[i].writer = -1;
  uint32_t per_rank[8] = {0};
  for (int id = 0; id < n; id++) {
    tasks[id].rank = rg_int(&r, g->nranks);
    tasks[id].local = per_rank[tasks[id].rank]++;
    rg_draw_task(&r, g, blocks, tasks, id);
  }
  td_status st = rg_wire(&r, g, tasks, n);
  for (int id = 0; st == TD_OK && id < n; id++) {
    rg_task *t = &tasks[id];
    uint32_t idx;
    st = td_plan_add_task(g->plan, t->rank, &t->t, t->deps, t->ndeps, t->waits, t->nwaits, t->raises,
                          t->nraises, &idx);
  }
  g->nsignals = td_plan_nsignals(g->plan);
  if (st == TD_OK)
    st = td_plan_validate(g->plan);
  if (st == TD_OK)
    rg_interpret(g, tasks, n);
  free(blocks);
  free(tasks);
  return st;
}

void rg_free(rg_graph *g) {
  for (int i = 0; g->init && i < g->nranks * RG_NBUFS; i++)
    free(g->init[i]), free(g->expect[i]);
  free(g->init);
  free(g->expect);
  td_plan_destroy(g->plan);
  memset(g, 0, sizeof *g);
}

int rg_compare(const rg_graph *g, int rank, int b, const void *got, char *msg, size_t cap) {
  const void *want = g->expect[rank * RG_NBUFS + b];
  size_t count = rg_bytes(g, b) / td_dtype_size(rg_dtypes[b]);
  double tol = rg_dtypes[b] == TD_F32 ? 1e-3 : 2e-2;
  for (size_t k = 0; k < count; k++) {
    double x, y;
    if (rg_dtypes[b] == TD_F32)
      x = ((const float *)got)[k], y = ((const float *)want)[k];
    else
      x = td_bf16_to_f32(((const uint16_t *)got)[k]), y = td_bf16_to_f32(((const uint16_t *)want)[k]);
    if (isnan(x) && isnan(y))
      continue;
    if (x == y)
      continue;
    if (!(fabs(x - y) <= tol * fmax(1.0, fabs(y)))) {
      snprintf(msg, cap, "rank %d buffer '%s' element %zu (row %zu, col %zu): got %.9g, expected %.9g", rank,
               rg_names[b], k, k / (size_t)g->bn, k % (size_t)g->bn, x, y);
      return 0;
    }
  }
  return 1;
}

#define RG_OK(expr)                                                                    \
  do {                                                                                 \
    td_status rg_st_ = (expr);                                                         \
    if (rg_st_ != TD_OK)                                                               \
      return rg_st_;                                                                   \
  } while (0)

td_status rg_run_rank(td_world *w, int rank, void *arg) {
  rg_graph *g = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.compute_workers = g->compute_workers;
  o.comm_workers = g->comm_workers;
  td_exec *ex = NULL;
  RG_OK(td_exec_create(g->plan, td_world_team(w), &o, &ex));
  /* Caller buffers: copies of the initial data (out is written). */
  void *mine[RG_NBUFS] = {0};
  td_status st = TD_OK;
  for (int b = 0; b < RG_NBUFS; b++) {
    void *init = g->init[rank * RG_NBUFS + b];
    size_t bytes = rg_bytes(g, b);
    const td_buffer_desc *d = td_plan_buffer(g->plan, g->buf[b]);
    if (d->kind == TD_BUF_SYMM || d->kind == TD_BUF_LOCAL) {
      RG_OK(td_exec_buffer(ex, g->buf[b], &mine[b]));
      memcpy(mine[b], init, bytes);
    } else {
      mine[b] = malloc(bytes);
      memcpy(mine[b], init, bytes);
      RG_OK(td_exec_bind(ex, g->buf[b], mine[b]));
    }
  }
  for (int run = 0; st == TD_OK && run < g->runs; run++)
    st = td_exec_run(ex);
  /* Peers' writes into this rank's copies are ordered with this rank's end
   * only where this rank waits for them: the barrier orders the rest. */
  if (st == TD_OK)
    st = td_barrier_all(w);
  char msg[256];
  for (int b = RG_OUT; st == TD_OK && b < RG_NBUFS; b++)
    if (!rg_compare(g, rank, b, mine[b], msg, sizeof msg))
      st = td__error(TD_ERR_CHECK_FAILED, "%s", msg);
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", td_last_error());
  td_status dst = td_exec_destroy(ex);
  for (int b = 0; b < RG_NBUFS; b++) {
    const td_buffer_desc *d = td_plan_buffer(g->plan, g->buf[b]);
    if (d->kind != TD_BUF_SYMM && d->kind != TD_BUF_LOCAL)
      free(mine[b]);
  }
  if (st != TD_OK)
    return td__error(st, "%s", saved);
  return dst;
}

