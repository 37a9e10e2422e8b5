/* SPDX-License-Identifier: Apache-2.0
 * The operators across processes: every operator as shm worlds of forked
 * processes (one process per rank, its executor's workers threads inside),
 * uneven shapes, several calls without reset, checked against the f64
 * reference by the same harness as the local-world tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops_harness.h"
#include "runtime/rt_harness.h"

static void run_shm(int n, oh_case c, const char *job) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = (size_t)16 << 20;
  o.timeout_ms = 30000;
  td_status st = rt_fork(n, job, &o, oh_rank, &c);
  if (st != TD_OK)
    fail_msg("%s %s on %d processes: %s: %s", td_tp_kind_name(c.kind), td_tp_variant_name(c.variant), n,
             td_status_name(st), td_last_error());
}

static void test_operators_shm(void **state) {
  (void)state;
  const int ranks[] = {2, 3, 4};
  for (int i = 0; i < 3; i++) {
    char job[32];
    int n = ranks[i];
    snprintf(job, sizeof job, "opsag%d", n);
    run_shm(n, (oh_case){.kind = TD_TP_AG_GEMM, .variant = TD_TP_SM, .dtype = TD_F32, .m = 41, .n = 19, .k = 12,
                         .calls = 3}, job);
    snprintf(job, sizeof job, "opsce%d", n);
    run_shm(n, (oh_case){.kind = TD_TP_AG_GEMM, .variant = TD_TP_COPY_ENGINE, .dtype = TD_BF16, .m = 29, .n = 16,
                         .k = 24, .calls = 2}, job);
    snprintf(job, sizeof job, "opsrs%d", n);
    run_shm(n, (oh_case){.kind = TD_TP_GEMM_RS, .variant = TD_TP_SM, .dtype = TD_F32, .m = 37, .n = 21, .k = 13,
                         .calls = 3}, job);
    snprintf(job, sizeof job, "opsar%d", n);
    run_shm(n, (oh_case){.kind = TD_TP_GEMM_AR, .variant = TD_TP_TWO_SHOT, .dtype = TD_F32, .m = 23, .n = 17,
                         .k = 9, .calls = 3}, job);
    snprintf(job, sizeof job, "opsll%d", n);
    run_shm(n, (oh_case){.kind = TD_TP_ALL_REDUCE, .variant = TD_TP_ONE_SHOT, .dtype = TD_F32, .count = 3001,
                         .calls = 3}, job);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_operators_shm)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
