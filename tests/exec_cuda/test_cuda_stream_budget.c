/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's setup decisions that need no GPU: the stream budget
 * (kernel queue, then copy engine, off when the ranks sharing a GPU would use
 * more streams than CUDA_DEVICE_MAX_CONNECTIONS), how that variable is read,
 * the kernel queue's limits (tasks per rank, sub-tile grid size), and the
 * process-wide per-device stuck flag. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec/cuda/cuda_exec.h"
#include "exec/cuda/device_stuck.h"

/* Every stream of every rank gets a hardware queue, with TD__CUDA_STREAM_RESERVE
 * spare (the legacy default stream and others share the pool: an exact fit
 * aliased on the H200). */
static void stream_plan_default_connections(void **state) {
  (void)state;
  int kq = -1, ce = -1;
  assert_int_equal(TD__CUDA_STREAM_RESERVE, 2);
  td__cuda_stream_plan(1, 8, &kq, &ce); /* 4 + 2 spare of 8 */
  assert_true(kq && ce);
  td__cuda_stream_plan(2, 8, &kq, &ce); /* 2 x 4 streams would fill the 8 queues exactly: queue off */
  assert_false(kq);
  assert_true(ce);
  td__cuda_stream_plan(3, 8, &kq, &ce); /* copy engine: 3 x 2 + 2 spare = 8 */
  assert_false(kq);
  assert_true(ce);
  td__cuda_stream_plan(4, 8, &kq, &ce); /* 4 x 2 streams on 8 queues stalled exec_random_test */
  assert_false(kq);
  assert_false(ce);
  td__cuda_stream_plan(0, 8, &kq, &ce); /* no count yet: as one rank */
  assert_true(kq && ce);
}

static void stream_plan_max_connections(void **state) {
  (void)state;
  int kq = -1, ce = -1;
  td__cuda_stream_plan(7, 32, &kq, &ce); /* 28 + 2 spare of 32 */
  assert_true(kq && ce);
  td__cuda_stream_plan(8, 32, &kq, &ce); /* 8 x 4 = 32 stalled exec_gemm_queue_test: queue off */
  assert_false(kq);
  assert_true(ce);
  td__cuda_stream_plan(15, 32, &kq, &ce);
  assert_false(kq);
  assert_true(ce);
  td__cuda_stream_plan(16, 32, &kq, &ce);
  assert_false(kq);
  assert_false(ce);
}

static void max_connections_read(void **state) {
  (void)state;
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  assert_int_equal(td__cuda_max_connections(), 8);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
  assert_int_equal(td__cuda_max_connections(), 32);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4", 1);
  assert_int_equal(td__cuda_max_connections(), 4);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "64", 1); /* CUDA's maximum is 32 */
  assert_int_equal(td__cuda_max_connections(), 32);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "many", 1);
  assert_int_equal(td__cuda_max_connections(), 8);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "0", 1);
  assert_int_equal(td__cuda_max_connections(), 8);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "", 1);
  assert_int_equal(td__cuda_max_connections(), 8);
  unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
}

static td_task *tasks_of(uint32_t n, td_task_kind kind, int64_t rows, int64_t cols) {
  td_task *t = calloc(n, sizeof *t);
  assert_non_null(t);
  for (uint32_t i = 0; i < n; i++) {
    t[i].kind = kind;
    t[i].c.rows = rows;
    t[i].c.cols = cols;
  }
  return t;
}

static void queue_limits(void **state) {
  (void)state;
  td_schedule s;
  memset(&s, 0, sizeof s);
  s.tasks = tasks_of(TD__KQ_MAX_TASKS + 1, TD_TASK_GEMM, 256, 512);
  s.ntasks = 3;
  assert_int_equal(td__cuda_kq_limits(&s), 0);
  s.ntasks = TD__KQ_MAX_TASKS;
  assert_int_equal(td__cuda_kq_limits(&s), 0);
  s.ntasks = TD__KQ_MAX_TASKS + 1; /* would fill CUDA's pending-launch queue */
  assert_int_equal(td__cuda_kq_limits(&s), 1);
  free(s.tasks);
  /* A GEMM of 2^23 x 2^23 outputs takes (2^16)^2 sub-tiles of 128 x 128: past INT32_MAX blocks. */
  s.tasks = tasks_of(2, TD_TASK_GEMM, 256, 512);
  s.ntasks = 2;
  s.tasks[1].c.rows = s.tasks[1].c.cols = (int64_t)1 << 23;
  assert_int_equal(td__cuda_kq_limits(&s), 2);
  /* An element-wise task takes 32K-element windows of whole rows: 2^23 rows
   * of 2^23 need 2^31 blocks, one too many; half the rows fit. */
  s.tasks[1].kind = TD_TASK_EWISE;
  assert_int_equal(td__cuda_kq_limits(&s), 2);
  s.tasks[1].c.rows = (int64_t)1 << 22;
  assert_int_equal(td__cuda_kq_limits(&s), 0);
  /* An empty task is one block. */
  s.tasks[1].c.rows = s.tasks[1].c.cols = 0;
  assert_int_equal(td__cuda_kq_limits(&s), 0);
  free(s.tasks);
}

/* Process-wide state: marks one device, then (last) an out-of-range ordinal. */
static void device_stuck_flag(void **state) {
  (void)state;
  assert_false(td__cuda_device_stuck(3));
  assert_false(td__cuda_device_stuck(-1));
  td__cuda_mark_device_stuck(3);
  assert_true(td__cuda_device_stuck(3));
  assert_false(td__cuda_device_stuck(2));
  assert_false(td__cuda_device_stuck(4));
  assert_false(td__cuda_device_stuck(100000)); /* out of range: not known stuck */
  td__cuda_mark_device_stuck(100000);          /* an ordinal past the table marks every device */
  assert_true(td__cuda_device_stuck(2));
  assert_true(td__cuda_device_stuck(100000));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stream_plan_default_connections),
      cmocka_unit_test(stream_plan_max_connections),
      cmocka_unit_test(max_connections_read),
      cmocka_unit_test(queue_limits),
      cmocka_unit_test(device_stuck_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
