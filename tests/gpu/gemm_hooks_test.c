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
 *    separate allocations, every configuration compiled with it; routed by
 *    PUSH (each row to its owner's buffer, td_chunk_range's split of M over
 *    2..8 owners, some owning nothing) and by BCAST (every row to 1, 3 or 8
 *    destinations), each buffer exact-sized between poisoned guards and
 *    checked element by element. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>

#include <cuda.h>
#include <limits.h>
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
/* The split tail (gemm.h; GATHER launches as KGATHER's): with split set, a
 * workspace of exactly the plan for `sms` blocks (0: one per SM of the GPU),
 * which must split, and two launches per round on it, each checked (so the
 * counters the first leaves at zero serve the second). */
static void gather_case_ex(const td_gemm_config *cfg, long long src_rows, int m, int n, int k, int sms, int split) {
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
  td_gemm_hooks tail;
  memset(&tail, 0, sizeof tail);
  int t = 0, sk = 1;
  if (split) {
    int slots = sms;
    if (slots == 0)
      assert_int_equal(cudaDeviceGetAttribute(&slots, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    const long long units = (long long)((m + cfg->bm - 1) / cfg->bm) * ((n + cfg->bn - 1) / cfg->bn);
    td__gemm_split_plan(units, slots, (k + 63) / 64, LLONG_MAX, (long long)cfg->bm * cfg->bn * 4, &t, &sk);
    assert_true(t > 0 && sk >= 2);
    tail.split_ws_bytes = TD_GEMM_SPLIT_CNT_BYTES + (long long)t * sk * cfg->bm * cfg->bn * 4;
    assert_int_equal(cudaMalloc(&tail.split_ws, (size_t)tail.split_ws_bytes), cudaSuccess);
    assert_int_equal(cudaMemset(tail.split_ws, 0, TD_GEMM_SPLIT_CNT_BYTES), cudaSuccess);
  }
  for (int round = 0; round < 2; round++)
    for (int rep = 0; rep < (split ? 2 : 1); rep++) {
    void *dc = gt_device_copy(NULL, (size_t)m * n * 2);
    td_gemm_problem p = {m, n, k, TD_BF16, TD_GEMM_B_KN, NULL, db, dc, NULL};
    td_status st = td__gemm_cuda_run_gather(&p, cfg, src, sources, src_rows, maps, split ? &tail : NULL, sms, NULL);
    if (st != TD_OK)
      fprintf(stderr, "%s\n", td_last_error());
    assert_int_equal(st, TD_OK);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(out, dc, (size_t)m * n * 2, cudaMemcpyDeviceToHost);
    cudaFree(dc);
    size_t nans;
    double rel = gt_rel_error(TD_BF16, out, ref, (size_t)m * n, &nans);
    if (nans || rel > gt_tolerance(TD_BF16))
      fprintf(stderr, "gather %dx%d s%d: M=%d N=%d K=%d src_rows=%lld sms=%d (%d tiles in %d slices) round %d "
              "launch %d: %zu NaN, rel %.3g\n", cfg->bm, cfg->bn, cfg->stages, m, n, k, src_rows, sms, t, sk, round,
              rep, nans, rel);
    assert_int_equal(nans, 0);
    assert_true(rel <= gt_tolerance(TD_BF16));
    if (rep == 0 && split) /* the second launch reuses the sources as they are */
      continue;
    if (sources >= 3 && round == 0) { /* the same rows from other allocations: swap the first two sources' data */
      long long rows = src_rows;
      cudaMemcpy(dsrc[0], a + (size_t)rows * k, (size_t)rows * k * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dsrc[1], a, (size_t)rows * k * 2, cudaMemcpyHostToDevice);
      const void *sw = src[0];
      src[0] = src[1], src[1] = sw;
    }
  }
  for (int s = 0; s < sources; s++)
    cudaFree(dsrc[s]);
  free(a), free(b), free(ref), free(out);
  cudaFree(db), cudaFree(maps), cudaFree(tail.split_ws);
}

static void gather_case(const td_gemm_config *cfg, long long src_rows, int m, int n, int k) {
  gather_case_ex(cfg, src_rows, m, n, k, 0, 0);
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

/* GATHER's split tail: each configuration with its grid capped one block
 * short of its tiles (a last wave of one tile, split in 4: K of 32 k-blocks)
 * and with the whole GPU (every tile split: fewer tiles than SMs), M of 4
 * sources, N and K not multiples of the tile; two launches on one workspace
 * per round, the second round with two sources' data swapped. */
static void test_gather_split(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER, cfgs, 16);
  assert_true(n >= 1);
  for (int i = 0; i < n && i < 16; i++) {
    const int m = 4 * 128, nn = 520, k = 2048 - 8;
    const int units = (m / cfgs[i].bm) * ((nn + cfgs[i].bn - 1) / cfgs[i].bn);
    gather_case_ex(&cfgs[i], 128, m, nn, k, units - 1, 1);
    gather_case_ex(&cfgs[i], 128, m, nn, k, 0, 1);
  }
}

/* The inputs of a KGATHER launch: A [M, K] and B [K, N] at random, cut into
 * `sources` separate allocations (source s: columns [s*k_src, (s+1)*k_src) of
 * A as its own [M, k_src] matrix, the same rows of B as [k_src, N]), and the
 * f64 product of the whole A and B. Built once per shape, run under every
 * configuration and route. */
typedef struct kg_inputs {
  int m, n, k, sources;
  long long k_src;
  double *ref; /* [M, N] */
  void *da[8], *dbs[8];
  const void *as[8], *bs[8];
  void *maps; /* the map table: 2 * sources maps and 8 of BCAST (reused launch after launch on one stream) */
} kg_inputs;

/* kg_make without the f64 product (ref NULL), for shapes whose reference is
 * the unsplit launch (test_kgather_split). */
static kg_inputs kg_make_ex(int sources, long long k_src, int m, int n, int with_ref);
static kg_inputs kg_make(int sources, long long k_src, int m, int n) { return kg_make_ex(sources, k_src, m, n, 1); }

static kg_inputs kg_make_ex(int sources, long long k_src, int m, int n, int with_ref) {
  kg_inputs in;
  memset(&in, 0, sizeof in);
  assert_true(sources >= 1 && sources <= 8);
  in.m = m, in.n = n, in.sources = sources, in.k_src = k_src, in.k = (int)(sources * k_src);
  const int k = in.k;
  uint16_t *a = gt_random(TD_BF16, (size_t)m * k), *b = gt_random(TD_BF16, (size_t)k * n);
  in.ref = with_ref ? gt_reference(TD_BF16, a, b, m, n, k, TD_GEMM_B_KN) : NULL;
  uint16_t *part = malloc((size_t)m * (size_t)k_src * 2 + 2);
  for (int s = 0; s < sources; s++) {
    for (int i = 0; i < m; i++)
      memcpy(part + (size_t)i * k_src, a + (size_t)i * k + (size_t)s * k_src, (size_t)k_src * 2);
    in.da[s] = gt_device_copy(part, (size_t)m * k_src * 2);
    in.dbs[s] = gt_device_copy(b + (size_t)s * k_src * n, (size_t)k_src * n * 2);
    assert_non_null(in.da[s]);
    assert_non_null(in.dbs[s]);
    in.as[s] = in.da[s], in.bs[s] = in.dbs[s];
  }
  in.maps = gt_device_copy(NULL, (2 * 8 + 8) * TD_GEMM_MAP_BYTES); /* A, B of up to 8 sources, C of 8 destinations */
  free(a), free(b), free(part);
  return in;
}

static void kg_free(kg_inputs *in) {
  for (int s = 0; s < in->sources; s++)
    cudaFree(in->da[s]), cudaFree(in->dbs[s]);
  cudaFree(in->maps);
  free(in->ref);
}

/* Every element of a [rows, n] result against its f64 reference: not NaN (the
 * poison, so every element was written) and within the bf16 rounding of the
 * value (2^-7 relative, twice the half-ulp) plus the f32 accumulation's error
 * (1e-3 * sqrt(K) absolute); a row stored at the wrong place is off by the
 * size of the values (~sqrt(K) / 3). The norm-wise error must pass as well. */
static void kg_check_rows(const char *what, const uint16_t *out, const double *ref, long long rows, int n, int k) {
  const double abs_tol = 1e-3 * sqrt((double)k);
  size_t bad = 0;
  for (long long i = 0; i < rows * n; i++) {
    double v = td_bf16_to_f32(out[i]), want = ref[i];
    if (isnan(v) || fabs(v - want) > fabs(want) / 128.0 + abs_tol) {
      if (bad < 4)
        fprintf(stderr, "%s: element (%lld, %lld) is %g, want %g\n", what, i / n, i % n, v, want);
      bad++;
    }
  }
  if (bad)
    fprintf(stderr, "%s: %zu of %lld elements wrong\n", what, bad, rows * n);
  assert_int_equal(bad, 0);
  size_t nans;
  if (rows > 0)
    assert_true(gt_rel_error(TD_BF16, out, ref, (size_t)(rows * n), &nans) <= gt_tolerance(TD_BF16));
}

/* A destination of `rows` x n, exactly, between two guards of KG_GUARD rows,
 * all in one allocation poisoned with 0xFF bytes (NaN): a store one row before
 * or past the buffer lands in a guard, which must stay poisoned. */
enum { KG_GUARD = 8 };
typedef struct kg_dest {
  uint16_t *base; /* the allocation */
  long long rows;
} kg_dest;

static kg_dest kg_dest_make(long long rows, int n) {
  kg_dest d = {gt_device_copy(NULL, (size_t)(rows + 2 * KG_GUARD) * n * 2), rows};
  assert_non_null(d.base);
  return d;
}
static void *kg_dest_rows(const kg_dest *d, int n) { return d->base + (size_t)KG_GUARD * n; }

/* Checks d's rows against ref (its first row's reference) and both guards, then frees d. */
static void kg_dest_check(const char *what, kg_dest *d, const double *ref, int n, int k) {
  const size_t count = (size_t)(d->rows + 2 * KG_GUARD) * n;
  uint16_t *host = malloc(count * 2);
  assert_int_equal(cudaMemcpy(host, d->base, count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t touched = 0;
  for (size_t i = 0; i < (size_t)KG_GUARD * n; i++) {
    touched += host[i] != 0xffffu;             /* the guard before */
    touched += host[count - 1 - i] != 0xffffu; /* the guard after */
  }
  if (touched)
    fprintf(stderr, "%s: %zu guard elements around its %lld rows were written\n", what, touched, d->rows);
  assert_int_equal(touched, 0);
  if (d->rows > 0)
    kg_check_rows(what, host + (size_t)KG_GUARD * n, ref, d->rows, n, k);
  free(host);
  cudaFree(d->base);
  d->base = NULL;
}

/* An untouched poisoned buffer (C under a route, a destination past the ones given) stays all NaN. */
static void kg_expect_poisoned(const char *what, const void *dev, size_t elems) {
  uint16_t *host = malloc(elems * 2);
  assert_int_equal(cudaMemcpy(host, dev, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t touched = 0;
  for (size_t i = 0; i < elems; i++)
    touched += host[i] != 0xffffu;
  if (touched)
    fprintf(stderr, "%s: %zu elements written, none expected\n", what, touched);
  assert_int_equal(touched, 0);
  free(host);
}

/* The split-tail workspace the routed launches get (NULL: none; set by test_kgather_split), and
 * BCAST's deferred second half (bcast_defer) for kgather_bcast_case. */
static void *kg_ws;
static long long kg_ws_bytes;
static int kg_bcast_defer;
static int kg_bcast_pace; /* bcast_pace_kb of the routed BCAST launches (0: the default gap) */
static int kg_split_waves; /* split_waves of the routed launches: 0 (the last wave) or 2 (two waves) */

/* The routing description handed to td__gemm_cuda_run_kgather, its other
 * fields filled with junk: only dst, rows_per_peer, push_long_peers,
 * bcast_peers, bcast_hint, bcast_defer, bcast_pace_kb, the split workspace
 * and map_cache are read, so a launch that copied the rest (an unknown scope,
 * signals, another map table or k_src, a split plan of the caller's) would be
 * refused or compute garbage. map_cache is read (a pointer the launcher
 * dereferences), so it is the caller's to set like dst: NULL here, as every
 * routed caller that keeps no shadow must (test_map_cache gives KGATHER a real one). */
static td_gemm_hooks kg_route_junk(void) {
  td_gemm_hooks h;
  memset(&h, 0x5a, sizeof h);
  h.map_cache = NULL;
  for (int i = 0; i < TD_GEMM_MAX_PEERS; i++)
    h.dst[i] = NULL;
  h.scope = 0xffffffffu;
  h.k_src = 7;
  h.split_ws = kg_ws, h.split_ws_bytes = kg_ws_bytes; /* split_tail, split_k stay junk: the launcher plans */
  h.split_waves = kg_split_waves;
  return h;
}

/* KGATHER: C = sum over sources of A_s * B_s, every A_s [M, k_src] and B_s
 * [k_src, N] a separate allocation read in place (the GEMM + ReduceScatter
 * of ranks sharing a GPU without partials); checked against the f64 product
 * of the concatenated A [M, K] and B [K, N], outputs poisoned first. */
static void kgather_case(const td_gemm_config *cfg, int sources, long long k_src, int m, int n) {
  kg_inputs in = kg_make(sources, k_src, m, n);
  const int k = in.k;
  void *dc = gt_device_copy(NULL, (size_t)m * n * 2);
  td_gemm_problem p = {m, n, k, TD_BF16, TD_GEMM_B_KN, NULL, NULL, dc, NULL};
  td_status st = td__gemm_cuda_run_kgather(&p, cfg, in.as, in.bs, sources, k_src, in.maps, 0, NULL, NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
  uint16_t *out = malloc((size_t)m * n * 2);
  cudaMemcpy(out, dc, (size_t)m * n * 2, cudaMemcpyDeviceToHost);
  size_t nans;
  double rel = gt_rel_error(TD_BF16, out, in.ref, (size_t)m * n, &nans);
  if (nans || rel > gt_tolerance(TD_BF16))
    fprintf(stderr, "kgather %dx%d: M=%d N=%d %d sources of K %lld: %zu NaN, rel %.3g\n", cfg->bm, cfg->bn, m, n,
            sources, k_src, nans, rel);
  assert_int_equal(nans, 0);
  assert_true(rel <= gt_tolerance(TD_BF16));
  free(out);
  cudaFree(dc);
  kg_free(&in);
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

/* A routed KGATHER launch of `in` (C poisoned and passed when with_c, so
 * that a routed launch can be seen to leave it alone), checked and finished;
 * returns that C (NULL without it). */
static void *kg_run_routed(const td_gemm_config *cfg, const kg_inputs *in, unsigned route, const td_gemm_hooks *out,
                           int with_c) {
  void *dc = with_c ? gt_device_copy(NULL, (size_t)in->m * in->n * 2) : NULL;
  td_gemm_problem p = {in->m, in->n, in->k, TD_BF16, TD_GEMM_B_KN, NULL, NULL, dc, NULL};
  td_status st = td__gemm_cuda_run_kgather(&p, cfg, in->as, in->bs, in->sources, in->k_src, in->maps, route, out,
                                           NULL);
  if (st != TD_OK)
    fprintf(stderr, "%s\n", td_last_error());
  assert_int_equal(st, TD_OK);
  assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
  return dc;
}

/* The buffers a routed launch must not write: the spare destination past
 * the used ones (when there is one) and C (when passed); both freed. */
static void kg_untouched(const char *spare_what, kg_dest *spare, size_t spare_elems, const char *c_what, void *dc,
                         size_t c_elems) {
  if (spare->base) {
    kg_expect_poisoned(spare_what, spare->base, spare_elems);
    cudaFree(spare->base);
  }
  if (dc) {
    kg_expect_poisoned(c_what, dc, c_elems);
    cudaFree(dc);
  }
}

/* KGATHER | PUSH (the fused gemm_rs of ranks sharing a GPU, every rank's rows
 * in one launch): row r lands in its owner's buffer under td_chunk_range's
 * split of M over `peers` (rows_per_peer = ceil(M / peers), push_long_peers =
 * M % peers; with all_long and M divisible, push_long_peers = peers, the same
 * split said the other way). Each owner's buffer holds exactly its rows,
 * guarded; a spare buffer at dst[peers] (when peers < 8) and C (when given)
 * must stay poisoned. */
static void kgather_push_case(const td_gemm_config *cfg, const kg_inputs *in, int peers, int all_long, int with_c) {
  const int m = in->m, n = in->n;
  td_gemm_hooks out = kg_route_junk();
  out.rows_per_peer = m / peers + (m % peers != 0);
  out.push_long_peers = m % peers;
  if (all_long && m % peers == 0)
    out.push_long_peers = peers;
  kg_dest d[TD_GEMM_MAX_PEERS], spare = {NULL, 0};
  size_t off[TD_GEMM_MAX_PEERS];
  for (int q = 0; q < peers; q++) {
    size_t len = 0;
    td_chunk_range((size_t)m, peers, q, &off[q], &len);
    d[q] = kg_dest_make((long long)len, n); /* an owner of 0 rows gets a buffer of guards only */
    out.dst[q] = kg_dest_rows(&d[q], n);
  }
  if (peers < TD_GEMM_MAX_PEERS) {
    spare = kg_dest_make(1, n);
    out.dst[peers] = kg_dest_rows(&spare, n);
  }
  void *dc = kg_run_routed(cfg, in, TD_GEMM_HOOK_PUSH, &out, with_c);
  char what[256];
  for (int q = 0; q < peers; q++) {
    snprintf(what, sizeof what, "kgather|push %dx%d s%d: M=%d N=%d %d sources of K %lld, rows_per_peer=%lld "
             "push_long_peers=%lld: owner %d of %d (rows %zu..+%lld)", cfg->bm, cfg->bn, cfg->stages, m, n,
             in->sources, in->k_src, out.rows_per_peer, out.push_long_peers, q, peers, off[q], d[q].rows);
    kg_dest_check(what, &d[q], in->ref + off[q] * (size_t)n, n, in->k);
  }
  kg_untouched("kgather|push: dst[peers], past the owners", &spare, (size_t)(1 + 2 * KG_GUARD) * n,
               "kgather|push: C, which a routed launch ignores", dc, (size_t)m * n);
}

static void test_kgather_push(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int nc = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH, cfgs, 16);
  assert_true(nc >= 2); /* 128x256 s4 and 128x128 s6 */
  /* 1003 rows over 8 (3 owners of 126, 5 of 125) and over 3 (335, 334, 334):
   * owner boundaries inside tiles, the long/short boundary inside one too */
  kg_inputs a = kg_make(4, 128, 1003, 520);
  for (int i = 0; i < nc && i < 16; i++) {
    kgather_push_case(&cfgs[i], &a, 8, 0, 1);
    kgather_push_case(&cfgs[i], &a, 3, 0, 0);
  }
  kg_free(&a);
  /* 301 rows over 3 (101, 100, 100) and over 2 (151, 150): two sources of one k-block */
  kg_inputs b = kg_make(2, 64, 301, 264);
  for (int i = 0; i < nc && i < 16; i++) {
    kgather_push_case(&cfgs[i], &b, 3, 0, 1);
    kgather_push_case(&cfgs[i], &b, 2, 0, 0);
  }
  kg_free(&b);
  /* 5 rows over 8: owners 0..4 one row each, 5..7 none (rows_per_peer 1,
   * push_long_peers 5); 13 over 8: five owners of 2 rows, three of 1 */
  kg_inputs c = kg_make(8, 64, 5, 264), d = kg_make(3, 128, 13, 520);
  for (int i = 0; i < nc && i < 16; i++) {
    kgather_push_case(&cfgs[i], &c, 8, 0, 0);
    kgather_push_case(&cfgs[i], &d, 8, 0, 1);
  }
  kg_free(&c);
  kg_free(&d);
  /* an even split, 1000 rows over 8 and 300 over 3, as push_long_peers = 0 and as = peers */
  kg_inputs e = kg_make(6, 64, 1000, 264), f = kg_make(5, 64, 300, 520);
  for (int i = 0; i < nc && i < 16; i++) {
    kgather_push_case(&cfgs[i], &e, 8, 0, 1);
    kgather_push_case(&cfgs[i], &e, 8, 1, 0);
    kgather_push_case(&cfgs[i], &f, 3, 0, 0);
    kgather_push_case(&cfgs[i], &f, 3, 1, 1);
  }
  kg_free(&e);
  kg_free(&f);
}

/* KGATHER | BCAST (the fused gemm_ar of ranks sharing a GPU): every row of the
 * sum stored into each of `peers` destinations of M x N, each guarded and
 * checked in full; a spare buffer at dst[peers] (when peers < 8) and C must
 * stay poisoned. */
static void kgather_bcast_case(const td_gemm_config *cfg, const kg_inputs *in, int peers, int with_c, int hint) {
  const int m = in->m, n = in->n;
  td_gemm_hooks out = kg_route_junk();
  out.bcast_peers = peers;
  out.bcast_hint = hint; /* 1: the stores carry an L2 evict-first policy (the same bytes land) */
  out.bcast_defer = kg_bcast_defer; /* 1: the second half of a half-staged tile stored in the next tile's main loop */
  out.bcast_pace_kb = kg_bcast_pace; /* paced: k-blocks between two copies (0: the default) */
  out.rows_per_peer = 0; /* PUSH's fields, not BCAST's */
  out.push_long_peers = -1;
  kg_dest d[TD_GEMM_MAX_PEERS], spare = {NULL, 0};
  for (int q = 0; q < peers; q++) {
    d[q] = kg_dest_make(m, n);
    out.dst[q] = kg_dest_rows(&d[q], n);
  }
  if (peers < TD_GEMM_MAX_PEERS) {
    spare = kg_dest_make(m, n);
    out.dst[peers] = kg_dest_rows(&spare, n);
  }
  void *dc = kg_run_routed(cfg, in, TD_GEMM_HOOK_BCAST, &out, with_c);
  char what[256];
  for (int q = 0; q < peers; q++) {
    snprintf(what, sizeof what, "kgather|bcast %dx%d s%d: M=%d N=%d %d sources of K %lld: destination %d of %d",
             cfg->bm, cfg->bn, cfg->stages, m, n, in->sources, in->k_src, q, peers);
    kg_dest_check(what, &d[q], in->ref, n, in->k);
  }
  kg_untouched("kgather|bcast: dst[bcast_peers], past the destinations", &spare, (size_t)(m + 2 * KG_GUARD) * n,
               "kgather|bcast: C, which a routed launch ignores", dc, (size_t)m * n);
}

static void test_kgather_bcast(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int nc = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST, cfgs, 16);
  assert_true(nc >= 2); /* 128x256 s4 (half staged) and 128x128 s6 */
  kg_inputs a = kg_make(3, 128, 301, 520), b = kg_make(8, 64, 257, 264), c = kg_make(2, 64, 1003, 264);
  for (int i = 0; i < nc && i < 16; i++) {
    kgather_bcast_case(&cfgs[i], &a, 1, 1, 0);
    kgather_bcast_case(&cfgs[i], &a, 3, 0, 0);
    kgather_bcast_case(&cfgs[i], &a, 8, 1, 0);
    kgather_bcast_case(&cfgs[i], &a, 8, 0, 1);
    kgather_bcast_case(&cfgs[i], &b, 8, 0, 0); /* eight sources of one k-block, 3 tile rows (the last of 1 row) */
    kgather_bcast_case(&cfgs[i], &c, 3, 1, 1);
  }
  kg_free(&a);
  kg_free(&b);
  kg_free(&c);
}

/* A route-0 KGATHER launch of `in` (the split workspace kg_ws when set),
 * its C copied back to the host (caller frees). */
static uint16_t *kg_plain_result(const td_gemm_config *cfg, const kg_inputs *in) {
  td_gemm_hooks out = kg_route_junk();
  void *dc = kg_run_routed(cfg, in, 0, &out, 1);
  uint16_t *host = malloc((size_t)in->m * in->n * 2);
  assert_int_equal(cudaMemcpy(host, dc, (size_t)in->m * in->n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dc);
  return host;
}

/* A zeroed split-tail workspace of `bytes` for the routed launches (kg_ws),
 * and its release. */
static void kg_ws_open(long long bytes) {
  kg_ws_bytes = bytes;
  assert_int_equal(cudaMalloc(&kg_ws, (size_t)bytes), cudaSuccess);
  assert_int_equal(cudaMemset(kg_ws, 0, TD_GEMM_SPLIT_CNT_BYTES), cudaSuccess);
}
static void kg_ws_close(void) {
  cudaFree(kg_ws);
  kg_ws = NULL, kg_ws_bytes = 0;
}

/* How many of `copies` x `count` results `got` (the copies one after another) differ from `want` [count]. */
static size_t kg_differ(const uint16_t *want, const uint16_t *got, size_t count, int copies) {
  size_t d = 0;
  for (size_t k = 0; k < (size_t)copies * count; k++)
    d += want[k % count] != got[k];
  return d;
}

/* A launch's bf16 result as the f64 reference of a later one (caller frees). */
static double *kg_ref_of(const uint16_t *host, size_t count) {
  double *ref = malloc(count * sizeof(double));
  assert_non_null(ref);
  for (size_t e = 0; e < count; e++)
    ref[e] = td_bf16_to_f32(host[e]);
  return ref;
}

/* The split tail's plan for `in` under cfg on this GPU (one block per SM). */
static void kg_plan(const td_gemm_config *cfg, const kg_inputs *in, int sms, int *tail, int *split) {
  const long long units = (long long)((in->m + cfg->bm - 1) / cfg->bm) * ((in->n + cfg->bn - 1) / cfg->bn);
  td__gemm_split_plan(units, sms, (in->k + 63) / 64, kg_ws_bytes, (long long)cfg->bm * cfg->bn * 4, tail, split);
}

/* KGATHER's split tail (gemm.h): the last wave's tiles run as K-slices whose
 * fp32 partials the last slice to finish adds up. Every KGATHER tile and
 * route: (a) M = 301, N = 520, K = 4 x 1024, fewer tiles than SMs, so every
 * tile is split (8 slices on the H200), against the f64 product, C and every
 * destination checked element by element, 3 launches in a row on the same
 * workspace (each must leave its counters at 0 for the next); (b) full waves
 * and then a short last one (2176 x 2048, K = 2 x 512: 136 or 272 tiles on
 * 132 SMs), against the same launch with no workspace (its own check is
 * test_kgather): route 0 alternating with (a) on the same workspace, PUSH to
 * 8 owners and BCAST to 8 destinations each destination checked; (c) a
 * workspace too small for any split: the plan says none and the launch is
 * the unsplit one. */
static void test_kgather_split(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  int sms = 0;
  assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  kg_ws_open(TD_GEMM_SPLIT_CNT_BYTES + (long long)sms * 128 * 256 * 4);
  kg_inputs a = kg_make(4, 1024, 301, 520), b = kg_make_ex(2, 512, 17 * 128, 2048, 0);
  const unsigned routes[3] = {0, TD_GEMM_HOOK_PUSH, TD_GEMM_HOOK_BCAST};
  for (int r = 0; r < 3; r++) {
    td_gemm_config cfgs[16];
    const int nc = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | routes[r], cfgs, 16);
    assert_true(nc >= 2);
    for (int i = 0; i < nc && i < 16; i++) {
      int tail = 0, split = 0;
      kg_plan(&cfgs[i], &a, sms, &tail, &split);
      assert_true(tail > 0 && split >= 2); /* 9 or 15 tiles, K of 64 k-blocks: split */
      for (int rep = 0; rep < 3; rep++) {
        if (routes[r] == 0) {
          uint16_t *c = kg_plain_result(&cfgs[i], &a);
          char what[160];
          snprintf(what, sizeof what, "kgather split %dx%d s%d: M=%d N=%d K=%d, %d tiles in %d slices, launch %d",
                   cfgs[i].bm, cfgs[i].bn, cfgs[i].stages, a.m, a.n, a.k, tail, split, rep);
          kg_check_rows(what, c, a.ref, a.m, a.n, a.k);
          free(c);
        } else if (routes[r] == TD_GEMM_HOOK_PUSH) {
          kgather_push_case(&cfgs[i], &a, rep == 1 ? 3 : 8, 0, rep == 0);
        } else {
          kgather_bcast_case(&cfgs[i], &a, rep == 1 ? 3 : 8, rep == 0, 0);
        }
      }
      /* (b): against the unsplit launch (route 0, no workspace), then (a) again on the same workspace */
      kg_plan(&cfgs[i], &b, sms, &tail, &split);
      void *ws = kg_ws;
      kg_ws = NULL;
      uint16_t *whole = kg_plain_result(&cfgs[i], &b);
      kg_ws = ws;
      double *ref = kg_ref_of(whole, (size_t)b.m * b.n);
      if (routes[r] != 0) { /* the routes' full waves and split last wave, each destination against it */
        b.ref = ref;
        if (routes[r] == TD_GEMM_HOOK_PUSH)
          kgather_push_case(&cfgs[i], &b, 8, 0, 1);
        else
          kgather_bcast_case(&cfgs[i], &b, 8, 1, 0);
        b.ref = NULL;
        free(ref), free(whole);
        continue;
      }
      for (int rep = 0; rep < 2; rep++) {
        uint16_t *c = kg_plain_result(&cfgs[i], &b);
        char what[160];
        snprintf(what, sizeof what, "kgather split %dx%d s%d: M=%d N=%d K=%d, last %d tiles in %d slices, launch %d "
                 "(against the unsplit launch)", cfgs[i].bm, cfgs[i].bn, cfgs[i].stages, b.m, b.n, b.k, tail, split,
                 rep);
        kg_check_rows(what, c, ref, b.m, b.n, b.k);
        free(c);
        c = kg_plain_result(&cfgs[i], &a);
        kg_check_rows("kgather split: (a) after (b) on the same workspace", c, a.ref, a.m, a.n, a.k);
        free(c);
      }
      free(ref), free(whole);
      /* (c): no room for two partial tiles: no split, the same product */
      const long long full = kg_ws_bytes;
      kg_ws_bytes = TD_GEMM_SPLIT_CNT_BYTES + (long long)cfgs[i].bm * cfgs[i].bn * 4;
      kg_plan(&cfgs[i], &a, sms, &tail, &split);
      assert_int_equal(tail, 0);
      assert_int_equal(split, 1);
      uint16_t *c = kg_plain_result(&cfgs[i], &a);
      kg_check_rows("kgather split: a workspace too small to split", c, a.ref, a.m, a.n, a.k);
      free(c);
      kg_ws_bytes = full;
    }
  }
  kg_free(&a);
  kg_free(&b);
  kg_ws_close();
}

/* The split tail over two waves (split_waves = 2, td__gemm_split_plan_waves):
 * M = 1024, N = 6912, K = 2 x 768 (216 tiles of 128x256 on the H200's 132
 * SMs, a wave and 84: all of them in 3 slices over 5 rounds, so blocks run
 * several slices of several tiles; 432 of 128x128, one-wave plan), every
 * KGATHER tile and route, every destination against the unsplit launch;
 * twice in a row on the same workspace, and BCAST a third time with its
 * deferred second half (a pending half flushed in a later slice). */
static void test_kgather_split_waves(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  int sms = 0;
  assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  kg_ws_open(TD_GEMM_SPLIT_CNT_BYTES + 1100LL * 128 * 256 * 4);
  void *const ws = kg_ws;
  const long long ws_bytes = kg_ws_bytes;
  kg_ws = NULL, kg_ws_bytes = 0; /* the unsplit reference launches first */
  kg_inputs d = kg_make_ex(2, 768, 1024, 6912, 0);
  const unsigned routes[3] = {0, TD_GEMM_HOOK_PUSH, TD_GEMM_HOOK_BCAST};
  for (int r = 0; r < 3; r++) {
    td_gemm_config cfgs[16];
    const int nc = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | routes[r], cfgs, 16);
    for (int i = 0; i < nc && i < 16; i++) {
      const long long units = (long long)((d.m + cfgs[i].bm - 1) / cfgs[i].bm) * ((d.n + cfgs[i].bn - 1) / cfgs[i].bn);
      int tail = 0, split = 0;
      td__gemm_split_plan_waves(units, sms, d.k / 64, ws_bytes, (long long)cfgs[i].bm * cfgs[i].bn * 4, 2, &tail,
                                &split);
      if (sms == 132 && cfgs[i].bn == 256)
        assert_true(tail == 216 && split == 3);
      uint16_t *whole = kg_plain_result(&cfgs[i], &d); /* no workspace yet: unsplit */
      double *ref = kg_ref_of(whole, (size_t)d.m * d.n);
      d.ref = ref;
      kg_ws = ws, kg_ws_bytes = ws_bytes, kg_split_waves = 2;
      for (int rep = 0; rep < (routes[r] == TD_GEMM_HOOK_BCAST ? 4 : 2); rep++) {
        kg_bcast_defer = rep >= 2 ? rep - 1 : 0; /* BCAST: then deferred, then paced */
        if (routes[r] == 0) {
          uint16_t *c = kg_plain_result(&cfgs[i], &d);
          char what[200];
          snprintf(what, sizeof what, "kgather split over two waves %dx%d s%d: %lld tiles, last %d in %d slices, "
                   "launch %d (against the unsplit launch)", cfgs[i].bm, cfgs[i].bn, cfgs[i].stages, units, tail,
                   split, rep);
          kg_check_rows(what, c, ref, d.m, d.n, d.k);
          free(c);
        } else if (routes[r] == TD_GEMM_HOOK_PUSH) {
          kgather_push_case(&cfgs[i], &d, 8, 0, rep == 0);
        } else {
          kgather_bcast_case(&cfgs[i], &d, 8, rep == 0, 0);
        }
      }
      kg_ws = NULL, kg_ws_bytes = 0, kg_split_waves = 0, kg_bcast_defer = 0;
      d.ref = NULL;
      free(ref), free(whole);
    }
  }
  kg_free(&d);
  kg_ws = ws, kg_ws_bytes = ws_bytes;
  kg_ws_close();
}

/* One BCAST launch of `in` into `peers` destinations (bcast_defer as
 * given), their rows copied back to the host one after another (caller
 * frees). */
static uint16_t *kg_bcast_results(const td_gemm_config *cfg, const kg_inputs *in, int defer, int peers) {
  td_gemm_hooks out = kg_route_junk();
  out.bcast_peers = peers, out.bcast_hint = 0, out.bcast_defer = defer, out.bcast_pace_kb = kg_bcast_pace;
  kg_dest d[TD_GEMM_MAX_PEERS];
  for (int q = 0; q < peers; q++) {
    d[q] = kg_dest_make(in->m, in->n);
    out.dst[q] = kg_dest_rows(&d[q], in->n);
  }
  kg_run_routed(cfg, in, TD_GEMM_HOOK_BCAST, &out, 0);
  const size_t count = (size_t)in->m * in->n;
  uint16_t *host = malloc(count * 2 * (size_t)peers);
  assert_non_null(host);
  for (int q = 0; q < peers; q++) {
    assert_int_equal(cudaMemcpy(host + q * count, out.dst[q], count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d[q].base);
  }
  return host;
}

/* The same into a single destination. */
static uint16_t *kg_bcast_result(const td_gemm_config *cfg, const kg_inputs *in, int defer) {
  return kg_bcast_results(cfg, in, defer, 1);
}

/* BCAST's deferred second half (bcast_defer: the half-staged 128x256 tile's
 * variant kernel holds the second half in registers and stores it 8 or fewer
 * k-blocks into the next unit's main loop, or after the last unit): every
 * destination against the f64 product where several tiles run per block
 * with K of 2 k-blocks (stored at the next unit's last k-block) and where
 * one tile runs per block (stored after it); bit for bit against the
 * undeferred launch for 272 tiles with K of 20 k-blocks (stored at the next
 * unit's ninth), which the same arithmetic must give (a short unit stores it
 * half-way through its k-blocks); and with the split
 * tail (27 tiles all split; 272 tiles, the last 8 split, against the
 * undeferred unsplit launch), whose slices that skip the epilogue still
 * store the deferred half. (That the variant kernel is the one launched for
 * 128x256 shows only in timing; gemm_args_test checks it is listed nowhere.)
 * All of it for bcast_defer 1 (deferred) and 2 (paced: every copy one at a
 * time over the next unit, the second half staged after the first's
 * copies, one step every 3 k-blocks; units of 2 k-blocks leave every step
 * to the next epilogue, units of 20 with one or two destinations take all
 * of theirs inside the main loop). And bit for bit with 8 destinations
 * (the operators' 8 ranks) on 272 tiles of 64 k-blocks (the 8b models' K
 * of 4096), the paced tile's 16 steps after its epilogue's first all inside
 * the next unit's main loop: every copy of the first half at its column,
 * the second half staged after them, each of its copies to its
 * destination, against the undeferred launch's one destination.
 * On a tile staged whole (128x128) bcast_defer changes nothing. */
static void test_kgather_bcast_defer(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int nc = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST, cfgs, 16);
  assert_int_equal(nc, 2); /* 128x256 s4 and 128x128 s6: the deferred variant is no configuration of its own */
  int sms = 0;
  assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  kg_inputs d1 = kg_make(2, 64, 2053, 2600), d2 = kg_make(2, 640, 1100, 520), e = kg_make_ex(2, 640, 34 * 128, 2048, 0);
  kg_inputs f = kg_make_ex(2, 2048, 34 * 128, 2048, 0); /* 64 k-blocks a tile */
  for (int i = 0; i < nc && i < 16; i++)
    for (int mode = 1; mode <= 2; mode++) { /* deferred, then paced */
      kg_bcast_defer = mode;
      kgather_bcast_case(&cfgs[i], &d1, 8, 1, 0); /* 187 tiles of 128x256 on 132 blocks */
      kgather_bcast_case(&cfgs[i], &d2, 3, 0, 1); /* 27 tiles: one a block */
      uint16_t *x0 = kg_bcast_result(&cfgs[i], &e, 0), *x1 = kg_bcast_result(&cfgs[i], &e, mode);
      const size_t differ = kg_differ(x0, x1, (size_t)e.m * e.n, 1);
      if (differ)
        fprintf(stderr, "kgather|bcast %dx%d: %zu of %d elements differ between bcast_defer 0 and %d\n", cfgs[i].bm,
                cfgs[i].bn, differ, e.m * e.n, mode);
      assert_int_equal(differ, 0);
      {
        const size_t count = (size_t)f.m * f.n;
        uint16_t *f0 = kg_bcast_result(&cfgs[i], &f, 0), *f8 = kg_bcast_results(&cfgs[i], &f, mode, 8);
        for (int q = 0; q < 8; q++) {
          const size_t fd = kg_differ(f0, f8 + q * count, count, 1);
          if (fd)
            fprintf(stderr, "kgather|bcast %dx%d, K of 64 k-blocks: %zu of %zu elements of destination %d of 8 "
                    "differ between bcast_defer 0 and %d\n", cfgs[i].bm, cfgs[i].bn, fd, count, q, mode);
          assert_int_equal(fd, 0);
        }
        if (mode == 2) /* other gaps: one a k-block, and 7 (the 16 steps need 112 k-blocks: the unit's 64
                        * close it to 4) -- the same bits */
          for (int g = 0; g < 2; g++) {
            kg_bcast_pace = g == 0 ? 1 : 7;
            uint16_t *fg = kg_bcast_results(&cfgs[i], &f, mode, 8);
            const size_t fd = kg_differ(f0, fg, count, 8);
            if (fd)
              fprintf(stderr, "kgather|bcast %dx%d, paced every %d k-blocks: %zu of %zu elements differ from "
                      "bcast_defer 0\n", cfgs[i].bm, cfgs[i].bn, kg_bcast_pace, fd, 8 * count);
            assert_int_equal(fd, 0);
            free(fg);
          }
        kg_bcast_pace = 0;
        free(f0), free(f8);
      }
      /* with the split tail: d2's 27 tiles in 2 K-slices each; e's full waves and a split last one,
       * against the undeferred unsplit launch */
      const long long ws_need = TD_GEMM_SPLIT_CNT_BYTES + (long long)sms * 128 * 256 * 4;
      kg_ws_open(ws_need);
      int tail = 0, split = 0;
      kg_plan(&cfgs[i], &d2, sms, &tail, &split);
      assert_true(tail > 0 && split >= 2);
      kgather_bcast_case(&cfgs[i], &d2, 8, 0, 0);
      double *ref = kg_ref_of(x0, (size_t)e.m * e.n);
      e.ref = ref;
      kgather_bcast_case(&cfgs[i], &e, 2, 0, 0);
      e.ref = NULL;
      if (mode == 2) { /* f's last wave split (slices of 32 or fewer k-blocks: the gap closes to fit the 16 steps),
                        * 8 destinations, against the unpaced unsplit launch */
        uint16_t *f0 = kg_bcast_result(&cfgs[i], &f, 0); /* the workspace is open: split too */
        kg_ws_close();
        uint16_t *fu = kg_bcast_result(&cfgs[i], &f, 0);
        kg_ws_open(ws_need);
        uint16_t *f8 = kg_bcast_results(&cfgs[i], &f, mode, 8);
        const size_t count = (size_t)f.m * f.n;
        double *fref = kg_ref_of(fu, count);
        const size_t fd = kg_differ(f0, f8, count, 8);
        size_t fs = 0;
        for (size_t k = 0; k < count; k++) /* split or not: fp32 sums in another order, within bf16's rounding */
          fs += fabs((double)td_bf16_to_f32(f0[k]) - fref[k]) > 1e-2 * (fabs(fref[k]) + 1.0);
        if (fd || fs)
          fprintf(stderr, "kgather|bcast %dx%d, split, paced, 8 destinations: %zu of %zu elements differ from the "
                  "unpaced split launch, %zu of %zu off the unsplit one\n", cfgs[i].bm, cfgs[i].bn, fd, 8 * count,
                  fs, count);
        assert_int_equal(fd, 0);
        assert_int_equal(fs, 0);
        free(f0), free(fu), free(f8), free(fref);
      }
      free(ref), free(x0), free(x1);
      kg_ws_close();
      kg_bcast_defer = 0;
    }
  kg_free(&d1), kg_free(&d2), kg_free(&e), kg_free(&f);
}

static td_gemm_arch sm90 = TD_GEMM_SM90, sm80 = TD_GEMM_SM80;

/* GATHER | NSPLIT: C_j = A * B_j for col_srcs column sources in one launch,
 * A's rows read in place from their row sources, each B_j [K, nb] and C_j
 * [M, nb] a separate allocation (ag_gemm's one launch for every rank). Each
 * C_j lies between guards and is checked element by element against its
 * columns of the f64 product; a destination past col_srcs stays poisoned.
 * Round 1 hands the column sources over in reverse order (the map table
 * rewritten in place), so a tile reading one source's B and storing at
 * another's C shows. */
static td_gemm_map_cache *gn_cache; /* non-NULL: the launches share this host shadow of their map table */

static void gather_nsplit_case_ex(const td_gemm_config *cfg, long long src_rows, int m, int nb, int k, int col_srcs,
                                  int split) {
  const int sources = (int)((m + src_rows - 1) / src_rows), n = nb * col_srcs;
  uint16_t *a = gt_random(TD_BF16, (size_t)m * k), *b = gt_random(TD_BF16, (size_t)k * n);
  double *ref = gt_reference(TD_BF16, a, b, m, n, k, TD_GEMM_B_KN);
  const void *src[8];
  void *dsrc[8], *dbj[8];
  double *refj[8];
  uint16_t *part = malloc((size_t)k * nb * 2 + 2);
  for (int s = 0; s < sources; s++) {
    long long r0 = s * src_rows, rows = m - r0 < src_rows ? m - r0 : src_rows;
    dsrc[s] = gt_device_copy(a + (size_t)r0 * k, (size_t)rows * k * 2);
    src[s] = dsrc[s];
  }
  for (int j = 0; j < col_srcs; j++) {
    for (int r = 0; r < k; r++)
      memcpy(part + (size_t)r * nb, b + (size_t)r * n + (size_t)j * nb, (size_t)nb * 2);
    dbj[j] = gt_device_copy(part, (size_t)k * nb * 2);
    refj[j] = malloc((size_t)m * nb * sizeof(double));
    for (int r = 0; r < m; r++)
      memcpy(refj[j] + (size_t)r * nb, ref + (size_t)r * n + (size_t)j * nb, (size_t)nb * sizeof(double));
  }
  void *maps = gt_device_copy(NULL, 16 * TD_GEMM_MAP_BYTES);
  if (gn_cache) /* a new table (perhaps at a freed one's address): its shadow starts empty */
    memset(gn_cache, 0, sizeof *gn_cache);
  td_gemm_hooks tail; /* split: the plan's workspace for every source's tiles on the whole GPU, which must split */
  memset(&tail, 0, sizeof tail);
  int t = 0, sk = 1;
  if (split) {
    int sms = 0;
    assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    const long long units = (long long)((m + cfg->bm - 1) / cfg->bm) * ((nb + cfg->bn - 1) / cfg->bn) * col_srcs;
    td__gemm_split_plan(units, sms, (k + 63) / 64, LLONG_MAX, (long long)cfg->bm * cfg->bn * 4, &t, &sk);
    assert_true(t > 0 && sk >= 2);
    tail.split_ws_bytes = TD_GEMM_SPLIT_CNT_BYTES + (long long)t * sk * cfg->bm * cfg->bn * 4;
    assert_int_equal(cudaMalloc(&tail.split_ws, (size_t)tail.split_ws_bytes), cudaSuccess);
    assert_int_equal(cudaMemset(tail.split_ws, 0, TD_GEMM_SPLIT_CNT_BYTES), cudaSuccess);
  }
  tail.map_cache = gn_cache;
  /* with a cache, round 2 repeats round 1's sources (a reuse) after round 1 changed round 0's (an upload) */
  const int rounds = gn_cache ? 3 : 2;
  for (int round = 0; round < rounds; round++) {
    kg_dest d[8];
    const void *bs[8];
    void *cs[9];
    for (int j = 0; j < col_srcs; j++) {
      const int q = round ? col_srcs - 1 - j : j; /* table slot j holds source q */
      d[q] = kg_dest_make(m, nb);
      bs[j] = dbj[q], cs[j] = kg_dest_rows(&d[q], nb);
    }
    void *extra = gt_device_copy(NULL, (size_t)m * nb * 2); /* slot col_srcs: not to be written */
    cs[col_srcs] = extra;
    td_gemm_problem p = {m, nb, k, TD_BF16, TD_GEMM_B_KN, NULL, NULL, NULL, NULL};
    const long long up0 = gn_cache ? gn_cache->uploads : 0, hit0 = gn_cache ? gn_cache->hits : 0;
    td_status st = td__gemm_cuda_run_gather_cols(&p, cfg, src, sources, src_rows, bs, cs, col_srcs, maps,
                                                 split || gn_cache ? &tail : NULL, NULL);
    if (gn_cache) { /* round 0: a new table for this case; 1: the sources changed; 2: the same as 1 */
      assert_int_equal(gn_cache->uploads - up0, round < 2 ? 1 : 0);
      assert_int_equal(gn_cache->hits - hit0, round < 2 ? 0 : 1);
    }
    if (st != TD_OK)
      fprintf(stderr, "%s\n", td_last_error());
    assert_int_equal(st, TD_OK);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    for (int q = 0; q < col_srcs; q++) {
      char what[160];
      snprintf(what, sizeof what, "gather+nsplit %dx%d s%d: M=%d nb=%d K=%d src_rows=%lld col_srcs=%d (%d tiles in %d "
               "slices) round %d C_%d", cfg->bm, cfg->bn, cfg->stages, m, nb, k, src_rows, col_srcs, t, sk, round, q);
      kg_dest_check(what, &d[q], refj[q], nb, k);
    }
    kg_expect_poisoned("gather+nsplit: the destination past col_srcs", extra, (size_t)m * nb);
    cudaFree(extra);
  }
  for (int s = 0; s < sources; s++)
    cudaFree(dsrc[s]);
  for (int j = 0; j < col_srcs; j++)
    cudaFree(dbj[j]), free(refj[j]);
  free(a), free(b), free(ref), free(part);
  cudaFree(maps), cudaFree(tail.split_ws);
}

static void gather_nsplit_case(const td_gemm_config *cfg, long long src_rows, int m, int nb, int k, int col_srcs) {
  gather_nsplit_case_ex(cfg, src_rows, m, nb, k, col_srcs, 0);
}

static void test_gather_nsplit(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, cfgs, 16);
  assert_true(n >= 1);
  for (int i = 0; i < n && i < 16; i++) {
    gather_nsplit_case(&cfgs[i], 256, 3 * 256 + 77, 200, 136, 3); /* sources' last tiles clipped at nb = 200 */
    gather_nsplit_case(&cfgs[i], 128, 8 * 128, 264, 192, 8);     /* 8 ranks' worth; nb over a tile */
    gather_nsplit_case(&cfgs[i], 256, 512, 512, 64, 2);          /* whole tiles */
    gather_nsplit_case(&cfgs[i], 128, 100, 8, 64, 1);            /* one source each way, tiny */
  }
}

/* GATHER | NSPLIT's split tail (ag_gemm's one launch for every rank): fewer
 * tiles than SMs, so every tile of every column source runs as K-slices (K
 * of 16 k-blocks and a bit: 2 slices), each C_j checked as above, round 1
 * with the sources reversed on the same workspace. */
static void test_gather_nsplit_split(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_config cfgs[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, cfgs, 16);
  assert_true(n >= 1);
  for (int i = 0; i < n && i < 16; i++)
    gather_nsplit_case_ex(&cfgs[i], 128, 4 * 128, 264, 1024 + 40, 4, 1);
}

/* The maps' host shadow (td_gemm_map_cache): a launch whose sources are
 * the previous launch's reuses the table, one whose sources moved uploads
 * it again, and every C is checked either way (each round's C a fresh
 * allocation: C is not in the table). GATHER | NSPLIT on every compiled
 * tile, the split tail on one (each case its own table, so the shadow is
 * cleared between cases: gather_nsplit_case_ex frees its table, and another
 * could be allocated at its address); then KGATHER, its sources reordered. */
static void test_map_cache(void **state) {
  (void)state;
  if (skip_arch(TD_GEMM_SM90))
    skip();
  td_gemm_map_cache *mc = calloc(1, sizeof *mc);
  assert_non_null(mc);
  gn_cache = mc;
  td_gemm_config cfgs[16];
  int n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, cfgs, 16);
  assert_true(n >= 1);
  for (int i = 0; i < n && i < 16; i++)
    gather_nsplit_case(&cfgs[i], 128, 8 * 128, 264, 192, 8);
  gather_nsplit_case_ex(&cfgs[0], 128, 4 * 128, 264, 1024 + 40, 4, 1);
  gn_cache = NULL;
  n = td__gemm_cuda_configs_hooked(TD_BF16, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER, cfgs, 16);
  assert_true(n >= 1);
  memset(mc, 0, sizeof *mc); /* another table: its shadow starts empty */
  td_gemm_hooks out;
  memset(&out, 0, sizeof out);
  out.map_cache = mc;
  kg_inputs in = kg_make(4, 128, 301, 520);
  /* launches 0, 1: the sources as made (an upload, then a reuse); 2, 3: in reverse order, A and B alike (the
   * same sum: an upload, then a reuse) */
  for (int launch = 0; launch < 4; launch++) {
    const void *as[8], *bs[8];
    for (int q = 0; q < in.sources; q++) {
      const int from = launch < 2 ? q : in.sources - 1 - q;
      as[q] = in.as[from], bs[q] = in.bs[from];
    }
    void *dc = gt_device_copy(NULL, (size_t)in.m * in.n * 2);
    td_gemm_problem p = {in.m, in.n, in.k, TD_BF16, TD_GEMM_B_KN, NULL, NULL, dc, NULL};
    const long long up0 = mc->uploads, hit0 = mc->hits;
    td_status st = td__gemm_cuda_run_kgather(&p, &cfgs[0], as, bs, in.sources, in.k_src, in.maps, 0, &out, NULL);
    if (st != TD_OK)
      fprintf(stderr, "%s\n", td_last_error());
    assert_int_equal(st, TD_OK);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(mc->uploads - up0, launch % 2 ? 0 : 1);
    assert_int_equal(mc->hits - hit0, launch % 2 ? 1 : 0);
    uint16_t *res = malloc((size_t)in.m * in.n * 2);
    cudaMemcpy(res, dc, (size_t)in.m * in.n * 2, cudaMemcpyDeviceToHost);
    size_t nans;
    double rel = gt_rel_error(TD_BF16, res, in.ref, (size_t)in.m * in.n, &nans);
    if (nans || rel > gt_tolerance(TD_BF16))
      fprintf(stderr, "kgather map cache launch %d: %zu NaN, rel %.3g\n", launch, nans, rel);
    assert_int_equal(nans, 0);
    assert_true(rel <= gt_tolerance(TD_BF16));
    free(res);
    cudaFree(dc);
  }
  kg_free(&in);
  free(mc);
}

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
      cmocka_unit_test(test_kgather_push),
      cmocka_unit_test(test_kgather_bcast),
      cmocka_unit_test(test_kgather_split),
      cmocka_unit_test(test_kgather_split_waves),
      cmocka_unit_test(test_kgather_bcast_defer),
      cmocka_unit_test(test_gather_nsplit),
      cmocka_unit_test(test_gather_split),
      cmocka_unit_test(test_gather_nsplit_split),
      cmocka_unit_test(test_map_cache),
      cmocka_unit_test_prestate(test_wait_raise, &sm80),
      cmocka_unit_test_prestate(test_timeout, &sm80),
      cmocka_unit_test_prestate(test_push_accumulate, &sm80),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
