/* SPDX-License-Identifier: Apache-2.0
 * Tensor-parallel operators on the cuda backend (label gpu): every operator
 * and variant on 1, 2, 4 and 8 ranks sharing the GPU, uneven shapes, bf16
 * and f32, several calls in a row without reset, checked against the f64
 * reference (the harness of tests/ops, with device buffers); and the
 * correctness case of the benchmark, M = 4091 x ranks, N = 5120, K = 1024,
 * checked on a sample of rows; the fused variant (Hopper GEMM + copy
 * engine) on the shapes it takes, only with TD_GPU_TEST_FUSED=1 (it hung on
 * the H200). TD_GPU_TEST_FILTER=<glob> runs a subset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ops/ops_harness.h"

static void *g_alloc(size_t bytes) {
  void *p = NULL;
  cudaSetDevice(0);
  return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}
static void g_free(void *p) { cudaFree(p); }
static int g_up(void *d, const void *h, size_t bytes) {
  return cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}
static int g_down(void *h, const void *d, size_t bytes) {
  return cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess ? 0 : -1;
}

static oh_case g_case(td_tp_kind kind, td_tp_variant v, td_dtype dt, int64_t m, int64_t n, int64_t k,
                      size_t count, int calls) {
  oh_case c = {.kind = kind, .variant = v, .dtype = dt, .m = m, .n = n, .k = k, .count = count, .calls = calls,
               .backend = TD_EXEC_CUDA, .dev_alloc = g_alloc, .dev_free = g_free, .upload = g_up,
               .download = g_down};
  return c;
}

static void test_ag_gemm(void **state) {
  (void)state;
  const td_tp_variant vs[] = {TD_TP_AUTO, TD_TP_SEQUENTIAL, TD_TP_SM, TD_TP_COPY_ENGINE, TD_TP_RING};
  const int ranks[] = {1, 2, 4, 8};
  for (int v = 0; v < 5; v++)
    for (int r = 0; r < 4; r++) {
      oh_case c = g_case(TD_TP_AG_GEMM, vs[v], TD_BF16, 333, 264, 136, 0, 3);
      OH_EXPECT_OK(ranks[r], &c);
    }
  oh_case c = g_case(TD_TP_AG_GEMM, TD_TP_COPY_ENGINE, TD_F32, 67, 45, 24, 0, 2);
  OH_EXPECT_OK(3, &c);
  c = g_case(TD_TP_AG_GEMM, TD_TP_SM, TD_BF16, 5, 16, 8, 0, 2); /* M < ranks */
  OH_EXPECT_OK(8, &c);
}

static void test_gemm_rs_ar(void **state) {
  (void)state;
  const int ranks[] = {1, 2, 4, 8};
  for (int r = 0; r < 4; r++) {
    oh_case c = g_case(TD_TP_GEMM_RS, TD_TP_AUTO, TD_BF16, 301, 264, 128, 0, 3);
    OH_EXPECT_OK(ranks[r], &c);
    c.variant = TD_TP_SEQUENTIAL;
    OH_EXPECT_OK(ranks[r], &c);
    c = g_case(TD_TP_GEMM_AR, TD_TP_ONE_SHOT, TD_BF16, 77, 136, 64, 0, 3);
    OH_EXPECT_OK(ranks[r], &c);
    c.variant = TD_TP_TWO_SHOT;
    OH_EXPECT_OK(ranks[r], &c);
    c.variant = TD_TP_AUTO;
    OH_EXPECT_OK(ranks[r], &c);
  }
}

static void test_all_reduce(void **state) {
  (void)state;
  const int ranks[] = {2, 4, 8};
  const size_t counts[] = {4096, 1009, 1 << 20};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 3; k++) {
      oh_case c = g_case(TD_TP_ALL_REDUCE, TD_TP_ONE_SHOT, TD_BF16, 0, 0, 0, counts[k], 3);
      OH_EXPECT_OK(ranks[r], &c);
      c.variant = TD_TP_TWO_SHOT;
      OH_EXPECT_OK(ranks[r], &c);
    }
}

static void test_many_calls(void **state) {
  (void)state;
  oh_case c = g_case(TD_TP_AG_GEMM, TD_TP_COPY_ENGINE, TD_BF16, 259, 128, 64, 0, 100);
  OH_EXPECT_OK(4, &c);
  c = g_case(TD_TP_ALL_REDUCE, TD_TP_ONE_SHOT, TD_BF16, 0, 0, 0, 8192, 200);
  OH_EXPECT_OK(8, &c);
}

static void test_correctness_case(void **state) {
  (void)state;
  /* The benchmark's correctness case, C checked on 16 rows of every rank's part. */
  const int ranks[] = {2, 8};
  for (int r = 0; r < 2; r++) {
    oh_case c = g_case(TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 4091 * ranks[r], 5120, 1024, 0, 2);
    c.sample_rows = 16;
    OH_EXPECT_OK(ranks[r], &c);
    c.kind = TD_TP_GEMM_RS;
    OH_EXPECT_OK(ranks[r], &c);
  }
}

/* The fused variant (src/ops/cuda/): Hopper GEMM + copy engine, on shapes
 * its kernels take (bf16; N / ranks and K / ranks multiples of 8), odd M,
 * 1-8 ranks, 100 calls without reset, and the benchmark's correctness case. */
static void fused_case(td_tp_kind kind, int64_t m, int64_t n, int64_t k, int calls, int sample, int ranks) {
  oh_case c = g_case(kind, TD_TP_FUSED, TD_BF16, m, n, k, 0, calls);
  c.sample_rows = sample;
  OH_EXPECT_OK(ranks, &c);
  assert_int_equal(c.chosen, TD_TP_FUSED);
}

static void test_fused(void **state) {
  (void)state;
  /* Opt-in: the fused variant hung on the H200 (8 ranks on one GPU, call 6
   * of the bench; this test timed out), see docs/architecture.md "fused".
   * Until a GPU run shows it finishing, the default suite must not hang. */
  const char *on = getenv("TD_GPU_TEST_FUSED");
  if (!on || strcmp(on, "1") != 0) {
    print_message("test_fused skipped: fused variant is experimental, known to hang on the H200 "
                  "at call 6 (2026-11-29); set TD_GPU_TEST_FUSED=1\n");
    skip();
    return;
  }
  const int ranks[] = {1, 2, 4, 8};
  for (int r = 0; r < 4; r++) {
    fused_case(TD_TP_AG_GEMM, 333, 512, 136, 3, 0, ranks[r]);
    fused_case(TD_TP_GEMM_RS, 301, 264, 512, 3, 0, ranks[r]);
    fused_case(TD_TP_GEMM_AR, 77, 136, 512, 3, 0, ranks[r]);   /* one-shot (<= 1 MiB) */
    fused_case(TD_TP_GEMM_AR, 1031, 520, 256, 2, 0, ranks[r]); /* RS + AG */
  }
  oh_case c = g_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_F16, 129, 64, 128, 0, 2);
  OH_EXPECT_OK(4, &c);
  c = g_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 131, 64, 128, 0, 2); /* the gather GEMM in the operand dtype */
  OH_EXPECT_OK(4, &c);
  fused_case(TD_TP_AG_GEMM, 259, 128, 64, 100, 0, 4);
  fused_case(TD_TP_GEMM_RS, 259, 128, 64, 100, 0, 8);
  fused_case(TD_TP_GEMM_AR, 1031, 520, 256, 100, 8, 8);
  for (int i = 0; i < 2; i++) {
    int n = i ? 8 : 2;
    fused_case(TD_TP_AG_GEMM, 4091 * n, 5120, 1024, 2, 16, n);
    fused_case(TD_TP_GEMM_RS, 4091 * n, 5120, 1024, 2, 16, n);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ag_gemm),
      cmocka_unit_test(test_gemm_rs_ar),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_many_calls),
      cmocka_unit_test(test_correctness_case),
      cmocka_unit_test(test_fused),
  };
  const char *filter = getenv("TD_GPU_TEST_FILTER"); /* e.g. test_fused */
  if (filter && *filter)
    cmocka_set_test_filter(filter);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
