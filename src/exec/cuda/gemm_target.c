/* SPDX-License-Identifier: Apache-2.0
 * The compiler's view of the cuda target (executor layer, cuda backend): see
 * gemm_target.h. Kept beside the executor because both must agree on when
 * the Hopper GEMM applies; the executor re-checks every task at launch and
 * falls back to sub-tile grids, so a plan made for another GPU still runs. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "exec/cuda/gemm_target.h"
#include "tdist/config.h"
#include "tile/cuda/gemm.h"

#pragma weak td__gemm_cuda_run_sms
#pragma weak td__gemm_cuda_default_config
#pragma weak td__gemm_tune_lookup

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
  int cached = 0;
  if (td__gemm_tune_lookup && t->gpu[0] &&
      td__gemm_tune_lookup(t->gpu, dtype, b_nk ? TD_GEMM_B_NK : TD_GEMM_B_KN, m, n, k, &c) == TD_OK &&
      c.split_k <= 1)
    cached = 1;
  else
    c = td__gemm_cuda_default_config(TD_GEMM_SM90, m, n, k);
  td__gemm_qcfg q = {c.arch == TD_GEMM_SM80 ? 80 : 90, c.bm, c.bn, c.bk, c.stages, c.cluster, c.group_m};
  *out = q;
  return cached;
}
