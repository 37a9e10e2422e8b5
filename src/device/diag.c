/* SPDX-License-Identifier: Apache-2.0
 * Device diagnostics, host side (primitives layer, device part).
 *
 * A device wait that passes its deadline leaves a td_dev_diagnostic record in
 * host-visible memory (device.h). This file turns such a record into the
 * TD_ERR_TIMEOUT status and the message that host code reports, in the same
 * words as the runtime's own wait diagnostics: who waited, on which word of
 * whose heap, for what comparison, and what it saw. */
#include <inttypes.h>
#include <stdio.h>

#include "core/error.h"
#include "tdist/device.h"

td_status td_dev_diagnostic_status(const td_dev_diagnostic *d) {
  if (d == NULL)
    return TD_OK;
  /* The writer stores state last, after a system fence. */
  if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == 0)
    return TD_OK;
  if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == TD_DEV_DIAG_BAD_PE)
    return td__error(TD_ERR_INVALID_ARG, "rank %d (block %d): a device put, get or signal named pe %d, outside "
                     "the team (0 to %d); it wrote nothing", (int)d->rank, (int)d->block, (int)d->owner,
                     (int)d->expected - 1);
  char where[96];
  if (d->offset == UINT64_MAX)
    snprintf(where, sizeof where, "a word outside the symmetric heap");
  else
    snprintf(where, sizeof where, "the signal at heap offset 0x%" PRIx64 " of rank %d", d->offset,
             (int)d->owner);
  return td__error(TD_ERR_TIMEOUT,
                   "rank %d (block %d, thread %d): device wait timed out after %" PRIu64
                   " ms on %s: needed value %s %" PRIu64 ", observed %" PRIu64
                   " (raise TD_TIMEOUT_MS if the peer is only slow; otherwise the signal is never "
                   "raised: check the producer)",
                   (int)d->rank, (int)d->block, (int)d->thread, d->waited_ns / 1000000u, where,
                   td_cmp_name((td_cmp)d->cmp), d->expected, d->observed);
}
