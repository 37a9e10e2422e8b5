/* SPDX-License-Identifier: Apache-2.0
 * The compiler's view of the cuda target (executor layer, cuda backend): see
 * gemm_target.h. Kept beside the executor because both must agree on when
 * the Hopper GEMM applies; the executor re-checks every task at launch and
 * falls back to sub-tile grids, so a plan made for another GPU still runs. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/cuda/gemm_target.h"
#include "tdist/config.h"
#include "tile/cuda/gemm.h"

#pragma weak td__gemm_cuda_run_sms
#pragma weak td__gemm_cuda_default_config
#pragma weak td__gemm_tune_lookup
#pragma weak td__gemm_cuda_configs

int td__cuda_gemm_pick_compiled(td_dtype dtype, int b_nk, int m, int n, int k, td__gemm_qcfg *out) {
  if (!td__gemm_cuda_default_config || !td__gemm_cuda_configs)
    return -1;
  const td_gemm_config want = td__gemm_cuda_default_config(TD_GEMM_SM90, m, n, k);
  td_gemm_config list[64];
  const int layout = b_nk ? TD_GEMM_B_NK : TD_GEMM_B_KN;
  int count = td__gemm_cuda_configs(TD_GEMM_SM90, dtype, layout, list, 64);
  if (count > 64)
    count = 64;
  /* The rule of thumb's block shape when it is compiled for this dtype and
   * layout (the rule does not know the layout; [K,N] needs BN % 64 == 0),
   * else the nearest compiled one: block shape first, then one CTA per
   * cluster, then the larger BN, then more stages. */
  int best = -1;
  long best_key = 0;
  for (int i = 0; i < count; i++) {
    const td_gemm_config *c = &list[i];
    long dist = labs((long)c->bm - want.bm) + labs((long)c->bn - want.bn);
    long key = dist * 100000 + (c->cluster != want.cluster) * 10000 + (256 - c->bn) * 10 + (8 - c->stages);
    if (best < 0 || key < best_key)
      best = i, best_key = key;
  }
  if (best < 0)
    return -1;
  const td_gemm_config *c = &list[best];
  td__gemm_qcfg q = {90, c->bm, c->bn, c->bk, c->stages, c->cluster, c->group_m};
  *out = q;
  return 0;
}

void td__cuda_gemm_target_get(td__cuda_gemm_target *out) {
  memset(out, 0, sizeof *out);
  int64_t on = 1, sm = 0;
  if (td_config_int("TD_CUDA_GEMM_QUEUE", &on) != TD_OK)
    on = 1; /* a malformed value is reported by the executor, which reads it too */
  if (!on) {
    snprintf(out->why, sizeof out->why, "turned off by TD_CUDA_GEMM_QUEUE=0");
    return;
  }
  if (!td__gemm_cuda_run_sms || !td__gemm_cuda_default_config) {
    snprintf(out->why, sizeof out->why, "the Hopper GEMM (library tdist_gemm_cuda) is not linked into this program");
    return;
  }
  const char *name = NULL;
  if (td_config_int("TD_CUDA_TARGET_SM", &sm) == TD_OK && sm > 0) {
    if (td_config_str("TD_CUDA_TARGET_NAME", &name) != TD_OK || !name)
      name = "";
    snprintf(out->gpu, sizeof out->gpu, "%.95s", name);
  } else {
    int count = 0;
    int64_t dev = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();
      snprintf(out->why, sizeof out->why, "no GPU is visible and TD_CUDA_TARGET_SM is not set");
      return;
    }
    if (td_config_int("TD_CUDA_DEVICE", &dev) != TD_OK || dev < 0 || dev >= count)
      dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, (int)dev) != cudaSuccess) {
      cudaGetLastError();
      snprintf(out->why, sizeof out->why, "cannot read the properties of GPU %d", (int)dev);
      return;
    }
    sm = prop.major * 10 + prop.minor;
    snprintf(out->gpu, sizeof out->gpu, "%.95s", prop.name);
  }
  out->sm = (int)sm;
  if (sm / 10 != 9) {
    snprintf(out->why, sizeof out->why, "the target GPU is sm_%d, not Hopper (sm_90)", (int)sm);
    return;
  }
  out->queue = 1;
}

int td__cuda_gemm_target_config(const td__cuda_gemm_target *t, td_dtype dtype, int b_nk, int m, int n, int k,
                                td__gemm_qcfg *out) {
  if (!td__gemm_cuda_default_config)
    return -1;
  td_gemm_config c;
  int cublas = 0;
  if (td__gemm_tune_lookup && t->gpu[0] &&
      td__gemm_tune_lookup(t->gpu, dtype, b_nk ? TD_GEMM_B_NK : TD_GEMM_B_KN, m, n, k, &c) == TD_OK &&
      c.split_k <= 1) {
    /* A cuBLAS entry has no tile fields and cannot be capped to the SMs no
     * persistent block holds: the queue runs the compiled pick instead. */
    cublas = c.arch == TD_GEMM_CUBLAS;
    if (!cublas) {
      td__gemm_qcfg q = {c.arch == TD_GEMM_SM80 ? 80 : 90, c.bm, c.bn, c.bk, c.stages, c.cluster, c.group_m};
      *out = q;
      return 1;
    }
  }
  const int r = td__cuda_gemm_pick_compiled(dtype, b_nk, m, n, k, out);
  return r == 0 && cublas ? 2 : r;
}
