/* SPDX-License-Identifier: Apache-2.0
 * Internal interface of the primitives layer for the layers above it
 * (collectives, device, executor). Not installed; not a public API.
 *
 * What it gives:
 *  - team rank -> world rank translation;
 *  - one private pointer per upper layer on every team ("slots"), with a
 *    destructor run when the team is destroyed or the world finalised;
 *  - the runtime's deadline wait on any 64-bit word of the region (a signal
 *    in this rank's heap or in a peer's copy), with the same spin / yield /
 *    futex sleep, deadline and peer-failure behaviour as td_signal_wait_until;
 *  - ringing a rank's doorbell, so a waiter asleep in td__wait_u64 or
 *    td_signal_wait_until looks again at once after a plain store;
 *  - the symmetric-range check (a range starting in the heap must lie inside
 *    one live block), shared by the one-sided calls and the collectives;
 *  - numbering of team calls (td__team_begin_call) so members in different
 *    calls fail with TD_ERR_MISMATCH, and the broken-team check.
 * td__team_world_rank, td__wait_u64 and td__wake are thread-safe: several
 * threads of one rank may wait on its doorbell at once (every wake wakes all
 * of them). Slots are not: one thread of the rank owns them. */
#ifndef TD_PRIM_INTERNAL_H
#define TD_PRIM_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "tdist/rma.h"
#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Slot ids: one per upper layer. */
enum {
  TD__SLOT_COLL = 0,   /* collectives (src/coll) */
  TD__SLOT_DEVICE = 1, /* device primitives (src/device) */
  TD__SLOT_EXEC = 2,   /* executors (src/exec) */
  TD__SLOT_COUNT = 3
};

/** Kinds of objects that keep a team past their create call. */
enum {
  TD__TEAM_USER_OPERATOR = 0, /* td_tp_op (src/ops) */
  TD__TEAM_USER_EXECUTOR = 1, /* td_exec made by td_exec_create (src/exec) */
  TD__TEAM_USER_NCCL = 2,     /* td_nccl (src/cuda) */
  TD__TEAM_USER_KINDS = 3
};

/** Counts (`delta` +1 at create, -1 at destroy) an object of kind `kind`
 * (TD__TEAM_USER_*) that keeps `team` after its create call returns, so
 * td_team_destroy refuses (TD_ERR_STATE, on every rank alike) while any
 * remain. NULL team or a kind out of range: nothing. Thread-safe. */
void td__team_users_add(td_team *team, int kind, int delta);

/** World rank of team rank `team_rank`; -1 when out of range. Thread-safe. */
int td__team_world_rank(const td_team *team, int team_rank);

/** The layer's private pointer of this team (initially NULL); NULL for an
 * invalid id. The pointer belongs to the calling rank only. */
void **td__team_slot(td_team *team, int id);

/** Sets the destructor of slot `id`: called with the slot's pointer (if
 * non-NULL) by td_team_destroy before the team goes, and for the world team by
 * td_world_finalize / td_local_world_destroy, in the order EXEC, DEVICE, COLL.
 * A destructor must release only this rank's resources: it must not make
 * collective calls (td_local_world_destroy runs it on the destroying thread,
 * and symmetric blocks are reclaimed with the team or the world anyway). */
void td__team_set_slot_dtor(td_team *team, int id, void (*dtor)(void *));

/** Waits until *addr compares to `value` as `cmp` says (acquire), with the
 * world's deadline from now. `addr` may be any 8-byte aligned word of the
 * region: this rank's heap or a peer's copy (td_symm_at). Writes the
 * satisfying value to *observed if non-NULL. Errors: TD_ERR_TIMEOUT (message:
 * waiting rank, `what`, the word's owner rank and heap offset when it is in a
 * heap, comparison, expected and last observed value), TD_ERR_PEER_FAILED
 * (message names the failed rank), TD_ERR_INVALID_ARG (cmp out of range).
 * The writer must ring the waiter's doorbell (td__wake) after its store for a
 * prompt wake-up; without it the waiter still sees the store within ~1 ms. */
td_status td__wait_u64(td_team *team, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                       const char *what, uint64_t *observed);

/** Checks a range this rank is about to hand to a symmetric operation. When
 * `ptr` lies outside this rank's symmetric heap, returns TD_OK and sets
 * *in_heap = 0 (the caller decides: a private buffer or an error). When it
 * lies inside, sets *in_heap = 1 and requires [ptr, ptr+bytes) to lie inside
 * ONE live block of this rank (bytes 0 counts as 1: the byte at ptr);
 * otherwise TD_ERR_INVALID_ARG whose message names `fn`, `arg`, the heap
 * offset, the block's size and offset and the bytes the range needs (or says
 * that no live block holds ptr). in_heap may be NULL. Reads only this rank's
 * own block table: call it from the thread that allocates, or while no
 * td_symm_alloc/free runs on this rank. */
td_status td__symm_check_range(const td_world *w, const void *ptr, size_t bytes, const char *fn, const char *arg,
                               int *in_heap);

/** Call kinds of the collectives (src/coll), for td__team_begin_call. */
enum {
  TD__CALL_ALL_GATHER = 16,
  TD__CALL_REDUCE_SCATTER,
  TD__CALL_ALL_REDUCE,
  TD__CALL_BROADCAST,
  TD__CALL_ALL_TO_ALL,
  TD__CALL_ALL_TO_ALLV,
};

/** Starts a collective call of an upper layer on the team (one of
 * TD__CALL_*): it is numbered with the runtime's own team calls (barriers,
 * td_symm_alloc/free, splits), so members at the same call number in
 * different calls fail with TD_ERR_MISMATCH naming each member's call. Made
 * by the thread that makes the rank's team calls; nothing happens on a
 * broken team. */
void td__team_begin_call(td_team *team, int kind);

/** td__wait_u64 for the thread making the current team call: also fails with
 * TD_ERR_MISMATCH (message names each member's call) as soon as a member is
 * found in a different call with the same number (checked every 20 ms). */
td_status td__wait_u64_call(td_team *team, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                            const char *what, uint64_t *observed);

/** TD_OK, or (at once) the error of a team that an earlier call found
 * broken: a timeout, a peer failure or members making different calls. Then
 * no collective call on the team can complete, and peers may still read what
 * this rank published before: callers check before publishing anything.
 * Message: `what`, and the first failure. TD_ERR_STATE or TD_ERR_PEER_FAILED. */
td_status td__team_check_usable(td_team *team, const char *what);

/** Rings team rank `team_pe`'s doorbell (after a release store it should
 * notice). Cheap when nobody sleeps. Ignores out-of-range ranks. */
void td__wake(td_team *team, int team_pe);

#ifdef __cplusplus
}
#endif
#endif
