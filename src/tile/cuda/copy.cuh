/* SPDX-License-Identifier: Apache-2.0
 * CUDA tile: copy/put of a rows x cols view (TD_TASK_COPY), c = a, where c or a
 * may be a peer's copy (the executor resolved peer views to plain device
 * addresses through the peers' heap bases). One thread block.
 *
 * Same dtype: a byte copy, 16 bytes per thread per step when both views and
 * their row strides are 16-byte aligned (the usual case for chunks), else one
 * element per step. Different dtypes convert through f32. */

__device__ void td_tile_copy(const td_dev_task &t) {
  const td_dev_view &a = t.a, &c = t.c;
  const td_dev_i64 rows = c.rows, cols = c.cols;
  if (rows <= 0 || cols <= 0)
    return;
  if (a.dtype == c.dtype) {
    const int esz = td_dtype_bytes(c.dtype);
    const td_dev_i64 rowbytes = cols * esz;
    const bool vec = ((a.ptr | c.ptr) % 16 == 0) && ((a.ld * esz) % 16 == 0) &&
                     ((c.ld * esz) % 16 == 0) && (rowbytes % 16 == 0);
    if (vec) {
      const td_dev_i64 per_row = rowbytes / 16, n = rows * per_row;
      for (td_dev_i64 k = threadIdx.x; k < n; k += TD_THREADS) {
        const td_dev_i64 i = k / per_row, j = k % per_row;
        const uint4 *src = (const uint4 *)((const char *)a.ptr + i * a.ld * esz) + j;
        uint4 *dst = (uint4 *)((char *)c.ptr + i * c.ld * esz) + j;
        *dst = *src;
      }
      return;
    }
    const td_dev_i64 n = rows * cols;
    for (td_dev_i64 k = threadIdx.x; k < n; k += TD_THREADS) {
      const td_dev_i64 i = k / cols, j = k % cols;
      const char *src = td_elem(a, i, j);
      char *dst = td_elem(c, i, j);
      switch (esz) {
      case 1: *dst = *src; break;
      case 2: *(unsigned short *)dst = *(const unsigned short *)src; break;
      case 4: *(unsigned int *)dst = *(const unsigned int *)src; break;
      default: *(td_dev_u64 *)dst = *(const td_dev_u64 *)src; break;
      }
    }
    return;
  }
  const td_dev_i64 n = rows * cols;
  for (td_dev_i64 k = threadIdx.x; k < n; k += TD_THREADS)
    td_store_f(c, k / cols, k % cols, td_load_f(a, k / cols, k % cols));
}
