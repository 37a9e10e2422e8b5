/* SPDX-License-Identifier: Apache-2.0
 * td_all_gather and td_broadcast (collectives layer): pure data movement,
 * every rank pulls what it needs from its peers.
 *
 * Three paths, chosen the same way on every rank:
 *  - inline: the data fits in the slot (TD__COLL_INLINE bytes); one step;
 *  - direct: every rank that supplies data has it in symmetric memory, or in
 *    ordinary memory that peers can read in place (coll_direct.c); peers copy
 *    it straight from there (one copy), then a "done" step keeps the owner
 *    from returning while peers still read its buffer;
 *  - staged: pieces of the scratch region's size, one step each; a rank whose
 *    src is symmetric still publishes its src (no copy-in), others copy each
 *    piece into scratch first. */
#include <string.h>

#include "coll/coll_internal.h"
#include "coll/coll_symm_check.h"
#include "core/error.h"

/* Copies peer p's piece k (of `piece` bytes; len of them) for the current
 * step into dst: in place from its src, or from its scratch region. */
static td_status td__piece_read(const td__coll *c, int p, size_t k, size_t piece, void *dst, size_t len) {
  const td__coll_slot *s = td__coll_peer_slot(c, p);
  if (s->mode & TD__COLL_SRC_DIRECT)
    return td__coll_read(c, p, s, k * piece, dst, len);
  memcpy(dst, td__coll_peer_at(c, p, s->loc), len);
  return TD_OK;
}

/* Publishes piece k of `src` (bytes long) for the next step: a src read in
 * place keeps what td__coll_src_direct put in *pub; otherwise the piece is
 * copied into the step's region. */
static void td__stage_piece(td__coll *c, td__coll_pub *pub, const char *src, size_t bytes, size_t k,
                            int src_direct) {
  if (src_direct)
    return;
  char *region = td__coll_region(c, c->seq + 1);
  size_t off = k * c->piece, len = bytes - off < c->piece ? bytes - off : c->piece;
  memcpy(region, src + off, len);
  pub->loc = td__coll_off(c, region);
  pub->mode = 0;
}

td_status td_all_gather(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype) {
  static const char name[] = "td_all_gather";
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", name);
  const int n = td_team_size(team), r = td_team_rank(team);
  td_status st = td__coll_check_dtype(name, dtype);
  size_t es = td_dtype_size(dtype), bytes = count * es;
  if (st == TD_OK)
    st = td__coll_check_count(name, count, dtype, n);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "src", src, bytes);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "dst", dst, bytes * (size_t)n);
  char *out = dst, *mine = out + (size_t)r * bytes;
  const int in_place = src == mine;
  if (st == TD_OK && !in_place)
    st = td__coll_check_disjoint(name, dst, bytes * (size_t)n, src, bytes);
  if (st != TD_OK)
    return td__coll_bad_args(team, TD__COLL_ALL_GATHER, st);

  td__coll *c;
  TD_CHECK(td__coll_get(team, &c));
  td__coll_pub pub = {.kind = TD__COLL_ALL_GATHER, .dtype = dtype, .count = count,
                      .loc = TD__COLL_LOC_NONE};
  const unsigned check = TD__CHECK_COUNT | TD__CHECK_DTYPE;
  if (bytes <= TD__COLL_INLINE) {
    pub.inline_data = src;
    pub.inline_bytes = bytes;
    TD_CHECK(td__coll_begin(c, name, &pub, check));
    for (int p = 0; p < n; p++)
      if (p != r)
        memcpy(out + (size_t)p * bytes, td__coll_peer_slot(c, p)->data, bytes);
    if (!in_place && bytes)
      memcpy(mine, src, bytes);
    return TD_OK;
  }
  const int src_direct = td__coll_src_direct(c, src, bytes, &pub);
  td__stage_piece(c, &pub, src, bytes, 0, src_direct);
  TD_CHECK(td__coll_begin(c, name, &pub, check));
  int all_direct, any_direct;
  td__coll_peers_src_direct(c, n, &all_direct, &any_direct);
  if (!in_place)
    memcpy(mine, src, bytes);
  size_t piece = all_direct ? bytes : c->piece;
  size_t pieces = (bytes + piece - 1) / piece;
  td_status rd = TD_OK; /* a failed read still ends the call's steps with the peers */
  for (size_t k = 0; k < pieces; k++) {
    if (k > 0) {
      td__stage_piece(c, &pub, src, bytes, k, src_direct);
      if ((st = td__coll_step(c, &pub)) != TD_OK)
        goto fail;
    }
    size_t off = k * piece, len = bytes - off < piece ? bytes - off : piece;
    for (int i = 1; i < n; i++) {
      int p = (r + i) % n; /* start with the next rank so peers' reads spread out */
      td_status e = td__piece_read(c, p, k, piece, out + (size_t)p * bytes + off, len);
      if (rd == TD_OK)
        rd = e;
    }
  }
  if (any_direct && (st = td__coll_done(c)) != TD_OK)
    goto fail;
  if ((st = rd) != TD_OK)
    goto fail;
  return TD_OK;
fail:
  td__error_prefix("%s: ", name);
  return st;
}

td_status td_broadcast(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype,
                       int root) {
  static const char name[] = "td_broadcast";
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", name);
  const int n = td_team_size(team), r = td_team_rank(team);
  td_status st = td__coll_check_dtype(name, dtype);
  size_t es = td_dtype_size(dtype), bytes = count * es;
  if (st == TD_OK)
    st = td__coll_check_count(name, count, dtype, 0);
  if (st == TD_OK && (root < 0 || root >= n))
    st = td__error(TD_ERR_INVALID_ARG, "%s: root %d is not a rank of the team (0..%d)", name, root,
                   n - 1);
  if (st == TD_OK && r == root)
    st = td__coll_check_buf_symm(team, name, "src (root)", src, bytes);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "dst", dst, bytes);
  if (st == TD_OK && r == root && dst != src)
    st = td__coll_check_disjoint(name, dst, bytes, src, bytes);
  if (st != TD_OK)
    return td__coll_bad_args(team, TD__COLL_BROADCAST, st);

  td__coll *c;
  TD_CHECK(td__coll_get(team, &c));
  td__coll_pub pub = {.kind = TD__COLL_BROADCAST, .dtype = dtype, .count = count, .root = root,
                      .loc = TD__COLL_LOC_NONE};
  const unsigned check = TD__CHECK_COUNT | TD__CHECK_DTYPE | TD__CHECK_ROOT;
  const int is_root = r == root;
  if (bytes <= TD__COLL_INLINE) {
    if (is_root) {
      pub.inline_data = src;
      pub.inline_bytes = bytes;
    }
    TD_CHECK(td__coll_begin(c, name, &pub, check));
    if (bytes && (!is_root || dst != src))
      memcpy(dst, is_root ? src : (const void *)td__coll_peer_slot(c, root)->data, bytes);
    return TD_OK;
  }
  const int src_direct = is_root && td__coll_src_direct(c, src, bytes, &pub);
  if (is_root)
    td__stage_piece(c, &pub, src, bytes, 0, src_direct);
  TD_CHECK(td__coll_begin(c, name, &pub, check));
  const int root_direct = (td__coll_peer_slot(c, root)->mode & TD__COLL_SRC_DIRECT) != 0;
  if (is_root && dst != src)
    memcpy(dst, src, bytes);
  size_t piece = root_direct ? bytes : c->piece;
  size_t pieces = (bytes + piece - 1) / piece;
  td_status rd = TD_OK;
  for (size_t k = 0; k < pieces; k++) {
    if (k > 0) {
      if (is_root)
        td__stage_piece(c, &pub, src, bytes, k, src_direct);
      if ((st = td__coll_step(c, &pub)) != TD_OK)
        goto fail;
    }
    size_t off = k * piece, len = bytes - off < piece ? bytes - off : piece;
    if (!is_root && rd == TD_OK)
      rd = td__piece_read(c, root, k, piece, (char *)dst + off, len);
  }
  if (root_direct && (st = td__coll_done(c)) != TD_OK)
    goto fail;
  if ((st = rd) != TD_OK)
    goto fail;
  return TD_OK;
fail:
  td__error_prefix("%s: ", name);
  return st;
}
