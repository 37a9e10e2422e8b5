/* SPDX-License-Identifier: Apache-2.0
 * Internal (collectives layer): the symmetric-range check of a collective's
 * buffers. A buffer that starts in the caller's symmetric heap may be read or
 * written by peers at the same offset, so it must lie inside one live block:
 * a range running past its block would read or overwrite the next block (the
 * collectives' own control block, possibly) or run off the heap. The check is
 * local, made before the call's first step, so a failing rank still takes part
 * in that step with its verdict (td__coll_bad_args) and every rank fails. */
#ifndef TD_COLL_SYMM_CHECK_H
#define TD_COLL_SYMM_CHECK_H

#include <stddef.h>

#include "tdist/coll.h"

/** TD_OK when [p, p+bytes) starts outside this rank's symmetric heap or lies
 * inside one live block of it; else TD_ERR_INVALID_ARG naming `name`, `what`,
 * the block's size and the bytes needed. bytes 0 is always TD_OK. */
td_status td__coll_check_symm(td_team *team, const char *name, const char *what, const void *p, size_t bytes);

#endif
