/* SPDX-License-Identifier: Apache-2.0
 * Every refusal of td__gemm_cuda_run, with its message. These checks run
 * before any CUDA call, so this test needs no GPU and runs in CI (label cpu). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <limits.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "tdist/types.h"
#include "tile/cuda/gemm.h"

static char buf[64]; /* stands in for device pointers: never dereferenced on these paths */

/* Distinct outputs for the routes that refuse overlapping ones: 64 TiB apart (room for the largest C these
 * tests describe), never dereferenced either. */
static void *fake_out(int i) { return (void *)(uintptr_t)(((uint64_t)i + 1) << 46); }
static const td_gemm_config cfg90 = {TD_GEMM_SM90, 128, 256, 64, 4, 1, 8, 1};

static td_gemm_problem good(void) {
  td_gemm_problem p = {64, 64, 64, TD_BF16, TD_GEMM_B_NK, buf, buf, buf, NULL};
  return p;
}

static void expect(const td_gemm_problem *p, const td_gemm_config *c, unsigned flags,
                   const td_gemm_hooks *h, td_status want, const char *text) {
  td_clear_error();
  td_status got = td__gemm_cuda_run(p, c, flags, h, NULL);
  if (got != want)
    print_error("got %d '%s', want %d '%s'\n", (int)got, td_last_error(), (int)want, text);
  assert_int_equal(got, want);
  if (!strstr(td_last_error(), text))
    print_error("want '%s' in '%s'\n", text, td_last_error());
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
  /* 0x100: the first bit past TD_GEMM_HOOK_KNOWN (0x80 is NSPLIT now) */
  expect(&p, &cfg90, 0x100, &h, TD_ERR_INVALID_ARG, "hook flags 0x100 name unknown hooks (known: 0xff)");
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
static void gather_expect_ex(const td_gemm_problem *p, const td_gemm_config *c, const void *const *src, int sources,
                             long long rows, void *maps, const td_gemm_hooks *tail, int sms, td_status want,
                             const char *text) {
  td_clear_error();
  assert_int_equal(td__gemm_cuda_run_gather(p, c, src, sources, rows, maps, tail, sms, NULL), want);
  if (!strstr(td_last_error(), text))
    fprintf(stderr, "want \"%s\" in: %s\n", text, td_last_error());
  assert_non_null(strstr(td_last_error(), text));
}
static void gather_expect(const td_gemm_problem *p, const td_gemm_config *c, const void *const *src, int sources,
                          long long rows, void *maps, td_status want, const char *text) {
  gather_expect_ex(p, c, src, sources, rows, maps, NULL, 0, want, text);
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
  /* src_rows near LLONG_MAX (a multiple of BM): M + src_rows - 1 must not wrap to "0 sources needed" */
  gather_expect(&p, &c, src, 0, LLONG_MAX - 127, maps, TD_ERR_INVALID_ARG, "needs 1 sources (at most 64); 0 given");
  gather_expect(&p, &c, src, 4, 128, maps + 8, TD_ERR_INVALID_ARG, "not 64-byte aligned");
  /* the grid cap and the split tail's workspace */
  gather_expect_ex(&p, &c, src, 4, 128, maps, NULL, -1, TD_ERR_INVALID_ARG, "GATHER sms=-1; 0 (every "
                   "multiprocessor) or a positive cap");
  static _Alignas(16) char ws[64]; /* stands in for a device workspace, as buf does */
  td_gemm_hooks tl;
  memset(&tl, 0, sizeof tl);
  tl.split_ws = ws + 8, tl.split_ws_bytes = 1 << 20;
  gather_expect_ex(&p, &c, src, 4, 128, maps, &tl, 0, TD_ERR_INVALID_ARG, "GATHER split_ws");
  tl.split_ws = ws, tl.split_ws_bytes = -1;
  gather_expect_ex(&p, &c, src, 4, 128, maps, &tl, 0, TD_ERR_INVALID_ARG, "a 16-byte aligned workspace of >= 0 bytes");
  tl.split_ws_bytes = 1 << 20, tl.split_waves = 3;
  gather_expect_ex(&p, &c, src, 4, 128, maps, &tl, 4, TD_ERR_INVALID_ARG, "GATHER split_waves=3; 0 or 1");
  tl.split_waves = -1;
  gather_expect_ex(&p, &c, src, 4, 128, maps, &tl, 4, TD_ERR_INVALID_ARG, "GATHER split_waves=-1");
  tl.split_waves = 0, tl.map_fence = 2; /* where the maps are fenced: 0 or 1 */
  gather_expect_ex(&p, &c, src, 4, 128, maps, &tl, 4, TD_ERR_INVALID_ARG, "GATHER map_fence=2; 0 (each map "
                   "fenced before each tile's first load) or 1");
  tl.map_fence = -1;
  gather_expect_ex(&p, &c, src, 4, 128, maps, &tl, 4, TD_ERR_INVALID_ARG, "GATHER map_fence=-1");
  tl.map_fence = 0;
  p.m = 4 * 96;
  gather_expect(&p, &c, src, 4, 96, maps, TD_ERR_SHAPE, "src_rows=96 is not a multiple of 128 (BM=128 loads");
  /* BM = 256 loads two 128-row halves: sources of 64 rows are refused, naming the part */
  c.bm = 256, c.bn = 128, c.stages = 4;
  p.m = 4 * 64;
  gather_expect(&p, &c, src, 4, 64, maps, TD_ERR_SHAPE, "src_rows=64 is not a multiple of 128 (BM=256 loads "
                "128-row parts)");
  c = cfg90;
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

/* td__gemm_cuda_run_gather_cols's refusals (GATHER with column sources): before any CUDA call. */
static void gc_expect(const td_gemm_problem *p, const td_gemm_config *c, const void *const *src, int sources,
                      long long rows, const void *const *bs, void *const *cs, int cols, void *maps, td_status want,
                      const char *text) {
  td_clear_error();
  assert_int_equal(td__gemm_cuda_run_gather_cols(p, c, src, sources, rows, bs, cs, cols, maps, NULL, NULL), want);
  if (!strstr(td_last_error(), text))
    fprintf(stderr, "want \"%s\" in: %s\n", text, td_last_error());
  assert_non_null(strstr(td_last_error(), text));
}

static void test_gather_nsplit(void **state) {
  (void)state;
  static _Alignas(64) char maps[12 * TD_GEMM_MAP_BYTES];
  const void *src[4] = {buf, buf, buf, buf}, *bs[9] = {buf, buf, buf, buf, buf, buf, buf, buf, buf};
  void *cs[9];
  for (int i = 0; i < 9; i++)
    cs[i] = fake_out(i);
  /* B and C in the problem are ignored (NULL allowed): the column sources hold them */
  td_gemm_problem p = {512, 256, 64, TD_BF16, TD_GEMM_B_KN, NULL, NULL, NULL, NULL};
  td_gemm_config c = cfg90;
  /* GATHER's own checks first */
  gc_expect(NULL, &c, src, 4, 128, bs, cs, 2, maps, TD_ERR_INVALID_ARG, "must not be NULL");
  gc_expect(&p, &c, src, 3, 128, bs, cs, 2, maps, TD_ERR_INVALID_ARG, "needs 4 sources (at most 64); 3 given");
  gc_expect(&p, &c, src, 4, 128, bs, cs, 2, maps + 8, TD_ERR_INVALID_ARG, "not 64-byte aligned");
  { /* the split tail's workspace, after the column sources' checks pass */
    static _Alignas(16) char ws[64];
    td_gemm_hooks tl;
    memset(&tl, 0, sizeof tl);
    tl.split_ws = ws + 4, tl.split_ws_bytes = 1 << 20;
    td_clear_error();
    assert_int_equal(td__gemm_cuda_run_gather_cols(&p, &c, src, 4, 128, bs, cs, 2, maps, &tl, NULL),
                     TD_ERR_INVALID_ARG);
    assert_non_null(strstr(td_last_error(), "NSPLIT split_ws"));
    tl.split_ws = ws, tl.split_waves = 7;
    td_clear_error();
    assert_int_equal(td__gemm_cuda_run_gather_cols(&p, &c, src, 4, 128, bs, cs, 2, maps, &tl, NULL),
                     TD_ERR_INVALID_ARG);
    assert_non_null(strstr(td_last_error(), "NSPLIT split_waves=7; 0 or 1"));
    tl.split_waves = 0, tl.map_fence = 5;
    td_clear_error();
    assert_int_equal(td__gemm_cuda_run_gather_cols(&p, &c, src, 4, 128, bs, cs, 2, maps, &tl, NULL),
                     TD_ERR_INVALID_ARG);
    assert_non_null(strstr(td_last_error(), "NSPLIT map_fence=5"));
  }
  /* then the column sources' */
  gc_expect(&p, &c, src, 4, 128, NULL, cs, 2, maps, TD_ERR_INVALID_ARG, "tables b_src and c_dst");
  gc_expect(&p, &c, src, 4, 128, bs, NULL, 2, maps, TD_ERR_INVALID_ARG, "tables b_src and c_dst");
  gc_expect(&p, &c, src, 4, 128, bs, cs, 0, maps, TD_ERR_INVALID_ARG, "NSPLIT col_srcs=0; 1..8 are allowed");
  gc_expect(&p, &c, src, 4, 128, bs, cs, 9, maps, TD_ERR_INVALID_ARG, "NSPLIT col_srcs=9; 1..8 are allowed");
  gc_expect(&p, &c, src, 4, 128, bs, cs, -1, maps, TD_ERR_INVALID_ARG, "NSPLIT col_srcs=-1; 1..8 are allowed");
  bs[5] = NULL;
  gc_expect(&p, &c, src, 4, 128, bs, cs, 8, maps, TD_ERR_INVALID_ARG, "column source 5 of 8 has a NULL B");
  bs[5] = buf;
  cs[2] = NULL;
  gc_expect(&p, &c, src, 4, 128, bs, cs, 8, maps, TD_ERR_INVALID_ARG, "column source 2 of 8 has a NULL C");
  cs[2] = fake_out(2);
  /* two column sources' C overlapping (the same buffer, or one starting inside another's M x N) */
  cs[5] = cs[3];
  gc_expect(&p, &c, src, 4, 128, bs, cs, 8, maps, TD_ERR_INVALID_ARG, "c_dst[3] and c_dst[5] overlap");
  cs[5] = (char *)cs[1] + (size_t)512 * 256 * 2 - 2; /* the last element of C_1 */
  gc_expect(&p, &c, src, 4, 128, bs, cs, 8, maps, TD_ERR_INVALID_ARG, "c_dst[1] and c_dst[5] overlap");
  p.n = 64;
  cs[5] = (char *)cs[1] + (size_t)512 * 64 * 2; /* just past C_1 of 512 x 64: no overlap, so the next check speaks */
  c.bn = 64;
  gc_expect(&p, &c, src, 4, 128, bs, cs, 8, maps, TD_ERR_UNSUPPORTED, "hooks=0x90; compiled:");
  c = cfg90;
  p.n = 256;
  cs[5] = fake_out(5);
  p.b_layout = TD_GEMM_B_NK;
  gc_expect(&p, &c, src, 4, 128, bs, cs, 2, maps, TD_ERR_INVALID_ARG, "NSPLIT reads B as [K,N]");
  p.b_layout = TD_GEMM_B_KN;
  p.n = 60; /* each source's B rows must be whole 16-byte vectors */
  gc_expect(&p, &c, src, 4, 128, bs, cs, 2, maps, TD_ERR_SHAPE, "N=60 is not a multiple of 8");
  p.n = 256;
  c.bn = 64; /* not compiled with GATHER | NSPLIT: the message lists those that are */
  gc_expect(&p, &c, src, 4, 128, bs, cs, 2, maps, TD_ERR_UNSUPPORTED, "hooks=0x90; compiled: 128x256x64/s4/g8");
  c = cfg90;
  c.arch = TD_GEMM_CUBLAS;
  gc_expect(&p, &c, src, 4, 128, bs, cs, 2, maps, TD_ERR_UNSUPPORTED, "sm_90a configurations only, not cuBLAS");
  /* NSPLIT through the general entry point: alone, with GATHER (no tables), with another hook */
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  td_gemm_problem q = good();
  expect(&q, &cfg90, TD_GEMM_HOOK_NSPLIT, &h, TD_ERR_UNSUPPORTED, "NSPLIT (0x80) runs with GATHER (0x10) only");
  expect(&q, &cfg90, TD_GEMM_HOOK_NSPLIT | TD_GEMM_HOOK_KGATHER, &h, TD_ERR_UNSUPPORTED, "flags 0xa0: NSPLIT (0x80) runs with GATHER");
  expect(&q, &cfg90, TD_GEMM_HOOK_NSPLIT | TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED,
         "runs alone or with NSPLIT");
  td_gemm_problem g = {512, 256, 64, TD_BF16, TD_GEMM_B_KN, NULL, buf, buf, NULL};
  expect(&g, &cfg90, TD_GEMM_HOOK_NSPLIT | TD_GEMM_HOOK_GATHER, &h, TD_ERR_INVALID_ARG,
         "runs through td__gemm_cuda_run_gather_cols");
  /* listed: B [K,N] only */
  assert_true(td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, NULL, 0) >= 1);
  assert_int_equal(td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_NK, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, NULL, 0),
                   0);
}

/* Sizes whose tile counts overflow the kernels' int arithmetic (M + BM - 1, N + BN - 1, and with NSPLIT the tile
 * units of every column source): refused before any CUDA call, not wrapped into a launch that runs no tile. */
static void test_tile_count_overflow(void **state) {
  (void)state;
  td_gemm_problem p = good();
  p.m = INT_MAX - 100; /* M + 127 wraps (A and C of K = N = 8 are 32 GiB each: fits an H200) */
  p.n = 8;
  p.k = 8;
  expect(&p, &cfg90, 0, NULL, TD_ERR_SHAPE, "overflow the kernel's int tile counts");
  p = good();
  p.n = INT_MAX - 7; /* a multiple of 8; N + 255 wraps */
  expect(&p, &cfg90, 0, NULL, TD_ERR_SHAPE, "overflow the kernel's int tile counts");
  static _Alignas(64) char maps[12 * TD_GEMM_MAP_BYTES];
  const void *src[1] = {buf}, *bs[8] = {buf, buf, buf, buf, buf, buf, buf, buf};
  void *cs[8];
  for (int i = 0; i < 8; i++)
    cs[i] = fake_out(i);
  td_gemm_problem g = {INT_MAX - 100, 256, 64, TD_BF16, TD_GEMM_B_KN, NULL, NULL, NULL, NULL};
  gc_expect(&g, &cfg90, src, 1, 1LL << 31, bs, cs, 2, maps, TD_ERR_SHAPE, "overflow the kernel's int tile counts");
  /* every size an int, but tiles_m x tiles_n x col_srcs = 2^15 x 2^14 x 8 units (each C 32 TiB, apart) */
  g.m = 1 << 22;
  g.n = 1 << 22;
  gc_expect(&g, &cfg90, src, 1, 1LL << 22, bs, cs, 8, maps, TD_ERR_SHAPE, "tiles of every column source");
  /* units within 65536 of INT32_MAX: the persistent loop's last step past them would wrap
   * (2^24 - 1 tile rows x 16 x 8 = 2147483520 units) */
  g.m = INT_MAX - 127;
  g.n = 4096;
  gc_expect(&g, &cfg90, src, 1, 1LL << 31, bs, cs, 8, maps, TD_ERR_SHAPE,
            "the tiles of every column source at most 2147418111");
  /* the largest M whose count fits passes these checks (then: no GPU here) */
  g.m = INT_MAX - 127;
  g.n = 256;
  td_clear_error();
  assert_int_not_equal(td__gemm_cuda_run_gather_cols(&g, &cfg90, src, 1, 1LL << 31, bs, cs, 8, maps, NULL, NULL),
                       TD_ERR_SHAPE);
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
  /* k_src x sources past any int K, here wrapping to exactly K = 4096 (2^64 + 4096): refused, not
   * taken for K's split (each source's maps would span 2^62 columns) */
  td_gemm_problem big = p;
  big.k = 4096;
  kg_expect(&big, &c, as, bs, 4, (1LL << 62) + 1024, maps, TD_ERR_INVALID_ARG,
            "KGATHER with 4 sources of k_src=4611686018427388928 needs K above 2147483647; K=4096 given");
  kg_expect(&big, &c, as, bs, 4, LLONG_MAX - 63, maps, TD_ERR_INVALID_ARG, "needs K above 2147483647");
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

/* td__gemm_cuda_run_kgather with a route (PUSH: each row to its owner; BCAST:
 * every row to every destination): every refusal comes before any CUDA call.
 * `out` is the routing description; only dst, rows_per_peer, push_long_peers
 * and bcast_peers of it are read. */
static void kr_expect(const td_gemm_problem *p, const td_gemm_config *c, unsigned route, const td_gemm_hooks *out,
                      td_status want, const char *text) {
  static _Alignas(64) char maps[8 * TD_GEMM_MAP_BYTES];
  const void *as[4] = {buf, buf, buf, buf}, *bs[4] = {buf, buf, buf, buf};
  td_clear_error();
  td_status got = td__gemm_cuda_run_kgather(p, c, as, bs, 4, p->k / 4, maps, route, out, NULL);
  if (got != want)
    print_error("got %d '%s', want %d '%s'\n", (int)got, td_last_error(), (int)want, text);
  assert_int_equal(got, want);
  if (!strstr(td_last_error(), text))
    print_error("got '%s', want '%s'\n", td_last_error(), text);
  assert_non_null(strstr(td_last_error(), text));
}

/* A routing description with every destination set. */
static td_gemm_hooks routes(long long rows_per_peer, long long long_peers, int bcast_peers) {
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  for (int i = 0; i < TD_GEMM_MAX_PEERS; i++)
    h.dst[i] = fake_out(i);
  h.rows_per_peer = rows_per_peer;
  h.push_long_peers = long_peers;
  h.bcast_peers = bcast_peers;
  return h;
}

/* The split tail's plan (td__gemm_split_plan, gemm.h): the last, partial wave
 * of tiles split along K onto the idle blocks, within the caps and the
 * workspace; nothing where the waves are full or K is short. The shapes are
 * the fused operators' on the H200 (132 SMs, 128x256 tiles). */
static void test_split_plan(void **state) {
  (void)state;
  const long long tile = 128 * 256 * 4, ws = TD_GEMM_SPLIT_CNT_BYTES + 132 * tile;
  int t = -1, s = -1;
  /* llama3.1-8b gemm_rs M = 1024: 448 tiles = 3 waves + 52: two slices each (104 blocks) */
  td__gemm_split_plan(448, 132, 64, ws, tile, &t, &s);
  assert_int_equal(t, 52), assert_int_equal(s, 2);
  /* qwen2-72b M = 1024: 928 tiles = 7 waves + 4: capped at TD_GEMM_SPLIT_MAX slices */
  td__gemm_split_plan(928, 132, 128, ws, tile, &t, &s);
  assert_int_equal(t, 4), assert_int_equal(s, TD_GEMM_SPLIT_MAX);
  /* ... and by K: 16 k-blocks leave 2 slices of TD_GEMM_SPLIT_MIN_KB */
  td__gemm_split_plan(928, 132, 16, ws, tile, &t, &s);
  assert_int_equal(t, 4), assert_int_equal(s, 2);
  /* fewer tiles than blocks: all of them split */
  td__gemm_split_plan(9, 132, 64, ws, tile, &t, &s);
  assert_int_equal(t, 9), assert_int_equal(s, 8);
  /* the workspace holds 5 partial tiles: 4 tiles of 1 slice would not pay, so none;
   * 2 tiles of 2 slices fit */
  td__gemm_split_plan(928, 132, 128, TD_GEMM_SPLIT_CNT_BYTES + 5 * tile, tile, &t, &s);
  assert_int_equal(t, 0), assert_int_equal(s, 1);
  td__gemm_split_plan(266, 132, 128, TD_GEMM_SPLIT_CNT_BYTES + 5 * tile, tile, &t, &s);
  assert_int_equal(t, 2), assert_int_equal(s, 2);
  /* nothing to split: full waves (264 = 2 x 132), a last wave of more than half the blocks
   * (200 = 132 + 68), K below two slices, no workspace, bad arguments */
  const long long none[][4] = {{264, 132, 64, ws}, {200, 132, 64, ws}, {448, 132, 15, ws}, {448, 132, 64, 0},
                               {448, 132, 64, TD_GEMM_SPLIT_CNT_BYTES + tile}, {0, 132, 64, ws},
                               {448, 0, 64, ws}, {448, 132, 0, ws}, {-5, 132, 64, ws}};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
    t = -1, s = -1;
    td__gemm_split_plan(none[i][0], (int)none[i][1], (int)none[i][2], none[i][3], tile, &t, &s);
    assert_int_equal(t, 0), assert_int_equal(s, 1);
  }
  td__gemm_split_plan(448, 132, 64, ws, 0, &t, &s); /* a tile of no bytes */
  assert_int_equal(t, 0), assert_int_equal(s, 1);
  /* tiles so large that rem * split * tile_bytes would wrap (the breaker's case: it returned a split that
   * does not fit); a workspace smaller than the counters */
  const long long huge[][2] = {{(1LL << 59) + 1, ws}, {LLONG_MAX, 1LL << 62}, {1LL << 60, 1LL << 62},
                               {tile, TD_GEMM_SPLIT_CNT_BYTES - 1}, {tile, LLONG_MIN}};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
    t = -1, s = -1;
    td__gemm_split_plan(928, 132, 128, huge[i][1], huge[i][0], &t, &s);
    assert_int_equal(t, 0), assert_int_equal(s, 1);
  }
  td__gemm_split_plan(928, 132, 128, LLONG_MAX, LLONG_MAX / 64, &t, &s); /* 32 of them fit LLONG_MAX */
  assert_int_equal(t, 4), assert_int_equal(s, 8);
  /* more split tiles than the counters hold (TD_GEMM_SPLIT_CNT_BYTES / 4): none */
  td__gemm_split_plan(2500, 3000, 64, LLONG_MAX, tile, &t, &s);
  assert_int_equal(t, 0), assert_int_equal(s, 1);
  /* every plan keeps the split units within one wave and the workspace */
  for (long long units = 1; units <= 1000; units += 7)
    for (int nk = 1; nk <= 130; nk += 13) {
      td__gemm_split_plan(units, 132, nk, ws, tile, &t, &s);
      assert_true(t == 0 ? s == 1 : (s >= 2 && s <= TD_GEMM_SPLIT_MAX && (long long)t * s <= 132 &&
                                     nk / s >= TD_GEMM_SPLIT_MIN_KB && t == units % 132 &&
                                     TD_GEMM_SPLIT_CNT_BYTES + (long long)t * s * tile <= ws));
    }
}

/* Where no GPU is visible (CI), a well-formed launch says so, not "compute capability 0.x". */
static void test_no_device(void **state) {
  (void)state;
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
    skip(); /* a GPU machine: the launch would run */
  cudaGetLastError();
  td_gemm_problem p = good();
  expect(&p, &cfg90, 0, NULL, TD_ERR_UNSUPPORTED, "no usable CUDA GPU (cudaGetDevice failed)");
  td_gemm_config c80 = {TD_GEMM_SM80, 128, 128, 32, 4, 1, 8, 1};
  expect(&p, &c80, 0, NULL, TD_ERR_UNSUPPORTED, "the sm_80 kernels need one of compute capability 8.x");
}

/* td__gemm_split_plan_waves: waves = 2 takes the last full wave too where its model says that pays (the
 * fused operators' shapes on 132 SMs, 128x256 tiles), and keeps the one-wave plan where that is better;
 * waves = 1 is td__gemm_split_plan's plan. */
static void test_split_plan_waves(void **state) {
  (void)state;
  const long long tile = 128 * 256 * 4, big = LLONG_MAX;
  int t = -1, s = -1;
  /* llama3.1-405b M = 1024: 12 waves + 80 tiles (too many to split onto 52 idle blocks): 212 tiles in 3
   * slices, 5 rounds (12.7 tile times against 13) */
  td__gemm_split_plan_waves(1664, 132, 256, big, tile, 2, &t, &s);
  assert_int_equal(t, 212), assert_int_equal(s, 3);
  td__gemm_split_plan_waves(1664, 132, 256, big, tile, 1, &t, &s);
  assert_int_equal(t, 0), assert_int_equal(s, 1);
  /* qwen2-72b M = 1024 (7 waves + 4): the one-wave plan, 4 tiles in 8 slices, stays the better */
  td__gemm_split_plan_waves(928, 132, 128, big, tile, 2, &t, &s);
  assert_int_equal(t, 4), assert_int_equal(s, 8);
  /* llama3.1-8b M = 1024 (3 waves + 52): 184 tiles in 5 slices would model 3.45 against the one-wave 3.52,
   * less than the tenth of a tile-time a two-wave plan must gain: 52 tiles in 2 slices */
  td__gemm_split_plan_waves(448, 132, 64, big, tile, 2, &t, &s);
  assert_int_equal(t, 52), assert_int_equal(s, 2);
  /* 216 tiles (one wave + 84), 24 k-blocks: all of them in 3 slices, 5 rounds (1.70 against 2) */
  td__gemm_split_plan_waves(216, 132, 24, big, tile, 2, &t, &s);
  assert_int_equal(t, 216), assert_int_equal(s, 3);
  /* the exact workspace of a plan gives the same plan (the operator allocates just that) */
  td__gemm_split_plan_waves(216, 132, 24, TD_GEMM_SPLIT_CNT_BYTES + 216 * 3 * tile, tile, 2, &t, &s);
  assert_int_equal(t, 216), assert_int_equal(s, 3);
  td__gemm_split_plan_waves(1664, 132, 256, TD_GEMM_SPLIT_CNT_BYTES + 212 * 3 * tile, tile, 2, &t, &s);
  assert_int_equal(t, 212), assert_int_equal(s, 3);
  /* a workspace for fewer slices: the best plan that fits; none: nothing */
  td__gemm_split_plan_waves(1664, 132, 256, TD_GEMM_SPLIT_CNT_BYTES + 212 * 2 * tile, tile, 2, &t, &s);
  assert_true(t == 0 || (long long)t * s <= 212 * 2);
  td__gemm_split_plan_waves(1664, 132, 256, 0, tile, 2, &t, &s);
  assert_int_equal(t, 0), assert_int_equal(s, 1);
  /* no full wave before the last (units < slots), full waves, short K, bad arguments: the one-wave plan */
  const long long cases[][3] = {{100, 132, 64}, {264, 132, 64}, {1664, 132, 15}, {0, 132, 64}, {1664, 0, 64}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int t1 = -1, s1 = -1;
    td__gemm_split_plan(cases[i][0], (int)cases[i][1], (int)cases[i][2], big, tile, &t1, &s1);
    td__gemm_split_plan_waves(cases[i][0], (int)cases[i][1], (int)cases[i][2], big, tile, 2, &t, &s);
    assert_int_equal(t, t1), assert_int_equal(s, s1);
  }
  /* every two-wave plan: a tail of the last wave or of the last two, slices of >= 8 k-blocks, within the
   * counters and the workspace, never slower by the model than no split */
  const long long ws = TD_GEMM_SPLIT_CNT_BYTES + 2000 * tile;
  for (long long units = 1; units <= 3000; units += 11)
    for (int nk = 1; nk <= 300; nk += 23) {
      td__gemm_split_plan_waves(units, 132, nk, ws, tile, 2, &t, &s);
      if (t == 0) {
        assert_int_equal(s, 1);
        continue;
      }
      assert_true(s >= 2 && s <= TD_GEMM_SPLIT_MAX && nk / s >= TD_GEMM_SPLIT_MIN_KB);
      assert_true(t == units % 132 || (t == units % 132 + 132 && units >= t));
      assert_true(t <= TD_GEMM_SPLIT_CNT_BYTES / 4 && TD_GEMM_SPLIT_CNT_BYTES + (long long)t * s * tile <= ws);
    }
}

static void test_kgather_route(void **state) {
  (void)state;
  /* C NULL: a routed launch ignores C, so this problem is refused only for its route */
  td_gemm_problem p = {256, 256, 512, TD_BF16, TD_GEMM_B_KN, NULL, NULL, NULL, NULL};
  td_gemm_hooks h = routes(32, 0, 8);
  /* the route must be one of the three, and one route at a time */
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_ACCUMULATE, &h, TD_ERR_INVALID_ARG,
            "KGATHER route 0x8; 0 (C), TD_GEMM_HOOK_PUSH (0x4) or TD_GEMM_HOOK_BCAST (0x40) are allowed");
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "KGATHER route 0x44;");
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_KGATHER, &h, TD_ERR_INVALID_ARG, "KGATHER route 0x20;");
  /* a route needs its destinations */
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, NULL, TD_ERR_INVALID_ARG,
            "KGATHER route 0x4 needs its destinations (out is NULL)");
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, NULL, TD_ERR_INVALID_ARG,
            "KGATHER route 0x40 needs its destinations (out is NULL)");

  /* the split-tail workspace: 16-byte aligned, of >= 0 bytes, with any route */
  const unsigned rts[3] = {0, TD_GEMM_HOOK_PUSH, TD_GEMM_HOOK_BCAST};
  for (int i = 0; i < 3; i++) {
    h = routes(32, 0, 8);
    h.split_ws = (char *)fake_out(7) + 8;
    h.split_ws_bytes = 1 << 20;
    kr_expect(&p, &cfg90, rts[i], &h, TD_ERR_INVALID_ARG, "KGATHER split_ws 0x");
    h.split_ws = fake_out(7);
    h.split_ws_bytes = -1;
    kr_expect(&p, &cfg90, rts[i], &h, TD_ERR_INVALID_ARG, "bytes; a 16-byte aligned workspace of >= 0 bytes");
  }

  for (int i = 0; i < 3; i++) { /* split_waves: 0..2 */
    h = routes(32, 0, 8);
    h.split_waves = i == 2 ? -1 : 3 + i;
    kr_expect(&p, &cfg90, rts[i], &h, TD_ERR_INVALID_ARG, "KGATHER split_waves=");
    assert_non_null(strstr(td_last_error(), "0 or 1 (the last wave's tiles) or 2 (the last two waves' where that "
                                            "pays) are allowed"));
  }

  /* BCAST: 1..8 destinations, each of them set */
  h = routes(0, 0, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST bcast_peers=0; 1..8 are allowed");
  h.bcast_peers = 9;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST bcast_peers=9; 1..8 are allowed");
  h.bcast_peers = -1;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST bcast_peers=-1; 1..8 are allowed");
  h.bcast_peers = 3;
  h.dst[2] = NULL;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST needs dst[2] (bcast_peers=3)");
  h = routes(0, 0, 8);
  h.dst[7] = NULL; /* the last of eight */
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST needs dst[7] (bcast_peers=8)");
  h = routes(0, 0, 4); /* every destination its own buffer */
  h.dst[3] = h.dst[1];
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST destinations dst[1] and dst[3] overlap");
  h.dst[3] = (char *)h.dst[1] - (size_t)256 * 256 * 2 + 2; /* ends one element into dst[1] */
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST destinations dst[1] and dst[3] overlap");
  h = routes(64, 0, 3); /* the store hint: 0 or 1 */
  h.bcast_hint = 2;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG,
            "BCAST bcast_hint=2; 0 (plain stores) or 1 (L2 evict-first) are allowed");
  h.bcast_hint = -1;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST bcast_hint=-1;");
  h = routes(64, 0, 3); /* the deferred second half: 0, 1 or 2 */
  h.bcast_defer = 3;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG,
            "BCAST bcast_defer=3; 0 (second half staged in the epilogue), 1 (deferred into the next tile's main "
            "loop) or 2 (every copy paced over the next tile's main loop) are allowed");
  h.bcast_defer = -1;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST bcast_defer=-1;");
  h = routes(64, 0, 3); /* the paced copies' gap: 0 (the default) or 1..TD_GEMM_PACE_KB_MAX k-blocks */
  h.bcast_defer = 2, h.bcast_pace_kb = TD_GEMM_PACE_KB_MAX + 1;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG,
            "BCAST bcast_pace_kb=17; 0 (the default, 3) or 1..16 k-blocks between two paced copies are allowed");
  h.bcast_pace_kb = -1;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG, "BCAST bcast_pace_kb=-1;");
  /* the deferred-half kernel is a variant of 128x256 s4, never a configuration of its own: two BCAST
   * configurations, each listed once (the listing of a configuration not compiled) */
  assert_int_equal(td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST,
                                                NULL, 0),
                   2);
  const unsigned kb = TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST;
  const td_gemm_config c128 = {TD_GEMM_SM90, 128, 128, 64, 6, 1, 8, 1};
  assert_int_equal(td__gemm_cuda_has_variant(&cfg90, TD_BF16, TD_GEMM_B_KN, kb, 1), 1); /* half staged */
  assert_int_equal(td__gemm_cuda_has_variant(&c128, TD_BF16, TD_GEMM_B_KN, kb, 1), 0);  /* staged whole */
  assert_int_equal(td__gemm_cuda_has_variant(&cfg90, TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH,
                                             1), 0);
  assert_int_equal(td__gemm_cuda_has_variant(&cfg90, TD_BF16, TD_GEMM_B_KN, kb, 0), 0); /* not a variant number */
  assert_int_equal(td__gemm_cuda_has_variant(NULL, TD_BF16, TD_GEMM_B_KN, kb, 1), 0);
  const td_gemm_config none64 = {TD_GEMM_SM90, 64, 64, 64, 4, 1, 8, 1};
  h = routes(0, 0, 3);
  h.bcast_defer = 1;
  kr_expect(&p, &none64, TD_GEMM_HOOK_BCAST, &h, TD_ERR_UNSUPPORTED,
            "compiled: 128x256x64/s4/g8/c1, 128x128x64/s6/g8/c1 (others need the JIT)");

  /* PUSH's split */
  h = routes(0, 0, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "the PUSH hook needs rows_per_peer >= 1");
  h = routes(32, -1, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH push_long_peers=-1; 0..8 are allowed");
  h = routes(32, 9, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH push_long_peers=9; 0..8 are allowed");
  /* rows_per_peer=1 with 3 long peers: the short peers would own 0 rows each, so rows 3..255 have no owner */
  h = routes(1, 3, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG,
            "PUSH with M=256, rows_per_peer=1 and push_long_peers=3 leaves rows 3.. without an owner");
  /* more than 8 owners: 256 rows by 31 (9 peers), and td_chunk_range's split of 256 rows over 9
   * (4 peers of 29 rows, then 28 each) */
  h = routes(31, 0, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG,
            "PUSH with M=256, rows_per_peer=31 and push_long_peers=0 needs 9 peers; at most 8");
  h = routes(29, 4, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG,
            "PUSH with M=256, rows_per_peer=29 and push_long_peers=4 needs 9 peers; at most 8");
  /* a NULL destination for rows owned: td_chunk_range's split of 13 rows over 8 (5 peers of 2
   * rows, 3 of 1) needs dst[7]; that of 5 rows over 8 (5 peers of 1 row) needs dst[4] */
  td_gemm_problem small = p;
  small.m = 13;
  h = routes(2, 5, 0);
  h.dst[7] = NULL;
  kr_expect(&small, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH needs dst[7] for the rows it owns");
  small.m = 5;
  h = routes(1, 5, 0);
  h.dst[4] = NULL;
  kr_expect(&small, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH needs dst[4] for the rows it owns");

  /* rows_per_peer past any M (an int): M + rows_per_peer - 1 and push_long_peers x rows_per_peer,
   * in the check and in the kernel's row split, would overflow, the check would count no owner and
   * let a NULL dst[0] through to the kernel */
  h = routes(LLONG_MAX, 0, 0);
  h.dst[0] = NULL;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG,
            "PUSH rows_per_peer=9223372036854775807; 1..2147483647 are allowed");
  h = routes(LLONG_MAX / 4, 8, 0);
  h.dst[0] = NULL;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH rows_per_peer=2305843009213693951;");
  h = routes((long long)INT_MAX + 1, 1, 0);
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH rows_per_peer=2147483648;");
  /* the largest one allowed: one owner, dst[0], of every row */
  h = routes(INT_MAX, 8, 0);
  h.dst[0] = NULL;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH needs dst[0] for the rows it owns");
  h = routes(INT_MAX, 0, 0);
  h.dst[0] = NULL;
  kr_expect(&p, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "PUSH needs dst[0] for the rows it owns");

  /* Accepted routes, seen by where they are refused next: a configuration
   * compiled without the hooks (128x192) is refused by the kernel lookup,
   * after every argument check, with the list of the configurations compiled
   * with KGATHER and that route. (A compiled configuration would go on to CUDA
   * calls with these host pointers.) */
  td_gemm_config c192 = cfg90;
  c192.bn = 192;
  const char *push_list = "hooks=0x24; compiled: 128x256x64/s4/g8/c1, 128x128x64/s6/g8/c1";
  const char *bcast_list = "hooks=0x60; compiled: 128x256x64/s4/g8/c1, 128x128x64/s6/g8/c1";
  /* td_chunk_range's split of 5 rows over 8: peers 5..7 own nothing, so their dst may be NULL */
  h = routes(1, 5, 0);
  h.dst[5] = h.dst[6] = h.dst[7] = NULL;
  kr_expect(&small, &c192, TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, push_list);
  /* 259 rows over 8 (3 peers of 33, 5 of 32): exactly 8 owners */
  td_gemm_problem q = p;
  q.m = 259;
  h = routes(33, 3, 0);
  kr_expect(&q, &c192, TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, push_list);
  /* rows_per_peer = INT_MAX: dst[0] owns every row, the other destinations may be NULL */
  h = routes(INT_MAX, 8, 0);
  for (int i = 1; i < TD_GEMM_MAX_PEERS; i++)
    h.dst[i] = NULL;
  kr_expect(&p, &c192, TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, push_list);
  /* push_long_peers = 8 with 8 * rows_per_peer rows: every peer long, the even split */
  h = routes(32, 8, 0);
  kr_expect(&p, &c192, TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, push_list);
  /* the fields of `out` the route does not read are ignored: a scope with unknown bits
   * and the WAIT/RAISE fields would be refused if they were copied into the launch */
  h = routes(32, 0, 0);
  h.scope = 0xf0;
  h.wait_rows = -1;
  h.raise_rows = -1;
  kr_expect(&p, &c192, TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, push_list);
  h = routes(0, -5, 8); /* BCAST reads neither rows_per_peer nor push_long_peers */
  h.scope = 0xf0;
  kr_expect(&p, &c192, TD_GEMM_HOOK_BCAST, &h, TD_ERR_UNSUPPORTED, bcast_list);
  h = routes(0, 0, 1);
  h.dst[1] = NULL; /* only dst[0..bcast_peers) are needed */
  kr_expect(&p, &c192, TD_GEMM_HOOK_BCAST, &h, TD_ERR_UNSUPPORTED, bcast_list);
  /* route 0 reads nothing of out (rows go to C, which must then be given) */
  h = routes(0, -5, 0);
  q = p;
  q.c = buf;
  kr_expect(&q, &c192, 0, &h, TD_ERR_UNSUPPORTED, "hooks=0x20; compiled: 128x256x64/s4/g8/c1");
  /* a routed launch with no compiled kernel for B [N,K]: refused before the lookup */
  q = p;
  q.b_layout = TD_GEMM_B_NK;
  h = routes(32, 0, 0);
  kr_expect(&q, &cfg90, TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG, "reads B as [K,N] sources");

  /* Through td__gemm_cuda_run: BCAST only with KGATHER, and that only through td__gemm_cuda_run_kgather */
  td_gemm_problem g = good();
  h = routes(64, 0, 1);
  h.wait_signals = (const td__gemm_u64 *)buf;
  h.wait_rows = 64;
  h.raise_signals[0] = (td__gemm_u64 *)buf;
  h.raise_rows = 64;
  const char *bcast_alone = "combine BCAST with hooks other than KGATHER; BCAST (0x40) stores every row to every "
                            "destination, with KGATHER only (through td__gemm_cuda_run_kgather)";
  expect(&g, &cfg90, TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_WAIT, &h, TD_ERR_UNSUPPORTED, bcast_alone);
  expect(&g, &cfg90, TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_RAISE, &h, TD_ERR_UNSUPPORTED, bcast_alone);
  expect(&g, &cfg90, TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, bcast_alone);
  expect(&g, &cfg90, TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_ACCUMULATE, &h, TD_ERR_UNSUPPORTED, bcast_alone);
  /* BCAST alone passes the combination rule but has no maps to store through: the same entry point named */
  g.b_layout = TD_GEMM_B_KN;
  expect(&g, &cfg90, TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG,
         "the BCAST hook (0x40) runs through td__gemm_cuda_run_kgather");
  g.b_layout = TD_GEMM_B_NK;
  /* KGATHER with both routes at once: refused as a KGATHER combination */
  expect(&g, &cfg90, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_BCAST, &h, TD_ERR_UNSUPPORTED,
         "KGATHER (0x20) runs alone or with PUSH (0x4) or BCAST (0x40)");
  /* td_chunk_range's split (push_long_peers > 0) cannot RAISE: the signals follow rows_per_peer alone */
  h = routes(22, 1, 0);
  h.raise_signals[0] = h.raise_signals[1] = h.raise_signals[2] = (td__gemm_u64 *)buf;
  h.raise_rows = 22;
  h.wait_signals = (const td__gemm_u64 *)buf;
  h.wait_rows = 64;
  expect(&g, &cfg90, TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_RAISE, &h, TD_ERR_UNSUPPORTED,
         "PUSH with push_long_peers=1 cannot RAISE");
  expect(&g, &cfg90, TD_GEMM_HOOK_ALL, &h, TD_ERR_UNSUPPORTED, "PUSH with push_long_peers=1 cannot RAISE");
  /* without RAISE the split is taken by plain PUSH too (gemm.h): refused only at the kernel lookup */
  td_gemm_problem g259 = good();
  g259.m = 259;
  td_gemm_config c40 = cfg90;
  c40.bn = 40;
  h = routes(33, 3, 0);
  h.wait_signals = (const td__gemm_u64 *)buf;
  h.wait_rows = 64;
  expect(&g259, &c40, TD_GEMM_HOOK_PUSH, &h, TD_ERR_UNSUPPORTED, "no sm_90 kernel compiled for 128x40x64");
  expect(&g259, &c40, TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_WAIT, &h, TD_ERR_UNSUPPORTED, "hooks=0x5");
  /* KGATHER with a route, with good routing fields, still runs only through td__gemm_cuda_run_kgather
   * (it builds the sources' maps) */
  g.b_layout = TD_GEMM_B_KN;
  g.c = NULL;
  h = routes(64, 0, 1);
  expect(&g, &cfg90, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH, &h, TD_ERR_INVALID_ARG,
         "the KGATHER hook (0x24) runs through td__gemm_cuda_run_kgather");
  expect(&g, &cfg90, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST, &h, TD_ERR_INVALID_ARG,
         "the KGATHER hook (0x60) runs through td__gemm_cuda_run_kgather");

  /* the routed configurations listed: both compiled tiles, B [K,N] only, no cluster */
  const unsigned routed[2] = {TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST};
  for (int r = 0; r < 2; r++) {
    td_gemm_config out[16];
    int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, routed[r], out, 16);
    assert_true(n >= 2 && n <= 16);
    int big = 0, square = 0;
    for (int i = 0; i < n; i++) {
      assert_int_equal(out[i].arch, TD_GEMM_SM90);
      assert_int_equal(out[i].bn % 64, 0);
      assert_int_equal(out[i].cluster, 1); /* KGATHER has no cluster variant */
      /* BCAST stages half a 128x256 tile at a time beside the ring, which keeps its 4 stages */
      big |= out[i].bm == 128 && out[i].bn == 256 && out[i].stages == 4;
      square |= out[i].bm == 128 && out[i].bn == 128 && out[i].stages == 6;
    }
    assert_true(big && square);
    assert_int_equal(td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_NK, routed[r], NULL, 0), 0);
    assert_int_equal(td__gemm_cuda_configs_hooked(TD_F16, TD_GEMM_B_KN, routed[r], NULL, 0), 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_and_sizes),  cmocka_unit_test(test_dtype_layout_alignment),
      cmocka_unit_test(test_hooks),           cmocka_unit_test(test_unknown_config),
      cmocka_unit_test(test_config_listing),  cmocka_unit_test(test_gather), cmocka_unit_test(test_gather_nsplit),
      cmocka_unit_test(test_kgather),         cmocka_unit_test(test_kgather_route),   cmocka_unit_test(test_split_plan), cmocka_unit_test(test_split_plan_waves),
      cmocka_unit_test(test_no_device),   cmocka_unit_test(test_tile_count_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
