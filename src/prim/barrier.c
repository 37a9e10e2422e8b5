/* SPDX-License-Identifier: Apache-2.0
 * Barriers, fence and quiet (primitives layer).
 *
 * A team barrier is a dissemination barrier: in round k every member stores
 * the barrier's epoch into the round-k flag of the member 2^k ahead (release)
 * and waits until its own round-k flag reaches the epoch (acquire); after
 * ceil(log2(size)) rounds every member has heard, directly or not, from all.
 * Flags are never reset: each barrier of a team uses the next epoch, and a
 * flag that is already past the epoch (a fast peer's next barrier) also
 * satisfies the wait, which is correct because that peer finished this one.
 * Each team owns one of TD__MAX_TEAMS flag sets per rank; a new team starts
 * its epochs above every epoch its members ever used, so a reused flag set
 * never holds a value that would satisfy a fresh barrier. */
#include <inttypes.h>

#include "core/error.h"
#include "prim/prim_impl.h"

td_status td__barrier(td_team *t, int64_t deadline_ns, const char *what) {
  td_world *w = t->world;
  TD_CHECK(td__team_usable(t, what));
  if (t->size == 1)
    return TD_OK;
  uint64_t epoch = ++t->bar_epoch;
  if (epoch > w->epoch_hwm)
    w->epoch_hwm = epoch;
  _Atomic uint64_t *mine = w->ranks[w->rank].bar[t->index];
  for (int k = 0, dist = 1; dist < t->size; k++, dist <<= 1) {
    int to = t->members[(t->rank + dist) % t->size];
    atomic_store_explicit(&w->ranks[to].bar[t->index][k], epoch, memory_order_release);
    td__wake_world_rank(w, to);
    uint64_t seen = 0;
    td_status st = td__team_wait(t, &mine[k], TD_CMP_GE, epoch, deadline_ns, &seen, what);
    if (st == TD_ERR_MISMATCH)
      return td__team_break(t, st);
    if (st == TD_ERR_PEER_FAILED)
      return td__team_break(t, td__peer_failed_error(w, what));
    if (st != TD_OK) {
      int from = (t->rank - dist + t->size) % t->size;
      return td__team_break(t, td__error(TD_ERR_TIMEOUT,
                       "rank %d: %s timed out after %d ms: team of %d ranks (this is team rank %d), "
                       "round %d waited for team rank %d (world rank %d) to arrive at barrier epoch %" PRIu64
                       "; last observed epoch %" PRIu64,
                       w->rank, what, w->timeout_ms, t->size, t->rank, k, from, t->members[from], epoch, seen));
    }
  }
  return TD_OK;
}

td_status td_fence(td_team *team) {
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "td_fence: team is NULL");
  /* Puts complete before they return, so ordering them needs only a release fence. */
  atomic_thread_fence(memory_order_release);
  return TD_OK;
}

td_status td_quiet(td_team *team) {
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "td_quiet: team is NULL");
  atomic_thread_fence(memory_order_seq_cst);
  return TD_OK;
}

td_status td_team_sync(td_team *team) {
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "td_team_sync: team is NULL");
  td__team_call(team, TD__OP_TEAM_SYNC);
  return td__barrier(team, td__deadline_ns(team->world), "td_team_sync");
}

td_status td_team_barrier(td_team *team) {
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "td_team_barrier: team is NULL");
  atomic_thread_fence(memory_order_seq_cst);
  td__team_call(team, TD__OP_TEAM_BARRIER);
  return td__barrier(team, td__deadline_ns(team->world), "td_team_barrier");
}

td_status td_barrier_all(td_world *world) {
  if (!world)
    return td__error(TD_ERR_INVALID_ARG, "td_barrier_all: world is NULL");
  atomic_thread_fence(memory_order_seq_cst);
  td__team_call(world->team, TD__OP_BARRIER_ALL);
  return td__barrier(world->team, td__deadline_ns(world), "td_barrier_all");
}
