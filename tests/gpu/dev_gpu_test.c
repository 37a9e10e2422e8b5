/* SPDX-License-Identifier: Apache-2.0
 * Device primitives on the GPU (label gpu): 2, 4 and 8 ranks of the CUDA
 * local transport share one GPU and run ring puts in every form (also fused
 * into one kernel, the variant compute-sanitizer can run), ping-pong, an
 * all-to-all with group waits, 10,000 block barriers, 1,000 launches on epoch
 * signals with no reset, copy-engine puts with stream signals and waits; the
 * co-residency refusal; a deadline that returns instead of trapping; and the
 * argument errors of the copy engine. TD_GPU_TEST_FILTER=<glob> runs a subset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/dev_kernels.h"

static const int sizes[] = {2, 4, 8};

static td_cuda_local *make(int n, int timeout_ms, unsigned flags) {
  td_cuda_local_opts o;
  td_cuda_local_opts_init(&o);
  o.nranks = n;
  o.heap_size = 32u << 20;
  o.timeout_ms = timeout_ms;
  o.flags = flags;
  td_cuda_local *cl = NULL;
  td_status st = td_cuda_local_create(&o, &cl);
  if (st != TD_OK)
    fail_msg("td_cuda_local_create(%d ranks): %s: %s", n, td_status_name(st), td_last_error());
  return cl;
}

#define RUN_ALL_SIZES(call)                                                              \
  for (size_t i_ = 0; i_ < sizeof sizes / sizeof sizes[0]; i_++) {                       \
    td_cuda_local *cl = make(sizes[i_], 20000, 0);                                       \
    td_status st_ = (call);                                                              \
    if (st_ != TD_OK)                                                                    \
      fail_msg("%d ranks: %s: %s", sizes[i_], td_status_name(st_), td_last_error());     \
    td_cuda_local_destroy(cl);                                                           \
  }

static void test_ring_all_forms(void **state) { RUN_ALL_SIZES(gdev_ring(cl, 0, 50, 1001)); }
static void test_ring_fused(void **state) { RUN_ALL_SIZES(gdev_ring(cl, 1, 20, 333)); }
static void test_pingpong(void **state) { RUN_ALL_SIZES(gdev_pingpong(cl, 1000)); }
static void test_alltoall(void **state) { RUN_ALL_SIZES(gdev_alltoall(cl, 20, 517)); }
static void test_barrier_10000(void **state) { RUN_ALL_SIZES(gdev_barrier(cl, 10000)); }
static void test_epochs_1000(void **state) { RUN_ALL_SIZES(gdev_epochs(cl, 1000)); }
static void test_copy_engine(void **state) { RUN_ALL_SIZES(gdev_copy_engine(cl, 16, 4099)); }

static void test_coresidency_refused(void **state) {
  td_cuda_local *cl = make(8, 20000, 0);
  td_status st = gdev_launch_kernel_for_check(cl, 100000, 64);
  assert_int_equal(st, TD_ERR_INVALID_ARG);
  const char *msg = td_last_error();
  /* 8 ranks share device 0 on one GPU; fewer where several GPUs are lent */
  assert_non_null(strstr(msg, "co-residency: "));
  assert_non_null(strstr(msg, " ranks share device 0"));
  assert_non_null(strstr(msg, "100000 blocks of 64 threads"));
  assert_non_null(strstr(msg, "launch at most"));
  /* one block per rank fits; an explicit sharing count is honoured */
  assert_int_equal(td_cuda_local_check_coresident(cl, gdev_stuck_kernel(), 0, 1, 64, 0), TD_OK);
  assert_int_equal(td_cuda_local_check_coresident(cl, gdev_stuck_kernel(), 1000000, 1, 64, 0),
                   TD_ERR_INVALID_ARG);
  assert_int_equal(td_cuda_local_check_coresident(cl, gdev_stuck_kernel(), 0, 0, 64, 0),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "must be at least 1"));
  assert_int_equal(td_cuda_local_check_coresident(cl, NULL, 0, 1, 64, 0), TD_ERR_INVALID_ARG);
  td_cuda_local_destroy(cl);
}

/* Return mode: the stuck block reports TD_ERR_TIMEOUT, all other blocks of all
 * ranks leave with TD_ERR_PEER_FAILED, the context stays usable. */
static void test_timeout_returns(void **state) {
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const int n = sizes[i], blocks = 2;
    td_cuda_local *cl = make(n, 300, TD_DEV_RETURN_ON_TIMEOUT);
    uint64_t status[8 * 2];
    memset(status, 0xff, sizeof status);
    td_status st = gdev_stuck(cl, blocks, status);
    assert_int_equal(st, TD_ERR_TIMEOUT);
    const char *msg = td_last_error();
    assert_non_null(strstr(msg, "rank 0 (block 1, thread 0): device wait timed out"));
    assert_non_null(strstr(msg, "needed value ge 7, observed 3"));
    assert_non_null(strstr(msg, "heap offset 0x"));
    assert_null(strstr(msg, "context is lost"));
    for (int r = 0; r < n; r++)
      for (int b = 0; b < blocks; b++)
        assert_int_equal(status[r * blocks + b],
                         r == 0 && b == 1 ? TD_ERR_TIMEOUT : TD_ERR_PEER_FAILED);
    const td_dev_diagnostic *d = td_cuda_local_diagnostic(cl);
    assert_int_equal(d->state, 2);
    assert_int_equal(d->rank, 0);
    assert_int_equal(d->block, 1);
    assert_int_equal(d->expected, 7);
    assert_int_equal(d->observed, 3);
    assert_true(d->waited_ns >= 300000000u);
    /* the record stays until cleared; the CUDA context survived: more work runs */
    assert_int_equal(td_cuda_local_sync(cl), TD_ERR_TIMEOUT);
    assert_int_equal(td_cuda_local_clear_diagnostic(cl), TD_OK);
    assert_int_equal(d->state, 0);
    assert_int_equal(gdev_pingpong(cl, 10), TD_OK);
    td_cuda_local_destroy(cl);
  }
}

static void test_copy_engine_errors(void **state) {
  td_cuda_local *cl = make(2, 20000, 0);
  size_t off;
  assert_int_equal(td_cuda_local_alloc(cl, 4096, 0, &off), TD_OK);
  void *src = td_cuda_local_ptr(cl, 0, off);
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, off, src, 64, off + 64, 1, TD_SIGNAL_ADD, 1, NULL),
                   TD_ERR_UNSUPPORTED);
  assert_non_null(strstr(td_last_error(), "can only set a signal"));
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, off, src, 64, off + 4, 1, TD_SIGNAL_SET, 1, NULL),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "not 8-byte aligned"));
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, 32u << 20, src, 64, SIZE_MAX, 0, TD_SIGNAL_SET, 1, NULL),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "outside the allocatable heap"));
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, 0, src, 64, SIZE_MAX, 0, TD_SIGNAL_SET, 1, NULL),
                   TD_ERR_INVALID_ARG);
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 2, off, src, 64, SIZE_MAX, 0, TD_SIGNAL_SET, 1, NULL),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "rank 2; allowed 0..1"));
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, off, src, 64, SIZE_MAX, 0, TD_SIGNAL_SET, -1, NULL),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "pe -1"));
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, off, NULL, 64, SIZE_MAX, 0, TD_SIGNAL_SET, 1, NULL),
                   TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "src is NULL"));
  assert_int_equal(td_cuda_ce_wait(cl, 0, off, TD_CMP_LT, 1, NULL), TD_ERR_UNSUPPORTED);
  assert_non_null(strstr(td_last_error(), "comparison lt"));
  assert_int_equal(td_cuda_ce_wait(cl, 0, off + 1, TD_CMP_GE, 1, NULL), TD_ERR_INVALID_ARG);
  assert_int_equal(td_cuda_ce_wait(cl, 5, off, TD_CMP_GE, 1, NULL), TD_ERR_INVALID_ARG);
  /* a stream wait that is never satisfied: sync is bounded and says why */
  td_cuda_local_destroy(cl);
  cl = make(2, 200, 0);
  assert_int_equal(td_cuda_local_alloc(cl, 64, 0, &off), TD_OK);
  assert_int_equal(td_cuda_ce_wait(cl, 1, off, TD_CMP_GE, 1, NULL), TD_OK);
  assert_int_equal(td_cuda_local_sync(cl), TD_ERR_TIMEOUT);
  assert_non_null(strstr(td_last_error(), "rank 1's copy-engine stream did not finish"));
  /* release the stream so destroy does not wait forever */
  assert_int_equal(td_cuda_ce_putmem_signal(cl, 0, off, NULL, 0, off, 1, TD_SIGNAL_SET, 1,
                                            td_cuda_local_stream(cl, 0)),
                   TD_OK);
  assert_int_equal(td_cuda_local_sync(cl), TD_OK);
  td_cuda_local_destroy(cl);
}

static void test_alloc_and_ctx_errors(void **state) {
  td_cuda_local *cl = make(2, 20000, 0);
  size_t off;
  assert_int_equal(td_cuda_local_alloc(cl, 8, 3, &off), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "align = 3"));
  assert_int_equal(td_cuda_local_alloc(cl, (size_t)1 << 40, 0, &off), TD_ERR_HEAP_EXHAUSTED);
  assert_non_null(strstr(td_last_error(), "raise td_cuda_local_opts.heap_size"));
  assert_int_equal(td_cuda_local_alloc(cl, 8, 0, NULL), TD_ERR_INVALID_ARG);
  td_dev_ctx c;
  assert_int_equal(td_cuda_local_ctx(cl, 2, &c), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "rank 2; allowed 0..1"));
  assert_int_equal(td_cuda_local_ctx(cl, 1, &c), TD_OK);
  assert_int_equal(c.rank, 1);
  assert_int_equal(c.n_pes, 2);
  assert_true(c.peer_base[0] != 0 && c.peer_base[1] != 0);
  assert_ptr_equal(td_cuda_local_ptr(cl, 1, 4096), (void *)(c.peer_base[1] + 4096));
  assert_null(td_cuda_local_ptr(cl, 2, 0));
  assert_true(td_cuda_local_device(cl, 1) >= 0); /* 1 % device count */
  assert_int_equal(td_cuda_local_device(cl, 2), -1);
  td_cuda_local_opts o;
  td_cuda_local_opts_init(&o);
  int dev[2] = {0, 7};
  o.nranks = 2;
  o.devices = dev;
  td_cuda_local *bad = NULL;
  assert_int_equal(td_cuda_local_create(&o, &bad), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "rank 1 on device 7"));
  assert_null(bad);
  o.devices = NULL;
  o.heap_size = (size_t)1 << 40; /* 1 TiB per rank: more than any GPU has */
  assert_int_equal(td_cuda_local_create(&o, &bad), TD_ERR_NO_MEMORY);
  assert_non_null(strstr(td_last_error(), "lower heap_size"));
  assert_null(bad);
  td_cuda_local_destroy(cl);
}

int main(void) {
  const char *filter = getenv("TD_GPU_TEST_FILTER");
  if (filter && *filter)
    cmocka_set_test_filter(filter);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_all_forms),     cmocka_unit_test(test_ring_fused),
      cmocka_unit_test(test_pingpong),           cmocka_unit_test(test_alltoall),
      cmocka_unit_test(test_barrier_10000),      cmocka_unit_test(test_epochs_1000),
      cmocka_unit_test(test_copy_engine),        cmocka_unit_test(test_coresidency_refused),
      cmocka_unit_test(test_copy_engine_errors), cmocka_unit_test(test_alloc_and_ctx_errors),
      cmocka_unit_test(test_timeout_returns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
