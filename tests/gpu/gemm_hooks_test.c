/* SPDX-License-Identifier: Apache-2.0
 * GEMM tile hooks on the GPU (sm_90a on Hopper, sm_80 on any GPU >= 8.0):
 *  - wait + raise with already-satisfied waits: the result is right and each
 *    raised signal holds exactly one add per tile covering its rows;
 *  - a wait that is never satisfied ends at its deadline, and the host turns
 *    the diagnostic record into TD_ERR_TIMEOUT naming signal and values;
 *  - push: rows scattered to per-peer buffers (three "peers" = three device
 *    buffers), with raise on each peer's signals; push + accumulate adds the
 *    tile into buffers that already hold values (also with 2-CTA clusters);
 *  - waits really wait, at system and at GPU scope: a GEMM whose A is the
 *    output of another GEMM, launched first while that A is still NaN; the
 *    producing GEMM starts ~20 ms later (held by a stream wait the host
 *    releases) and raises the signals, and the waiting GEMM's result must be
 *    the product of the finished A;
 *  - GATHER: A's rows read in place from separate allocations (one tensor
 *    map per source), every configuration compiled with it;
 *  - KGATHER: the sum over sources of A_s * B_s, K read in place from
 *    separate allocations, every configuration compiled with it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>

#include <cuda.h>
#include <time.h>

#include "gemm_test_util.h"

enum { M = 250, N = 136, K = 200, EPOCH = 7 };

static int cluster = 1; /* 2: the sm_90a tests run the cluster (TMA multicast) variant */

static td_gemm_config config_for(td_gemm_arch arch) {
  td_gemm_config c = {arch, 128, 128, arch == TD_GEMM_SM90 ? 64 : 32, arch == TD_GEMM_SM90 ? 6 : 4,
                      arch == TD_GEMM_SM90 ? cluster : 1, 8, 1};
  return c;
}

static int skip_arch(td_gemm_arch arch) {
  int major = gt_gpu_major();
  return arch == TD_GEMM_SM90 ? major != 9 : major < 8;
}

/* Expected adds per raise signal: one per (tile row, tile column) covering it. */
static void expected_raises(uint64_t *exp, int nsig, long long rows_per_sig, int bm, int bn,
                            long long row_begin, long long row_end) {
  int tiles_n = (N + bn - 1) / bn;
  for (long long r0 = 0; r0 < M; r0 += bm) {
    long long r1 = r0 + bm < M ? r0 + bm : M;
    long long lo = r0 > row_begin ? r0 : row_begin, hi = r1 < row_end ? r1 : row_end;
    if (lo >= hi)
      continue;
    for (long long s = (lo - row_begin) / rows_per_sig; s <= (hi - 1 - row_begin) / rows_per_sig;
         s++)
      if (s < nsig)
        exp[s] += (uint64_t)tiles_n;
  }
}

static void wait_raise(td_gemm_arch arch) {
  td_gemm_config cfg = config_for(arch);
  uint16_t *a = gt_random(TD_BF16, (size_t)M * K), *b = gt_random(TD_BF16, (size_t)N * K);
  double *ref = gt_reference(TD_BF16, a, b, M, N, K, TD_GEMM_B_NK);
  void *da = gt_device_copy(a, (size_t)M * K * 2), *db = gt_device_copy(b, (size_t)N * K * 2);
  void *dc = gt_device_copy(NULL, (size_t)M * N * 2);
  enum { WROWS = 50, RROWS = 64, NW = (M + WROWS - 1) / WROWS, NR = (M + RROWS - 1) / RROWS };
  uint64_t wsig[NW], rsig[NR], exp[NR] = {0};
  for (int i = 0; i < NW; i++)
    wsig[i] = EPOCH + (uint64_t)i; /* >= EPOCH: satisfied */
  memset(rsig, 0, sizeof rsig);
  uint64_t *dw = gt_device_copy(wsig, sizeof wsig), *dr = gt_device_copy(rsig, sizeof rsig);
  uint64_t zeros[TD_GEMM_DIAG_WORDS] = {0};
  uint64_t *diag = gt_device_copy(zeros, sizeof zeros);
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  h.wait_signals = (const td__gemm_u64 *)dw;
  h.wait_rows = WROWS;
  h.wait_value = EPOCH;
  h.timeout_ns = 5000000000ull;
  h.raise_signals[0] = (td__gemm_u64 *)dr;
  h.raise_rows = RROWS;
  h.raise_value = 1;
  h.diag = (td__gemm_u64 *)diag;
  td_gemm_problem p = {M, N, K, TD_BF16, TD_GEMM_B_NK, da, db, dc, NULL};
  td_status st = td__gemm_cuda_run(&p, &cfg, TD_GEMM_HOOK_WAIT | TD_GEMM_HOOK_RAISE, &h, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  assert_int_equal(td__gemm_cuda_check_diag(h.diag), TD_OK);
  uint16_t *out = malloc((size_t)M * N * 2);
  cudaMemcpy(out, dc, (size_t)M * N * 2, cudaMemcpyDeviceToHost);
  size_t nans;
  double rel = gt_rel_error(TD_BF16, out, ref, (size_t)M * N, &nans);
  assert_int_equal(nans, 0);
  assert_true(rel <= gt_tolerance(TD_BF16));
  cudaMemcpy(rsig, dr, sizeof rsig, cudaMemcpyDeviceToHost);
  expected_raises(exp, NR, RROWS, cfg.bm, cfg.bn, 0, M);
  for (int i = 0; i < NR; i++)
    assert_int_equal(rsig[i], exp[i]);
  free(a), free(b), free(ref), free(out);
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dw), cudaFree(dr), cudaFree(diag);
}

static void timeout(td_gemm_arch arch) {
  td_gemm_config cfg = config_for(arch);
  uint16_t *a = gt_random(TD_BF16, (size_t)M * K), *b = gt_random(TD_BF16, (size_t)N * K);
  void *da = gt_device_copy(a, (size_t)M * K * 2), *db = gt_device_copy(b, (size_t)N * K * 2);
  void *dc = gt_device_copy(NULL, (size_t)M * N * 2);
  uint64_t wsig[2] = {EPOCH, EPOCH - 1}; /* rows >= 128 never arrive */
  uint64_t rsig[8] = {0}, zeros[TD_GEMM_DIAG_WORDS] = {0};
  uint64_t *dw = gt_device_copy(wsig, sizeof wsig), *dr = gt_device_copy(rsig, sizeof rsig);
  uint64_t *diag = gt_device_copy(zeros, sizeof zeros);
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  h.wait_signals = (const td__gemm_u64 *)dw;
  h.wait_rows = 128;
  h.wait_value = EPOCH;
  h.timeout_ns = 2000000ull; /* 2 ms */
  h.raise_signals[0] = (td__gemm_u64 *)dr;
  h.raise_rows = 128;
  h.raise_value = 1;
  h.diag = (td__gemm_u64 *)diag;
  td_gemm_problem p = {M, N, K, TD_BF16, TD_GEMM_B_NK, da, db, dc, NULL};
  assert_int_equal(td__gemm_cuda_run(&p, &cfg, TD_GEMM_HOOK_WAIT | TD_GEMM_HOOK_RAISE, &h, NULL),
                   TD_OK);
  assert_int_equal(td__gemm_cuda_check_diag(h.diag), TD_ERR_TIMEOUT);
  const char *msg = td_last_error();
  assert_non_null(strstr(msg, "wait signal 1"));
  assert_non_null(strstr(msg, "expected >= 7"));
  assert_non_null(strstr(msg, "observed 6"));
  assert_non_null(strstr(msg, "row 128"));
  free(a), free(b);
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dw), cudaFree(dr), cudaFree(diag);
}

/* PUSH (store or accumulate) into three peer buffers of RPP rows, raising each peer's signals. */
static void push(td_gemm_arch arch, int accumulate) {
  enum { RPP = 100, NPEER = 3, RROWS = 32, NR = (RPP + RROWS - 1) / RROWS };
  td_gemm_config cfg = config_for(arch); /* sm_80 compiles push only with every hook: tested so */
  uint16_t *a = gt_random(TD_BF16, (size_t)M * K), *b = gt_random(TD_BF16, (size_t)N * K);
  double *ref = gt_reference(TD_BF16, a, b, M, N, K, TD_GEMM_B_NK);
  void *da = gt_device_copy(a, (size_t)M * K * 2), *db = gt_device_copy(b, (size_t)N * K * 2);
  uint16_t *init = gt_random(TD_BF16, (size_t)NPEER * RPP * N);
  void *dst[NPEER];
  uint64_t *rs[NPEER], zeros[16] = {0};
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  uint64_t wsig[8] = {EPOCH, EPOCH, EPOCH, EPOCH, EPOCH, EPOCH, EPOCH, EPOCH};
  uint64_t *dw = gt_device_copy(wsig, sizeof wsig), *diag = gt_device_copy(zeros, sizeof zeros);
  for (int p = 0; p < NPEER; p++) {
    dst[p] = gt_device_copy(accumulate ? init + (size_t)p * RPP * N : NULL, (size_t)RPP * N * 2);
    rs[p] = gt_device_copy(zeros, sizeof zeros);
    h.dst[p] = dst[p];
    h.raise_signals[p] = (td__gemm_u64 *)rs[p];
  }
  h.rows_per_peer = RPP;
  h.raise_rows = RROWS;
  h.raise_value = 1;
  h.wait_signals = (const td__gemm_u64 *)dw;
  h.wait_rows = 64;
  h.wait_value = EPOCH;
  h.timeout_ns = 5000000000ull;
  h.diag = (td__gemm_u64 *)diag;
  unsigned flags = accumulate ? TD_GEMM_HOOK_ALL : TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_RAISE;
  td_gemm_problem pr = {M, N, K, TD_BF16, TD_GEMM_B_NK, da, db, NULL, NULL};
  td_status st = td__gemm_cuda_run(&pr, &cfg, flags, &h, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  assert_int_equal(td__gemm_cuda_check_diag(h.diag), TD_OK);
  uint16_t *out = malloc((size_t)RPP * N * 2);
  double *want = malloc(sizeof(double) * RPP * N);
  for (int p = 0; p < NPEER; p++) {
    int rows = M - p * RPP < RPP ? M - p * RPP : RPP;
    cudaMemcpy(out, dst[p], (size_t)rows * N * 2, cudaMemcpyDeviceToHost);
    for (int i = 0; i < rows * N; i++)
      want[i] = ref[(size_t)p * RPP * N + i] +
                (accumulate ? td_bf16_to_f32(init[(size_t)p * RPP * N + i]) : 0.0);
    size_t nans;
    double rel = gt_rel_error(TD_BF16, out, want, (size_t)rows * N, &nans);
    assert_int_equal(nans, 0);
    assert_true(rel <= gt_tolerance(TD_BF16));
    uint64_t got[16], exp[16] = {0};
    cudaMemcpy(got, rs[p], sizeof got, cudaMemcpyDeviceToHost);
    expected_raises(exp, NR, RROWS, cfg.bm, cfg.bn, (long long)p * RPP, (long long)p * RPP + rows);
    for (int s = 0; s < NR; s++)
      assert_int_equal(got[s], exp[s]);
    cudaFree(dst[p]);
    cudaFree(rs[p]);
  }
  free(a), free(b), free(ref), free(init), free(out), free(want);
  cudaFree(da), cudaFree(db), cudaFree(dw), cudaFree(diag);
}

typedef CUresult (*wait32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

static void *driver_entry(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return NULL;
  return fn;
}

/* X = A1 * B1 (raise, GEMM 1) then Y = X * B2 (wait, GEMM 2), GEMM 2 launched
 * first on its own stream: its waits must hold until GEMM 1's raises. Both
 * GEMMs are small (4 CTAs each), so GEMM 1 finds free SMs while GEMM 2 waits. */
static void late_chain(unsigned scope) {
  enum { RROWS = 64, NS = (M + RROWS - 1) / RROWS, N2 = 72 };
  td_gemm_config cfg = config_for(TD_GEMM_SM90);
  const uint64_t tiles_n1 = (uint64_t)((N + cfg.bn - 1) / cfg.bn); /* adds per signal from GEMM 1 */
  wait32_fn wait32 = (wait32_fn)driver_entry("cuStreamWaitValue32");
  wait32_fn write32 = (wait32_fn)driver_entry("cuStreamWriteValue32");
  assert_non_null(wait32);
  assert_non_null(write32);
  uint16_t *a = gt_random(TD_BF16, (size_t)M * K), *b1 = gt_random(TD_BF16, (size_t)N * K);
  uint16_t *b2 = gt_random(TD_BF16, (size_t)N2 * N);
  void *da = gt_device_copy(a, (size_t)M * K * 2), *db1 = gt_device_copy(b1, (size_t)N * K * 2);
  void *db2 = gt_device_copy(b2, (size_t)N2 * N * 2);
  void *dx = gt_device_copy(NULL, (size_t)M * N * 2), *dy = gt_device_copy(NULL, (size_t)M * N2 * 2);
  assert_int_equal(cudaMemset(dx, 0xff, (size_t)M * N * 2), cudaSuccess); /* NaN until GEMM 1 writes it */
  assert_int_equal(cudaMemset(dy, 0xff, (size_t)M * N2 * 2), cudaSuccess);
  uint64_t zeros[16] = {0}, ready[16];
  for (int i = 0; i < 16; i++)
    ready[i] = EPOCH;
  uint64_t *sig = gt_device_copy(zeros, sizeof zeros), *sat = gt_device_copy(ready, sizeof ready);
  uint64_t *sink = gt_device_copy(zeros, sizeof zeros);
  uint64_t *diag1 = gt_device_copy(zeros, sizeof zeros), *diag2 = gt_device_copy(zeros, sizeof zeros);
  uint32_t *flag = gt_device_copy(zeros, sizeof zeros);
  td_gemm_hooks h1, h2;
  memset(&h1, 0, sizeof h1);
  h1.wait_signals = (const td__gemm_u64 *)sat; /* satisfied: GEMM 1 runs at once when started */
  h1.wait_rows = M;
  h1.wait_value = EPOCH;
  h1.timeout_ns = 5000000000ull;
  h1.diag = (td__gemm_u64 *)diag1;
  h1.raise_signals[0] = (td__gemm_u64 *)sig;
  h1.raise_rows = RROWS;
  h1.raise_value = 1;
  h1.scope = scope;
  h2 = h1;
  h2.wait_signals = (const td__gemm_u64 *)sig; /* one add per N-tile of GEMM 1 covering the rows */
  h2.wait_rows = RROWS;
  h2.wait_value = tiles_n1;
  h2.diag = (td__gemm_u64 *)diag2;
  h2.raise_signals[0] = (td__gemm_u64 *)sink;
  cudaStream_t s1, s2, s3;
  assert_int_equal(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  assert_int_equal(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
  assert_int_equal(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking), cudaSuccess);
  const unsigned wr = TD_GEMM_HOOK_WAIT | TD_GEMM_HOOK_RAISE;
  td_gemm_problem p2 = {M, N2, N, TD_BF16, TD_GEMM_B_NK, dx, db2, dy, NULL};
  td_gemm_problem p1 = {M, N, K, TD_BF16, TD_GEMM_B_NK, da, db1, dx, NULL};
  assert_int_equal(td__gemm_cuda_run(&p2, &cfg, wr, &h2, s2), TD_OK); /* waits for X */
  assert_int_equal(wait32((CUstream)s1, (CUdeviceptr)(uintptr_t)flag, 1, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
  assert_int_equal(td__gemm_cuda_run(&p1, &cfg, wr, &h1, s1), TD_OK); /* held until the flag */
  struct timespec pause = {0, 20000000};
  nanosleep(&pause, NULL);
  assert_int_equal(cudaStreamQuery(s2), cudaErrorNotReady); /* GEMM 2 is still waiting */
  assert_int_equal(write32((CUstream)s3, (CUdeviceptr)(uintptr_t)flag, 1, 0), CUDA_SUCCESS);
  assert_int_equal(cudaStreamSynchronize(s3), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
  assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
  assert_int_equal(td__gemm_cuda_check_diag(h1.diag), TD_OK);
  assert_int_equal(td__gemm_cuda_check_diag(h2.diag), TD_OK);
  uint16_t *x = malloc((size_t)M * N * 2), *y = malloc((size_t)M * N2 * 2);
  cudaMemcpy(x, dx, (size_t)M * N * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(y, dy, (size_t)M * N2 * 2, cudaMemcpyDeviceToHost);
  double *ref1 = gt_reference(TD_BF16, a, b1, M, N, K, TD_GEMM_B_NK);
  double *ref2 = gt_reference(TD_BF16, x, b2, M, N2, N, TD_GEMM_B_NK); /* from the X GEMM 1 wrote */
  size_t nans1, nans2;
  assert_true(gt_rel_error(TD_BF16, x, ref1, (size_t)M * N, &nans1) <= gt_tolerance(TD_BF16));
  assert_int_equal(nans1, 0);
  double rel2 = gt_rel_error(TD_BF16, y, ref2, (size_t)M * N2, &nans2);
  if (nans2 || rel2 > gt_tolerance(TD_BF16))
    fail_msg("scope 0x%x: GEMM 2 read X before it was complete: %zu NaNs, rel err %.3e", scope, nans2, rel2);
  uint64_t got[16];
  cudaMemcpy(got, sig, sizeof got, cudaMemcpyDeviceToHost);
  for (int i = 0; i < NS; i++)
    assert_int_equal(got[i], tiles_n1);
  cudaStreamDestroy(s1), cudaStreamDestroy(s2), cudaStreamDestroy(s3);
  free(a), free(b1), free(b2), free(x), free(y), free(ref1), free(ref2);
  cudaFree(da), cudaFree(db1), cudaFree(db2), cudaFree(dx), cudaFree(dy), cudaFree(sig), cudaFree(sat);
  cudaFree(sink), cudaFree(diag1), cudaFree(diag2), cudaFree(flag);
}

static void test_late_raise_system_scope(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  late_chain(0);
}

static void test_late_raise_gpu_scope(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  late_chain(TD_GEMM_SCOPE_ALL);
}

static void test_wait_raise(void **state) {
  td_gemm_arch arch = *(td_gemm_arch *)*state;
  if (skip_arch(arch))
    skip();
  wait_raise(arch);
}
static void test_timeout(void **state) {
  td_gemm_arch arch = *(td_gemm_arch *)*state;
  if (skip_arch(arch))
    skip();
  timeout(arch);
}
static void test_push(void **state) {
  td_gemm_arch arch = *(td_gemm_arch *)*state;
  if (skip_arch(arch))
    skip();
  push(arch, 0);
}
static void test_push_accumulate(void **state) {
  td_gemm_arch arch = *(td_gemm_arch *)*state;
  if (skip_arch(arch))
    skip();
  push(arch, 1);
}

static void test_push_accumulate_cluster(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  cluster = 2;
  push(TD_GEMM_SM90, 1);
  cluster = 1;
}

/* GATHER: A's rows read in place from separate allocations (the zero-copy
 * AllGather + GEMM of ranks sharing a GPU), every GATHER configuration; the
 * last source shorter than the others, N and K not multiples of the tile;
 * output poisoned (NaN) first and every element checked; a second launch
 * reuses the map table with the sources in another order. */
static void gather_case(const td_gemm_config *cfg, long long src_rows, int m, int n, int k) {
  const int sources = (int)((m + src_rows - 1) / src_rows);
  uint16_t *a = gt_random(TD_BF16, (size_t)m * k), *b = gt_random(TD_BF16, (size_t)k * n);
  double *ref = gt_reference(TD_BF16, a, b, m, n, k, TD_GEMM_B_KN);
  const void *src[8];
  void *dsrc[8];
  for (int s = 0; s < sources; s++) {
    long long r0 = s * src_rows, rows = m - r0 < src_rows ? m - r0 : src_rows;
    dsrc[s] = gt_device_copy(a + (size_t)r0 * k, (size_t)rows * k * 2);
    src[s] = dsrc[s];
  }
  void *db = gt_device_copy(b, (size_t)k * n * 2), *maps = gt_device_copy(NULL, 8 * TD_GEMM_MAP_BYTES);
  uint16_t *out = malloc((size_t)m * n * 2);
  for (int round = 0; round < 2; round++) {
    void *dc = gt_device_copy(NULL, (size_t)m * n * 2);
    td_gemm_problem p = {m, n, k, TD_BF16, TD_GEMM_B_KN, NULL, db, dc, NULL};
    td_status st = td__gemm_cuda_run_gather(&p, cfg, src, sources, src_rows, maps, NULL);
    if (st != TD_OK)
      fprintf(stderr, "%s\n", td_last_error());
    assert_int_equal(st, TD_OK);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(out, dc, (size_t)m * n * 2, cudaMemcpyDeviceToHost);
    cudaFree(dc);
    size_t nans;
    double rel = gt_rel_error(TD_BF16, out, ref, (size_t)m * n, &nans);
    if (nans || rel > gt_tolerance(TD_BF16))
      fprintf(stderr, "gather %dx%d s%d: M=%d N=%d K=%d src_rows=%lld round %d: %zu NaN, rel %.3g\n", cfg->bm,
              cfg->bn, cfg->stages, m, n, k, src_rows, round, nans, rel);
    assert_int_equal(nans, 0);
    assert_true(rel <= gt_tolerance(TD_BF16));
    if (sources >= 3 && round == 0) { /* the same rows from other allocations: swap the first two sources' data */
      long long rows = src_rows;
      cudaMemcpy(dsrc[0], a + (size_t)rows * k, (size_t)rows * k * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dsrc[1], a, (size_t)rows * k * 2, cudaMemcpyHostToDevice);
      const void *t = src[0];
      src[0] = src[1], src[1] = t;
    }
  }
  for (int s = 0; s < sources; s++)
    cudaFree(dsrc[s]);
  free(a), free(b), free(ref), free(out);
  cudaFree(db), cudaFree(maps);
}

static void test_gather(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER, cfgs, 16);
  assert_true(n >= 1);
  for (int i = 0; i < n && i < 16; i++) {
    gather_case(&cfgs[i], 256, 3 * 256 + 77, 520, 200); /* 4 sources, the last of 77 rows */
    gather_case(&cfgs[i], 128 * 2, 8 * 256, 1024, 136); /* 8 equal sources */
    gather_case(&cfgs[i], 128, 100, 264, 64);          /* one source, fewer rows than a tile */
  }
}

/* KGATHER: C = sum over sources of A_s * B_s, every A_s [M, k_src] and B_s
 * [k_src, N] a separate allocation read in place (the GEMM + ReduceScatter
 * of ranks sharing a GPU without partials); checked against the f64 product
 * of the concatenated A [M, K] and B [K, N], outputs poisoned first. */
static void kgather_case(const td_gemm_config *cfg, int sources, long long k_src, int m, int n) {
  const int k = (int)(sources * k_src);
  uint16_t *a = gt_random(TD_BF16, (size_t)m * k), *b = gt_random(TD_BF16, (size_t)k * n);
  double *ref = gt_reference(TD_BF16, a, b, m, n, k, TD_GEMM_B_KN);
  const void *as[8], *bs[8];
  void *da[8], *dbs[8];
  uint16_t *part = malloc((size_t)m * (size_t)k_src * 2);
  for (int s = 0; s < sources; s++) { /* source s: columns [s*k_src, (s+1)*k_src) of A, the same rows of B */
    for (int i = 0; i < m; i++)
      memcpy(part + (size_t)i * k_src, a + (size_t)i * k + (size_t)s * k_src, (size_t)k_src * 2);
    da[s] = gt_device_copy(part, (size_t)m * k_src * 2);
    dbs[s] = gt_device_copy(b + (size_t)s * k_src * n, (size_t)k_src * n * 2);
    as[s] = da[s], bs[s] = dbs[s];
  }
  void *maps = gt_device_copy(NULL, 16 * TD_GEMM_MAP_BYTES), *dc = gt_device_copy(NULL, (size_t)m * n * 2);
  td_gemm_problem p = {m, n, k, TD_BF16, TD_GEMM_B_KN, NULL, NULL, dc, NULL};
  td_status st = td__gemm_cuda_run_kgather(&p, cfg, as, bs, sources, k_src, maps, 0, NULL, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
  uint16_t *out = malloc((size_t)m * n * 2);
  cudaMemcpy(out, dc, (size_t)m * n * 2, cudaMemcpyDeviceToHost);
  size_t nans;
  double rel = gt_rel_error(TD_BF16, out, ref, (size_t)m * n, &nans);
  if (nans || rel > gt_tolerance(TD_BF16))
    fprintf(stderr, "kgather %dx%d: M=%d N=%d %d sources of K %lld: %zu NaN, rel %.3g\n", cfg->bm, cfg->bn, m, n,
            sources, k_src, nans, rel);
  assert_int_equal(nans, 0);
  assert_true(rel <= gt_tolerance(TD_BF16));
  for (int s = 0; s < sources; s++)
    cudaFree(da[s]), cudaFree(dbs[s]);
  free(a), free(b), free(ref), free(out), free(part);
  cudaFree(maps), cudaFree(dc);
}

static void test_kgather(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER, cfgs, 16);
  assert_true(n >= 1);
  for (int i = 0; i < n && i < 16; i++) {
    kgather_case(&cfgs[i], 4, 128, 301, 520); /* M, N not multiples of the tile */
    kgather_case(&cfgs[i], 8, 64, 77, 264);   /* one k-block per source */
    kgather_case(&cfgs[i], 1, 192, 256, 512);
  }
}

static td_gemm_arch sm90 = TD_GEMM_SM90, sm80 = TD_GEMM_SM80;

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate(test_wait_raise, &sm90),
      cmocka_unit_test_prestate(test_timeout, &sm90),
      cmocka_unit_test_prestate(test_push, &sm90),
      cmocka_unit_test_prestate(test_push_accumulate, &sm90),
      cmocka_unit_test(test_push_accumulate_cluster),
      cmocka_unit_test(test_late_raise_system_scope),
      cmocka_unit_test(test_late_raise_gpu_scope),
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_kgather),
      cmocka_unit_test_prestate(test_wait_raise, &sm80),
      cmocka_unit_test_prestate(test_timeout, &sm80),
      cmocka_unit_test_prestate(test_push_accumulate, &sm80),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
