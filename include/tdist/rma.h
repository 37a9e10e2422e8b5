/* SPDX-License-Identifier: Apache-2.0
 * Host-side one-sided operations and signals, with OpenSHMEM names and
 * semantics (td_ prefix). Peers are team ranks; destination/source addresses
 * on the peer side are *this rank's* symmetric addresses (the library
 * translates them), as in OpenSHMEM.
 *
 * Memory model:
 *  - td_putmem / td_getmem complete before returning (the data is in place).
 *  - _nbi forms may complete later; td_quiet() waits until every outstanding
 *    put/get of the calling rank is complete and visible. td_fence() orders
 *    puts to each peer (those issued before it land before those after it).
 *  - A signal is a uint64_t in symmetric memory. td_signal_op and the signal
 *    of td_putmem_signal are *release* operations: every put to that peer
 *    issued before them (the put of putmem_signal included) is visible to a
 *    rank that observes the signal value through td_signal_wait_until,
 *    which is an *acquire* operation.
 *  - td_barrier_all / td_team_barrier imply quiet, then a barrier; td_team_sync
 *    is a barrier without the quiet.
 *
 * Every wait has a deadline (td_world_opts.timeout_ms / TD_TIMEOUT_MS, default
 * 60 s). On expiry it returns TD_ERR_TIMEOUT and a message naming the waiting
 * rank, the signal (owner rank and heap offset), the comparison and the value
 * last observed. Waits spin briefly, then yield, then sleep on a futex, so
 * they progress when ranks outnumber cores.
 *
 * Collective calls on a team (barriers, td_symm_alloc/free, splits, destroy,
 * the collectives of coll.h) must be made by every member in the same order.
 * Members that make different calls at the same point fail with
 * TD_ERR_MISMATCH naming each member's call (a collective's first call on a
 * team makes td_symm_alloc and td_team_sync itself, so it is named so). After
 * a timeout, a peer failure or such a mismatch the team is broken: every later
 * collective call on it fails at once with TD_ERR_STATE (TD_ERR_PEER_FAILED
 * after a peer failure) naming the first failure; destroy the team, or
 * finalize the world, which then does not wait for the others.
 *
 * Thread-safety: the one-sided calls (put, get, signal op/fetch/wait, fence,
 * quiet) only read the team and world handles, so several threads of one rank
 * may call them at once (e.g. executor workers). Barriers, like every
 * collective call, are made by one thread of each rank at a time. */
#ifndef TDIST_RMA_H
#define TDIST_RMA_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_sigop {
  TD_SIGNAL_SET = 0, /* signal = value */
  TD_SIGNAL_ADD = 1, /* signal += value (atomic) */
} td_sigop;

typedef enum td_cmp {
  TD_CMP_EQ = 0,
  TD_CMP_NE = 1,
  TD_CMP_GT = 2,
  TD_CMP_GE = 3,
  TD_CMP_LT = 4,
  TD_CMP_LE = 5,
} td_cmp;

/** "eq", "ne", "gt", "ge", "lt", "le"; "invalid" otherwise. */
const char *td_cmp_name(td_cmp cmp);

/* Common errors of the calls below: TD_ERR_INVALID_ARG when a pointer range is
 * outside the symmetric heap where it must be inside (message gives the
 * address, length and heap bounds) or not inside ONE live block (a range
 * running past its block's end, or in unallocated heap: the message gives the
 * block's size and the bytes needed), when pe is not a team rank, or an enum
 * is out of range. */

/** Copies `bytes` from local `src` to team rank pe's copy of symmetric `dest`. */
td_status td_putmem(td_team *team, void *dest, const void *src, size_t bytes, int pe);
/** Copies `bytes` from team rank pe's copy of symmetric `src` into local `dest`. */
td_status td_getmem(td_team *team, void *dest, const void *src, size_t bytes, int pe);
td_status td_putmem_nbi(td_team *team, void *dest, const void *src, size_t bytes, int pe);
td_status td_getmem_nbi(td_team *team, void *dest, const void *src, size_t bytes, int pe);

/** Put, then update pe's copy of symmetric signal `sig` with op/value (release). */
td_status td_putmem_signal(td_team *team, void *dest, const void *src, size_t bytes,
                           uint64_t *sig, uint64_t value, td_sigop op, int pe);
td_status td_putmem_signal_nbi(td_team *team, void *dest, const void *src, size_t bytes,
                               uint64_t *sig, uint64_t value, td_sigop op, int pe);

/** Updates pe's copy of symmetric signal `sig` (release); wakes a sleeping waiter. */
td_status td_signal_op(td_team *team, uint64_t *sig, uint64_t value, td_sigop op, int pe);

/** Reads this rank's copy of `sig` (acquire). */
uint64_t td_signal_fetch(const uint64_t *sig);

/** Waits until this rank's copy of symmetric `sig` compares to `value` as
 * `cmp` says (acquire). Writes the satisfying value to *observed if non-NULL.
 * Errors: TD_ERR_TIMEOUT (diagnostic as above), TD_ERR_PEER_FAILED (a rank of
 * the world failed while we waited), TD_ERR_INVALID_ARG. */
td_status td_signal_wait_until(td_team *team, uint64_t *sig, td_cmp cmp, uint64_t value,
                               uint64_t *observed);

/** Orders this rank's puts to each peer. */
td_status td_fence(td_team *team);
/** Completes all of this rank's outstanding _nbi operations. */
td_status td_quiet(td_team *team);

/** Quiet, then barrier over all ranks of the world. */
td_status td_barrier_all(td_world *world);
/** Quiet, then barrier over the team's members. */
td_status td_team_barrier(td_team *team);
/** Barrier over the team's members without the quiet. */
td_status td_team_sync(td_team *team);

#ifdef __cplusplus
}
#endif
#endif
