/* SPDX-License-Identifier: Apache-2.0
 * Test harness of the tensor-parallel operators (tests/ops): runs one
 * operator on a local world of N ranks on the cpu backend, calls it several
 * times with new inputs each call (no reset between calls), and compares
 * every rank's part of C with an f64 reference of the same math computed
 * from the same dtype-rounded inputs. Inputs are a hash of (call, operand,
 * row, col), so every rank makes its own part without shared state; padding
 * of every buffer is NaN, so a read outside a rank's part shows up. */
#ifndef TD_TESTS_OPS_HARNESS_H
#define TD_TESTS_OPS_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/tdist.h"

typedef struct oh_case {
  td_tp_kind kind;
  td_tp_variant variant;
  td_dtype dtype;
  int64_t m, n, k; /* GEMM operators */
  size_t count;    /* all-reduce */
  int calls;       /* calls with fresh inputs (>= 1) */
  int chunks;      /* chunks_per_rank option (0 = model) */
  td_tp_variant chosen; /* out: what the operator ran (rank 0) */
  char schedule[160];   /* out: td_tp_schedule of rank 0's operator */
  int sample_rows;      /* check only this many evenly spaced rows of C (0 = all) */
  int moving_buffers;   /* 1: each rank's A, B and C alternate between two allocations, rank r switching every
                         * 2 + r % 2 calls, so some calls reuse every address and others move some ranks' */
  /* Backend: NULL hooks = cpu (host memory). The cuda test sets them. */
  td_exec_backend backend;
  void *(*dev_alloc)(size_t bytes);
  void (*dev_free)(void *p);
  int (*upload)(void *dev, const void *host, size_t bytes);
  int (*download)(void *host, const void *dev, size_t bytes);
} oh_case;

static inline double oh_value(int call, int which, int64_t i, int64_t j) {
  uint64_t z = (uint64_t)call * 0x9e3779b97f4a7c15ull ^ (uint64_t)which * 0xbf58476d1ce4e5b9ull ^
               (uint64_t)i * 0x94d049bb133111ebull ^ (uint64_t)j * 0x2545f4914f6cdd1dull;
  z ^= z >> 31, z *= 0xd6e8feb86659fd93ull, z ^= z >> 29;
  return (double)(int64_t)(z % 2001) / 1000.0 - 1.0;
}

static inline double oh_round(td_dtype dt, double x) {
  if (dt == TD_BF16)
    return td_bf16_to_f32(td_f32_to_bf16((float)x));
  if (dt == TD_F16)
    return td_f16_to_f32(td_f32_to_f16((float)x));
  return (float)x;
}

static inline void oh_store(void *buf, td_dtype dt, size_t i, double x) {
  if (dt == TD_F32)
    ((float *)buf)[i] = (float)x;
  else if (dt == TD_BF16)
    ((uint16_t *)buf)[i] = td_f32_to_bf16((float)x);
  else
    ((uint16_t *)buf)[i] = td_f32_to_f16((float)x);
}

static inline double oh_load(const void *buf, td_dtype dt, size_t i) {
  if (dt == TD_F32)
    return ((const float *)buf)[i];
  if (dt == TD_BF16)
    return td_bf16_to_f32(((const uint16_t *)buf)[i]);
  return td_f16_to_f32(((const uint16_t *)buf)[i]);
}

static inline void oh_fill_nan(void *buf, td_dtype dt, size_t bytes) {
  if (getenv("OH_NO_NAN")) {
    memset(buf, 0, bytes);
    return;
  }
  for (size_t i = 0; i < bytes / td_dtype_size(dt); i++)
    oh_store(buf, dt, i, NAN);
}

static inline double oh_tolerance(td_dtype dt) { return dt == TD_F32 ? 1e-4 : dt == TD_BF16 ? 2e-2 : 4e-3; }

/* The operand values: A is operand 0, B operand 1; all-reduce: rank s's src is operand 10 + s. */
static inline td_status oh_fill(const oh_case *c, td_tp_op *op, int rank, int call, td_tp_operand_id which, void *buf) {
  td_tp_layout l;
  td_status st = td_tp_operand(op, which, rank, &l);
  if (st != TD_OK)
    return st;
  oh_fill_nan(buf, c->dtype, l.bytes);
  int tag = c->kind == TD_TP_ALL_REDUCE ? 10 + rank : (int)which;
  for (int64_t i = 0; i < l.rows; i++)
    for (int64_t j = 0; j < l.cols; j++)
      oh_store(buf, c->dtype, (size_t)(i * l.ld + j), oh_value(call, tag, l.row0 + i, l.col0 + j));
  return TD_OK;
}

/* Reference of C's element (i, j) for this call. */
static inline double oh_ref(const oh_case *c, int nranks, int call, int64_t i, int64_t j) {
  double s = 0;
  if (c->kind == TD_TP_ALL_REDUCE) {
    for (int r = 0; r < nranks; r++)
      s += oh_round(c->dtype, oh_value(call, 10 + r, 0, j));
    return s;
  }
  for (int64_t q = 0; q < c->k; q++)
    s += oh_round(c->dtype, oh_value(call, 0, i, q)) * oh_round(c->dtype, oh_value(call, 1, q, j));
  return s;
}

static inline td_status oh_create(const oh_case *c, td_world *w, td_tp_op **op) {
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.variant = c->variant;
  o.chunks_per_rank = c->chunks;
  o.backend = c->backend;
  td_team *t = td_world_team(w);
  switch (c->kind) {
  case TD_TP_AG_GEMM: return td_ag_gemm_create(t, c->m, c->n, c->k, c->dtype, &o, op);
  case TD_TP_GEMM_RS: return td_gemm_rs_create(t, c->m, c->n, c->k, c->dtype, &o, op);
  case TD_TP_GEMM_AR: return td_gemm_ar_create(t, c->m, c->n, c->k, c->dtype, &o, op);
  default: return td_ll_all_reduce_create(t, c->count, c->dtype, &o, op);
  }
}

static inline td_status oh_call(const oh_case *c, td_tp_op *op, void *cb, const void *ab, const void *bb) {
  switch (c->kind) {
  case TD_TP_AG_GEMM: return td_ag_gemm(op, cb, ab, bb);
  case TD_TP_GEMM_RS: return td_gemm_rs(op, cb, ab, bb);
  case TD_TP_GEMM_AR: return td_gemm_ar(op, cb, ab, bb);
  default: return td_ll_all_reduce(op, cb, ab);
  }
}

static void *oh_host_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static int oh_host_copy(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return 0;
}

/* Compares this rank's part of C (host copy) with the reference; TD_OK or TD_ERR_CHECK_FAILED. */
static td_status oh_check(const oh_case *c, int n, int rank, int call, const td_tp_layout *lc, const void *hc) {
  double maxref = 1e-30, maxerr = 0;
  int64_t bi = -1, bj = -1;
  int64_t nrows = c->sample_rows && c->sample_rows < lc->rows ? c->sample_rows : lc->rows;
  for (int64_t s = 0; s < nrows; s++) {
    int64_t i = nrows == lc->rows ? s : (nrows > 1 ? s * (lc->rows - 1) / (nrows - 1) : 0);
    for (int64_t j = 0; j < lc->cols; j++) {
      double want = oh_ref(c, n, call, lc->row0 + i, lc->col0 + j);
      double got = oh_load(hc, c->dtype, (size_t)(i * lc->ld + j));
      if (fabs(want) > maxref)
        maxref = fabs(want);
      double e = isnan(got) ? INFINITY : fabs(got - want);
      if (e > maxerr)
        maxerr = e, bi = lc->row0 + i, bj = lc->col0 + j;
    }
  }
  if (maxerr / maxref <= oh_tolerance(c->dtype))
    return TD_OK;
  fprintf(stderr, "rank %d call %d: C(%lld, %lld) off by %g (rel %g > %g)\n", rank, call, (long long)bi,
          (long long)bj, maxerr, maxerr / maxref, oh_tolerance(c->dtype));
  return TD_ERR_CHECK_FAILED;
}

static td_status oh_rank(td_world *w, int rank, void *arg) {
  oh_case *c = arg;
  int n = td_world_size(w);
  void *(*dalloc)(size_t) = c->dev_alloc ? c->dev_alloc : oh_host_alloc;
  void (*dfree)(void *) = c->dev_free ? c->dev_free : free;
  int (*up)(void *, const void *, size_t) = c->upload ? c->upload : oh_host_copy;
  int (*down)(void *, const void *, size_t) = c->download ? c->download : oh_host_copy;
  td_tp_op *op = NULL;
  td_status st = oh_create(c, w, &op);
  if (st != TD_OK)
    return st;
  if (rank == 0) {
    td_tp_choices(op, &c->chosen, NULL, NULL, NULL);
    td_tp_schedule(op, c->schedule, sizeof c->schedule);
  }
  td_tp_layout la, lb, lc;
  td_tp_operand(op, TD_TP_A, rank, &la);
  td_tp_operand(op, TD_TP_B, rank, &lb);
  td_tp_operand(op, TD_TP_C, rank, &lc);
  void *a = malloc(la.bytes), *b = malloc(lb.bytes ? lb.bytes : 1), *cb = malloc(lc.bytes);
  void *set[2][3] = {{dalloc(la.bytes), dalloc(lb.bytes ? lb.bytes : 1), dalloc(lc.bytes)}, {NULL, NULL, NULL}};
  if (c->moving_buffers)
    set[1][0] = dalloc(la.bytes), set[1][1] = dalloc(lb.bytes ? lb.bytes : 1), set[1][2] = dalloc(lc.bytes);
  if (!a || !b || !cb)
    st = TD_ERR_NO_MEMORY;
  for (int i = 0; i < (c->moving_buffers ? 6 : 3); i++)
    if (!set[i / 3][i % 3])
      st = TD_ERR_NO_MEMORY;
  for (int call = 0; call < c->calls && st == TD_OK; call++) {
    void *const *use = set[c->moving_buffers ? (call / (2 + rank % 2)) % 2 : 0];
    void *da = use[0], *db = use[1], *dc = use[2];
    /* Peers read this rank's A only inside the call, which starts with a barrier. */
    st = oh_fill(c, op, rank, call, TD_TP_A, a);
    if (st == TD_OK && c->kind != TD_TP_ALL_REDUCE)
      st = oh_fill(c, op, rank, call, TD_TP_B, b);
    oh_fill_nan(cb, c->dtype, lc.bytes);
    if (st == TD_OK && (up(da, a, la.bytes) || (lb.bytes && up(db, b, lb.bytes)) || up(dc, cb, lc.bytes)))
      st = TD_ERR_CUDA;
    if (st == TD_OK)
      st = oh_call(c, op, dc, da, db);
    if (st == TD_OK && down(cb, dc, lc.bytes))
      st = TD_ERR_CUDA;
    if (st == TD_OK)
      st = oh_check(c, n, rank, call, &lc, cb);
  }
  free(a);
  free(b);
  free(cb);
  for (int i = 0; i < 6; i++)
    if (set[i / 3][i % 3])
      dfree(set[i / 3][i % 3]);
  td_status st2 = td_tp_destroy(op);
  return st != TD_OK ? st : st2;
}

static inline td_status oh_run(int nranks, oh_case *c) {
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  wo.heap_size = 64u << 20;
  return td_local_world_run(nranks, &wo, oh_rank, c);
}

#define OH_EXPECT_OK(nranks, c)                                                                           \
  do {                                                                                                    \
    td_status oh_st_ = oh_run((nranks), (c));                                                             \
    if (oh_st_ != TD_OK)                                                                                  \
      fail_msg("%s %s %s M=%lld N=%lld K=%lld count=%zu on %d ranks: %s: %s", td_tp_kind_name((c)->kind), \
               td_tp_variant_name((c)->variant), td_dtype_name((c)->dtype), (long long)(c)->m,            \
               (long long)(c)->n, (long long)(c)->k, (c)->count, (nranks), td_status_name(oh_st_),        \
               td_last_error());                                                                          \
  } while (0)

#endif
