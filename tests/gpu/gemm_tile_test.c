/* SPDX-License-Identifier: Apache-2.0
 * GEMM tiles against the float64 CPU reference on the GPU: every compiled
 * sm_90a configuration (on Hopper) and the sm_80 ones (on any GPU >= 8.0),
 * bf16 and fp16, B as [N,K] and [K,N], on shapes that divide no tile size
 * (M = 1, 7, 127, ...). Outputs are poisoned with NaN before each run and
 * every element must be written. Inputs are fresh random values per case. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "gemm_test_util.h"

static const int shapes[][3] = {{1, 72, 64},    {7, 200, 136},  {127, 129, 264}, {129, 257, 8},
                                {300, 520, 1032}, {513, 1000, 200}, {64, 64, 64}};
enum { NSHAPES = sizeof shapes / sizeof shapes[0] };

static void run_case(const td_gemm_config *cfg, td_dtype dt, int layout, int m, int n, int k) {
  uint16_t *a = gt_random(dt, (size_t)m * k), *b = gt_random(dt, (size_t)n * k);
  double *ref = gt_reference(dt, a, b, m, n, k, layout);
  void *da = gt_device_copy(a, (size_t)m * k * 2), *db = gt_device_copy(b, (size_t)n * k * 2);
  void *dc = gt_device_copy(NULL, (size_t)m * n * 2);
  assert_non_null(da);
  assert_non_null(dc);
  td_gemm_problem p = {m, n, k, dt, layout, da, db, dc, NULL};
  td_status st = td__gemm_cuda_run(&p, cfg, 0, NULL, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  assert_int_equal(td__gemm_cuda_check_diag(NULL), TD_OK);
  uint16_t *out = malloc((size_t)m * n * 2 + 2);
  assert_int_equal(cudaMemcpy(out, dc, (size_t)m * n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t nans;
  double rel = gt_rel_error(dt, out, ref, (size_t)m * n, &nans);
  if (nans || rel > gt_tolerance(dt))
    fprintf(stderr, "sm%d %dx%d s%d %s B=%s M=%d N=%d K=%d: rel %.3e, %zu unwritten\n",
            (int)cfg->arch, cfg->bm, cfg->bn, cfg->stages, td_dtype_name(dt),
            layout ? "[K,N]" : "[N,K]", m, n, k, rel, nans);
  assert_int_equal(nans, 0);
  assert_true(rel <= gt_tolerance(dt));
  free(a);
  free(b);
  free(ref);
  free(out);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

static void run_arch(td_gemm_arch arch, td_dtype dt, int layout) {
  td_gemm_config cfgs[64];
  int n = td__gemm_cuda_configs(arch, dt, layout, cfgs, 64);
  assert_true(n > 0);
  for (int i = 0; i < n && i < 64; i++)
    for (int s = 0; s < NSHAPES; s++) {
      int n_cols = shapes[s][1];
      if (layout == TD_GEMM_B_KN)
        n_cols = (n_cols + 7) / 8 * 8; /* [K,N] rows must be 16-byte aligned */
      run_case(&cfgs[i], dt, layout, shapes[s][0], n_cols, shapes[s][2]);
    }
}

static void test_sm90_bf16_nk(void **state) {
  (void)state;
  if (gt_gpu_major() != 9)
    skip();
  run_arch(TD_GEMM_SM90, TD_BF16, TD_GEMM_B_NK);
}
static void test_sm90_bf16_kn(void **state) {
  (void)state;
  if (gt_gpu_major() != 9)
    skip();
  run_arch(TD_GEMM_SM90, TD_BF16, TD_GEMM_B_KN);
}
static void test_sm90_f16(void **state) {
  (void)state;
  if (gt_gpu_major() != 9)
    skip();
  run_arch(TD_GEMM_SM90, TD_F16, TD_GEMM_B_NK);
  run_arch(TD_GEMM_SM90, TD_F16, TD_GEMM_B_KN);
}
static void test_sm80_all(void **state) {
  (void)state;
  if (gt_gpu_major() < 8)
    skip();
  run_arch(TD_GEMM_SM80, TD_BF16, TD_GEMM_B_NK);
  run_arch(TD_GEMM_SM80, TD_BF16, TD_GEMM_B_KN);
  run_arch(TD_GEMM_SM80, TD_F16, TD_GEMM_B_NK);
  run_arch(TD_GEMM_SM80, TD_F16, TD_GEMM_B_KN);
}

/* The cuBLAS engine through the same entry point, both layouts and dtypes;
 * hooks are refused by name (cuBLAS cannot wait or signal per tile). */
static void test_cublas_engine(void **state) {
  (void)state;
  if (gt_gpu_major() < 8)
    skip();
  const td_gemm_config cb = {TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
  const td_dtype dts[] = {TD_BF16, TD_F16};
  for (int d = 0; d < 2; d++)
    for (int layout = 0; layout < 2; layout++)
      for (int s = 0; s < NSHAPES; s++)
        run_case(&cb, dts[d], layout, shapes[s][0], (shapes[s][1] + 7) / 8 * 8, shapes[s][2]);
  td_gemm_hooks h = {0};
  td_gemm_problem p = {8, 8, 8, TD_BF16, TD_GEMM_B_NK, (void *)16, (void *)16, (void *)16, NULL};
  assert_int_equal(td__gemm_cuda_run(&p, &cb, TD_GEMM_HOOK_RAISE, &h, NULL), TD_ERR_UNSUPPORTED);
  assert_non_null(strstr(td_last_error(), "cannot wait or signal per tile"));
  char name[64];
  td__gemm_config_name(&cb, name, sizeof name);
  assert_string_equal(name, "cuBLAS");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cublas_engine),
      cmocka_unit_test(test_sm90_bf16_nk),
      cmocka_unit_test(test_sm90_bf16_kn),
      cmocka_unit_test(test_sm90_f16),
      cmocka_unit_test(test_sm80_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
