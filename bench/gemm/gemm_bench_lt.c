/* SPDX-License-Identifier: Apache-2.0
 * What cuBLAS would run (bench layer): cuBLASLt's first heuristic for the
 * GEMM gemm_bench times through cublasGemmEx, described in one line (tile,
 * stages, split-K, cluster), so a figure against cuBLAS says what it was
 * against. cublasGemmEx takes its kernel from the same heuristics; the line
 * says "heuristic" because cuBLAS does not report the kernel it launched. */
#include "gemm_bench_lt.h"

#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>

/* Names of the cublasLtMatmulTile_t / cublasLtMatmulStages_t /
 * cublasLtClusterShape_t values that Hopper's bf16 kernels use; any other
 * value prints as its number. */
static const char *tile_name(uint32_t t) {
  static const char *const names[] = {
      [15] = "64x64",   [16] = "128x32",  [17] = "64x128",  [18] = "128x64",  [19] = "64x256",
      [20] = "128x128", [21] = "256x64",  [22] = "64x512",  [23] = "128x256", [24] = "256x128",
      [25] = "512x64",  [26] = "64x96",   [27] = "96x64",   [28] = "96x128",  [29] = "128x160",
      [30] = "160x128", [31] = "192x128", [32] = "128x192", [33] = "128x96"};
  return t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

static const char *stages_name(uint32_t s) {
  static const char *const names[] = {[13] = "64x1", [14] = "64x2",  [15] = "64x3",  [16] = "64x4",
                                      [17] = "64x5", [18] = "64x6",  [19] = "128x1", [20] = "128x2",
                                      [21] = "128x3", [22] = "128x4", [23] = "128x5", [24] = "128x6",
                                      [35] = "64xAUTO", [36] = "128xAUTO"};
  return s < sizeof names / sizeof names[0] ? names[s] : NULL;
}

static const char *cluster_name(uint32_t c) {
  static const char *const names[] = {[0] = "auto", [2] = "1x1", [3] = "2x1", [4] = "4x1",
                                      [5] = "1x2",  [6] = "2x2", [8] = "1x4"};
  return c < sizeof names / sizeof names[0] ? names[c] : NULL;
}

int gb_lt_describe(int m, int n, int k, int b_kn, char *buf, size_t cap) {
  cublasLtHandle_t lt = NULL;
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  int rc = -1;
  snprintf(buf, cap, "cuBLASLt heuristic: not available");
  /* gemm_bench's column-major view: C^T[n, m] = op(B) * A^T (op(B) = B^T for [N,K]) */
  const cublasOperation_t ta = b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const size_t ws = (size_t)32 << 20; /* cuBLAS's default workspace on Hopper */
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, b_kn ? n : k, b_kn ? k : n, b_kn ? n : k) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, m, n) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) !=
          CUBLAS_STATUS_SUCCESS)
    goto out;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found) != CUBLAS_STATUS_SUCCESS ||
      found < 1)
    goto out;
  int32_t id = 0, splitk = 1;
  uint32_t tile = 0, stages = 0, red = 0, swz = 0;
  uint16_t cluster = 0;
  size_t w;
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster,
                                       &w);
  char t[16], s[16], c[16];
  /* the tile is of C^T: n x m, printed as the M x N tile gemm_bench's configurations name */
  const char *tn = tile_name(tile), *sn = stages_name(stages), *cn = cluster_name(cluster);
  if (tn) {
    int tr = 0, tc = 0;
    sscanf(tn, "%dx%d", &tr, &tc);
    snprintf(t, sizeof t, "%dx%d", tc, tr);
  } else {
    snprintf(t, sizeof t, "#%u", tile);
  }
  if (sn)
    snprintf(s, sizeof s, "%s", sn);
  else
    snprintf(s, sizeof s, "#%u", stages);
  if (cn)
    snprintf(c, sizeof c, "%s", cn);
  else
    snprintf(c, sizeof c, "#%u", (unsigned)cluster);
  snprintf(buf, cap, "cuBLASLt heuristic: algo %d, tile %s (M x N), stages %s, split-K %d (reduction %u), "
           "swizzle %u, cluster %s (of C^T, N x M), waves %.2f", (int)id, t, s, (int)splitk, red, swz, c,
           (double)res.wavesCount);
  rc = 0;
out:
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  if (lc)
    cublasLtMatrixLayoutDestroy(lc);
  if (lb)
    cublasLtMatrixLayoutDestroy(lb);
  if (la)
    cublasLtMatrixLayoutDestroy(la);
  if (desc)
    cublasLtMatmulDescDestroy(desc);
  if (lt)
    cublasLtDestroy(lt);
  return rc;
}
