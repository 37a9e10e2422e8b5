/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's launcher for measurement variants of the hooked Hopper GEMM
 * (bench layer): the XV template parameter of td__gemm_sm90_kernel
 * (gemm_sm90.cuh) selects alternative hook paths -- A prefetched into L2
 * during the first wait, one red.release per raise instead of fence + add,
 * tensor-map descriptors prefetched at the start -- so one GPU call can
 * measure them side by side against the shipped kernel (XV = 0). Only the
 * configuration that wins at M = 128 (64 x 64, 8 stages, group 8, no
 * cluster, bf16, B as [N,K]) is instantiated; the launch mirrors
 * gemm_sm90_launch.cu (tensor maps, one CTA per SM, persistent grid). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdio.h>

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

const entry table[] = {
    {W, 0, kern<W, 0>()},   {R, 0, kern<R, 0>()},   {WR, 0, kern<WR, 0>()},
    {W, 1, kern<W, 1>()},   {R, 1, kern<R, 1>()},   {WR, 1, kern<WR, 1>()},
    {W, 2, kern<W, 2>()},   {R, 2, kern<R, 2>()},   {WR, 2, kern<WR, 2>()},
    {W, 4, kern<W, 4>()},   {R, 4, kern<R, 4>()},   {WR, 4, kern<WR, 4>()},
    {W, 7, kern<W, 7>()},   {R, 7, kern<R, 7>()},   {WR, 7, kern<WR, 7>()},
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

} // namespace

bool xv_config_matches(const td_gemm_config *cfg, int b_layout) {
  return cfg->arch == TD_GEMM_SM90 && cfg->bm == BM && cfg->bn == BN && cfg->stages == ST &&
         cfg->group_m == GM && cfg->cluster <= 1 && b_layout == TD_GEMM_B_NK;
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
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const long long units = (long long)((p->m + BM - 1) / BM) * ((p->n + BN - 1) / BN);
  const int grid = (int)(units < sms ? units : sms);
  td__gemm_u16 *c = (td__gemm_u16 *)p->c;
  int m = p->m, n = p->n, k = p->k;
  td_gemm_hooks hk = *h;
  void *args[] = {&ma, &mb, &c, &m, &n, &k, &hk};
  return cudaLaunchKernel(fn, dim3(grid), dim3(S::THREADS), args, (size_t)S::SMEM_BYTES, stream) == cudaSuccess;
}
