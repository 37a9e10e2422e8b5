/* SPDX-License-Identifier: Apache-2.0
 * Internal: recording the thread-local error message. The first code that
 * detects a problem calls td__error() and returns its result. */
#ifndef TD_CORE_ERROR_H
#define TD_CORE_ERROR_H

#include <stddef.h>

#include "tdist/status.h"

#if defined(__GNUC__)
#define TD__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TD__PRINTF(a, b)
#endif

/** Sets the calling thread's message to the formatted text and returns status. */
td_status td__error(td_status status, const char *fmt, ...) TD__PRINTF(2, 3);
/** Prefixes the calling thread's current message with the formatted text ("while X: "). A prefix that
 * starts with a rank's tag ("rank 3: ") takes the same tag off the start of the message, so that a rank's
 * context around its own error names it once ("rank 3: task 7: td_symm_alloc ..."). */
void td__error_prefix(const char *fmt, ...) TD__PRINTF(1, 2);
/** Length of the rank tag "rank N: " (N decimal digits) that `m` starts with; 0 when it has none. */
size_t td__rank_tag_len(const char *m);

#define TD_CHECK(expr)              \
  do {                              \
    td_status td__st_ = (expr);     \
    if (td__st_ != TD_OK)           \
      return td__st_;               \
  } while (0)

#endif
