/* SPDX-License-Identifier: Apache-2.0
 * Copy / put chunk tile (tiles layer, cpu backend): c = a for a rows x cols
 * view of one dtype, row by row. Either side may be a peer's copy (a put
 * when c is remote, a get when a is remote): on the local and shm transports
 * every peer is load/store reachable, so a chunk move is a plain copy and
 * the executor's raise after it publishes the data (release). Rows are
 * moved with memmove so a shifted copy inside one buffer is also defined. */
#include <string.h>

#include "tile/cpu/elem.h"

td_status td__tile_cpu_copy(td_tile_ctx *ctx, const td_tile_args *args) {
  (void)ctx;
  const td_tile_mat *a = &args->a, *c = &args->c;
  size_t row_bytes = (size_t)c->cols * td_dtype_size(c->dtype);
  if (row_bytes == 0 || c->rows == 0)
    return TD_OK;
  if (a->ld == a->cols && c->ld == c->cols) { /* whole rows: one move */
    memmove(c->ptr, a->ptr, row_bytes * (size_t)c->rows);
    return TD_OK;
  }
  for (int64_t i = 0; i < c->rows; i++)
    memmove(td__elem(c, i, 0), td__elem(a, i, 0), row_bytes);
  return TD_OK;
}
