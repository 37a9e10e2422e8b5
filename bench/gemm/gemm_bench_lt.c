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
 * cublasLtClusterShape_t values, generated from the cublasLt.h of this build
 * (lt_names.cmake); a value outside them prints as its number. */
#include "gemm_bench_lt_names.h"

#define GB_LT_NAME(table, v) ((size_t)(v) < sizeof table / sizeof table[0] ? table[v] : NULL)

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
  /* an attribute this cuBLAS cannot report leaves the line "not available" rather than printing zeros */
  if (cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w) ||
      cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w) ||
      cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w) ||
      cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w) ||
      cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w) ||
      cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &w) ||
      cublasLtMatmulAlgoConfigGetAttribute(&res.algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                           sizeof cluster, &w))
    goto out;
  char t[24], s[24], c[24];
  /* the tile is of C^T: n x m, printed as the M x N tile gemm_bench's configurations name */
  const char *tn = GB_LT_NAME(gb_lt_tile_names, tile), *sn = GB_LT_NAME(gb_lt_stages_names, stages),
             *cn = GB_LT_NAME(gb_lt_cluster_names, cluster);
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
