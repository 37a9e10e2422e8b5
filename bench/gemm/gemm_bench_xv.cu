/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's launcher for measurement variants of the hooked Hopper GEMM
 * (bench layer). The XV template parameter of td__gemm_sm90_kernel
 * (gemm_sm90.cuh) selects the hooks6 paths that the shipped kernel replaced
 * (the first wait after the block barrier; the last tile raised by the
 * raiser warp; the loader's non-uniform loop) and phase stamps, so one GPU call can time them side by side
 * with the shipped kernel (XV = 0) and see where a launch spends its time.
 * Only the configuration that wins at M = 128 (64 x 64, 8 stages, group 8,
 * no cluster, bf16, B as [N,K]) is instantiated; the launch mirrors
 * gemm_sm90_launch.cu (tensor maps, one CTA per SM, persistent grid). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "gemm_sm90.cuh"
#include "gemm_bench_xv.h"

namespace {

constexpr int BM = 64, BN = 64, ST = 8, GM = 8;
typedef td__gemm_sm90_shape<BM, BN, ST> S;
constexpr unsigned W = TD_GEMM_HOOK_WAIT, R = TD_GEMM_HOOK_RAISE, WR = W | R;

template <unsigned HOOKS, int XV>
const void *kern() {
  return (const void *)td__gemm_sm90_kernel<BM, BN, ST, GM, TD_GEMM_DT_BF16, TD_GEMM_B_NK, HOOKS, 1, XV>;
}

struct entry {
  unsigned hooks;
  int xv;
  const void *fn;
};

/* Timed variants (0 = shipped; 16, 32, 48 = the hooks6 wait, raise, both
 * paths; 64 = the hooks6 loader codegen; 112 = all three, the hooks6 kernel;
 * 128 = uniform warpgroup index, also without hooks; 512 = the warp-3 front:
 * the first signals read by warp 3 outside the block barrier, B first),
 * then the stamped ones (XV & 8): plain, shipped, hooks6, shipped paths with
 * the hooks6 loader codegen, the warp-3 front. */
const entry table[] = {
    {W, 0, kern<W, 0>()},     {R, 0, kern<R, 0>()},     {WR, 0, kern<WR, 0>()},
    {W, 16, kern<W, 16>()},   {WR, 16, kern<WR, 16>()}, {R, 32, kern<R, 32>()},
    {WR, 32, kern<WR, 32>()}, {WR, 48, kern<WR, 48>()}, {W, 64, kern<W, 64>()},
    {R, 64, kern<R, 64>()},   {WR, 64, kern<WR, 64>()}, {WR, 112, kern<WR, 112>()},
    {0, 8, kern<0, 8>()},     {WR, 8, kern<WR, 8>()},   {WR, 120, kern<WR, 120>()},
    {WR, 72, kern<WR, 72>()},   {0, 128, kern<0, 128>()},  {WR, 128, kern<WR, 128>()},
    {W, 512, kern<W, 512>()},   {WR, 512, kern<WR, 512>()}, {WR, 520, kern<WR, 520>()},
};

PFN_cuTensorMapEncodeTiled_v12000 encoder(void) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
  if (!fn) {
    void *p = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
            cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
  }
  return fn;
}

bool make_map(td__tensor_map *out, const void *base, long long rows, long long cols, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 enc = encoder();
  if (!enc)
    return false;
  cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
  cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  return enc((CUtensorMap *)out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides, box, estr,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int grid_of(const td_gemm_problem *p) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const long long units = (long long)((p->m + BM - 1) / BM) * ((p->n + BN - 1) / BN);
  return (int)(units < sms ? units : sms);
}

const char *const phase_names[TD__XV_PHASES] = {
    "start",          "synced",        "wait: issued",  "wait: seen",   "wait: fenced", "wait: ready",
    "load: first B",  "load: first A", "mma: 1st full", "mma: last",    "stores issued", "done/barrier",
    "raise: seen",    "raise: fenced", "raise: added",  "consumer end"};

double med(std::vector<double> v) {
  if (v.empty())
    return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

bool xv_config_matches(const td_gemm_config *cfg, int b_layout) {
  return cfg->arch == TD_GEMM_SM90 && cfg->bm == BM && cfg->bn == BN && cfg->stages == ST &&
         cfg->group_m == GM && cfg->cluster <= 1 && b_layout == TD_GEMM_B_NK;
}

bool xv_exists(int xv, unsigned hooks) {
  for (const entry &e : table)
    if (e.hooks == hooks && e.xv == xv)
      return true;
  return false;
}

bool xv_run(int xv, unsigned hooks, const td_gemm_problem *p, const td_gemm_hooks *h, cudaStream_t stream) {
  const void *fn = NULL;
  for (const entry &e : table)
    if (e.hooks == hooks && e.xv == xv)
      fn = e.fn;
  if (!fn || p->dtype != TD_BF16 || p->b_layout != TD_GEMM_B_NK) {
    fprintf(stderr, "xv_run: no variant %d for hooks 0x%x\n", xv, hooks);
    return false;
  }
  static bool prepared[sizeof table / sizeof table[0]];
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (table[i].fn == fn && !prepared[i]) {
      if (cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, S::SMEM_BYTES) != cudaSuccess)
        return false;
      prepared[i] = true;
    }
  td__tensor_map ma, mb;
  if (!make_map(&ma, p->a, p->m, p->k, BM) || !make_map(&mb, p->b, p->n, p->k, BN))
    return false;
  td__gemm_u16 *c = (td__gemm_u16 *)p->c;
  int m = p->m, n = p->n, k = p->k;
  td_gemm_hooks hk = *h;
  void *args[] = {&ma, &mb, &c, &m, &n, &k, &hk};
  return cudaLaunchKernel(fn, dim3(grid_of(p)), dim3(S::THREADS), args, (size_t)S::SMEM_BYTES, stream) ==
         cudaSuccess;
}

bool xv_stamps(const char *label, int xv, unsigned hooks, const td_gemm_problem *p, const td_gemm_hooks *h,
               int launches, FILE *out) {
  const int grid = grid_of(p);
  const size_t words = (size_t)grid * TD__XV_PHASES * 2;
  td__gemm_u64 *dev = NULL;
  if (cudaMalloc(&dev, words * 8) != cudaSuccess)
    return false;
  std::vector<td__gemm_u64> host(words);
  /* per phase: ns after the block's own start (clock64, converted), ns after
   * the launch's first block start (globaltimer), and per launch the latest
   * block's (globaltimer) */
  std::vector<double> own[TD__XV_PHASES], from0[TD__XV_PHASES], latest[TD__XV_PHASES], span;
  double gt_sum = 0, clk_sum = 0;
  std::vector<std::vector<td__gemm_u64>> runs;
  td_gemm_hooks hk = *h;
  hk.dst[0] = dev;
  bool ok = true;
  for (int l = 0; l < launches + 3 && ok; l++) {
    ok = cudaMemset(dev, 0, words * 8) == cudaSuccess && xv_run(xv, hooks, p, &hk, NULL) &&
         cudaDeviceSynchronize() == cudaSuccess &&
         cudaMemcpy(host.data(), dev, words * 8, cudaMemcpyDeviceToHost) == cudaSuccess;
    if (ok && l >= 3) /* the first three warm the code and the data */
      runs.push_back(host);
  }
  cudaFree(dev);
  if (!ok) {
    fprintf(out, "    stamps %s: launch failed (%s)\n", label, cudaGetErrorString(cudaGetLastError()));
    return false;
  }
  auto gt = [&](const std::vector<td__gemm_u64> &r, int b, int ph) { return r[((size_t)b * TD__XV_PHASES + ph) * 2]; };
  auto clk = [&](const std::vector<td__gemm_u64> &r, int b, int ph) {
    return r[((size_t)b * TD__XV_PHASES + ph) * 2 + 1];
  };
  for (const auto &r : runs)
    for (int b = 0; b < grid; b++)
      if (gt(r, b, TD__XV_START) && gt(r, b, TD__XV_C_END)) {
        gt_sum += (double)(gt(r, b, TD__XV_C_END) - gt(r, b, TD__XV_START));
        clk_sum += (double)(clk(r, b, TD__XV_C_END) - clk(r, b, TD__XV_START));
      }
  const double ns_per_clk = clk_sum > 0 ? gt_sum / clk_sum : 0;
  for (const auto &r : runs) {
    td__gemm_u64 t0 = ~0ull, t1 = 0;
    for (int b = 0; b < grid; b++)
      if (gt(r, b, TD__XV_START))
        t0 = std::min(t0, gt(r, b, TD__XV_START));
    for (int ph = 0; ph < TD__XV_PHASES; ph++) {
      double worst = -1;
      for (int b = 0; b < grid; b++) {
        if (!gt(r, b, ph) || !gt(r, b, TD__XV_START))
          continue;
        own[ph].push_back(((double)clk(r, b, ph) - (double)clk(r, b, TD__XV_START)) * ns_per_clk);
        from0[ph].push_back((double)(gt(r, b, ph) - t0));
        worst = std::max(worst, (double)(gt(r, b, ph) - t0));
        t1 = std::max(t1, gt(r, b, ph));
      }
      if (worst >= 0)
        latest[ph].push_back(worst);
    }
    span.push_back((double)(t1 - t0));
  }
  fprintf(out, "    stamps %-22s %d launches x %d blocks, %.3f ns/clock; median ns: own-block clock, launch "
               "globaltimer, latest block\n",
          label, (int)runs.size(), grid, ns_per_clk);
  for (int ph = 0; ph < TD__XV_PHASES; ph++)
    if (!own[ph].empty())
      fprintf(out, "      %-2d %-14s %8.0f %8.0f %8.0f\n", ph, phase_names[ph], med(own[ph]), med(from0[ph]),
              med(latest[ph]));
  fprintf(out, "      span (first start .. last stamp) %8.0f ns\n", med(span));
  fflush(out);
  return true;
}
