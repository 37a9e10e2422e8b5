/* SPDX-License-Identifier: Apache-2.0
 * Every refusal of td__gemm_cuda_run, with its message. These checks run
 * before any CUDA call, so this test needs no GPU and runs in CI (label cpu). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tdist/types.h"
#include "tile/cuda/gemm.h"

static char buf[64]; /* stands in for device pointers: never dereferenced on these paths */
static const td_gemm_config cfg90 = {TD_GEMM_SM90, 128, 256, 64, 4, 1, 8, 1};

static td_gemm_problem good(void) {
  td_gemm_problem p = {64, 64, 64, TD_BF16, TD_GEMM_B_NK, buf, buf, buf, NULL};
  return p;
}

static void expect(const td_gemm_problem *p, const td_gemm_config *c, unsigned flags,
                   const td_gemm_hooks *h, td_status want, const char *text) {
  td_clear_error();
  assert_int_equal(td__gemm_cuda_run(p, c, flags, h, NULL), want);
  assert_non_null(strstr(td_last_error(), text));
}

static void test_null_and_sizes(void **state) {
  (void)state;
  td_gemm_problem p = good();
  expect(NULL, &cfg90, 0, NULL, TD_ERR_INVALID_ARG, "must not be NULL");
  expect(&p, NULL, 0, NULL, TD_ERR_INVALID_ARG, "must not be NULL");
  p.k = 0;
  expect(&p, &cfg90, 0, NULL, TD_ERR_INVALID_ARG, "K >= 1");
  p = good();
  p.m = -1;
  expect(&p, &cfg90, 0, NULL, TD_ERR_INVALID_ARG, "M=-1");
  p = good();
  p.a = NULL;
  expect(&p, &cfg90, 0, NULL, TD_ERR_INVALID_ARG, "not NULL");
}

static void test_dtype_layout_alignment(void **state) {
  (void)state;
  td_gemm_problem p = good();
  p.dtype = TD_F32;
  expect(&p, &cfg90, 0, NULL, TD_ERR_INVALID_ARG, "dtype f32");
  p = good();
  p.b_layout = 5;
  expect(&p, &cfg90, 0, NULL, TD_ERR_INVALID_ARG, "b_layout 5");
  p = good();
  p.k = 100;
  expect(&p, &cfg90, 0, NULL, TD_ERR_SHAPE, "K=100 is not a multiple of 8");
  p = good();
  p.n = 60;
  p.b_layout = TD_GEMM_B_KN;
  expect(&p, &cfg90, 0, NULL, TD_ERR_SHAPE, "N=60 is not a multiple of 8");
}

static void test_hooks(void **state) {
  (void)state;
  td_gemm_problem p = good();
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  expect(&p, &cfg90, 0x40, &h, TD_ERR_INVALID_ARG, "unknown hooks");
  expect(&p, &cfg90, TD_GEMM_HOOK_RAISE, NULL, TD_ERR_INVALID_ARG, "without a hooks description");
  h.scope = 0x4; /* only TD_GEMM_SCOPE_WAIT_GPU | TD_GEMM_SCOPE_RAISE_GPU exist */
  expect(&p, &cfg90, TD_GEMM_HOOK_RAISE, &h, TD_ERR_INVALID_ARG, "scope 0x4 has unknown bits");
  h.scope = 0;
  expect(&p, &cfg90, TD_GEMM_HOOK_WAIT, &h, TD_ERR_INVALID_ARG, "wait_signals and wait_rows");
  expect(&p, &cfg90, TD_GEMM_HOOK_RAISE, &h, TD_ERR_INVALID_ARG, "raise_signals[0]");
  expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "rows_per_peer >= 1");
  h.rows_per_peer = 4;
  expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "needs 16 peers; at most 8");
  h.rows_per_peer = 32;
  h.dst[0] = buf;
  expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "dst[1]");
  td_gemm_config split = cfg90;
  split.split_k = 2;
  h.raise_signals[0] = (td__gemm_u64 *)buf;
  h.raise_rows = 1;
  expect(&p, &split, TD_GEMM_HOOK_RAISE, &h, TD_ERR_UNSUPPORTED, "split_k=2 cannot be combined");
}

static void test_unknown_config(void **state) {
  (void)state;
  td_gemm_problem p = good();
  td_gemm_config c = cfg90;
  c.bn = 40;
  expect(&p, &c, 0, NULL, TD_ERR_UNSUPPORTED, "no sm_90 kernel compiled for 128x40x64");
  expect(&p, &c, 0, NULL, TD_ERR_UNSUPPORTED, "128x256x64/s4/g8");
  c = cfg90;
  c.split_k = 3;
  expect(&p, &c, 0, NULL, TD_ERR_UNSUPPORTED, "split_k=3");
}

static void test_config_listing(void **state) {
  (void)state;
  td_gemm_config out[64];
  int n = td__gemm_cuda_configs(TD_GEMM_SM90, TD_BF16, TD_GEMM_B_KN, out, 64);
  assert_true(n > 0);
  for (int i = 0; i < n; i++)
    assert_int_equal(out[i].bn % 64, 0); /* [K,N] needs whole 64-column boxes */
  assert_int_equal(td__gemm_cuda_configs(TD_GEMM_SM80, TD_F16, TD_GEMM_B_NK, NULL, 0) > 0, 1);
  /* The default for every benchmark shape (and tiny ones) is a compiled kernel. */
  static const int shapes[][3] = {{8192, 3584, 8192}, {8192, 8192, 3584}, {8192, 1280, 8192},
                                  {4096, 3584, 8192}, {1024, 3584, 8192}, {128, 3584, 8192},
                                  {8192, 8192, 8192}, {1, 8, 8},          {300, 100, 64}};
  td_gemm_config all[64];
  int na = td__gemm_cuda_configs(TD_GEMM_SM90, TD_BF16, TD_GEMM_B_NK, all, 64);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    td_gemm_config d = td__gemm_cuda_default_config(TD_GEMM_SM90, shapes[s][0], shapes[s][1],
                                                    shapes[s][2]);
    int found = 0;
    for (int i = 0; i < na; i++)
      found |= all[i].bm == d.bm && all[i].bn == d.bn && all[i].stages == d.stages &&
               all[i].cluster == d.cluster && all[i].group_m == d.group_m;
    assert_true(found);
  }
  td_gemm_config d80 = td__gemm_cuda_default_config(TD_GEMM_SM80, 4096, 4096, 4096);
  int n80 = td__gemm_cuda_configs(TD_GEMM_SM80, TD_BF16, TD_GEMM_B_NK, all, 64), found80 = 0;
  for (int i = 0; i < n80; i++)
    found80 |= all[i].bm == d80.bm && all[i].bn == d80.bn && all[i].stages == d80.stages;
  assert_true(found80);
}

/* td__gemm_cuda_run_gather's refusals (zero-copy A from several sources):
 * all of them come before any CUDA call. */
static void gather_expect(const td_gemm_problem *p, const td_gemm_config *c, const void *const *src, int sources,
                          long long rows, void *maps, td_status want, const char *text) {
  td_clear_error();
  assert_int_equal(td__gemm_cuda_run_gather(p, c, src, sources, rows, maps, NULL), want);
  assert_non_null(strstr(td_last_error(), text));
}

static void test_gather(void **state) {
  (void)state;
  static _Alignas(64) char maps[4 * TD_GEMM_MAP_BYTES];
  const void *src[4] = {buf, buf, buf, buf};
  td_gemm_problem p = {512, 256, 64, TD_BF16, TD_GEMM_B_KN, NULL, buf, buf, NULL};
  td_gemm_config c = cfg90;
  gather_expect(NULL, &c, src, 4, 128, maps, TD_ERR_INVALID_ARG, "must not be NULL");
  gather_expect(&p, &c, NULL, 4, 128, maps, TD_ERR_INVALID_ARG, "source table");
  gather_expect(&p, &c, src, 4, 128, NULL, TD_ERR_INVALID_ARG, "map_buf");
  gather_expect(&p, &c, src, 4, 0, maps, TD_ERR_INVALID_ARG, "src_rows=0");
  gather_expect(&p, &c, src, 3, 128, maps, TD_ERR_INVALID_ARG, "needs 4 sources (at most 64); 3 given");
  gather_expect(&p, &c, src, 4, 128, maps + 8, TD_ERR_INVALID_ARG, "not 64-byte aligned");
  p.m = 4 * 96;
  gather_expect(&p, &c, src, 4, 96, maps, TD_ERR_SHAPE, "src_rows=96 is not a multiple of BM=128");
  p.m = 512;
  /* a configuration with BM = 0 names no kernel: refused with the list, not a division by zero */
  c.bm = 0;
  gather_expect(&p, &c, src, 4, 128, maps, TD_ERR_UNSUPPORTED, "no sm_90 kernel compiled for 0x256x64");
  c = cfg90;
  src[2] = NULL;
  gather_expect(&p, &c, src, 4, 128, maps, TD_ERR_INVALID_ARG, "source 2 of 4 is NULL");
  src[2] = buf;
  c.arch = TD_GEMM_CUBLAS;
  gather_expect(&p, &c, src, 4, 128, maps, TD_ERR_UNSUPPORTED, "sm_90a configurations only, not cuBLAS");
  c = cfg90;
  c.bn = 64; /* compiled without the hook: the message lists those compiled with it */
  gather_expect(&p, &c, src, 4, 128, maps, TD_ERR_UNSUPPORTED, "hooks=0x10; compiled: 128x256x64/s4/g8");
  p.b_layout = TD_GEMM_B_NK;
  gather_expect(&p, &cfg90, src, 4, 128, maps, TD_ERR_UNSUPPORTED, "B=[N,K] hooks=0x10; compiled: none");
  /* GATHER with another hook, through the general entry point */
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  td_gemm_problem q = good();
  expect(&q, &cfg90, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_WAIT, &h, TD_ERR_UNSUPPORTED, "runs alone");
  /* GATHER alone through the general entry point: it has no sources, so no
   * tensor maps to read (refused before any CUDA call, whatever the GPU) */
  td_gemm_problem g = {512, 256, 64, TD_BF16, TD_GEMM_B_KN, NULL, buf, buf, NULL};
  expect(&g, &cfg90, TD_GEMM_HOOK_GATHER, &h, TD_ERR_INVALID_ARG, "runs through td__gemm_cuda_run_gather");
  /* the GATHER configurations listed: B [K,N] only, each BM a multiple of 64 */
  td_gemm_config out[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER, out, 16);
  assert_true(n >= 1 && n <= 16);
  for (int i = 0; i < n; i++)
    assert_int_equal(out[i].bm % 64, 0);
  assert_int_equal(td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_NK, TD_GEMM_HOOK_GATHER, NULL, 0), 0);
}

/* td__gemm_cuda_run_kgather's refusals (K from several sources): before any CUDA call. */
static void kg_expect(const td_gemm_problem *p, const td_gemm_config *c, const void *const *as,
                      const void *const *bs, int sources, long long ks, void *maps, td_status want, const char *text) {
  td_clear_error();
  assert_int_equal(td__gemm_cuda_run_kgather(p, c, as, bs, sources, ks, maps, 0, NULL, NULL), want);
  if (!strstr(td_last_error(), text))
    print_error("got '%s', want '%s'\n", td_last_error(), text);
  assert_non_null(strstr(td_last_error(), text));
}

static void test_kgather(void **state) {
  (void)state;
  static _Alignas(64) char maps[8 * TD_GEMM_MAP_BYTES];
  const void *as[4] = {buf, buf, buf, buf}, *bs[4] = {buf, buf, buf, buf};
  td_gemm_problem p = {256, 256, 512, TD_BF16, TD_GEMM_B_KN, NULL, NULL, buf, NULL};
  td_gemm_config c = cfg90;
  kg_expect(NULL, &c, as, bs, 4, 128, maps, TD_ERR_INVALID_ARG, "must not be NULL");
  kg_expect(&p, &c, NULL, bs, 4, 128, maps, TD_ERR_INVALID_ARG, "source tables a_src and b_src");
  kg_expect(&p, &c, as, NULL, 4, 128, maps, TD_ERR_INVALID_ARG, "source tables a_src and b_src");
  kg_expect(&p, &c, as, bs, 4, 128, NULL, TD_ERR_INVALID_ARG, "map_buf");
  kg_expect(&p, &c, as, bs, 0, 128, maps, TD_ERR_INVALID_ARG, "sources=0; 1..64");
  kg_expect(&p, &c, as, bs, 65, 128, maps, TD_ERR_INVALID_ARG, "sources=65; 1..64");
  kg_expect(&p, &c, as, bs, 4, 96, maps, TD_ERR_SHAPE, "k_src=96 is not a positive multiple of 64");
  kg_expect(&p, &c, as, bs, 4, 64, maps, TD_ERR_INVALID_ARG, "needs K=256; K=512 given");
  kg_expect(&p, &c, as, bs, 4, 128, maps + 8, TD_ERR_INVALID_ARG, "not 64-byte aligned");
  bs[3] = NULL;
  kg_expect(&p, &c, as, bs, 4, 128, maps, TD_ERR_INVALID_ARG, "source 3 of 4 has a NULL B");
  bs[3] = buf;
  p.b_layout = TD_GEMM_B_NK;
  kg_expect(&p, &c, as, bs, 4, 128, maps, TD_ERR_INVALID_ARG, "reads B as [K,N] sources");
  p.b_layout = TD_GEMM_B_KN;
  c.arch = TD_GEMM_CUBLAS;
  kg_expect(&p, &c, as, bs, 4, 128, maps, TD_ERR_UNSUPPORTED, "sm_90a configurations only, not cuBLAS");
  c = cfg90;
  c.bn = 192; /* compiled with GATHER, not with KGATHER */
  kg_expect(&p, &c, as, bs, 4, 128, maps, TD_ERR_UNSUPPORTED, "hooks=0x20; compiled: 128x256x64/s4/g8");
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  td_gemm_problem q = good();
  q.b_layout = TD_GEMM_B_KN;
  expect(&q, &cfg90, TD_GEMM_HOOK_KGATHER, &h, TD_ERR_INVALID_ARG, "runs through td__gemm_cuda_run_kgather");
  expect(&q, &cfg90, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_RAISE, &h, TD_ERR_UNSUPPORTED, "KGATHER (0x20) runs alone or with PUSH");
  assert_true(td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER, NULL, 0) >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_and_sizes),  cmocka_unit_test(test_dtype_layout_alignment),
      cmocka_unit_test(test_hooks),           cmocka_unit_test(test_unknown_config),
      cmocka_unit_test(test_config_listing),  cmocka_unit_test(test_gather),
      cmocka_unit_test(test_kgather),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
