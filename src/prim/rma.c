/* SPDX-License-Identifier: Apache-2.0
 * Host one-sided operations and signals (primitives layer).
 *
 * Every peer of the local and shm transports is an LSA peer, so a put is a
 * copy into the peer's mapping of the heap and completes before it returns;
 * the _nbi forms are the same copy (quiet then has nothing left to wait for
 * but a fence). A signal update is an atomic store or add with release order
 * after the data copy, followed by a ring of the owner's doorbell so a
 * sleeping waiter looks again at once. */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "prim/prim_impl.h"

static td_status td__check_team(const td_team *team, const char *fn) {
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", fn);
  return TD_OK;
}

static td_status td__check_local(const td_world *w, const void *ptr, size_t bytes, const char *fn, const char *arg) {
  if (bytes && !ptr)
    return td__error(TD_ERR_INVALID_ARG, "rank %d: %s: %s is NULL with %zu bytes", w->rank, fn, arg, bytes);
  return TD_OK;
}

/* In this rank's heap and inside one live block (td__symm_check_range). */
static td_status td__check_symm_block(const td_world *w, const void *ptr, size_t bytes, const char *fn,
                                      const char *arg) {
  TD_CHECK(td__check_symm(w, ptr, bytes, fn, arg));
  return td__symm_check_range(w, ptr, bytes, fn, arg, NULL);
}

static td_status td__check_sig(const td_world *w, const uint64_t *sig, const char *fn) {
  TD_CHECK(td__check_symm_block(w, sig, sizeof *sig, fn, "sig"));
  if ((uintptr_t)sig % sizeof(uint64_t))
    return td__error(TD_ERR_INVALID_ARG, "rank %d: %s: sig=%p is not 8-byte aligned", w->rank, fn, (const void *)sig);
  return TD_OK;
}

static void *td__peer_addr(const td_team *t, const void *ptr, int pe) {
  const td_world *w = t->world;
  return td__heap(w, t->members[pe]) + ((const char *)ptr - td__heap(w, w->rank));
}

static td_status td__put(td_team *team, void *dest, const void *src, size_t bytes, int pe, const char *fn) {
  TD_CHECK(td__check_team(team, fn));
  TD_CHECK(td__check_pe(team, pe, fn));
  TD_CHECK(td__check_symm_block(team->world, dest, bytes, fn, "dest"));
  TD_CHECK(td__check_local(team->world, src, bytes, fn, "src"));
  if (bytes)
    memmove(td__peer_addr(team, dest, pe), src, bytes);
  return TD_OK;
}

static td_status td__get(td_team *team, void *dest, const void *src, size_t bytes, int pe, const char *fn) {
  TD_CHECK(td__check_team(team, fn));
  TD_CHECK(td__check_pe(team, pe, fn));
  TD_CHECK(td__check_symm_block(team->world, src, bytes, fn, "src"));
  TD_CHECK(td__check_local(team->world, dest, bytes, fn, "dest"));
  if (bytes)
    memmove(dest, td__peer_addr(team, src, pe), bytes);
  return TD_OK;
}

td_status td_putmem(td_team *team, void *dest, const void *src, size_t bytes, int pe) {
  return td__put(team, dest, src, bytes, pe, "td_putmem");
}

td_status td_getmem(td_team *team, void *dest, const void *src, size_t bytes, int pe) {
  return td__get(team, dest, src, bytes, pe, "td_getmem");
}

td_status td_putmem_nbi(td_team *team, void *dest, const void *src, size_t bytes, int pe) {
  return td__put(team, dest, src, bytes, pe, "td_putmem_nbi");
}

td_status td_getmem_nbi(td_team *team, void *dest, const void *src, size_t bytes, int pe) {
  return td__get(team, dest, src, bytes, pe, "td_getmem_nbi");
}

/* Applies op to pe's copy of sig (release) and rings pe's doorbell. Arguments checked by the caller. */
static void td__signal_apply(td_team *team, uint64_t *sig, uint64_t value, td_sigop op, int pe) {
  _Atomic uint64_t *s = td__peer_addr(team, sig, pe);
  if (op == TD_SIGNAL_SET)
    atomic_store_explicit(s, value, memory_order_release);
  else
    atomic_fetch_add_explicit(s, value, memory_order_release);
  td__wake_world_rank(team->world, team->members[pe]);
}

static td_status td__check_signal_args(td_team *team, uint64_t *sig, td_sigop op, int pe, const char *fn) {
  TD_CHECK(td__check_team(team, fn));
  TD_CHECK(td__check_pe(team, pe, fn));
  TD_CHECK(td__check_sig(team->world, sig, fn));
  if (op != TD_SIGNAL_SET && op != TD_SIGNAL_ADD)
    return td__error(TD_ERR_INVALID_ARG, "rank %d: %s: op=%d; allowed TD_SIGNAL_SET (0) or TD_SIGNAL_ADD (1)",
                     team->world->rank, fn, (int)op);
  return TD_OK;
}

static td_status td__put_signal(td_team *team, void *dest, const void *src, size_t bytes, uint64_t *sig,
                                uint64_t value, td_sigop op, int pe, const char *fn) {
  TD_CHECK(td__check_signal_args(team, sig, op, pe, fn));
  TD_CHECK(td__put(team, dest, src, bytes, pe, fn));
  td__signal_apply(team, sig, value, op, pe);
  return TD_OK;
}

td_status td_putmem_signal(td_team *team, void *dest, const void *src, size_t bytes, uint64_t *sig, uint64_t value,
                           td_sigop op, int pe) {
  return td__put_signal(team, dest, src, bytes, sig, value, op, pe, "td_putmem_signal");
}

td_status td_putmem_signal_nbi(td_team *team, void *dest, const void *src, size_t bytes, uint64_t *sig,
                               uint64_t value, td_sigop op, int pe) {
  return td__put_signal(team, dest, src, bytes, sig, value, op, pe, "td_putmem_signal_nbi");
}

td_status td_signal_op(td_team *team, uint64_t *sig, uint64_t value, td_sigop op, int pe) {
  TD_CHECK(td__check_signal_args(team, sig, op, pe, "td_signal_op"));
  td__signal_apply(team, sig, value, op, pe);
  return TD_OK;
}

uint64_t td_signal_fetch(const uint64_t *sig) {
  return atomic_load_explicit((const _Atomic uint64_t *)sig, memory_order_acquire);
}

td_status td_signal_wait_until(td_team *team, uint64_t *sig, td_cmp cmp, uint64_t value, uint64_t *observed) {
  static const char fn[] = "td_signal_wait_until";
  TD_CHECK(td__check_team(team, fn));
  td_world *w = team->world;
  TD_CHECK(td__check_sig(w, sig, fn));
  if ((unsigned)cmp > TD_CMP_LE)
    return td__error(TD_ERR_INVALID_ARG, "rank %d: %s: cmp=%d; allowed TD_CMP_EQ .. TD_CMP_LE (0..5)", w->rank, fn,
                     (int)cmp);
  uint64_t v = 0;
  td_status st = td__wait_raw(w, (_Atomic uint64_t *)sig, cmp, value, td__deadline_ns(w), &v);
  if (st == TD_ERR_PEER_FAILED)
    return td__peer_failed_error(w, fn);
  if (st == TD_ERR_TIMEOUT)
    return td__error(TD_ERR_TIMEOUT,
                     "rank %d: %s timed out after %d ms: signal owned by rank %d at heap offset %zu, until value %s "
                     "%" PRIu64 "; last observed %" PRIu64,
                     w->rank, fn, w->timeout_ms, w->rank, (size_t)((char *)sig - td__heap(w, w->rank)),
                     td_cmp_name(cmp), value, v);
  if (observed)
    *observed = v;
  return TD_OK;
}
