/* SPDX-License-Identifier: Apache-2.0
 * Compiler: the single-rank reference evaluator. Runs a program's math on
 * full (global) tensors in f64, ignoring layouts: a collective is the
 * identity on the global value (all_gather of a shard is the tensor;
 * reduce_scatter/all_reduce of a partial value is its sum, which is what the
 * reference already holds). Each op's result is rounded to the op's dtype,
 * as the distributed run stores it, so the remaining difference is only the
 * order and precision of accumulation. `tdist run --check` and the tests
 * compare every output with it. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "core/error.h"

static double td__round(double x, td_dtype dt) {
  switch (dt) {
  case TD_BF16: return td_bf16_to_f32(td_f32_to_bf16((float)x));
  case TD_F16: return td_f16_to_f32(td_f32_to_f16((float)x));
  case TD_F32: return (float)x;
  default: return x;
  }
}

static double td__gelu(double x) {
  const double k = 0.7978845608028654; /* sqrt(2/pi): the tanh form the tiles use */
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

td_status td_program_reference(const td_program *p, const double *const *inputs, double **values) {
  if (!p || !inputs || !values)
    return td__error(TD_ERR_INVALID_ARG, "reference: program, inputs or values is NULL");
  TD_CHECK(td_program_check(p));
  for (td_value v = 0; v < p->nvals; v++)
    values[v] = NULL;
  for (td_value v = 0; v < p->nvals; v++) {
    const td__val *V = &p->vals[v];
    int64_t R, C;
    td__val_shape(p, v, &R, &C);
    double *y = malloc(sizeof *y * (size_t)(R * C > 0 ? R * C : 1));
    if (!y) {
      for (td_value u = 0; u < v; u++)
        free(values[u]);
      return td__error(TD_ERR_NO_MEMORY, "reference: out of memory for %lld x %lld", (long long)R,
                       (long long)C);
    }
    values[v] = y;
    const double *a = V->in[0] >= 0 ? values[V->in[0]] : NULL;
    const double *b = V->in[1] >= 0 ? values[V->in[1]] : NULL;
    size_t n = (size_t)(R * C);
    switch (V->op) {
    case TD_OP_INPUT:
    case TD_OP_WEIGHT:
      if (!inputs[v]) {
        for (td_value u = 0; u <= v; u++)
          free(values[u]);
        return td__error(TD_ERR_INVALID_ARG, "reference: no data for input '%s'", V->name);
      }
      for (size_t i = 0; i < n; i++)
        y[i] = td__round(inputs[v][i], V->dtype);
      continue;
    case TD_OP_MATMUL: {
      int64_t ar, ac, br, bc;
      td__val_shape(p, V->in[0], &ar, &ac);
      td__val_shape(p, V->in[1], &br, &bc);
      int ta = (V->flags & TD_MATMUL_TRANSPOSE_A) != 0, tb = (V->flags & TD_MATMUL_TRANSPOSE_B) != 0;
      int64_t K = ta ? ar : ac;
      /* f64 BLAS: the reference must stay cheap next to the runs it checks. */
      cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  (int)R, (int)C, (int)K, 1.0, a, (int)ac, b, (int)bc, 0.0, y, (int)C);
      break;
    }
    case TD_OP_ALL_GATHER:
    case TD_OP_REDUCE_SCATTER:
    case TD_OP_ALL_REDUCE:
    case TD_OP_ALL_TO_ALL:
      memcpy(y, a, sizeof *y * n);
      break;
    case TD_OP_ADD: for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i]; break;
    case TD_OP_MUL: for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i]; break;
    case TD_OP_GELU: for (size_t i = 0; i < n; i++) y[i] = td__gelu(a[i]); break;
    case TD_OP_SILU: for (size_t i = 0; i < n; i++) y[i] = a[i] / (1.0 + exp(-a[i])); break;
    case TD_OP_SCALE: for (size_t i = 0; i < n; i++) y[i] = (double)V->alpha * a[i]; break;
    case TD_OP_RMSNORM:
      for (int64_t i = 0; i < R; i++) {
        double ss = 0;
        for (int64_t j = 0; j < C; j++)
          ss += a[i * C + j] * a[i * C + j];
        double inv = 1.0 / sqrt(ss / (double)C + (double)V->alpha);
        for (int64_t j = 0; j < C; j++)
          y[i * C + j] = a[i * C + j] * inv * b[j];
      }
      break;
    default:
      break;
    }
    for (size_t i = 0; i < n; i++)
      y[i] = td__round(y[i], V->dtype);
  }
  return TD_OK;
}
