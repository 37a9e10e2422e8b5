/* SPDX-License-Identifier: Apache-2.0
 * The symmetric heap allocator (primitives layer).
 *
 * Each rank keeps a table of its live blocks (offset, bytes, team) in its
 * control data, where every other rank can read it. An allocation is a
 * leader-free exchange (team.c): members post (status, bytes, align); all
 * check that the requests match; each then scans the tables of all members
 * for the lowest offset free on every one of them (teams may have allocated
 * different things, so one rank's view is not enough) and, after the closing
 * barrier, records the block in its own table. All members read the same
 * inputs, so all reach the same offset or the same error, and the heap is
 * unchanged by a failed call. Free is the same exchange: members post the
 * offset, all check, then each removes its own entry. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "prim/prim_impl.h"

enum { TD__ALLOC_STATUS, TD__ALLOC_BYTES, TD__ALLOC_ALIGN };

td_status td__check_symm(const td_world *w, const void *ptr, size_t bytes, const char *fn, const char *arg) {
  const char *lo = td__heap(w, w->rank), *p = ptr;
  if (!ptr || p < lo || p > lo + w->heap_size || bytes > (size_t)(lo + w->heap_size - p))
    return td__error(TD_ERR_INVALID_ARG,
                     "rank %d: %s: %s=%p (+%zu bytes) is outside this rank's symmetric heap [%p, %p); pass an "
                     "address returned by td_symm_alloc",
                     w->rank, fn, arg, ptr, bytes, (const void *)lo, (const void *)(lo + w->heap_size));
  return TD_OK;
}

/* Index of the live block of `rc` holding heap offset `off`; -1 if none. The
 * table is sorted by offset: find the last block starting at or before off. */
static int td__block_at(const td__rank_ctl *rc, uint64_t off) {
  uint32_t lo = 0, hi = rc->nblocks;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (rc->blocks[mid].offset <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return -1;
  const td__block *b = &rc->blocks[lo - 1];
  return off < b->offset + (b->bytes ? b->bytes : 1) ? (int)(lo - 1) : -1;
}

td_status td__symm_check_range(const td_world *w, const void *ptr, size_t bytes, const char *fn, const char *arg,
                               int *in_heap) {
  const char *lo = td__heap(w, w->rank), *p = ptr;
  int inside = p && p >= lo && p < lo + w->heap_size;
  if (in_heap)
    *in_heap = inside;
  if (!inside)
    return TD_OK;
  uint64_t off = (uint64_t)(p - lo), need = bytes ? bytes : 1;
  const td__rank_ctl *rc = &w->ranks[w->rank];
  int k = td__block_at(rc, off);
  if (k < 0)
    return td__error(TD_ERR_INVALID_ARG,
                     "rank %d: %s: %s=%p (heap offset %" PRIu64 ", %zu byte%s) is in the symmetric heap but not "
                     "inside a live block (unallocated or freed); pass memory from td_symm_alloc",
                     w->rank, fn, arg, ptr, off, bytes, bytes == 1 ? "" : "s");
  const td__block *b = &rc->blocks[k];
  uint64_t span = b->bytes ? b->bytes : 1, left = b->offset + span - off;
  if (need > left)
    return td__error(TD_ERR_INVALID_ARG,
                     "rank %d: %s: %s=%p needs %zu bytes but runs past the end of its symmetric block (%" PRIu64
                     " bytes at heap offset %" PRIu64 "; %" PRIu64 " bytes left from heap offset %" PRIu64
                     "); a range must stay inside one block",
                     w->rank, fn, arg, ptr, bytes, b->bytes, b->offset, left, off);
  return TD_OK;
}

td_status td__check_pe(const td_team *t, int pe, const char *fn) {
  if (pe < 0 || pe >= t->size)
    return td__error(TD_ERR_INVALID_ARG, "rank %d: %s: pe=%d is not a rank of the team (size %d; allowed 0 to %d)",
                     t->world->rank, fn, pe, t->size, t->size - 1);
  return TD_OK;
}

static uint64_t td__span(const td__block *b) { return b->bytes ? b->bytes : 1; }

static uint64_t td__align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

/* Lowest offset (aligned) where `bytes` fit on every member; UINT64_MAX if none. */
static uint64_t td__find_common(const td_team *t, uint64_t bytes, uint64_t align) {
  const td_world *w = t->world;
  uint64_t need = bytes ? bytes : 1, off = 0;
  if (need > w->heap_size)
    return UINT64_MAX;
  for (int moved = 1; moved;) {
    moved = 0;
    if (off > w->heap_size - need)
      return UINT64_MAX;
    for (int i = 0; i < t->size; i++) {
      const td__rank_ctl *rc = &w->ranks[t->members[i]];
      for (uint32_t k = 0; k < rc->nblocks; k++) {
        const td__block *b = &rc->blocks[k];
        if (b->offset < off + need && off < b->offset + td__span(b)) {
          off = td__align_up(b->offset + td__span(b), align);
          moved = 1;
        }
      }
    }
  }
  return off;
}

static void td__table_insert(td__rank_ctl *rc, uint64_t off, uint64_t bytes, uint64_t uid) {
  uint32_t k = rc->nblocks;
  while (k > 0 && rc->blocks[k - 1].offset > off) {
    rc->blocks[k] = rc->blocks[k - 1];
    k--;
  }
  rc->blocks[k] = (td__block){off, bytes, uid};
  rc->nblocks++;
}

static void td__table_remove(td__rank_ctl *rc, uint32_t k) {
  memmove(&rc->blocks[k], &rc->blocks[k + 1], sizeof(td__block) * (rc->nblocks - k - 1));
  rc->nblocks--;
}

static size_t td__used(const td__rank_ctl *rc) {
  size_t used = 0;
  for (uint32_t k = 0; k < rc->nblocks; k++)
    used += rc->blocks[k].bytes;
  return used;
}

td_status td_symm_alloc(td_team *team, size_t bytes, size_t align, void **out) {
  static const char what[] = "td_symm_alloc";
  if (!team || !out)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s is NULL", what, team ? "out" : "team");
  td_world *w = team->world;
  char msg[1024] = "";
  td_status local = TD_OK;
  if (align == 0)
    align = 64;
  if ((align & (align - 1)) != 0 || align > TD__REGION_ALIGN) {
    local = td__error(TD_ERR_INVALID_ARG, "rank %d: %s: align=%zu; allowed 0 (= 64) or a power of two up to %zu",
                      w->rank, what, align, (size_t)TD__REGION_ALIGN);
    snprintf(msg, sizeof msg, "%s", td_last_error());
  }
  int64_t deadline = td__deadline_ns(w);
  uint64_t words[TD__POST_WORDS] = {(uint64_t)local, bytes, align};
  TD_CHECK(td__team_gather(team, TD__OP_ALLOC, words, deadline, what));
  td_status result = local;
  for (int i = 0; i < team->size && result == TD_OK; i++) {
    const uint64_t *p = td__team_posted(team, i);
    if (p[TD__ALLOC_STATUS] != TD_OK)
      result = td__error(TD_ERR_INVALID_ARG, "rank %d: %s: team rank %d passed an invalid align=%" PRIu64,
                         w->rank, what, i, p[TD__ALLOC_ALIGN]);
    else if (p[TD__ALLOC_BYTES] != bytes || p[TD__ALLOC_ALIGN] != align) {
      size_t len = (size_t)snprintf(msg, sizeof msg,
                                    "rank %d: %s: members asked for different blocks (every member must pass the "
                                    "same bytes and align):",
                                    w->rank, what);
      for (int j = 0; j < team->size && len < sizeof msg - 64; j++) {
        const uint64_t *q = td__team_posted(team, j);
        len += (size_t)snprintf(msg + len, sizeof msg - len, " team rank %d: %" PRIu64 " bytes align %" PRIu64 ";",
                                j, q[TD__ALLOC_BYTES], q[TD__ALLOC_ALIGN]);
      }
      if (len >= sizeof msg - 64)
        snprintf(msg + sizeof msg - 8, 8, " ...");
      result = td__error(TD_ERR_MISMATCH, "%s", msg);
    }
  }
  uint64_t off = UINT64_MAX;
  if (result == TD_OK) {
    for (int i = 0; i < team->size && result == TD_OK; i++)
      if (w->ranks[team->members[i]].nblocks >= TD__MAX_BLOCKS)
        result = td__error(TD_ERR_HEAP_EXHAUSTED, "rank %d: %s: team rank %d already has %d live blocks, the most "
                           "allowed; free some",
                           w->rank, what, i, TD__MAX_BLOCKS);
  }
  if (result == TD_OK) {
    off = td__find_common(team, bytes, align);
    if (off == UINT64_MAX) {
      size_t used = td__used(&w->ranks[w->rank]);
      result = td__error(TD_ERR_HEAP_EXHAUSTED,
                         "rank %d: %s: requested %zu bytes (align %zu) on a team of %d, but no range that large is "
                         "free on every member; this rank has %zu of %zu bytes free (total); raise "
                         "TD_SYMM_HEAP_SIZE or free blocks",
                         w->rank, what, bytes, align, team->size, w->heap_size - used, w->heap_size);
    }
  }
  if (result != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  TD_CHECK(td__team_gather_end(team, deadline, what));
  if (result != TD_OK)
    return td__error(result, "%s", msg);
  td__table_insert(&w->ranks[w->rank], off, bytes, team->uid);
  *out = td__heap(w, w->rank) + off;
  return TD_OK;
}

/* Checks that ptr starts a live block of `team` on this rank; sets *index. */
static td_status td__find_block(td_team *team, const void *ptr, uint32_t *index, int *other_team) {
  td_world *w = team->world;
  TD_CHECK(td__check_symm(w, ptr, 0, "td_symm_free", "ptr"));
  uint64_t off = (uint64_t)((const char *)ptr - td__heap(w, w->rank));
  const td__rank_ctl *rc = &w->ranks[w->rank];
  for (uint32_t k = 0; k < rc->nblocks; k++) {
    const td__block *b = &rc->blocks[k];
    if (b->offset == off) {
      *other_team = b->team_uid != team->uid;
      if (*other_team)
        return td__error(TD_ERR_INVALID_ARG,
                         "rank %d: td_symm_free: ptr=%p (heap offset %" PRIu64 ") was allocated on another "
                         "team; free it on the team that allocated it",
                         w->rank, ptr, off);
      *index = k;
      return TD_OK;
    }
    if (off > b->offset && off < b->offset + td__span(b))
      return td__error(TD_ERR_INVALID_ARG,
                       "rank %d: td_symm_free: ptr=%p points inside a block (heap offset %" PRIu64 ", %" PRIu64
                       " bytes at offset %" PRIu64 "), not at its start",
                       w->rank, ptr, off, b->bytes, b->offset);
  }
  for (unsigned k = 0; k < sizeof w->freed / sizeof w->freed[0] && k < w->nfreed; k++)
    if (w->freed[k] == off)
      return td__error(TD_ERR_INVALID_ARG, "rank %d: td_symm_free: ptr=%p (heap offset %" PRIu64
                       ") was already freed",
                       w->rank, ptr, off);
  return td__error(TD_ERR_INVALID_ARG, "rank %d: td_symm_free: ptr=%p (heap offset %" PRIu64
                   ") was never allocated (or was freed long ago)",
                   w->rank, ptr, off);
}

td_status td_symm_free(td_team *team, void *ptr) {
  static const char what[] = "td_symm_free";
  if (!ptr)
    return TD_OK;
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", what);
  td_world *w = team->world;
  char msg[768] = "";
  uint32_t index = 0;
  int other_team = 0;
  td_status local = td__find_block(team, ptr, &index, &other_team);
  if (other_team)
    return local; /* members of this team may never call: waiting for them would only reach the deadline */
  if (local != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  uint64_t off = (uint64_t)((const char *)ptr - td__heap(w, w->rank));
  int64_t deadline = td__deadline_ns(w);
  uint64_t words[TD__POST_WORDS] = {(uint64_t)local, off};
  TD_CHECK(td__team_gather(team, TD__OP_FREE, words, deadline, what));
  td_status result = local;
  for (int i = 0; i < team->size && result == TD_OK; i++) {
    const uint64_t *p = td__team_posted(team, i);
    if (p[0] != TD_OK)
      result = td__error(TD_ERR_INVALID_ARG, "rank %d: %s: team rank %d passed an invalid pointer, so nothing was "
                         "freed",
                         w->rank, what, i);
    else if (p[1] != off)
      result = td__error(TD_ERR_MISMATCH, "rank %d: %s: members passed different blocks: team rank %d heap "
                         "offset %" PRIu64 ", team rank %d heap offset %" PRIu64,
                         w->rank, what, team->rank, off, i, p[1]);
  }
  if (result != TD_OK && local == TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  TD_CHECK(td__team_gather_end(team, deadline, what));
  if (result != TD_OK)
    return td__error(result, "%s", msg);
  td__table_remove(&w->ranks[w->rank], index);
  w->freed[w->nfreed++ % (sizeof w->freed / sizeof w->freed[0])] = off;
  return TD_OK;
}

void td__symm_release_team(td_team *t) {
  td__rank_ctl *rc = &t->world->ranks[t->world->rank];
  for (uint32_t k = rc->nblocks; k-- > 0;)
    if (rc->blocks[k].team_uid == t->uid)
      td__table_remove(rc, k);
}

td_status td_symm_at(td_team *team, const void *ptr, int peer, void **out) {
  if (!team || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_symm_at: %s is NULL", team ? "out" : "team");
  TD_CHECK(td__check_pe(team, peer, "td_symm_at"));
  td_world *w = team->world;
  TD_CHECK(td__check_symm(w, ptr, 0, "td_symm_at", "ptr"));
  TD_CHECK(td__symm_check_range(w, ptr, 1, "td_symm_at", "ptr", NULL));
  *out = td__heap(w, team->members[peer]) + ((const char *)ptr - td__heap(w, w->rank));
  return TD_OK;
}

void *td_symm_ptr(td_team *team, const void *ptr, int peer) {
  void *p = NULL;
  return td_symm_at(team, ptr, peer, &p) == TD_OK ? p : NULL;
}

int td_symm_contains(const td_world *world, const void *ptr, size_t bytes) {
  if (!world || !ptr)
    return 0;
  const char *lo = td__heap(world, world->rank), *p = ptr;
  return p >= lo && p <= lo + world->heap_size && bytes <= (size_t)(lo + world->heap_size - p);
}

td_status td_symm_heap_base(const td_world *world, int peer, void **base, size_t *size) {
  if (!world || !base || !size)
    return td__error(TD_ERR_INVALID_ARG, "td_symm_heap_base: %s is NULL", !world ? "world" : !base ? "base" : "size");
  if (peer < 0 || peer >= world->size)
    return td__error(TD_ERR_INVALID_ARG, "td_symm_heap_base: peer=%d is not a world rank (world size %d)", peer,
                     world->size);
  *base = td__heap(world, peer);
  *size = world->heap_size;
  return TD_OK;
}

void td_symm_usage(const td_world *world, size_t *used, size_t *total) {
  size_t u = world ? td__used(&world->ranks[world->rank]) : 0;
  if (used)
    *used = u;
  if (total)
    *total = world ? world->heap_size : 0;
}
