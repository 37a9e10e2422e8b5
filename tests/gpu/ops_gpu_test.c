/* SPDX-License-Identifier: Apache-2.0
 * Tensor-parallel operators on the cuda backend (label gpu): every operator
 * and variant on 1, 2, 4 and 8 ranks sharing the GPU, uneven shapes, bf16
 * and f32, several calls in a row without reset, checked against the f64
 * reference (the harness of tests/ops, with device buffers); and the
 * correctness case of the benchmark, M = 4091 x ranks, N = 5120, K = 1024,
 * checked on a sample of rows; the fused variant (Hopper GEMM + copy engine,
 * reduction kernels) on the shapes it takes, as AUTO's choice and forced,
 * with its refusals on every rank; ag_gemm's direct (zero-copy) GEMMs on a
 * shared GPU; every fused operator with its ranks on 2 and 4 GPUs (skipped on
 * smaller machines). TD_GPU_TEST_FILTER=<glob>[,<glob>...] runs a subset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <fnmatch.h>

#include "ops/ops_harness.h"

/* 1 (the several-GPU fused cases): buffers on the device the rank's thread
 * uses (the fused variant's creation made its device current), so each rank's
 * operands live on its own GPU; 0: on GPU 0. */
static int g_own_device;

static void *g_alloc(size_t bytes) {
  void *p = NULL;
  if (!g_own_device)
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

/* The fused variant (src/ops/cuda/): Hopper GEMM + copy engine and the
 * reduction kernels, on shapes its kernels take (bf16 and f16; N / ranks and
 * K / ranks multiples of 8), M not divisible by the ranks, 1-8 ranks, 100
 * calls without reset, and the benchmark's correctness case. */
static char g_sched[160]; /* the schedule of the last fused_case (rank 0) */
static int g_moving;      /* 1: fused_case's operands move between calls (oh_case.moving_buffers) */

static void fused_case(td_tp_kind kind, td_tp_variant v, td_dtype dt, int64_t m, int64_t n, int64_t k,
                       size_t count, int calls, int sample, int ranks) {
  oh_case c = g_case(kind, v, dt, m, n, k, count, calls);
  c.sample_rows = sample;
  c.moving_buffers = g_moving;
  if (getenv("TD_GPU_TEST_VERBOSE")) /* which case a hang or a failure is in (unbuffered, before it runs) */
    fprintf(stderr, "case %s dt=%d m=%lld n=%lld k=%lld count=%zu calls=%d ranks=%d AG=%s RS=%s AR=%s\n",
            td_tp_kind_name(kind), (int)dt, (long long)m, (long long)n, (long long)k, count, calls, ranks,
            getenv("TD_OPS_FUSED_AG") ? getenv("TD_OPS_FUSED_AG") : "-",
            getenv("TD_OPS_FUSED_RS") ? getenv("TD_OPS_FUSED_RS") : "-",
            getenv("TD_OPS_FUSED_AR") ? getenv("TD_OPS_FUSED_AR") : "-");
  OH_EXPECT_OK(ranks, &c);
  assert_int_equal(c.chosen, TD_TP_FUSED);
  snprintf(g_sched, sizeof g_sched, "%s", c.schedule);
  if (getenv("TD_GPU_TEST_VERBOSE"))
    fprintf(stderr, "  schedule: %s\n", g_sched);
}

/* fused_case, and the schedule it ran must contain `want` (or, with a
 * leading '!', must not); `check` rows of C sampled against the f64
 * reference (0: every row), for shapes whose full reference would take the
 * test past its limit. */
static void fused_sched_rows(const char *want, td_tp_kind kind, td_tp_variant v, td_dtype dt, int64_t m,
                             int64_t n, int64_t k, int calls, int check, int ranks) {
  fused_case(kind, v, dt, m, n, k, 0, calls, check, ranks);
  int has = strstr(g_sched, want[0] == '!' ? want + 1 : want) != NULL;
  if (has != (want[0] != '!'))
    fprintf(stderr, "schedule \"%s\": expected %s\n", g_sched, want);
  assert_int_equal(has, want[0] != '!');
}

/* fused_sched_rows checking every row. */
static void fused_sched(const char *want, td_tp_kind kind, td_tp_variant v, td_dtype dt, int64_t m, int64_t n,
                        int64_t k, int calls, int ranks) {
  fused_sched_rows(want, kind, v, dt, m, n, k, calls, 0, ranks);
}

static void test_fused(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1); /* every rank on GPU 0, however many the machine has */
  const int ranks[] = {1, 2, 4, 8};
  for (int r = 0; r < 4; r++) {
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 0, 3, 0, ranks[r]);
    fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 0, 3, 0, ranks[r]);
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 77, 136, 512, 0, 3, 0, ranks[r]);   /* one-shot (<= 1 MiB) */
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 2, 0, ranks[r]); /* RS + AG */
  }
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_F16, 129, 64, 128, 0, 2, 0, 4);
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 131, 64, 128, 0, 2, 0, 4); /* the gather GEMM in f16 */
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 5, 128, 64, 0, 2, 0, 8);  /* M < ranks: empty parts */
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 259, 128, 64, 0, 100, 0, 4);
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 259, 128, 64, 0, 100, 0, 8);
  fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 100, 8, 8);
  /* every GEMM split of ag_gemm and a forced tile (benchmark knobs of the config table) */
  const char *splits[] = {"1", "3", "8"};
  for (int i = 0; i < 3; i++) {
    setenv("TD_OPS_FUSED_AG_GEMMS", splits[i], 1);
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 0, 3, 0, 4);
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1001, 1024, 64, 0, 3, 0, 8);
  }
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
  setenv("TD_OPS_FUSED_TILE", "128x256c2", 1);
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 0, 2, 0, 2);
  /* the GEMM engines: cuBLAS is the default without a tuned entry; our tiles by rule */
  const char *engines[] = {"cublas", "tiles"};
  for (int i = 0; i < 2; i++) {
    setenv("TD_OPS_FUSED_TILE", engines[i], 1);
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1001, 1024, 64, 0, 3, 0, 8);
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 333, 512, 136, 0, 3, 0, 4);
    fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 0, 2, 0, 2);
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 2, 8, 4);
  }
  unsetenv("TD_OPS_FUSED_TILE");
  for (int i = 0; i < 2; i++) {
    int n = i ? 8 : 2;
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 4091 * n, 5120, 1024, 0, 2, 16, n);
    fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 4091 * n, 5120, 1024, 0, 2, 16, n);
  }
  unsetenv("TD_CUDA_DEVICE");
}

/* The fused all-reduce: one-shot (<= 1 MiB) and two-shot, every dtype,
 * counts that split unevenly and leave a tail past the last 16-byte vector,
 * 1-8 ranks, 100 calls. */
static void test_fused_all_reduce(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1);
  const int ranks[] = {1, 2, 3, 8};
  const size_t counts[] = {4096, 1009, (1u << 20) + 3, 8};
  const td_dtype dts[] = {TD_BF16, TD_F16, TD_F32};
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 4; k++)
      for (int d = 0; d < 3; d++)
        fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, dts[d], 0, 0, 0, counts[k], 2, 0, ranks[r]);
  fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, TD_BF16, 0, 0, 0, 8192, 100, 0, 8);
  fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, TD_BF16, 0, 0, 0, 3u << 20, 100, 0, 8);
  unsetenv("TD_CUDA_DEVICE");
}

/* ag_gemm on ranks sharing one GPU, direct (zero copy): the GEMMs read every
 * peer's A in place, one launch per rank or one batched launch (equal
 * parts). M not divisible by the ranks and M < ranks, bf16 and f16, 100
 * calls; the copy path forced beside it; and gemm_rs / gemm_ar with
 * the push schedule forced on one GPU (its receive slots, order and events
 * checked where every machine can run them). */
static void test_fused_direct(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1);
  /* by rule direct runs parts of >= 512 rows; forced here on small shapes */
  fused_case(TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 4091 * 4, 5120, 1024, 0, 2, 16, 4);
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 2053 * 2 + 1, 256, 64, 0, 2, 0, 2); /* unequal parts */
  /* one launch per rank, and one batched launch where the parts are equal */
  const char *modes[] = {"direct", "batched"};
  const int ranks[] = {2, 4, 8};
  for (int i = 0; i < 2; i++) {
    setenv("TD_OPS_FUSED_AG", modes[i], 1);
    for (int r = 0; r < 3; r++) {
      fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 0, 3, 0, ranks[r]);
      fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 1001, 1024, 64, 0, 3, 0, ranks[r]);
      fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * ranks[r], 256, 64, 0, 3, 0, ranks[r]); /* equal */
      fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 136 * ranks[r], 512, 136, 0, 3, 0, ranks[r]);
    }
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 5, 128, 64, 0, 2, 0, 8); /* M < ranks: empty parts */
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 259, 128, 64, 0, 100, 0, 8);
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256, 128, 64, 0, 100, 0, 8);
  }
  unsetenv("TD_OPS_FUSED_AG"); /* the loop's last mode would force every case below */
  /* gather: our tile reading every rank's A in place, where the parts are
   * equal multiples of 128 rows in bf16. AUTO takes rank 0's one launch of
   * 256x128 tiles there (td__tp_fused_ag_one_auto; 3 ranks: the last tile's
   * second half past the last rank's rows), B rows that are not whole
   * 128-byte lines included (nb = 72); each rank's own launch where a tile is
   * named (below) or TD_OPS_FUSED_AG=gather; gather-one has its own cases in
   * test_fused_ag_one */
  for (int r = 0; r < 3; r++) { /* clusters of 2 on parts of >= 256 rows (td__tp_fused_ag_one_cluster) */
    fused_sched("ag gather, one launch for every rank, sm90 256x128x64 s4 c1", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16,
                128 * ranks[r], 1024, 136, 3, ranks[r]);
    fused_sched("ag gather, one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16,
                256 * ranks[r], 1024, 136, 3, ranks[r]);
    /* parts of >= 512 rows: rank 0's one cuBLAS batched launch where a rank's B rows are whole 128-byte lines
     * (td__tp_fused_ag_one_blas_auto), else the tile's */
    fused_sched("ag batched, one launch for every rank, cuBLAS batched", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16,
                512 * ranks[r], 1024, 64, 3, ranks[r]);
    fused_sched("ag gather, one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16,
                512 * ranks[r], 576, 64, 3, ranks[r]);
  }
  /* M = 1024 on 8 ranks, 100 calls (8 rows of C checked a call: the f64 reference of every row takes seconds) */
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 1024, 0, 100, 8, 8);
  assert_non_null(strstr(g_sched, "ag gather, one launch for every rank"));
  fused_sched("ag gather, one launch for every rank, sm90 256x128", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 512 * 4,
              4 * 72, 64, 2, 4);
  /* B rows of whole 128-byte lines: rank 0's one cuBLAS batched launch, unless a copy split or our tiles are
   * asked for */
  fused_sched("ag batched, one launch for every rank", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 512 * 4, 4 * 64, 64, 2, 4);
  setenv("TD_OPS_FUSED_AG_GEMMS", "3", 1);
  fused_sched("ag copy", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 512 * 4, 4 * 64, 64, 2, 4);
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
  setenv("TD_OPS_FUSED_TILE", "tiles", 1);
  fused_sched("ag gather, one launch for every rank, sm90 256x128", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 512 * 4,
              4 * 64, 64, 2, 4);
  unsetenv("TD_OPS_FUSED_TILE");
  /* parts of >= 512 rows where no gather runs (f16: none compiled): AUTO takes the batched launch */
  fused_sched("ag batched", TD_TP_AG_GEMM, TD_TP_AUTO, TD_F16, 512 * 4, 4 * 72, 64, 2, 4);
  fused_sched("!gather", TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 128 * 4, 1024, 136, 2, 4);   /* f16: none compiled */
  fused_sched("!gather", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 96 * 4, 1024, 136, 2, 4);   /* parts of 96 rows */
  fused_sched("!gather", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * 4 + 1, 1024, 136, 2, 4); /* unequal */
  setenv("TD_OPS_FUSED_TILE", "128x128", 1); /* a named tile compiled with the hook: each rank's launch */
  fused_sched("ag gather, sm90 128x128", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * 4, 1024, 136, 2, 4);
  fused_sched("ag gather, sm90 128x128", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 512 * 4, 4 * 64, 64, 2, 4);
  /* each rank's launch applies the 128-byte-line rule at parts of >= 512 rows: direct on the named tile */
  fused_sched("!gather", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 512 * 4, 4 * 72, 64, 2, 4);
  setenv("TD_OPS_FUSED_TILE", "cublas", 1); /* cuBLAS asked for: no gather */
  fused_sched("!gather", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * 4, 1024, 136, 2, 4);
  unsetenv("TD_OPS_FUSED_TILE");
  setenv("TD_OPS_FUSED_AG", "gather", 1); /* forced where it cannot run: the other zero-copy launches */
  fused_sched("ag batched", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 96 * 4, 1024, 136, 2, 4);
  fused_sched("ag direct", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 2, 4);
  fused_sched("ag gather, sm90", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * 2, 272, 64, 2, 2);
  setenv("TD_OPS_FUSED_AG", "copy", 1);
  fused_sched("ag copy", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * 4, 1024, 136, 2, 4);
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 0, 3, 0, 4);
  setenv("TD_OPS_FUSED_AG", "direct", 1);
  setenv("TD_OPS_FUSED_AG_GEMMS", "3", 1); /* direct wins over a copy split */
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 0, 3, 0, 4);
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
  unsetenv("TD_OPS_FUSED_AG");
  setenv("TD_OPS_FUSED_RS", "push", 1);
  for (int r = 0; r < 3; r++) {
    fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 0, 3, 0, ranks[r]);
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_F16, 1031, 520, 256, 0, 2, 0, ranks[r]); /* RS + AG */
  }
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_F16, 5, 64, 128, 0, 2, 0, 8); /* M < ranks */
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 259, 128, 64, 0, 100, 0, 8);
  unsetenv("TD_OPS_FUSED_RS");
  setenv("TD_OPS_FUSED_AR", "all-push", 1); /* forced on one GPU too: n - 1 slots, M not divisible */
  for (int r = 0; r < 3; r++)
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 4099, 520, 256, 0, 3, 0, ranks[r]);
  unsetenv("TD_OPS_FUSED_AR");
  unsetenv("TD_CUDA_DEVICE");
}

/* ag_gemm's gather as rank 0's one launch for every rank (GATHER | NSPLIT:
 * each rank's B and C a column source) on one shared GPU: forced (AUTO takes
 * it on parts of a multiple of 128 rows, on 256x128 tiles),
 * 1-8 ranks, a rank's columns not a multiple of the tile (nb = 136, 72),
 * 100 calls with no reset, the fallbacks where it cannot run, and a named
 * tile. Every rank's C checked against the f64 reference (fused_case). */
static void test_fused_ag_one(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1);
  setenv("TD_OPS_FUSED_AG", "gather-one", 1);
  const int ranks[] = {1, 2, 3, 4, 8};
  for (int r = 0; r < 5; r++) {
    const int n = ranks[r];
    fused_sched("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * n, 136 * n, 136,
                3, n);
    fused_sched("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * n, 72 * n, 64, 2, n);
  }
  /* 100 calls, 8 ranks, M = 1024 (8 rows of every C checked a call) */
  fused_sched_rows("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 1024,
                   100, 8, 8);
  /* operands that move between calls (some ranks' at a time): the reused tensor maps (td_gemm_map_cache) must
   * follow them, and TD_OPS_FUSED_MAP_CACHE=0 gives the same results */
  g_moving = 1;
  fused_sched_rows("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 1024,
                   12, 8, 8);
  fused_sched("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 384, 600, 1032, 8, 3);
  setenv("TD_OPS_FUSED_MAP_CACHE", "0", 1);
  fused_sched("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 384, 600, 1032, 5, 3);
  unsetenv("TD_OPS_FUSED_MAP_CACHE");
  g_moving = 0;
  /* its split tail (nb = 128: every rank's 8 tiles of 128x128, 64 in all, in 2 K-slices on the 132 SMs; at
   * nb = 224 above, 128 tiles leave too few SMs idle to split), and none */
  fused_sched_rows("K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 20, 8, 8);
  setenv("TD_OPS_FUSED_TAIL", "none", 1);
  fused_sched("!K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 3, 8);
  unsetenv("TD_OPS_FUSED_TAIL");
  /* the maps fenced once at the start (TD_OPS_FUSED_MAP_FENCE=start): the same results */
  setenv("TD_OPS_FUSED_MAP_FENCE", "start", 1);
  fused_sched("ag gather, one launch for every rank", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 384, 600, 1032, 3, 3);
  fused_sched_rows("K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 3, 8, 8);
  setenv("TD_OPS_FUSED_AG", "gather", 1);
  fused_sched("ag gather, sm90", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * 4, 1024, 136, 3, 4);
  setenv("TD_OPS_FUSED_AG", "gather-one", 1);
  unsetenv("TD_OPS_FUSED_MAP_FENCE");
  /* where it cannot run, the other zero-copy launches (as forced gather) */
  fused_sched("ag batched", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 96 * 4, 1024, 136, 2, 4); /* parts of 96 rows */
  fused_sched("ag direct", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 2, 4);     /* unequal parts */
  fused_sched("!one launch", TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 128 * 4, 1024, 136, 2, 4); /* f16: none compiled */
  setenv("TD_OPS_FUSED_TILE", "128x128", 1);
  fused_sched("ag gather, one launch for every rank, sm90 128x128", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * 4,
              1024, 136, 2, 4);
  /* 256-row tiles over parts of 128 rows (each tile's halves from two ranks' A), named only: one launch, each
   * rank's, and its split tail (nb = 128: 4 tiles a rank, 32 on 132 SMs) */
  setenv("TD_OPS_FUSED_TILE", "256x128", 1);
  fused_sched_rows("one launch for every rank, sm90 256x128", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 1032,
                   20, 8, 8);
  fused_sched_rows("K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 3, 8, 8);
  /* in clusters of 2 (B multicast to the pair; a cluster never splits its tail), 8 and 3 ranks (the second
   * pair's second tile wholly past M) */
  setenv("TD_OPS_FUSED_TILE", "256x128c2", 1);
  fused_sched_rows("one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024,
                   1792, 1032, 20, 8, 8);
  fused_sched("!K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 3, 8);
  fused_sched("one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 384, 600,
              1032, 3, 3);
  setenv("TD_OPS_FUSED_TILE", "128x256c2", 1); /* a pair of 128-row tiles, B's 256 columns multicast */
  fused_sched_rows("one launch for every rank, sm90 128x256x64 s4 c2", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024,
                   1792, 1032, 20, 8, 8);
  fused_sched("one launch for every rank, sm90 128x256x64 s4 c2", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 384, 600,
              1032, 3, 3);
  setenv("TD_OPS_FUSED_TILE", "256x128", 1);
  setenv("TD_OPS_FUSED_AG", "gather", 1);
  fused_sched_rows("ag gather, sm90 256x128", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 1032, 20, 8, 8);
  fused_sched("ag gather, sm90 256x128", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 384 * 3, 600, 200, 3, 3);
  setenv("TD_OPS_FUSED_AG", "gather-one", 1);
  setenv("TD_OPS_FUSED_TILE", "128x192", 1); /* compiled for per-rank GATHER only: each rank's launch */
  fused_sched("ag gather, sm90 128x192", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * 4, 1536, 136, 2, 4);
  unsetenv("TD_OPS_FUSED_TILE");
  /* AUTO takes the one launch of 256x128 tiles on parts of a multiple of 128 rows (td__tp_fused_ag_one_auto),
   * unless a tile is named or gather asks for each rank's launch */
  unsetenv("TD_OPS_FUSED_AG");
  fused_sched("one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 256 * 4, 1024,
              136, 2, 4);
  fused_sched_rows("one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 1024 * 2,
                   3696 * 2, 520, 2, 8, 2); /* parts of 1024 rows, B rows of 7392 bytes (qwen2-72b's) */
  fused_sched_rows("ag batched, one launch for every rank", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 1024 * 2, 3584 * 2,
                   520, 2, 8, 2); /* B rows of 7168 bytes (llama3.1-70b's): cuBLAS's one launch */
  fused_sched("!one launch", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 192 * 4, 1024, 136, 2, 4); /* parts of 192 rows */
  fused_sched_rows("one launch for every rank, sm90 256x128", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 1024, 1792, 1032,
                   20, 8, 8);
  fused_sched("one launch for every rank, sm90 256x128", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 256, 3696 * 2, 520, 2,
              2);
  fused_sched("one launch for every rank, sm90 256x128", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 384, 600, 1032, 3,
              3); /* odd ranks: the second tile's second half lies past M */
  /* 128x256 tiles in clusters of 2 at a long K on parts of 128 rows (and 256 at K >= 12288) where a rank's
   * columns are whole 256-column tiles (td__tp_fused_ag_one_tile); 256x128 otherwise. 3 ranks: the last
   * cluster's second tile lies past M. 16 rows a rank checked (the f64 reference at K = 8192 takes seconds). */
  fused_sched_rows("one launch for every rank, sm90 128x256x64 s4 c2", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 128 * 3,
                   256 * 3, 8192, 3, 16, 3);
  fused_sched_rows("one launch for every rank, sm90 128x256x64 s4 c2", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 256 * 2,
                   512 * 2, 12288, 2, 16, 2);
  fused_sched_rows("one launch for every rank, sm90 256x128x64 s4 c2", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 256 * 2,
                   512 * 2, 8192, 2, 16, 2); /* 256-row parts at K = 8192 */
  fused_sched_rows("one launch for every rank, sm90 256x128x64 s4 c1", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 128 * 2,
                   264 * 2, 8192, 2, 16, 2); /* columns not whole 256-column tiles */
  setenv("TD_OPS_FUSED_TILE", "128x256", 1);
  fused_sched("!one launch", TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 1024, 1792, 1032, 2, 8);
  unsetenv("TD_OPS_FUSED_TILE");
  setenv("TD_OPS_FUSED_AG", "gather", 1);
  fused_sched("!one launch", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 256 * 4, 1024, 136, 2, 4);
  unsetenv("TD_OPS_FUSED_AG");
  unsetenv("TD_CUDA_DEVICE");
}

/* ag_gemm's gather with each rank's launch on its share of the SMs
 * (TD_OPS_FUSED_AG=gather-share: the ranks' launches at once fill the GPU),
 * its last wave split along K: 1-8 ranks, nb not a multiple of the tile, the
 * split over 100 calls on one workspace per rank (M = 1024 on 8 ranks: each
 * rank's 8 tiles on 16 or 17 SMs, 2 slices each), TD_OPS_FUSED_TAIL=none,
 * and where it cannot run. Every rank's C checked (fused_case). */
/* ag_gemm's batched-one (TD_OPS_FUSED_AG=batched-one): rank 0's one cuBLAS
 * batched launch of ranks x ranks GEMMs for every rank on one shared GPU,
 * 1-8 ranks, bf16 and f16, columns and K that are no multiple of a tile,
 * parts of 1 row, 100 calls with no reset, operands that move between calls
 * (the pointer table is uploaded again) and stay (it is not), and the
 * fallbacks where it cannot run: unequal parts (direct GEMMs) and a named
 * tile (our tile, each rank's launches). Every rank's C against the f64
 * reference (fused_case). */
static void test_fused_ag_batched_one(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1);
  setenv("TD_OPS_FUSED_AG", "batched-one", 1);
  const char *want = "ag batched, one launch for every rank, cuBLAS batched";
  const int ranks[] = {1, 2, 3, 4, 8};
  for (int mv = 0; mv < 2; mv++) {
    g_moving = mv;
    for (int r = 0; r < 5; r++) {
      const int n = ranks[r];
      fused_sched(want, TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * n, 136 * n, 136, 3, n);
      fused_sched(want, TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 37 * n, 72 * n, 64, 3, n);
      fused_sched(want, TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, n, 8 * n, 1000, 2, n); /* parts of 1 row */
    }
  }
  g_moving = 0;
  /* 100 calls, no reset (8 rows of C checked a call: the f64 reference of every row takes seconds) */
  fused_sched_rows(want, TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 512, 100, 8, 8);
  fused_sched("ag direct", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 2, 4); /* unequal parts */
  setenv("TD_OPS_FUSED_TILE", "128x128", 1); /* our tile named: no cuBLAS batched launch */
  fused_sched("!batched", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * 4, 1024, 136, 2, 4);
  unsetenv("TD_OPS_FUSED_TILE");
  unsetenv("TD_OPS_FUSED_AG");
  unsetenv("TD_CUDA_DEVICE");
}

static void test_fused_ag_share(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1);
  setenv("TD_OPS_FUSED_AG", "gather-share", 1);
  const int ranks[] = {1, 2, 3, 4, 8};
  for (int r = 0; r < 5; r++) {
    const int n = ranks[r];
    fused_sched("ag gather on ", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * n, 136 * n, 136, 3, n);
    fused_sched("K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 128 * n, 72 * n, 1024 + 8, 2, n); /* n tiles */
  }
  /* 100 calls at nb = 224 (16 tiles of 128x128 on 16-17 SMs: whole), then nb = 128 (8 tiles: split), and none */
  fused_sched_rows("!K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1792, 1024, 100, 8, 8);
  fused_sched_rows("K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 20, 8, 8);
  setenv("TD_OPS_FUSED_TAIL", "none", 1);
  fused_sched("!K-slices", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1024, 1024, 1024, 3, 8);
  unsetenv("TD_OPS_FUSED_TAIL");
  fused_sched("ag batched", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 96 * 4, 1024, 136, 2, 4); /* parts of 96 rows */
  fused_sched("ag direct", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 2, 4);     /* unequal parts */
  unsetenv("TD_OPS_FUSED_AG");
  unsetenv("TD_CUDA_DEVICE");
}

/* kgather on one shared GPU (gemm_rs to each owner, gemm_ar to every rank,
 * in rank 0's one launch), apart from test_fused_direct so that it can run
 * alone (TD_GPU_TEST_FILTER=test_fused_kgather). */
static void test_fused_kgather(void **state) {
  (void)state;
  setenv("TD_CUDA_DEVICE", "0", 1);
  const int ranks[] = {2, 4, 8};
  /* gemm_rs kgather: rank 0's one launch computes every rank's rows over every rank's A and B in place (no
   * partials) and stores each row at its owner's C; M not divisible, M < ranks, 100 calls; K / ranks not a
   * multiple of 64 falls back to pull */
  setenv("TD_OPS_FUSED_RS", "kgather", 1);
  for (int r = 0; r < 3; r++) {
    fused_sched("gemm_rs kgather", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 128 * ranks[r], 3, ranks[r]);
    fused_sched("gemm_rs kgather", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 1024, 520, 64 * ranks[r], 3, ranks[r]);
  }
  fused_sched("gemm_rs kgather", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 5, 64, 512, 2, 8); /* M < ranks */
  fused_sched("gemm_rs kgather", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 259, 128, 512, 100, 8);
  g_moving = 1; /* A and B move between calls: the reused tensor maps must follow them */
  fused_sched("gemm_rs kgather", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 8, 4);
  g_moving = 0;
  fused_sched("gemm_rs pull", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 32 * 4, 2, 4); /* K/ranks = 32 */
  fused_sched("gemm_rs pull", TD_TP_GEMM_RS, TD_TP_FUSED, TD_F16, 301, 264, 128 * 4, 2, 4); /* f16: none compiled */
  fused_sched("!kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 2, 4); /* gemm_ar: its own knob */
  /* ... which it does not turn off either: AUTO's rule still takes kgather for gemm_ar where it pays (only
   * pull or push keep gemm_ar's reductions; td__tp_fused_kgather_mode) */
  fused_sched_rows("gemm_ar kgather", TD_TP_GEMM_AR, TD_TP_AUTO, TD_BF16, 2048 + 3, 2304, 512, 2, 16, 8);
  unsetenv("TD_OPS_FUSED_RS");
  /* gemm_ar kgather: the same launch stores every row into every rank's C; one-shot and two-shot sizes, M
   * not divisible, M < ranks, 100 calls, K / ranks = 32 and f16 fall back */
  setenv("TD_OPS_FUSED_AR", "kgather", 1);
  for (int r = 0; r < 3; r++) {
    fused_sched("gemm_ar kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 64 * ranks[r], 3, ranks[r]);
    fused_sched("gemm_ar kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 77, 136, 128 * ranks[r], 3, ranks[r]);
  }
  fused_sched("gemm_ar kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 5, 64, 512, 2, 8); /* M < ranks */
  fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 512, 0, 100, 8, 8);
  assert_non_null(strstr(g_sched, "gemm_ar kgather"));
  g_moving = 1; /* A, B and every rank's C (BCAST's destinations, in the map table) move between calls */
  fused_sched_rows("gemm_ar kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 512, 8, 16, 8);
  g_moving = 0;
  fused_sched("!kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 32 * 4, 2, 4); /* K/ranks = 32 */
  fused_sched("!kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_F16, 1031, 520, 256, 2, 4);     /* f16: none compiled */
  setenv("TD_OPS_FUSED_BCAST_HINT", "evict_first", 1); /* the stores' L2 policy changes no byte */
  for (int r = 0; r < 3; r++)
    fused_sched("kgather, one launch for every rank, stores L2 evict-first", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16,
                1031, 520, 64 * ranks[r], 3, ranks[r]);
  unsetenv("TD_OPS_FUSED_BCAST_HINT");
  setenv("TD_OPS_FUSED_TILE", "128x128", 1); /* a named tile compiled with the route */
  fused_sched("kgather, one launch for every rank, sm90 128x128", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520,
              256, 2, 4);
  setenv("TD_OPS_FUSED_TILE", "cublas", 1); /* cuBLAS asked for: the partial GEMMs */
  fused_sched("!kgather", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 2, 4);
  unsetenv("TD_OPS_FUSED_TILE");
  unsetenv("TD_OPS_FUSED_AR");
  /* the split tail (gemm.h): with K of >= 16 k-blocks the launch's last wave (here every tile: fewer tiles than
   * SMs) runs as K-slices, the last slice to finish adding the others' partials; 100 calls on one workspace (its
   * counters back at 0 after each); TD_OPS_FUSED_TAIL=none keeps every tile whole */
  setenv("TD_OPS_FUSED_RS", "kgather", 1);
  setenv("TD_OPS_FUSED_AR", "kgather", 1);
  fused_sched_rows("in 2 K-slices", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 1024, 520, 1024, 100, 16, 8);
  fused_sched("gemm_rs kgather, one launch for every rank, last", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 1001, 264,
              4096, 3, 4);
  fused_sched_rows("in 2 K-slices", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 1024, 100, 16, 8);
  fused_sched("gemm_ar kgather, one launch for every rank, last", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 77, 136,
              2048, 3, 2);
  setenv("TD_OPS_FUSED_BCAST_HALF", "defer", 1); /* the 128x256 tile's second half stored in the next main loop */
  setenv("TD_OPS_FUSED_TILE", "128x256", 1);
  fused_sched_rows("second half deferred", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 2053, 2600, 1024, 20, 16, 8);
  fused_sched_rows("second half deferred", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 1024, 3, 16, 4);
  setenv("TD_OPS_FUSED_TILE", "128x128", 1); /* staged whole: nothing to defer, and the schedule says none */
  fused_sched_rows("!deferred", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 1024, 2, 16, 4);
  setenv("TD_OPS_FUSED_TILE", "128x256", 1);
  setenv("TD_OPS_FUSED_BCAST_HALF", "pace", 1); /* every copy issued one at a time over the next main loop */
  fused_sched_rows("copies paced", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 2053, 2600, 1024, 20, 16, 8);
  fused_sched_rows("copies paced", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 1024, 3, 16, 4);
  unsetenv("TD_OPS_FUSED_BCAST_HALF"); /* pace is the default */
  fused_sched_rows("copies paced", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 1024, 2, 16, 8);
  setenv("TD_OPS_FUSED_BCAST_HALF", "wait", 1); /* the second half staged inside the epilogue */
  fused_sched_rows("!paced", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 2053, 2600, 1024, 3, 16, 8);
  unsetenv("TD_OPS_FUSED_TILE");
  unsetenv("TD_OPS_FUSED_BCAST_HALF");
  setenv("TD_OPS_FUSED_TAIL", "split2", 1); /* 216 tiles of 128x256, a wave and 84: all of them in 3 slices */
  fused_sched_rows("last 216 tiles in 3 K-slices", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 1024, 6912, 1536, 2, 16, 8);
  setenv("TD_OPS_FUSED_BCAST_HALF", "defer", 1); /* gemm_ar's deferred half with slices of several tiles a block */
  fused_sched_rows("second half deferred", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1024, 6912, 1536, 2, 16, 8);
  setenv("TD_OPS_FUSED_BCAST_HALF", "pace", 1); /* paced copies across split slices (short units) */
  fused_sched_rows("copies paced", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1024, 6912, 1536, 2, 16, 8);
  unsetenv("TD_OPS_FUSED_BCAST_HALF");
  setenv("TD_OPS_FUSED_TAIL", "none", 1);
  fused_sched("!K-slices", TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 1024, 520, 1024, 2, 8);
  fused_sched("!K-slices", TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 1024, 2, 8);
  unsetenv("TD_OPS_FUSED_TAIL");
  unsetenv("TD_OPS_FUSED_AR");
  unsetenv("TD_OPS_FUSED_RS");
  /* AUTO: kgather where the output has at least as many 128x256 tiles as the GPU has SMs (the H200's 132:
   * 16 x 9 = 144 here, 16 x 8 = 128 below), unless a reduction schedule is asked for */
  /* (16 rows of each C checked: these shapes' full f64 reference took the test past its limit on the H200) */
  fused_sched_rows("gemm_rs kgather", TD_TP_GEMM_RS, TD_TP_AUTO, TD_BF16, 2048 + 3, 2304, 512, 2, 16, 8);
  fused_sched_rows("gemm_ar kgather", TD_TP_GEMM_AR, TD_TP_AUTO, TD_BF16, 2048 + 3, 2304, 512, 2, 16, 8);
  fused_sched_rows("!kgather", TD_TP_GEMM_RS, TD_TP_AUTO, TD_BF16, 2048, 2048, 512, 2, 16, 8);
  fused_sched_rows("!kgather", TD_TP_GEMM_AR, TD_TP_AUTO, TD_BF16, 2048, 2048, 512, 2, 16, 8);
  setenv("TD_OPS_FUSED_RS", "pull", 1);
  fused_sched_rows("gemm_rs pull", TD_TP_GEMM_RS, TD_TP_AUTO, TD_BF16, 2048 + 3, 2304, 512, 2, 16, 8);
  fused_sched_rows("gemm_ar two-shot pull", TD_TP_GEMM_AR, TD_TP_AUTO, TD_BF16, 2048 + 3, 2304, 512, 2, 16, 8);
  unsetenv("TD_OPS_FUSED_RS");
  unsetenv("TD_CUDA_DEVICE");
}

/* Every fused operator with rank r on GPU r (peer access enabled by the
 * operator): ag_gemm's copy-engine pulls and a GEMM per source, gemm_rs /
 * gemm_ar's pushes, the all-reduce's kernels on the peers' buffers; M not
 * divisible by the ranks, bf16 and f16, 100 calls, pull and push forced, and
 * 2 ranks per GPU. Skipped where the machine has fewer GPUs. */
static void fused_gpus(int gpus) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < gpus)
    skip();
  unsetenv("TD_CUDA_DEVICE");
  g_own_device = 1;
  const td_dtype dts[] = {TD_BF16, TD_F16};
  for (int d = 0; d < 2; d++) {
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, dts[d], 333, 512, 136, 0, 3, 0, gpus);
    fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, dts[d], 301, 264, 512, 0, 3, 0, gpus);
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, dts[d], 77, 136, 512, 0, 3, 0, gpus);   /* one-shot */
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, dts[d], 1031, 520, 256, 0, 2, 0, gpus); /* RS + AG */
    fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, dts[d], 0, 0, 0, 4099, 3, 0, gpus);
    fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, dts[d], 0, 0, 0, (1u << 20) + 3, 3, 0, gpus);
  }
  fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, TD_F32, 0, 0, 0, 1009, 3, 0, gpus);
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 5, 128, 64, 0, 2, 0, gpus); /* M < ranks */
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 259, 128, 64, 0, 100, 0, gpus);
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 259, 128, 64, 0, 100, 0, gpus);
  fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 100, 8, gpus);
  fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, TD_BF16, 0, 0, 0, 3u << 20, 100, 0, gpus);
  fused_case(TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 4091 * gpus, 5120, 1024, 0, 2, 16, gpus);
  fused_case(TD_TP_GEMM_RS, TD_TP_AUTO, TD_BF16, 4091 * gpus, 5120, 1024, 0, 2, 16, gpus);
  /* the other schedules forced across GPUs */
  setenv("TD_OPS_FUSED_RS", "pull", 1);
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 0, 3, 0, gpus);
  fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 2, 0, gpus);
  unsetenv("TD_OPS_FUSED_RS");
  const char *ag[] = {"direct", "copy"}, *splits[] = {"1", "3"};
  for (int i = 0; i < 2; i++) {
    setenv("TD_OPS_FUSED_AG", ag[i], 1);
    setenv("TD_OPS_FUSED_AG_GEMMS", splits[i], 1);
    fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 0, 3, 0, gpus);
  }
  /* the copy path's pulls, one stream per source, under each GEMM split */
  setenv("TD_OPS_FUSED_AG", "copy", 1);
  const char *copy_splits[] = {"1", "3", "8"}, *copy_names[] = {"ag copy, one GEMM launch,", "ag copy, up to", "ag copy, up to"};
  for (int i = 0; i < 3; i++) {
    setenv("TD_OPS_FUSED_AG_GEMMS", copy_splits[i], 1);
    fused_sched(copy_names[i], TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 333, 512, 136, 3, gpus);
    fused_sched(copy_names[i], TD_TP_AG_GEMM, TD_TP_FUSED, TD_F16, 128 * gpus, 320, 64, 20, gpus);
    fused_sched("ag copy", TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 3, 128, 64, 2, gpus); /* M < ranks */
  }
  unsetenv("TD_OPS_FUSED_AG");
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
  /* gemm_ar both ways (auto takes all-push on 2 GPUs): uneven row blocks, many calls */
  const char *ar[] = {"two-shot", "all-push"};
  for (int i = 0; i < 2; i++) {
    setenv("TD_OPS_FUSED_AR", ar[i], 1);
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 3, 0, gpus);
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_F16, 4099, 520, 256, 0, 2, 0, gpus); /* 3 row blocks */
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 6151, 264, 128, 0, 100, 8, gpus); /* 8 rows checked a call */
    fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 2053, 520, 256, 0, 2, 0, 2 * gpus);
  }
  unsetenv("TD_OPS_FUSED_AR");
  /* two ranks per GPU: peers on this GPU and on the others */
  fused_case(TD_TP_AG_GEMM, TD_TP_FUSED, TD_BF16, 1001, 1024, 64, 0, 3, 0, 2 * gpus);
  fused_case(TD_TP_GEMM_RS, TD_TP_FUSED, TD_BF16, 301, 264, 512, 0, 3, 0, 2 * gpus);
  fused_case(TD_TP_GEMM_AR, TD_TP_FUSED, TD_BF16, 1031, 520, 256, 0, 3, 0, 2 * gpus);
  fused_case(TD_TP_ALL_REDUCE, TD_TP_FUSED, TD_BF16, 0, 0, 0, 3u << 20, 3, 0, 2 * gpus);
  g_own_device = 0;
}

static void test_fused_gpus2(void **state) {
  (void)state;
  fused_gpus(2);
}

static void test_fused_gpus4(void **state) {
  (void)state;
  fused_gpus(4);
}

/* AUTO runs fused on cuda wherever it applies (ranks of this process share
 * the GPU) and keeps the executor variants elsewhere. */
static void test_fused_auto(void **state) {
  (void)state;
  fused_case(TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 333, 512, 136, 0, 3, 0, 4);
  fused_case(TD_TP_GEMM_RS, TD_TP_AUTO, TD_F16, 301, 264, 512, 0, 3, 0, 4);
  fused_case(TD_TP_GEMM_AR, TD_TP_AUTO, TD_BF16, 77, 136, 512, 0, 3, 0, 8);
  fused_case(TD_TP_ALL_REDUCE, TD_TP_AUTO, TD_F32, 0, 0, 0, 1009, 3, 0, 8);
  /* f32 GEMM, and N / ranks not a multiple of 8: the executor's variants */
  oh_case c = g_case(TD_TP_AG_GEMM, TD_TP_AUTO, TD_F32, 67, 48, 24, 0, 2);
  OH_EXPECT_OK(3, &c);
  assert_true(c.chosen != TD_TP_FUSED && c.chosen != TD_TP_AUTO);
  c = g_case(TD_TP_AG_GEMM, TD_TP_AUTO, TD_BF16, 333, 264, 136, 0, 2);
  OH_EXPECT_OK(8, &c);
  assert_true(c.chosen != TD_TP_FUSED && c.chosen != TD_TP_AUTO);
  /* TD_OPS_FUSED=0 turns AUTO's choice off */
  setenv("TD_OPS_FUSED", "0", 1);
  c = g_case(TD_TP_GEMM_RS, TD_TP_AUTO, TD_BF16, 301, 264, 512, 0, 2);
  OH_EXPECT_OK(2, &c);
  unsetenv("TD_OPS_FUSED");
  assert_true(c.chosen != TD_TP_FUSED && c.chosen != TD_TP_AUTO);
}

/* A forced fused variant the shape or dtype does not fit: every rank refuses
 * with the same message naming the rule (no hang, nothing allocated). */
typedef struct fr_case {
  td_tp_kind kind;
  td_dtype dt;
  int64_t m, n, k;
  td_status got[8];
  char msg[8][512];
} fr_case;

static td_status fr_rank(td_world *w, int rank, void *arg) {
  fr_case *c = arg;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.variant = TD_TP_FUSED;
  td_tp_op *op = NULL;
  td_team *t = td_world_team(w);
  c->got[rank] = c->kind == TD_TP_AG_GEMM ? td_ag_gemm_create(t, c->m, c->n, c->k, c->dt, &o, &op)
                                          : td_gemm_rs_create(t, c->m, c->n, c->k, c->dt, &o, &op);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  td_tp_destroy(op);
  return TD_OK;
}

static void expect_refused(td_tp_kind kind, td_dtype dt, int64_t m, int64_t n, int64_t k, int ranks,
                           const char *text) {
  fr_case c = {.kind = kind, .dt = dt, .m = m, .n = n, .k = k};
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  assert_int_equal(td_local_world_run(ranks, &wo, fr_rank, &c), TD_OK);
  for (int r = 0; r < ranks; r++) {
    assert_int_equal(c.got[r], TD_ERR_UNSUPPORTED);
    if (!strstr(c.msg[r], text))
      fail_msg("rank %d: message '%s' lacks '%s'", r, c.msg[r], text);
  }
}

static void test_fused_refused(void **state) {
  (void)state;
  expect_refused(TD_TP_AG_GEMM, TD_BF16, 333, 264, 136, 8, "N=264 on 8 ranks (33)");
  expect_refused(TD_TP_AG_GEMM, TD_F32, 333, 512, 136, 4, "needs bf16 or f16");
  expect_refused(TD_TP_AG_GEMM, TD_BF16, 333, 512, 100, 2, "K % 8 == 0");
  expect_refused(TD_TP_GEMM_RS, TD_BF16, 301, 264, 100, 4, "K=100, N=264 on 4 ranks");
  expect_refused(TD_TP_GEMM_RS, TD_F32, 301, 264, 512, 4, "got f32");
  setenv("TD_OPS_FUSED_TILE", "96x8", 1);
  expect_refused(TD_TP_GEMM_RS, TD_BF16, 301, 264, 512, 2, "TD_OPS_FUSED_TILE=96x8: no such bf16 kernel");
  unsetenv("TD_OPS_FUSED_TILE");
}

/* The fused all-reduce on buffers that are not 16-byte aligned (element by
 * element, still exact): src and dst start one element into their allocations. */
enum { MIS_COUNT = 100003 };
static td_status mis_rank(td_world *w, int rank, void *arg) {
  int *bad = arg;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.variant = TD_TP_FUSED;
  td_tp_op *op = NULL;
  int n = td_world_size(w);
  td_status st = td_ll_all_reduce_create(td_world_team(w), MIS_COUNT, TD_F32, &o, &op);
  if (st != TD_OK)
    return st;
  float *h = malloc(sizeof(float) * (MIS_COUNT + 1));
  float *src = g_alloc(sizeof(float) * (MIS_COUNT + 1)), *dst = g_alloc(sizeof(float) * (MIS_COUNT + 1));
  for (int i = 0; i < MIS_COUNT; i++)
    h[i] = (float)((rank + 1) * (i % 7));
  if (!h || !src || !dst || g_up(src + 1, h, sizeof(float) * MIS_COUNT))
    st = TD_ERR_CUDA;
  for (int call = 0; call < 3 && st == TD_OK; call++)
    st = td_ll_all_reduce(op, dst + 1, src + 1);
  if (st == TD_OK && g_down(h, dst + 1, sizeof(float) * MIS_COUNT))
    st = TD_ERR_CUDA;
  for (int i = 0; st == TD_OK && i < MIS_COUNT; i++)
    if (h[i] != (float)(n * (n + 1) / 2 * (i % 7)))
      bad[rank] = 1;
  free(h);
  g_free(src);
  g_free(dst);
  td_status st2 = td_tp_destroy(op);
  return st != TD_OK ? st : st2;
}

/* Runs fn on 4 ranks (each sets bad[rank] on a wrong element) and fails on
 * any rank's error or wrong result. */
static void run4_checked(td_status (*fn)(td_world *, int, void *)) {
  int bad[8] = {0};
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  td_status st = td_local_world_run(4, &wo, fn, bad);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  for (int r = 0; r < 4; r++)
    assert_int_equal(bad[r], 0);
}

static void test_fused_all_reduce_unaligned(void **state) {
  (void)state;
  run4_checked(mis_rank);
}

/* opts.cuda_stream produces the operands: on each rank's stream, a host
 * function that sleeps, then the copy of src (pinned host -> device) right
 * before the fused all-reduce; src was zeroed first, so a call that does not
 * wait for the stream reads zeros (or a mix) and the sums come out wrong. */
enum { US_COUNT = 65536 };
static void CUDART_CB us_sleep(void *arg) {
  (void)arg;
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
}
static td_status user_stream_rank(td_world *w, int rank, void *arg) {
  int *bad = arg;
  cudaStream_t us = NULL;
  if (cudaStreamCreateWithFlags(&us, cudaStreamNonBlocking) != cudaSuccess)
    return TD_ERR_CUDA;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.variant = TD_TP_FUSED;
  o.cuda_stream = us;
  td_tp_op *op = NULL;
  int n = td_world_size(w);
  td_status st = td_ll_all_reduce_create(td_world_team(w), US_COUNT, TD_F32, &o, &op);
  float *h = NULL, *src = g_alloc(sizeof(float) * US_COUNT), *dst = g_alloc(sizeof(float) * US_COUNT);
  if (st == TD_OK && (cudaMallocHost((void **)&h, sizeof(float) * US_COUNT) != cudaSuccess || !src || !dst))
    st = TD_ERR_CUDA;
  for (int call = 0; call < 3 && st == TD_OK; call++) {
    for (int i = 0; i < US_COUNT; i++)
      h[i] = (float)((rank + 1) * ((i + call) % 5));
    if (cudaMemset(src, 0, sizeof(float) * US_COUNT) != cudaSuccess ||
        cudaLaunchHostFunc(us, us_sleep, NULL) != cudaSuccess ||
        cudaMemcpyAsync(src, h, sizeof(float) * US_COUNT, cudaMemcpyHostToDevice, us) != cudaSuccess)
      st = TD_ERR_CUDA;
    if (st == TD_OK)
      st = td_ll_all_reduce(op, dst, src);
    float *back = malloc(sizeof(float) * US_COUNT);
    if (st == TD_OK && (!back || g_down(back, dst, sizeof(float) * US_COUNT)))
      st = TD_ERR_CUDA;
    for (int i = 0; st == TD_OK && i < US_COUNT; i++)
      if (back[i] != (float)(n * (n + 1) / 2 * ((i + call) % 5)))
        bad[rank] = 1;
    free(back);
    cudaStreamSynchronize(us); /* h is reused: the copy has read it */
  }
  cudaFreeHost(h);
  g_free(src);
  g_free(dst);
  td_status st2 = op ? td_tp_destroy(op) : TD_OK;
  cudaStreamDestroy(us);
  return st != TD_OK ? st : st2;
}

static void test_fused_user_stream(void **state) {
  (void)state;
  run4_checked(user_stream_rank);
}

/* A misaligned GEMM operand on one rank: every rank refuses the call at once
 * (no rank waits for it at a barrier), and the next good call works. */
static td_status misgemm_rank(td_world *w, int rank, void *arg) {
  char (*msg)[300] = arg;
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.variant = TD_TP_FUSED;
  td_tp_op *op = NULL;
  td_status st = td_ag_gemm_create(td_world_team(w), 256, 256, 128, TD_BF16, &o, &op);
  if (st != TD_OK)
    return st;
  td_tp_layout la, lb, lc;
  td_tp_operand(op, TD_TP_A, rank, &la);
  td_tp_operand(op, TD_TP_B, rank, &lb);
  td_tp_operand(op, TD_TP_C, rank, &lc);
  char *a = g_alloc(la.bytes + 16), *b = g_alloc(lb.bytes + 16), *c = g_alloc(lc.bytes + 16);
  if (!a || !b || !c)
    st = TD_ERR_CUDA;
  if (st == TD_OK) {
    td_status bad = td_ag_gemm(op, rank == 1 ? c + 2 : c, a, b);
    snprintf(msg[rank], sizeof msg[rank], "%s|%s", td_status_name(bad), td_last_error());
    st = td_ag_gemm(op, c, a, b); /* still usable */
  }
  g_free(a), g_free(b), g_free(c);
  td_status st2 = td_tp_destroy(op);
  return st != TD_OK ? st : st2;
}

static void test_fused_misaligned_refused(void **state) {
  (void)state;
  static char msg[2][300];
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  td_status st = td_local_world_run(2, &wo, misgemm_rank, msg);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  assert_non_null(strstr(msg[1], "TD_ERR_INVALID_ARG|"));
  assert_non_null(strstr(msg[1], "operand C at"));
  assert_non_null(strstr(msg[1], "is not 16-byte aligned"));
  assert_non_null(strstr(msg[0], "TD_ERR_INVALID_ARG|"));
  assert_non_null(strstr(msg[0], "rank 1 refused the call"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fused_misaligned_refused),
      cmocka_unit_test(test_ag_gemm),
      cmocka_unit_test(test_gemm_rs_ar),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_many_calls),
      cmocka_unit_test(test_correctness_case),
      cmocka_unit_test(test_fused),
      cmocka_unit_test(test_fused_all_reduce),
      cmocka_unit_test(test_fused_auto),
      cmocka_unit_test(test_fused_refused),
      cmocka_unit_test(test_fused_all_reduce_unaligned),
      cmocka_unit_test(test_fused_user_stream),
      cmocka_unit_test(test_fused_direct),
      cmocka_unit_test(test_fused_kgather),
      cmocka_unit_test(test_fused_ag_one),
      cmocka_unit_test(test_fused_ag_batched_one),
      cmocka_unit_test(test_fused_ag_share),
      cmocka_unit_test(test_fused_gpus2),
      cmocka_unit_test(test_fused_gpus4),
  };
  /* TD_GPU_TEST_FILTER: comma-separated fnmatch globs ("test_fused_gpus*,test_fused_user_stream") */
  const char *filter = getenv("TD_GPU_TEST_FILTER");
  enum { NT = sizeof tests / sizeof tests[0] };
  struct CMUnitTest pick[NT];
  size_t np = 0;
  for (size_t i = 0; i < NT; i++) {
    int take = !filter || !*filter;
    char pats[512];
    snprintf(pats, sizeof pats, "%s", filter ? filter : "");
    for (char *save = NULL, *p = strtok_r(pats, ",", &save); p && !take; p = strtok_r(NULL, ",", &save))
      take = fnmatch(p, tests[i].name, 0) == 0;
    if (take)
      pick[np++] = tests[i];
  }
  if (np == 0) {
    fprintf(stderr, "ops_gpu_test: TD_GPU_TEST_FILTER=%s matches no test\n", filter);
    return 1;
  }
  return _cmocka_run_group_tests("ops_gpu_test", pick, np, NULL, NULL);
}
