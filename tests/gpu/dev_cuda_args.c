/* SPDX-License-Identifier: Apache-2.0
 * Argument checks of the CUDA local transport and the copy engine that need
 * no GPU (label cpu: CI runs it; on a GPU machine the device part differs
 * only in that creation succeeds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "tdist/device/cuda_local.h"

static void expect(td_status got, td_status want, const char *text) {
  assert_int_equal(got, want);
  if (strstr(td_last_error(), text) == NULL)
    fail_msg("message \"%s\" lacks \"%s\"", td_last_error(), text);
}

static void test_create_arguments(void **state) {
  td_cuda_local_opts o;
  td_cuda_local *cl = NULL;
  expect(td_cuda_local_create(NULL, &cl), TD_ERR_INVALID_ARG, "opts is NULL");
  td_cuda_local_opts_init(&o);
  assert_int_equal(o.nranks, 1);
  expect(td_cuda_local_create(&o, NULL), TD_ERR_INVALID_ARG, "out is NULL");
  o.nranks = 0;
  expect(td_cuda_local_create(&o, &cl), TD_ERR_INVALID_ARG, "nranks = 0; allowed 1..64");
  o.nranks = TD_DEV_MAX_PEERS + 1;
  expect(td_cuda_local_create(&o, &cl), TD_ERR_INVALID_ARG, "nranks = 65");
  o.nranks = 2;
  o.heap_size = 100;
  expect(td_cuda_local_create(&o, &cl), TD_ERR_INVALID_ARG, "heap_size = 100 bytes; at least 8192");
  o.heap_size = 0;
  o.flags = 0x80;
  expect(td_cuda_local_create(&o, &cl), TD_ERR_INVALID_ARG, "only TD_DEV_RETURN_ON_TIMEOUT");
  o.flags = 0;
  o.timeout_ms = -5;
  expect(td_cuda_local_create(&o, &cl), TD_ERR_INVALID_ARG, "timeout_ms = -5 is negative");
  assert_null(cl);
  /* valid options: a GPU machine creates the ranks; CI has no device */
  o.timeout_ms = 0;
  o.heap_size = 1u << 20;
  td_status st = td_cuda_local_create(&o, &cl);
  if (st == TD_OK) {
    assert_int_equal(td_cuda_local_size(cl), 2);
    td_cuda_local_destroy(cl);
  } else {
    expect(st, TD_ERR_CUDA, "td_cuda_local_create: no CUDA device");
    assert_null(cl);
  }
}

static void test_null_handles(void **state) {
  td_cuda_local_destroy(NULL);
  assert_int_equal(td_cuda_local_size(NULL), 0);
  assert_int_equal(td_cuda_local_device(NULL, 0), -1);
  assert_null(td_cuda_local_ptr(NULL, 0, 0));
  assert_null(td_cuda_local_ctx_table(NULL));
  assert_null(td_cuda_local_stream(NULL, 0));
  assert_null(td_cuda_local_ce_stream(NULL, 0));
  assert_null(td_cuda_local_diagnostic(NULL));
  size_t off;
  td_dev_ctx c;
  expect(td_cuda_local_alloc(NULL, 8, 0, &off), TD_ERR_INVALID_ARG, "cl is NULL");
  expect(td_cuda_local_ctx(NULL, 0, &c), TD_ERR_INVALID_ARG, "cl is NULL");
  expect(td_cuda_local_sync(NULL), TD_ERR_INVALID_ARG, "cl is NULL");
  expect(td_cuda_local_clear_diagnostic(NULL), TD_ERR_INVALID_ARG, "cl is NULL");
  expect(td_cuda_local_check_coresident(NULL, NULL, 0, 1, 1, 0), TD_ERR_INVALID_ARG, "cl is NULL");
  expect(td_cuda_local_launch(NULL, NULL, 1, 1, 0, NULL), TD_ERR_INVALID_ARG, "args is NULL");
  expect(td_cuda_ce_putmem_signal(NULL, 0, 4096, NULL, 0, SIZE_MAX, 0, TD_SIGNAL_SET, 0, NULL),
         TD_ERR_INVALID_ARG, "td_cuda_ce_putmem_signal: cl is NULL");
  expect(td_cuda_ce_wait(NULL, 0, 4096, TD_CMP_GE, 0, NULL), TD_ERR_INVALID_ARG,
         "td_cuda_ce_wait: cl is NULL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_arguments),
      cmocka_unit_test(test_null_handles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
