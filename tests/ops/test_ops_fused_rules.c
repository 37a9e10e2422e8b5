/* SPDX-License-Identifier: Apache-2.0
 * The fused variant's schedule rules across GPUs (ops_internal.h, pure, no
 * GPU needed): whether ag_gemm splits its GEMM per source
 * (td__tp_fused_ag_split), whether gemm_ar takes all-push
 * (td__tp_fused_ar_all_push), and on one shared GPU whether ag_gemm gathers
 * (td__tp_fused_ag_gather) and gemm_rs / gemm_ar take kgather
 * (td__tp_fused_kgather). The expected answers are the outcomes
 * measured on two H200s (docs/perf.md, "Operators on two H200s"): each case
 * names the shape and which schedule ran faster there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops/ops_internal.h"

enum { H200_SMS = 132 };

/* 2 ranks, rank 0, bf16: M rows split as td_chunk_range does (part 0 the larger), nb = N / 2 columns */
static int split2(int64_t m, int64_t n_total) {
  int64_t rows[2] = {(m + 1) / 2, m / 2};
  return td__tp_fused_ag_split(m, rows, 2, 0, (n_total + 1) / 2, H200_SMS, 2);
}

/* ag_gemm, measured with TD_OPS_FUSED_AG_GEMMS=1 and =8 (one run each, 9373ae9) */
static void test_ag_split_measured(void **state) {
  (void)state;
  /* per-source GEMMs faster: 1-8% (no wave added) */
  assert_true(split2(1024, 14336));  /* llama3.1-8b */
  assert_true(split2(2048, 14336));
  assert_true(split2(1024, 28672));  /* llama3.1-70b */
  assert_true(split2(1024, 29568));  /* qwen2-72b */
  assert_true(split2(2048, 29568));
  assert_true(split2(1024, 49152));  /* gpt3-175b */
  assert_true(split2(2048, 49152));
  /* one GEMM after the copies faster: 5-6% (the split adds a wave, few rows hidden) */
  assert_false(split2(2048, 28672)); /* llama3.1-70b */
  assert_false(split2(1024, 53248)); /* llama3.1-405b */
  assert_false(split2(2048, 53248));
  /* the split kept at M = 8192 for 405b (a wave added, 4096 rows hidden: 1.03-1.04x of NCCL + cuBLAS) */
  assert_true(split2(8192, 53248));
}

/* Degenerate inputs: one rank (nothing to copy), empty parts, no SM count. */
static void test_ag_split_edges(void **state) {
  (void)state;
  int64_t one[1] = {4096};
  assert_true(td__tp_fused_ag_split(4096, one, 1, 0, 4096, H200_SMS, 2)); /* no added wave */
  int64_t empty[4] = {1, 1, 1, 0}; /* M < ranks: three one-row launches for one tile of work, nothing to hide */
  assert_false(td__tp_fused_ag_split(3, empty, 4, 3, 128, H200_SMS, 2));
  assert_false(td__tp_fused_ag_split(3, empty, 4, 0, 128, H200_SMS, 2));
  int64_t rows[2] = {512, 512};
  /* sms unknown (0) counts as one SM: every tile a wave, the split adds none */
  assert_true(td__tp_fused_ag_split(1024, rows, 2, 0, 256, 0, 2));
  /* the same shape with the H200's SMs: 405b's columns add a wave, 512 rows hide too little */
  assert_false(td__tp_fused_ag_split(1024, rows, 2, 0, 26624, H200_SMS, 2));
  /* wider elements hide more: f32 rows take twice as long to copy (still not enough here) */
  assert_false(td__tp_fused_ag_split(1024, rows, 2, 0, 26624, H200_SMS, 4));
}

/* gemm_ar: all-push for 2 ranks on 2 GPUs above M = 4096 (measured: faster at 8192 in 5/5 models, 1-2% slower at
 * 4096, 2-13% slower at 1024), never on one shared GPU or with more ranks (n - 1 partials to move). */
/* The gather schedule's rule on the measured shapes (H200, 8 ranks sharing
 * the GPU, bf16, BMs 128 compiled; docs/perf.md "zero-copy ag_gemm"). */
static void test_ag_gather(void **state) {
  (void)state;
  const int bms[] = {128, 128, 128}; /* 128x256, 128x192, 128x128 */
  /* taken: every model at M = 1024 (parts of 128 rows), B rows of whole lines at any M */
  assert_int_equal(td__tp_fused_ag_gather(0, 1024, 8, 3696, 2, bms, 3, 0), 128); /* qwen2 M=1024 */
  assert_int_equal(td__tp_fused_ag_gather(0, 4096, 8, 3584, 2, bms, 3, 0), 128); /* 70b: 7168-byte rows */
  assert_int_equal(td__tp_fused_ag_gather(0, 8192, 8, 6656, 2, bms, 3, 0), 128); /* 405b */
  assert_int_equal(td__tp_fused_ag_gather(0, 8192, 8, 6144, 2, bms, 3, 0), 128); /* gpt3 */
  /* AUTO leaves qwen2's parts of >= 512 rows (7392-byte B rows) to the batched launch; forced, it runs */
  assert_int_equal(td__tp_fused_ag_gather(0, 4096, 8, 3696, 2, bms, 3, 0), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 8192, 8, 3696, 2, bms, 3, 0), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 4096, 8, 3696, 2, bms, 3, 1), 128);
  assert_int_equal(td__tp_fused_ag_gather(0, 511 * 8, 8, 3696, 2, bms, 3, 0), 0); /* 511: no BM divides it */
  /* cannot run: across GPUs, unequal parts, parts no BM divides, M < ranks, no kernel, the check case */
  assert_int_equal(td__tp_fused_ag_gather(1, 1024, 8, 3584, 2, bms, 3, 1), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 1025, 8, 3584, 2, bms, 3, 1), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 96 * 4, 4, 256, 2, bms, 3, 1), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 5, 8, 256, 2, bms, 3, 1), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 1024, 8, 3584, 2, bms, 0, 1), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 1024, 8, 3584, 2, NULL, 3, 1), 0);
  assert_int_equal(td__tp_fused_ag_gather(0, 4091 * 8, 8, 640, 2, bms, 3, 0), 0);
  /* the largest BM that divides a part */
  const int mixed[] = {64, 256, 128};
  assert_int_equal(td__tp_fused_ag_gather(0, 512 * 4, 4, 256, 2, mixed, 3, 0), 256);
  assert_int_equal(td__tp_fused_ag_gather(0, 384 * 4, 4, 256, 2, mixed, 3, 0), 128);
  assert_int_equal(td__tp_fused_ag_gather(0, 64 * 4, 4, 256, 2, mixed, 3, 0), 64);
}

/* AUTO's one launch of 256x128 tiles: parts of a multiple of 128 rows on one shared GPU (measured at 128, 512, 1024). */
static void test_ag_one_auto(void **state) {
  (void)state;
  assert_true(td__tp_fused_ag_one_auto(0, 8, 128, 8));  /* M = 1024 on 8 ranks */
  assert_true(td__tp_fused_ag_one_auto(0, 2, 128, 8));
  assert_true(td__tp_fused_ag_one_auto(0, 8, 256, 8));  /* M = 2048 */
  assert_true(td__tp_fused_ag_one_auto(0, 8, 512, 8));  /* M = 4096 */
  assert_true(td__tp_fused_ag_one_auto(0, 8, 1024, 8)); /* M = 8192 */
  assert_true(td__tp_fused_ag_one_auto(0, 4, 4096, 8));
  assert_false(td__tp_fused_ag_one_auto(0, 8, 192, 8)); /* not whole 128-row halves of a 256-row tile */
  assert_false(td__tp_fused_ag_one_auto(0, 8, 4091, 8));
  assert_false(td__tp_fused_ag_one_auto(0, 8, 0, 8));
  assert_false(td__tp_fused_ag_one_auto(0, 1, 128, 8)); /* one rank: its launch is already the one */
  assert_false(td__tp_fused_ag_one_auto(1, 8, 128, 8)); /* across GPUs: no gather */
  assert_false(td__tp_fused_ag_one_auto(0, 9, 128, 8)); /* more ranks than the column table holds */
  assert_false(td__tp_fused_ag_one_auto(0, 8, 64, 8));
}

/* AUTO's one cuBLAS batched launch: equal parts of >= 512 rows with B rows of whole 128-byte lines on one shared GPU
 * (measured at 128, 512, 1024 rows). */
static void test_ag_one_blas_auto(void **state) {
  (void)state;
  assert_true(td__tp_fused_ag_one_blas_auto(0, 8, 4096, 1792, 2, 8)); /* llama3.1-8b, parts of 512 rows */
  assert_true(td__tp_fused_ag_one_blas_auto(0, 8, 8192, 3584, 2, 8)); /* llama3.1-70b */
  assert_true(td__tp_fused_ag_one_blas_auto(0, 8, 8192, 6656, 2, 8)); /* llama3.1-405b: 13312-byte rows */
  assert_true(td__tp_fused_ag_one_blas_auto(0, 8, 4091 * 8, 640, 2, 8)); /* the correctness case: no multiple of 128 */
  assert_true(td__tp_fused_ag_one_blas_auto(0, 2, 1024, 64, 2, 8));
  assert_true(td__tp_fused_ag_one_blas_auto(0, 4, 2048, 32, 4, 8)); /* f32-sized elements: 128-byte rows */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 8, 8192, 3696, 2, 8)); /* qwen2-72b: 7392-byte rows */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 4, 2048, 72, 2, 8)); /* 144-byte rows */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 8, 1024, 1792, 2, 8)); /* parts of 128 rows: the tile's one launch */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 8, 2048, 1792, 2, 8)); /* 256: not measured, the tile stays */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 8, 511 * 8, 1792, 2, 8));
  assert_false(td__tp_fused_ag_one_blas_auto(0, 8, 4097, 1792, 2, 8)); /* unequal parts */
  assert_false(td__tp_fused_ag_one_blas_auto(1, 8, 8192, 1792, 2, 8)); /* across GPUs */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 1, 8192, 1792, 2, 8)); /* one rank */
  assert_false(td__tp_fused_ag_one_blas_auto(0, 9, 9 * 512, 1792, 2, 8)); /* more ranks than the table holds */
}

/* That launch's cluster: 2 on parts of >= 256 rows, 1 on parts of 128 (where only one launch splits its tail). */
static void test_ag_one_cluster(void **state) {
  (void)state;
  assert_int_equal(td__tp_fused_ag_one_cluster(128), 1);  /* M = 1024 on 8 ranks */
  assert_int_equal(td__tp_fused_ag_one_cluster(256), 2);  /* M = 2048 */
  assert_int_equal(td__tp_fused_ag_one_cluster(1024), 2); /* M = 8192 */
  assert_int_equal(td__tp_fused_ag_one_cluster(4096), 2);
}

/* The one launch's tile (td__tp_fused_ag_one_tile): 128x256 c2 at a long K on parts of 128 rows (256 at
 * K >= 12288) where a rank's columns are whole 256-column tiles, else 256x128 in td__tp_fused_ag_one_cluster's. */
static void one_tile(int64_t rows, int64_t nb, int64_t k, int bm, int bn, int cl) {
  int m = 0, n = 0;
  assert_int_equal(td__tp_fused_ag_one_tile(rows, nb, k, &m, &n), cl);
  assert_int_equal(m, bm);
  assert_int_equal(n, bn);
}

static void test_ag_one_tile(void **state) {
  (void)state;
  one_tile(128, 3584, 8192, 128, 256, 2);   /* llama3.1-70b M = 1024 on 8 ranks */
  one_tile(128, 6656, 16384, 128, 256, 2);  /* llama3.1-405b */
  one_tile(128, 6144, 12288, 128, 256, 2);  /* gpt3-175b */
  one_tile(256, 6144, 12288, 128, 256, 2);  /* gpt3-175b M = 2048 */
  one_tile(256, 6656, 16384, 128, 256, 2);  /* llama3.1-405b M = 2048 */
  one_tile(128, 1792, 4096, 256, 128, 1);   /* llama3.1-8b: K too short */
  one_tile(128, 3696, 8192, 256, 128, 1);   /* qwen2-72b: columns not whole 256-column tiles */
  one_tile(256, 3584, 8192, 256, 128, 2);   /* llama3.1-70b M = 2048: K under 12288 at 256 rows */
  one_tile(512, 6144, 12288, 256, 128, 2);  /* gpt3-175b M = 4096 */
  one_tile(1024, 6656, 16384, 256, 128, 2); /* llama3.1-405b M = 8192 */
  one_tile(384, 6144, 12288, 256, 128, 2);  /* 384-row parts */
  one_tile(128, 0, 8192, 256, 128, 1);
  one_tile(128, 3584, 8191, 256, 128, 1);
}

static void test_ar_all_push(void **state) {
  (void)state;
  assert_true(td__tp_fused_ar_all_push(2, 1, 8192));
  assert_true(td__tp_fused_ar_all_push(2, 1, 4097));
  assert_false(td__tp_fused_ar_all_push(2, 1, 4096));
  assert_false(td__tp_fused_ar_all_push(2, 1, 1024));
  assert_false(td__tp_fused_ar_all_push(2, 0, 8192)); /* one shared GPU */
  assert_false(td__tp_fused_ar_all_push(4, 1, 8192));
  assert_false(td__tp_fused_ar_all_push(1, 0, 8192));
}

/* gemm_rs / gemm_ar kgather on one shared GPU: the bench shapes (M x N x K, K split over 8 ranks) where it
 * was measured (docs/perf.md "kgather"), and the edges of what it can run */
static void test_kgather(void **state) {
  (void)state;
  assert_true(td__tp_fused_kgather(0, 1024, 14336, 4096, 8, H200_SMS, 0));  /* llama3.1-8b: 448 tiles */
  assert_true(td__tp_fused_kgather(0, 1024, 28672, 8192, 8, H200_SMS, 0));  /* llama3.1-70b */
  assert_true(td__tp_fused_kgather(0, 8192, 53248, 16384, 8, H200_SMS, 0)); /* llama3.1-405b */
  assert_true(td__tp_fused_kgather(0, 1024, 29568, 8192, 8, H200_SMS, 0));  /* qwen2-72b: N % 256 != 0 */
  assert_true(td__tp_fused_kgather(0, 32728, 5120, 1024, 8, H200_SMS, 0));  /* the check case */
  /* decode-size M: fewer tiles than SMs, so the partial GEMMs keep the GPU busy; forced, it runs */
  assert_false(td__tp_fused_kgather(0, 8, 4096, 14336, 8, H200_SMS, 0));
  assert_true(td__tp_fused_kgather(0, 8, 4096, 14336, 8, H200_SMS, 1));
  assert_false(td__tp_fused_kgather(0, 2048, 2048, 512, 8, H200_SMS, 0)); /* 16 x 8 = 128 tiles < 132 */
  assert_true(td__tp_fused_kgather(0, 2051, 2304, 512, 8, H200_SMS, 0));  /* 17 x 9 = 153 */
  /* what it cannot run, forced or not */
  for (int forced = 0; forced < 2; forced++) {
    assert_false(td__tp_fused_kgather(1, 8192, 14336, 4096, 8, H200_SMS, forced)); /* across GPUs */
    assert_false(td__tp_fused_kgather(0, 8192, 14336, 32 * 8, 8, H200_SMS, forced)); /* K / ranks = 32 */
    assert_false(td__tp_fused_kgather(0, 8192, 14336, 4100, 4, H200_SMS, forced)); /* K / ranks = 1025 */
    assert_false(td__tp_fused_kgather(0, 8192, 14336, 4097, 8, H200_SMS, forced)); /* K % ranks != 0 */
    assert_false(td__tp_fused_kgather(0, 8192, 14332, 4096, 8, H200_SMS, forced)); /* N % 8 != 0 */
    assert_false(td__tp_fused_kgather(0, 8192, 14336, 64 * 16, 16, H200_SMS, forced)); /* more than 8 ranks */
    assert_false(td__tp_fused_kgather(0, 0, 14336, 4096, 8, H200_SMS, forced)); /* no rows */
    assert_false(td__tp_fused_kgather(0, 8192, 14336, 4096, 0, H200_SMS, forced));
  }
  /* the launch takes int M, N, K: past INT32_MAX it cannot run (and M + 127, N + 255 must not overflow) */
  for (int forced = 0; forced < 2; forced++) {
    assert_false(td__tp_fused_kgather(0, INT64_MAX, 14336, 4096, 8, H200_SMS, forced));
    assert_false(td__tp_fused_kgather(0, 8192, INT64_MAX - 7, 4096, 8, H200_SMS, forced)); /* a multiple of 8 */
    assert_false(td__tp_fused_kgather(0, (int64_t)INT32_MAX + 1, 14336, 4096, 8, H200_SMS, forced));
    assert_false(td__tp_fused_kgather(0, 8192, (int64_t)INT32_MAX + 1, 4096, 8, H200_SMS, forced));
    assert_false(td__tp_fused_kgather(0, 8192, 14336, (int64_t)1 << 32, 8, H200_SMS, forced)); /* K / 8 % 64 == 0 */
  }
  assert_true(td__tp_fused_kgather(0, INT32_MAX, 14336, 4096, 8, H200_SMS, 0)); /* the largest M */
  assert_true(td__tp_fused_kgather(0, 8192, INT32_MAX - 7, 4096, 8, H200_SMS, 0)); /* the largest N */
  assert_true(td__tp_fused_kgather(0, 5, 64, 512, 8, H200_SMS, 1)); /* M < ranks: some own no rows */
  assert_true(td__tp_fused_kgather(0, 77, 136, 64, 1, H200_SMS, 1)); /* one rank */
}

/* The tile rule on the shapes it was measured on (8 ranks on one H200, docs/perf.md "Seventh session"):
 * kgather's launches (one for every rank) take 128x256 at M = 1024 where 128x128's fuller waves had won,
 * ag_gemm's per-rank gather launches keep 128x128 there; and its edges. */
static void test_tile_rule(void **state) {
  (void)state;
  const int bm[2] = {128, 128}, bn[2] = {256, 128};
  /* llama3.1-8b M = 1024: 448 tiles of 128x256 (4 waves) against 896 of 128x128 (7 waves) */
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 14336, 1, 1), 0);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 14336, 1, 0), 1);
  /* qwen2-72b M = 1024: 928 tiles (8 waves, 4 tiles in the last) against 1848 (exactly 14) */
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 29568, 1, 1), 0);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 29568, 1, 0), 1);
  /* ag_gemm 8b M = 1024: 8 launches of 1024 x 1792 at once, per-rank gather: 128x128 (measured 1.112x vs 1.129x) */
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 1792, 8, 0), 1);
  /* llama3.1-70b M = 1024 and every M >= 4096 case: 128x256 either way */
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 28672, 1, 0), 0);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 8192, 14336, 1, 0), 0);
  /* ties go to the first listed; ok[] skips; none eligible or bad arguments: -1 */
  const int bm2[2] = {128, 128}, bn2[2] = {256, 256}, skip0[2] = {0, 1}, none[2] = {0, 0};
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm2, bn2, NULL, 2, 4096, 4096, 1, 0), 0);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm2, bn2, skip0, 2, 4096, 4096, 1, 0), 1);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm2, bn2, none, 2, 4096, 4096, 1, 0), -1);
  assert_int_equal(td__tp_fused_least_work(0, 0, bm, bn, NULL, 2, 1024, 1024, 1, 0), -1);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, NULL, bn, NULL, 2, 1024, 1024, 1, 0), -1);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, 1024, 1024, 0, 0), -1);
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, -1, 1024, 1, 0), -1);
  const int zero[2] = {0, 128};
  assert_int_equal(td__tp_fused_least_work(0, H200_SMS, zero, bn, NULL, 2, 1024, 1024, 1, 0), 1); /* BM 0: skipped */
  /* an int M near INT32_MAX: no wrap, still a pick */
  assert_true(td__tp_fused_least_work(0, H200_SMS, bm, bn, NULL, 2, INT32_MAX, 14336, 8, 0) >= 0);
  /* the rates themselves */
  assert_true(td__tp_fused_tile_eff(0, 256, 0) == 1.0 && td__tp_fused_tile_eff(1, 256, 1) == 1.0);
  assert_true(td__tp_fused_tile_eff(0, 128, 1) < td__tp_fused_tile_eff(0, 128, 0));
  assert_true(td__tp_fused_tile_eff(0, 192, 0) < td__tp_fused_tile_eff(1, 192, 0)); /* shared GPU: 0.85 */
  assert_true(td__tp_fused_tile_eff(0, 64, 0) < td__tp_fused_tile_eff(0, 128, 1));
}

/* what TD_OPS_FUSED_RS / TD_OPS_FUSED_AR say of kgather: 1 forced, 0 AUTO's rule, -1 another schedule */
static void test_kgather_mode(void **state) {
  (void)state;
  /* gemm_rs: TD_OPS_FUSED_RS alone */
  assert_int_equal(td__tp_fused_kgather_mode(1, NULL, NULL), 0);
  assert_int_equal(td__tp_fused_kgather_mode(1, "auto", "two-shot"), 0);
  assert_int_equal(td__tp_fused_kgather_mode(1, "kgather", NULL), 1);
  assert_int_equal(td__tp_fused_kgather_mode(1, "pull", "kgather"), -1);
  assert_int_equal(td__tp_fused_kgather_mode(1, "push", NULL), -1);
  /* gemm_ar: TD_OPS_FUSED_AR, and under its auto TD_OPS_FUSED_RS's pull or push */
  assert_int_equal(td__tp_fused_kgather_mode(0, NULL, NULL), 0);
  assert_int_equal(td__tp_fused_kgather_mode(0, NULL, "kgather"), 1);
  assert_int_equal(td__tp_fused_kgather_mode(0, "pull", "kgather"), 1);
  assert_int_equal(td__tp_fused_kgather_mode(0, NULL, "two-shot"), -1);
  assert_int_equal(td__tp_fused_kgather_mode(0, NULL, "all-push"), -1);
  assert_int_equal(td__tp_fused_kgather_mode(0, "pull", "auto"), -1);
  assert_int_equal(td__tp_fused_kgather_mode(0, "push", NULL), -1);
  /* TD_OPS_FUSED_RS=kgather names gemm_rs's schedule: gemm_ar's auto still takes kgather where it pays
   * (the variables' descriptions: "unless TD_OPS_FUSED_RS asks for pull or push") */
  assert_int_equal(td__tp_fused_kgather_mode(0, "kgather", NULL), 0);
  assert_int_equal(td__tp_fused_kgather_mode(0, "kgather", "auto"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ag_split_measured),
      cmocka_unit_test(test_ag_split_edges),
      cmocka_unit_test(test_ar_all_push),
      cmocka_unit_test(test_ag_gather),
      cmocka_unit_test(test_ag_one_auto),
      cmocka_unit_test(test_ag_one_blas_auto),
      cmocka_unit_test(test_ag_one_cluster),
      cmocka_unit_test(test_ag_one_tile),
      cmocka_unit_test(test_kgather),
      cmocka_unit_test(test_kgather_mode),
      cmocka_unit_test(test_tile_rule),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
