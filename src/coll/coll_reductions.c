/* SPDX-License-Identifier: Apache-2.0
 * td_reduce_scatter and td_all_reduce (collectives layer).
 *
 * reduce_scatter: rank r reduces its td_chunk_range part, reading every
 * rank's input for that part (directly from symmetric src, or from the piece
 * the owner staged in scratch), in rank order 0..n-1.
 *
 * all_reduce:
 *  - inline (<= TD__COLL_INLINE bytes): every rank publishes its vector in
 *    its slot and reduces all of them: one flag round-trip, nothing else;
 *  - one-shot (<= TD__COLL_ONESHOT_MAX, twice that for 2 ranks): the same
 *    with the vector in scratch, or read straight from a symmetric src (then
 *    a "done" step; in-place calls always stage, since dst is being written);
 *  - direct (src and dst symmetric on every rank): reduce-scatter into the
 *    own part of dst, one step, copy the peers' reduced parts out of their
 *    dst, then a "done" step;
 *  - pipelined: per piece, step A publishes every chunk's piece, each rank
 *    reduces its own and writes it to the next region, step B publishes that
 *    and every rank copies the peers' reduced pieces.
 * All paths reduce an element in the same rank order, so they agree bit for bit. */
#include <string.h>

#include "coll/coll_internal.h"
#include "coll/coll_symm_check.h"
#include "core/error.h"

static size_t td__min(size_t a, size_t b) { return a < b ? a : b; }

/* One-shot reads n whole vectors per rank; reduce-scatter + all-gather about
 * two. Measured on the 2-core dev box (docs/perf.md), one-shot wins up to
 * 64 KiB, and with 2 ranks up to 128 KiB. */
static size_t td__oneshot_max(int n) { return n == 2 ? 2 * TD__COLL_ONESHOT_MAX : TD__COLL_ONESHOT_MAX; }

td_status td_reduce_scatter(td_team *team, void *dst, const void *src, size_t count,
                            td_dtype dtype, td_red_op op) {
  static const char name[] = "td_reduce_scatter";
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", name);
  const int n = td_team_size(team), r = td_team_rank(team);
  td_status st = td__coll_check_op(name, dtype, op);
  size_t es = td_dtype_size(dtype), bytes = count * es, off_r = 0, len_r = 0;
  if (st == TD_OK)
    st = td__coll_check_count(name, count, dtype, 0);
  td_chunk_range(count, n, r, &off_r, &len_r);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "src", src, bytes);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "dst", dst, len_r * es);
  const int in_place = dst == (const char *)src + off_r * es;
  if (st == TD_OK && !in_place)
    st = td__coll_check_disjoint(name, dst, len_r * es, src, bytes);
  if (st != TD_OK)
    return td__coll_bad_args(team, TD__COLL_REDUCE_SCATTER, st);

  td__coll *c;
  TD_CHECK(td__coll_get(team, &c));
  td__coll_pub pub = {.kind = TD__COLL_REDUCE_SCATTER, .dtype = dtype, .op = op, .count = count,
                      .loc = TD__COLL_LOC_NONE};
  const unsigned check = TD__CHECK_COUNT | TD__CHECK_DTYPE | TD__CHECK_OP;
  if (bytes <= TD__COLL_INLINE) {
    pub.inline_data = src;
    pub.inline_bytes = bytes;
    TD_CHECK(td__coll_begin(c, name, &pub, check));
    for (int p = 0; p < n; p++)
      c->srcs[p] = td__coll_peer_slot(c, p)->data + off_r * es;
    td__coll_reduce(dst, c->srcs, n, len_r, dtype, op);
    return TD_OK;
  }
  size_t len0 = 0, off0 = 0;
  td_chunk_range(count, n, 0, &off0, &len0); /* chunk 0 is the longest */
  const int src_symm = td__coll_read_direct(c, src, bytes);
  size_t q = c->piece / (size_t)n / es;
  td__coll_stage_chunks(c, &pub, src, count, es, 0, q, src_symm);
  TD_CHECK(td__coll_begin(c, name, &pub, check));
  int all_symm, any_symm;
  td__coll_peers_src_symm(c, n, &all_symm, &any_symm);
  if (all_symm)
    q = len0;
  size_t pieces = (len0 + q - 1) / q;
  for (size_t k = 0; k < pieces; k++) {
    if (k > 0) {
      td__coll_stage_chunks(c, &pub, src, count, es, k, q, src_symm);
      if ((st = td__coll_step(c, &pub)) != TD_OK)
        goto fail;
    }
    size_t from = k * q;
    if (from >= len_r)
      continue;
    for (int p = 0; p < n; p++)
      c->srcs[p] = td__coll_chunk_src(c, p, r, count, es, k, q);
    td__coll_reduce((char *)dst + from * es, c->srcs, n, td__min(q, len_r - from), dtype, op);
  }
  if (any_symm && (st = td__coll_done(c)) != TD_OK)
    goto fail;
  return TD_OK;
fail:
  td__error_prefix("%s: ", name);
  return st;
}

/* Direct path: every rank's src and dst are symmetric (begin already done). */
static td_status td__all_reduce_direct(td__coll *c, char *dst, size_t count, td_dtype dtype,
                                       td_red_op op) {
  const int n = c->size, r = c->rank;
  const size_t es = td_dtype_size(dtype);
  size_t off_r, len_r;
  td_chunk_range(count, n, r, &off_r, &len_r);
  for (int p = 0; p < n; p++)
    c->srcs[p] = td__coll_peer_at(c, p, td__coll_peer_slot(c, p)->loc) + off_r * es;
  td__coll_reduce(dst + off_r * es, c->srcs, n, len_r, dtype, op);
  td__coll_pub pub = {.kind = TD__COLL_ALL_REDUCE, .loc = td__coll_off(c, dst)};
  TD_CHECK(td__coll_step(c, &pub));
  for (int i = 1; i < n; i++) {
    int p = (r + i) % n;
    size_t off, len;
    td_chunk_range(count, n, p, &off, &len);
    memcpy(dst + off * es, td__coll_peer_at(c, p, td__coll_peer_slot(c, p)->loc) + off * es,
           len * es);
  }
  return td__coll_done(c);
}

td_status td_all_reduce(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype,
                        td_red_op op) {
  static const char name[] = "td_all_reduce";
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", name);
  const int n = td_team_size(team), r = td_team_rank(team);
  td_status st = td__coll_check_op(name, dtype, op);
  size_t es = td_dtype_size(dtype), bytes = count * es;
  if (st == TD_OK)
    st = td__coll_check_count(name, count, dtype, 0);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "src", src, bytes);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "dst", dst, bytes);
  if (st == TD_OK && dst != src)
    st = td__coll_check_disjoint(name, dst, bytes, src, bytes);
  if (st != TD_OK)
    return td__coll_bad_args(team, TD__COLL_ALL_REDUCE, st);

  td__coll *c;
  TD_CHECK(td__coll_get(team, &c));
  td__coll_pub pub = {.kind = TD__COLL_ALL_REDUCE, .dtype = dtype, .op = op, .count = count,
                      .loc = TD__COLL_LOC_NONE};
  const unsigned check = TD__CHECK_COUNT | TD__CHECK_DTYPE | TD__CHECK_OP;
  if (bytes <= TD__COLL_INLINE) {
    pub.inline_data = src;
    pub.inline_bytes = bytes;
    TD_CHECK(td__coll_begin(c, name, &pub, check));
    for (int p = 0; p < n; p++)
      c->srcs[p] = td__coll_peer_slot(c, p)->data;
    td__coll_reduce(dst, c->srcs, n, count, dtype, op);
    return TD_OK;
  }
  if (bytes <= td__min(td__oneshot_max(n), c->piece)) {
    /* Symmetric, not in place: publish src itself (peers may then go direct);
     * otherwise stage a copy, which also makes in-place safe. */
    const int sy = dst != src && td__coll_read_direct(c, src, bytes) && td__coll_is_symm(c, dst, bytes);
    const char *mine = src;
    if (sy) {
      pub.loc = td__coll_off(c, src);
      pub.mode = TD__COLL_SRC_SYMM | TD__COLL_DST_SYMM;
    } else {
      char *region = td__coll_region(c, c->seq + 1);
      memcpy(region, src, bytes);
      mine = region;
      pub.loc = td__coll_off(c, region);
    }
    TD_CHECK(td__coll_begin(c, name, &pub, check));
    int any_symm = 0;
    for (int p = 0; p < n; p++)
      any_symm |= (td__coll_peer_slot(c, p)->mode & TD__COLL_SRC_SYMM) != 0;
    for (int p = 0; p < n; p++)
      c->srcs[p] = p == r ? mine : td__coll_peer_at(c, p, td__coll_peer_slot(c, p)->loc);
    td__coll_reduce(dst, c->srcs, n, count, dtype, op);
    if (any_symm)
      st = td__coll_done(c);
    if (st != TD_OK)
      td__error_prefix("%s: ", name);
    return st;
  }
  const int src_symm = td__coll_is_symm(c, src, bytes);
  size_t q = c->piece / (size_t)n / es;
  if (td__coll_is_symm(c, dst, bytes))
    pub.mode |= TD__COLL_DST_SYMM;
  td__coll_stage_chunks(c, &pub, src, count, es, 0, q, src_symm);
  TD_CHECK(td__coll_begin(c, name, &pub, check));
  int all_direct = 1, any_symm = 0;
  for (int p = 0; p < n; p++) {
    unsigned m = td__coll_peer_slot(c, p)->mode;
    all_direct &= (m & TD__COLL_SRC_SYMM) && (m & TD__COLL_DST_SYMM);
    any_symm |= (m & TD__COLL_SRC_SYMM) != 0;
  }
  if (all_direct) {
    if ((st = td__all_reduce_direct(c, dst, count, dtype, op)) != TD_OK)
      goto fail;
    return TD_OK;
  }
  size_t off_r, len_r, off0, len0;
  td_chunk_range(count, n, r, &off_r, &len_r);
  td_chunk_range(count, n, 0, &off0, &len0);
  size_t pieces = (len0 + q - 1) / q;
  char *out = dst;
  for (size_t k = 0; k < pieces; k++) {
    if (k > 0) { /* step A(k): every chunk's piece k */
      td__coll_stage_chunks(c, &pub, src, count, es, k, q, src_symm);
      if ((st = td__coll_step(c, &pub)) != TD_OK)
        goto fail;
    }
    size_t from = k * q;
    char *next = td__coll_region(c, c->seq + 1); /* peers are done with it: they reached seq */
    if (from < len_r) {
      size_t m = td__min(q, len_r - from);
      for (int p = 0; p < n; p++)
        c->srcs[p] = td__coll_chunk_src(c, p, r, count, es, k, q);
      td__coll_reduce(out + (off_r + from) * es, c->srcs, n, m, dtype, op);
      memcpy(next, out + (off_r + from) * es, m * es);
    }
    td__coll_pub pub_b = {.kind = TD__COLL_ALL_REDUCE, .loc = td__coll_off(c, next)};
    if ((st = td__coll_step(c, &pub_b)) != TD_OK) /* step B(k): the reduced pieces */
      goto fail;
    for (int i = 1; i < n; i++) {
      int p = (r + i) % n;
      size_t off, len;
      td_chunk_range(count, n, p, &off, &len);
      if (from < len)
        memcpy(out + (off + from) * es, td__coll_peer_at(c, p, td__coll_peer_slot(c, p)->loc),
               td__min(q, len - from) * es);
    }
  }
  if (any_symm && (st = td__coll_done(c)) != TD_OK)
    goto fail;
  return TD_OK;
fail:
  td__error_prefix("%s: ", name);
  return st;
}
