/* SPDX-License-Identifier: Apache-2.0
 * Every lowering pattern and the fallback, run on a local world and checked
 * against the reference: AG -> GEMM (mesh and ring, both gather dims),
 * GEMM -> RS (both dims), GEMM -> AR (one-shot and RS + AG), element-wise and
 * rmsnorm tiles, all_to_all and collectives between non-GEMM ops (fallback),
 * transposed operands, f32 and bf16, overlapped and sequential. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "compiler/run_helper.h"

static const char *ag_gemm =
    "dim M = 24, K = 8, N = 12\ninput x : f32[M, K] shard(0)\nweight w : f32[K, N] shard(1)\n"
    "output y = matmul(all_gather(x), w)\n";

static void test_ag_gemm(void **state) {
  (void)state;
  td_test_run mesh = {2, 3, 0, -1, 0}, ring = {2, 3, 1, -1, 0};
  for (int n = 1; n <= 4; n++) {
    td_test_run_program(ag_gemm, NULL, n, &mesh);
    td_test_run_program(ag_gemm, NULL, n, &ring);
  }
  /* gather along dim 1, consumed by a GEMM */
  const char *dim1 = "input x : bf16[10, 12] shard(1)\nweight w : bf16[12, 6]\n"
                     "output y = matmul(all_gather(x), w)\n";
  td_test_run_program(dim1, NULL, 3, &mesh);
  td_test_run_program(dim1, NULL, 3, &ring);
}

static void test_gemm_rs(void **state) {
  (void)state;
  const char *rs0 = "input a : f32[20, 12] shard(1)\nweight w : f32[12, 9] shard(0)\n"
                    "output y = reduce_scatter(matmul(a, w))\n";
  const char *rs1 = "input a : bf16[20, 12] shard(1)\nweight w : bf16[12, 9] shard(0)\n"
                    "output y = reduce_scatter(matmul(a, w), 1)\n";
  td_test_run cfg = {3, 2, 0, -1, 0};
  for (int n = 1; n <= 4; n++) {
    td_test_run_program(rs0, NULL, n, &cfg);
    td_test_run_program(rs1, NULL, n, &cfg);
  }
}

static void test_gemm_ar(void **state) {
  (void)state;
  const char *ar = "input a : f32[11, 12] shard(1)\nweight w : f32[12, 7] shard(0)\n"
                   "output y = all_reduce(matmul(a, w))\n";
  td_test_run one_shot = {2, 2, 0, 1 << 20, 0}, two_step = {2, 2, 0, 0, 0};
  for (int n = 1; n <= 4; n++) {
    td_test_run_program(ar, NULL, n, &one_shot);
    td_test_run_program(ar, NULL, n, &two_step);
  }
}

static void test_ewise_rmsnorm(void **state) {
  (void)state;
  const char *text = "input x : bf16[13, 8] shard(0)\ninput r : bf16[13, 8]\nweight g : bf16[8]\n"
                     "h = add(x, r)\nu = mul(silu(h), scale(x, 0.25))\n"
                     "output y = rmsnorm(u, g, 1e-5)\n";
  td_test_run cfg = {1, 2, 0, -1, 0};
  for (int n = 1; n <= 3; n++)
    td_test_run_program(text, NULL, n, &cfg);
  const char *partial = "input p : f32[6, 5] partial\ninput q : f32[6, 5] partial\n"
                        "output y = all_reduce(scale(add(p, q), 2))\n";
  td_test_run_program(partial, NULL, 3, &cfg);
}

static void test_fallback(void **state) {
  (void)state;
  td_test_run cfg = {2, 2, 0, -1, 0};
  /* all_gather feeding rmsnorm, reduce_scatter of a non-GEMM value, all_to_all both ways */
  const char *ag_norm = "input x : f32[9, 6] shard(0)\nweight g : f32[6]\n"
                        "output y = rmsnorm(all_gather(x), g)\n";
  const char *rs_ew = "input p : f32[10, 4] partial\noutput y = reduce_scatter(scale(p, 3))\n";
  const char *a2a = "input x : f32[10, 7] shard(1)\nt = all_to_all(x, 0)\n"
                    "output y = all_to_all(gelu(t), 1)\n";
  const char *chain = "input x : bf16[12, 8] shard(0)\nweight w1 : bf16[8, 6]\nweight w2 : bf16[6, 8] shard(0)\n"
                      "g = all_gather(x)\nh = matmul(g, w1)\noutput z = add(all_gather(gelu(matmul(x, w1))), h)\n";
  for (int n = 1; n <= 4; n++) {
    td_test_run_program(ag_norm, NULL, n, &cfg);
    td_test_run_program(rs_ew, NULL, n, &cfg);
    td_test_run_program(a2a, NULL, n, &cfg);
    td_test_run_program(chain, NULL, n, &cfg);
  }
}

static void test_transposes(void **state) {
  (void)state;
  td_test_run cfg = {2, 3, 0, -1, 0};
  const char *tb = "input x : f32[12, 8] shard(0)\nweight w : f32[10, 8] shard(0)\n"
                   "output y = matmul(all_gather(x), w, transpose_b)\n";
  const char *ta = "input x : f32[8, 12] shard(0)\nweight w : f32[8, 5]\n"
                   "output y = reduce_scatter(matmul(x, w, transpose_a))\n";
  for (int n = 1; n <= 3; n++) {
    td_test_run_program(tb, NULL, n, &cfg);
    td_test_run_program(ta, NULL, n, &cfg);
  }
}

static void test_more_workers(void **state) {
  (void)state;
  td_test_run cfg = {2, 2, 0, -1, 3};
  td_test_run_program(ag_gemm, NULL, 2, &cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ag_gemm),       cmocka_unit_test(test_gemm_rs),
      cmocka_unit_test(test_gemm_ar),       cmocka_unit_test(test_ewise_rmsnorm),
      cmocka_unit_test(test_fallback),      cmocka_unit_test(test_transposes),
      cmocka_unit_test(test_more_workers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
