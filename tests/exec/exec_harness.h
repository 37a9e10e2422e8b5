/* SPDX-License-Identifier: Apache-2.0
 * Helpers of the executor tests: checks inside rank functions (which run on
 * other threads and must not call cmocka asserts) and plan-building
 * shorthands. */
#ifndef TD_TESTS_EXEC_HARNESS_H
#define TD_TESTS_EXEC_HARNESS_H

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "tdist/tdist.h"

#define EX_FAIL(...) td__error(TD_ERR_CHECK_FAILED, __VA_ARGS__)
#define EX_CHECK(cond)                                                                 \
  do {                                                                                 \
    if (!(cond))                                                                       \
      return EX_FAIL("%s:%d: rank check failed: %s", __FILE__, __LINE__, #cond);       \
  } while (0)
#define EX_OK(expr)                                                                    \
  do {                                                                                 \
    td_status ex_st_ = (expr);                                                         \
    if (ex_st_ != TD_OK) {                                                             \
      td__error_prefix("%s:%d: %s -> %s: ", __FILE__, __LINE__, #expr,                 \
                       td_status_name(ex_st_));                                        \
      return ex_st_;                                                                   \
    }                                                                                  \
  } while (0)

static inline td_view ex_view(int32_t buf, int32_t peer, int64_t row0, int64_t col0, int64_t rows,
                              int64_t cols) {
  td_view v = {buf, peer, row0, col0, rows, cols};
  return v;
}

static inline td_view ex_none(void) { return ex_view(-1, TD_PEER_SELF, 0, 0, 0, 0); }

static inline td_task ex_task(td_task_kind kind, td_worker_class cls, uint32_t op, const char *label) {
  td_task t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  t.worker = cls;
  t.op = op;
  t.alpha = 1.0f;
  t.a = t.b = t.c = ex_none();
  snprintf(t.label, sizeof t.label, "%s", label);
  return t;
}

static inline int32_t ex_buffer(td_plan *p, const char *name, td_buffer_kind kind, td_dtype dtype, int64_t rows,
                                int64_t cols) {
  td_buffer_desc d;
  memset(&d, 0, sizeof d);
  snprintf(d.name, sizeof d.name, "%s", name);
  d.kind = kind;
  d.dtype = dtype;
  d.rows = rows;
  d.cols = cols;
  int32_t idx = -1;
  return td_plan_add_buffer(p, &d, &idx) == TD_OK ? idx : -1;
}

/* Small local world options for tests: 1 MiB heaps, given deadline. */
static inline td_world_opts ex_world_opts(int timeout_ms) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = (size_t)4 << 20;
  o.timeout_ms = timeout_ms;
  o.transport = "local";
  return o;
}

/* Ring over n ranks, rows of w f32: rank r puts its input row into slot r
 * of rank r+1's symm buffer `raises` times (comm worker, raising "got" there
 * each time), then waits for that many raises and copies slot r-1 to its
 * output (compute worker). Uses symm buffers, signals and both worker
 * classes; NULL when the plan cannot be made. */
static inline td_plan *ex_ring(int n, int raises, int64_t w) {
  td_plan *p = NULL;
  if (td_plan_create(n, &p) != TD_OK)
    return NULL;
  int32_t in = ex_buffer(p, "in", TD_BUF_INPUT, TD_F32, 1, w), x = ex_buffer(p, "x", TD_BUF_SYMM, TD_F32, n, w);
  int32_t out = ex_buffer(p, "out", TD_BUF_OUTPUT, TD_F32, 1, w);
  uint32_t s, idx;
  td_plan_add_signal(p, "got", &s);
  for (int r = 0; r < n; r++) {
    for (int k = 0; k < raises; k++) {
      td_task t = ex_task(TD_TASK_COPY, TD_WORKER_COMM, 0, "put");
      t.a = ex_view(in, TD_PEER_SELF, 0, 0, 1, w);
      t.c = ex_view(x, (r + 1) % n, r, 0, 1, w);
      td_raise ra = {s, (r + 1) % n, 1};
      td_plan_add_task(p, r, &t, NULL, 0, NULL, 0, &ra, 1, &idx);
    }
    td_task t = ex_task(TD_TASK_COPY, TD_WORKER_COMPUTE, 0, "get");
    t.a = ex_view(x, TD_PEER_SELF, (r + n - 1) % n, 0, 1, w);
    t.c = ex_view(out, TD_PEER_SELF, 0, 0, 1, w);
    td_wait wt = {s, TD_CMP_GE, (uint64_t)raises};
    td_plan_add_task(p, r, &t, NULL, 0, &wt, 1, NULL, 0, &idx);
  }
  return td_plan_validate(p) == TD_OK ? p : NULL;
}

#endif
