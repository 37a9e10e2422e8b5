/* SPDX-License-Identifier: Apache-2.0
 * CUDA tile: reduce chunk (TD_TASK_REDUCE), c = c <op> a element-wise, op a
 * td_red_op (sum, max, min, prod); c or a may be a peer's copy. One thread
 * block. f16/bf16/f32 compute in f32 and round once; f64 in double; i32 and
 * i64 in integers that wrap as unsigned arithmetic does (as the CPU tile). */

#define TD_RED_SUM 0
#define TD_RED_MAX 1
#define TD_RED_MIN 2
#define TD_RED_PROD 3

__device__ __forceinline__ double td_red_apply(unsigned int op, double x, double y) {
  switch (op) {
  case TD_RED_MAX: return x > y ? x : y;
  case TD_RED_MIN: return x < y ? x : y;
  case TD_RED_PROD: return x * y;
  default: return x + y;
  }
}

__device__ void td_tile_reduce(const td_dev_task &t) {
  const td_dev_view &a = t.a, &c = t.c;
  const td_dev_i64 rows = c.rows, cols = c.cols, n = rows * cols;
  for (td_dev_i64 k = threadIdx.x; k < n; k += TD_THREADS) {
    const td_dev_i64 i = k / cols, j = k % cols;
    if (c.dtype == TD_DT_I64 && a.dtype == TD_DT_I64) {
      long long *pc = (long long *)td_elem(c, i, j);
      const long long x = *pc, y = *(const long long *)td_elem(a, i, j);
      long long r;
      switch (t.op) {
      case TD_RED_MAX: r = x > y ? x : y; break;
      case TD_RED_MIN: r = x < y ? x : y; break;
      case TD_RED_PROD: r = (long long)((td_dev_u64)x * (td_dev_u64)y); break;
      default: r = (long long)((td_dev_u64)x + (td_dev_u64)y); break;
      }
      *pc = r;
    } else if (c.dtype == TD_DT_F64) {
      double *pc = (double *)td_elem(c, i, j);
      *pc = td_red_apply(t.op, *pc, td_load_d(a, i, j));
    } else if (c.dtype == TD_DT_I32 && a.dtype == TD_DT_I32) {
      int *pc = (int *)td_elem(c, i, j);
      const int x = *pc, y = *(const int *)td_elem(a, i, j);
      int r;
      switch (t.op) {
      case TD_RED_MAX: r = x > y ? x : y; break;
      case TD_RED_MIN: r = x < y ? x : y; break;
      case TD_RED_PROD: r = (int)((unsigned int)x * (unsigned int)y); break;
      default: r = (int)((unsigned int)x + (unsigned int)y); break;
      }
      *pc = r;
    } else {
      const float r = (float)td_red_apply(t.op, td_load_f(c, i, j), td_load_f(a, i, j));
      td_store_f(c, i, j, r);
    }
  }
}
