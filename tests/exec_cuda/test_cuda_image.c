/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's device task image, checked on the CPU with made-up
 * device addresses: every view resolves to the right arena (own or a peer's),
 * private buffer or caller binding plus the view's offset, with the buffer's
 * row stride; waits point at this rank's signal words with the per-launch
 * totals; raises at the owner's words; copy-engine copies become queue proxies
 * only when the queue is on; an unresolvable view is an internal error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "exec/cuda/cuda_exec.h"
#include "exec/exec_harness.h"

enum { OWN = 0x10000000, PEER = 0x20000000, LOCALBUF = 0x30000000, INPUT = 0x100000, SOFF = 256 };

typedef struct {
  td_plan *plan;
  int32_t in, s, l;
  uint32_t s0, s1;
} img_plan;

static void build(img_plan *ip) {
  assert_int_equal(td_plan_create(2, &ip->plan), TD_OK);
  ip->in = ex_buffer(ip->plan, "in", TD_BUF_INPUT, TD_F32, 4, 8);
  ip->s = ex_buffer(ip->plan, "s", TD_BUF_SYMM, TD_F32, 6, 16);
  ip->l = ex_buffer(ip->plan, "l", TD_BUF_LOCAL, TD_F32, 3, 4);
  assert_int_equal(td_plan_add_signal(ip->plan, "s0", &ip->s0), TD_OK);
  assert_int_equal(td_plan_add_signal(ip->plan, "s1", &ip->s1), TD_OK);
  uint32_t idx;
  /* rank 0 */
  td_task put = ex_task(TD_TASK_COPY, TD_WORKER_COMM, 0, "put");
  put.a = ex_view(ip->in, TD_PEER_SELF, 1, 2, 2, 4);
  put.c = ex_view(ip->s, 1, 2, 3, 2, 4);
  td_raise r1 = {ip->s1, 1, 3};
  assert_int_equal(td_plan_add_task(ip->plan, 0, &put, NULL, 0, NULL, 0, &r1, 1, &idx), TD_OK);
  td_task scale = ex_task(TD_TASK_EWISE, TD_WORKER_COMPUTE, TD_EW_SCALE, "scale");
  scale.a = ex_view(ip->s, TD_PEER_SELF, 0, 0, 2, 4);
  scale.c = ex_view(ip->l, TD_PEER_SELF, 0, 0, 2, 4);
  td_wait w0 = {ip->s0, TD_CMP_GE, 2};
  assert_int_equal(td_plan_add_task(ip->plan, 0, &scale, NULL, 0, &w0, 1, NULL, 0, &idx), TD_OK);
  td_task ce = ex_task(TD_TASK_COPY, TD_WORKER_COPY_ENGINE, 0, "ce");
  ce.a = ex_view(ip->in, TD_PEER_SELF, 0, 0, 2, 8);
  ce.c = ex_view(ip->s, TD_PEER_SELF, 4, 8, 2, 8);
  assert_int_equal(td_plan_add_task(ip->plan, 0, &ce, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  /* rank 1 */
  td_task nop = ex_task(TD_TASK_NOP, TD_WORKER_COMM, 0, "raise s0");
  td_raise r0 = {ip->s0, 0, 2};
  assert_int_equal(td_plan_add_task(ip->plan, 1, &nop, NULL, 0, NULL, 0, &r0, 1, &idx), TD_OK);
  td_task waiter = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "wait s1");
  td_wait w1 = {ip->s1, TD_CMP_GE, 3};
  assert_int_equal(td_plan_add_task(ip->plan, 1, &waiter, NULL, 0, &w1, 1, NULL, 0, &idx), TD_OK);
  assert_int_equal(td_plan_validate(ip->plan), TD_OK);
}

typedef struct {
  td_exec e;
  td__cuda_exec cx;
  void *bound[3];
  size_t buf_off[3];
  void *local[3];
  uint64_t peer_base[2];
  td_dev_task tasks[3];
  td_dev_wait waits[1];
  td_dev_raise raises[1];
} fake;

static void make_fake(const img_plan *ip, fake *f, int ce_enabled) {
  memset(f, 0, sizeof *f);
  f->e.plan = ip->plan;
  f->e.sched = td_plan_schedule(ip->plan, 0);
  f->e.rank = 0;
  f->e.nranks = 2;
  f->e.bound = f->bound;
  f->bound[ip->in] = (void *)(uintptr_t)INPUT;
  f->buf_off[ip->s] = SOFF;
  f->local[ip->l] = (void *)(uintptr_t)LOCALBUF;
  f->peer_base[0] = OWN;
  f->peer_base[1] = PEER;
  f->cx.exec = &f->e;
  f->cx.buf_off = f->buf_off;
  f->cx.local = f->local;
  f->cx.peer_base = f->peer_base;
  f->cx.h_tasks = f->tasks;
  f->cx.ce_enabled = ce_enabled;
}

static void test_views_waits_raises(void **state) {
  img_plan ip;
  build(&ip);
  fake f;
  make_fake(&ip, &f, 1);
  assert_int_equal(td__cuda_image_tasks(&f.cx, f.waits, f.raises), TD_OK);
  const td_dev_task *put = &f.tasks[0], *scale = &f.tasks[1], *ce = &f.tasks[2];
  assert_int_equal(put->a.ptr, INPUT + (1 * 8 + 2) * 4);
  assert_int_equal(put->a.ld, 8);
  assert_int_equal(put->a.rows, 2);
  assert_int_equal(put->a.cols, 4);
  assert_int_equal(put->a.dtype, TD_F32);
  assert_int_equal(put->c.ptr, PEER + SOFF + (2 * 16 + 3) * 4); /* the peer's arena */
  assert_int_equal(put->c.ld, 16);
  assert_int_equal(put->b.ptr, 0);                               /* unused view */
  assert_int_equal(put->worker, TD_WORKER_COMM);
  assert_int_equal(put->raise_count, 1);
  assert_int_equal(scale->a.ptr, OWN + SOFF);
  assert_int_equal(scale->c.ptr, LOCALBUF);
  assert_int_equal(scale->c.ld, 4);
  assert_int_equal(scale->op, TD_EW_SCALE);
  assert_int_equal(scale->wait_count, 1);
  assert_int_equal(ce->worker, TD_DEV_WORKER_CE_PROXY);
  assert_int_equal(ce->c.ptr, OWN + SOFF + (4 * 16 + 8) * 4);
  /* Signal words: word k of an arena at byte 8k; waits on our own, raises on the owner's. */
  assert_int_equal(f.waits[0].sig, OWN + 8 * ip.s0);
  assert_int_equal(f.waits[0].total, td_plan_signal_total(ip.plan, ip.s0, 0));
  assert_int_equal(f.waits[0].total, 2);
  assert_int_equal(f.waits[0].value, 2);
  assert_int_equal(f.waits[0].cmp, TD_CMP_GE);
  assert_int_equal(f.waits[0].signal, ip.s0);
  assert_int_equal(f.raises[0].sig, PEER + 8 * ip.s1);
  assert_int_equal(f.raises[0].value, 3);
  td_plan_destroy(ip.plan);
}

static void test_copy_engine_off_keeps_class(void **state) {
  img_plan ip;
  build(&ip);
  fake f;
  make_fake(&ip, &f, 0);
  assert_int_equal(td__cuda_image_tasks(&f.cx, f.waits, f.raises), TD_OK);
  assert_int_equal(f.tasks[2].worker, TD_WORKER_COPY_ENGINE); /* run by communication blocks */
  td_plan_destroy(ip.plan);
}

static void test_unresolved_view_is_internal_error(void **state) {
  img_plan ip;
  build(&ip);
  fake f;
  make_fake(&ip, &f, 1);
  f.bound[ip.in] = NULL;
  assert_int_equal(td__cuda_image_tasks(&f.cx, f.waits, f.raises), TD_ERR_INTERNAL);
  assert_non_null(strstr(td_last_error(), "buffer 0 'in' has no device address"));
  td_plan_destroy(ip.plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_views_waits_raises),
      cmocka_unit_test(test_copy_engine_off_keeps_class),
      cmocka_unit_test(test_unresolved_view_is_internal_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
