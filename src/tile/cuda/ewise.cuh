/* SPDX-License-Identifier: Apache-2.0
 * CUDA tiles: element-wise (TD_TASK_EWISE) and RMS normalisation
 * (TD_TASK_RMSNORM) of a rows x cols view. One thread block; math in f32.
 *
 * Element-wise: c = f(a) or f(a, b) with f = add, mul (binary), gelu (the tanh
 * form, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as the CPU tile, so
 * both backends agree), silu (x / (1 + e^-x)), scale (alpha x), copy.
 * RMS norm: c[i][j] = a[i][j] / sqrt(mean_j(a[i][j]^2) + alpha) * b[0][j], one
 * row at a time with a block-wide sum through shared memory. */

#define TD_EW_ADD 0
#define TD_EW_MUL 1
#define TD_EW_GELU 2
#define TD_EW_SILU 3
#define TD_EW_SCALE 4
#define TD_EW_COPY 5

__device__ __forceinline__ float td_ewise_apply(unsigned int op, float alpha, float x, float y) {
  switch (op) {
  case TD_EW_ADD: return x + y;
  case TD_EW_MUL: return x * y;
  case TD_EW_GELU: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  case TD_EW_SILU: return x / (1.0f + expf(-x));
  case TD_EW_SCALE: return alpha * x;
  default: return x;
  }
}

__device__ void td_tile_ewise(const td_dev_task &t) {
  const td_dev_view &a = t.a, &b = t.b, &c = t.c;
  const bool binary = (t.op == TD_EW_ADD || t.op == TD_EW_MUL);
  const td_dev_i64 rows = c.rows, cols = c.cols, n = rows * cols;
  for (td_dev_i64 k = threadIdx.x; k < n; k += TD_THREADS) {
    const td_dev_i64 i = k / cols, j = k % cols;
    const float x = td_load_f(a, i, j);
    const float y = binary ? td_load_f(b, i, j) : 0.0f;
    td_store_f(c, i, j, td_ewise_apply(t.op, t.alpha, x, y));
  }
}

__device__ void td_tile_rmsnorm(const td_dev_task &t) {
  __shared__ float partial[TD_THREADS / 32];
  const td_dev_view &a = t.a, &b = t.b, &c = t.c;
  for (td_dev_i64 i = 0; i < c.rows; i++) {
    float s = 0.0f;
    for (td_dev_i64 j = threadIdx.x; j < c.cols; j += TD_THREADS) {
      const float x = td_load_f(a, i, j);
      s += x * x;
    }
    for (int off = 16; off > 0; off >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0)
      partial[threadIdx.x >> 5] = s;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < TD_THREADS / 32; w++)
      total += partial[w];
    const float inv = rsqrtf(total / (float)c.cols + t.alpha);
    for (td_dev_i64 j = threadIdx.x; j < c.cols; j += TD_THREADS)
      td_store_f(c, i, j, td_load_f(a, i, j) * inv * td_load_f(b, 0, j));
    __syncthreads(); /* partial[] is reused by the next row */
  }
}
