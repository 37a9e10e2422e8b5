/* SPDX-License-Identifier: Apache-2.0
 * Local argument checks of the host collectives (collectives layer): what one
 * rank can tell about its own call before talking to its peers. A rank that
 * fails them still joins the call's first step (td__coll_bad_args) so its
 * peers fail at once instead of waiting for their deadline. */
#include <stdint.h>

#include "coll/coll_internal.h"
#include "coll/coll_symm_check.h"
#include "core/error.h"
#include "prim/prim_internal.h"

td_status td__coll_check_dtype(const char *name, td_dtype dtype) {
  if ((unsigned)dtype >= TD_DTYPE_COUNT)
    return td__error(TD_ERR_INVALID_ARG,
                     "%s: dtype %d is not a td_dtype; allowed: f32, f16, bf16, i32, f64, i64, u8",
                     name, (int)dtype);
  return TD_OK;
}

td_status td__coll_check_op(const char *name, td_dtype dtype, td_red_op op) {
  TD_CHECK(td__coll_check_dtype(name, dtype));
  if ((unsigned)op >= TD_RED_OP_COUNT)
    return td__error(TD_ERR_INVALID_ARG, "%s: reduction op %d is not a td_red_op; allowed: sum, max, min, prod",
                     name, (int)op);
  if (dtype == TD_U8)
    return td__error(TD_ERR_INVALID_ARG,
                     "%s: u8 is raw bytes and cannot be reduced; reductions take f32, f16, bf16, i32, "
                     "f64 or i64",
                     name);
  return TD_OK;
}

td_status td__coll_check_buf(const char *name, const char *what, const void *p, size_t bytes) {
  if (!p && bytes > 0)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s is NULL but must hold %zu bytes", name, what, bytes);
  if (p && (uintptr_t)p + bytes < (uintptr_t)p)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s of %zu bytes at %p wraps around the address space",
                     name, what, bytes, p);
  return TD_OK;
}

td_status td__coll_check_disjoint(const char *name, const void *a, size_t an, const void *b,
                                  size_t bn) {
  if (!a || !b || !an || !bn)
    return TD_OK;
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  if (a0 < b0 + bn && b0 < a0 + an)
    return td__error(TD_ERR_INVALID_ARG,
                     "%s: dst [%p, +%zu bytes) and src [%p, +%zu bytes) overlap; they must be "
                     "disjoint except for the documented in-place form",
                     name, a, an, b, bn);
  return TD_OK;
}

td_status td__coll_check_symm(td_team *team, const char *name, const char *what, const void *p, size_t bytes) {
  if (!team || !p || !bytes)
    return TD_OK;
  return td__symm_check_range(td_team_world(team), p, bytes, name, what, NULL);
}

td_status td__coll_check_count(const char *name, size_t count, td_dtype dtype, int ranks) {
  const size_t es = td_dtype_size(dtype);
  if (!es)
    return TD_OK;
  if (!ranks && count > SIZE_MAX / es)
    return td__error(TD_ERR_INVALID_ARG,
                     "%s: count %zu of %s (%zu bytes each) overflows the address space; at most %zu elements",
                     name, count, td_dtype_name(dtype), es, SIZE_MAX / es);
  if (ranks && count > SIZE_MAX / es / (size_t)ranks)
    return td__error(TD_ERR_INVALID_ARG,
                     "%s: count %zu of %s (%zu bytes each) times %d ranks overflows the address space; at most "
                     "%zu elements per rank",
                     name, count, td_dtype_name(dtype), es, ranks, SIZE_MAX / es / (size_t)ranks);
  return TD_OK;
}

td_status td__coll_check_buf_symm(td_team *team, const char *name, const char *what, const void *p,
                                  size_t bytes) {
  TD_CHECK(td__coll_check_buf(name, what, p, bytes));
  return td__coll_check_symm(team, name, what, p, bytes);
}
