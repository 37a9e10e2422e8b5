/* SPDX-License-Identifier: Apache-2.0
 * td_all_to_all and td_all_to_allv (collectives layer).
 *
 * Each rank pulls the block meant for it from every peer: straight out of the
 * peer's src when it can be read in place (symmetric, or ordinary memory
 * readable across ranks: coll_direct.c; then a "done" step), otherwise
 * from scratch pieces the peer packs for every destination (region split in
 * n parts of q bytes, one step per piece).
 *
 * all_to_allv first publishes every rank's send counts and displacements
 * (the control block's vectors), lets each rank compare its column with its
 * own recv counts, then spends one "verdict" step so that a difference found
 * by any rank fails the call on every rank with the same message. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_internal.h"
#include "coll/coll_symm_check.h"
#include "core/error.h"

static size_t td__min(size_t a, size_t b) { return a < b ? a : b; }

td_status td_all_to_all(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype) {
  static const char name[] = "td_all_to_all";
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", name);
  const int n = td_team_size(team), r = td_team_rank(team);
  td_status st = td__coll_check_dtype(name, dtype);
  size_t es = td_dtype_size(dtype), b = count * es, total = b * (size_t)n;
  if (st == TD_OK)
    st = td__coll_check_count(name, count, dtype, n);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "src", src, total);
  if (st == TD_OK)
    st = td__coll_check_buf_symm(team, name, "dst", dst, total);
  if (st == TD_OK)
    st = td__coll_check_disjoint(name, dst, total, src, total);
  if (st != TD_OK)
    return td__coll_bad_args(team, TD__COLL_ALL_TO_ALL, st);

  td__coll *c;
  TD_CHECK(td__coll_get(team, &c));
  td__coll_pub pub = {.kind = TD__COLL_ALL_TO_ALL, .dtype = dtype, .count = count,
                      .loc = TD__COLL_LOC_NONE};
  const unsigned check = TD__CHECK_COUNT | TD__CHECK_DTYPE;
  char *out = dst;
  const char *in = src;
  if (total <= TD__COLL_INLINE) {
    pub.inline_data = src;
    pub.inline_bytes = total;
    TD_CHECK(td__coll_begin(c, name, &pub, check));
    for (int p = 0; p < n; p++)
      memcpy(out + (size_t)p * b, td__coll_peer_slot(c, p)->data + (size_t)r * b, b);
    return TD_OK;
  }
  const int src_direct = td__coll_src_direct(c, src, total, &pub);
  size_t q = (c->piece / (size_t)n) & ~(size_t)63;
  int all_direct = 1, any_direct = 0;
  size_t pieces = 1;
  td_status rd = TD_OK; /* a failed read still ends the call's steps with the peers */
  for (size_t k = 0; k < pieces; k++) {
    if (!src_direct) { /* else pub keeps what td__coll_src_direct wrote */
      char *region = td__coll_region(c, c->seq + 1);
      for (int d = 0; d < n && k * q < b; d++)
        memcpy(region + (size_t)d * q, in + (size_t)d * b + k * q, td__min(q, b - k * q));
      pub.loc = td__coll_off(c, region);
      pub.mode = 0;
    }
    if (k == 0) {
      TD_CHECK(td__coll_begin(c, name, &pub, check));
      td__coll_peers_src_direct(c, n, &all_direct, &any_direct);
      if (all_direct)
        q = b;
      pieces = (b + q - 1) / q;
    } else if ((st = td__coll_step(c, &pub)) != TD_OK) {
      goto fail;
    }
    size_t from = k * q, len = td__min(q, b - from);
    for (int i = 1; i < n; i++) {
      int p = (r + i) % n;
      const td__coll_slot *s = td__coll_peer_slot(c, p);
      if (s->mode & TD__COLL_SRC_DIRECT) {
        td_status e = td__coll_read(c, p, s, (size_t)r * b + from, out + (size_t)p * b + from, len);
        if (rd == TD_OK)
          rd = e;
      } else {
        memcpy(out + (size_t)p * b + from, td__coll_peer_at(c, p, s->loc) + (size_t)r * q, len);
      }
    }
  }
  memcpy(out + (size_t)r * b, in + (size_t)r * b, b);
  if (any_direct && (st = td__coll_done(c)) != TD_OK)
    goto fail;
  if ((st = rd) != TD_OK)
    goto fail;
  return TD_OK;
fail:
  td__error_prefix("%s: ", name);
  return st;
}

typedef struct {
  size_t lo, hi;
  int peer;
} td__a2av_block;

static int td__a2av_block_cmp(const void *x, const void *y) {
  const td__a2av_block *a = x, *b = y;
  return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Receive blocks that overlap would be written by two peers at once (the
 * result would depend on timing): refused, naming both peers. Elements, not
 * bytes; counts and displacements were checked against overflow before. */
static td_status td__a2av_recv_disjoint(const char *name, int n, const size_t *rc, const size_t *rd) {
  td__a2av_block *b = malloc((size_t)n * sizeof *b);
  if (!b)
    return td__error(TD_ERR_NO_MEMORY, "%s: no memory to check the receive blocks", name);
  int m = 0;
  for (int p = 0; p < n; p++)
    if (rc[p])
      b[m++] = (td__a2av_block){rd[p], rd[p] + rc[p], p};
  qsort(b, (size_t)m, sizeof *b, td__a2av_block_cmp);
  td_status st = TD_OK;
  for (int i = 1; i < m && st == TD_OK; i++)
    if (b[i].lo < b[i - 1].hi)
      st = td__error(TD_ERR_INVALID_ARG, "%s: the receive blocks from ranks %d [%zu, %zu) and %d [%zu, %zu) "
                     "overlap (elements of dst); each peer's block must have room of its own", name,
                     b[i - 1].peer, b[i - 1].lo, b[i - 1].hi, b[i].peer, b[i].lo, b[i].hi);
  free(b);
  return st;
}

/* Local checks of all_to_allv; writes the byte extents of src and dst. */
static td_status td__a2av_check(td_team *team, const char *name, int n, const size_t *rc, const size_t *rd,
                                const void *dst, const size_t *sc, const size_t *sd,
                                const void *src, td_dtype dtype, size_t *sext, size_t *rext) {
  TD_CHECK(td__coll_check_dtype(name, dtype));
  if (!rc || !rd || !sc || !sd)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s is NULL; all four count/displacement arrays must "
                     "have one entry per team rank", name,
                     !sc ? "send_counts" : !sd ? "send_displs" : !rc ? "recv_counts" : "recv_displs");
  size_t es = td_dtype_size(dtype), smax = 0, rmax = 0;
  for (int p = 0; p < n; p++) {
    if (sd[p] > SIZE_MAX / es || sc[p] > SIZE_MAX / es - sd[p] || rd[p] > SIZE_MAX / es ||
        rc[p] > SIZE_MAX / es - rd[p])
      return td__error(TD_ERR_INVALID_ARG,
                       "%s: counts and displacements for rank %d overflow the address space (count + "
                       "displacement at most %zu elements of %s)",
                       name, p, SIZE_MAX / es, td_dtype_name(dtype));
    if (sc[p] && (sd[p] + sc[p]) * es > smax)
      smax = (sd[p] + sc[p]) * es;
    if (rc[p] && (rd[p] + rc[p]) * es > rmax)
      rmax = (rd[p] + rc[p]) * es;
  }
  TD_CHECK(td__coll_check_buf_symm(team, name, "src", src, smax));
  TD_CHECK(td__coll_check_buf_symm(team, name, "dst", dst, rmax));
  TD_CHECK(td__coll_check_disjoint(name, dst, rmax, src, smax));
  TD_CHECK(td__a2av_recv_disjoint(name, n, rc, rd));
  *sext = smax;
  *rext = rmax;
  return TD_OK;
}

td_status td_all_to_allv(td_team *team, void *dst, const size_t *recv_counts,
                         const size_t *recv_displs, const void *src, const size_t *send_counts,
                         const size_t *send_displs, td_dtype dtype) {
  static const char name[] = "td_all_to_allv";
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "%s: team is NULL", name);
  const int n = td_team_size(team), r = td_team_rank(team);
  size_t sext = 0, rext = 0;
  td_status st = td__a2av_check(team, name, n, recv_counts, recv_displs, dst, send_counts, send_displs,
                                src, dtype, &sext, &rext);
  if (st != TD_OK)
    return td__coll_bad_args(team, TD__COLL_ALL_TO_ALLV, st);
  td__coll *c;
  TD_CHECK(td__coll_get(team, &c));
  const size_t es = td_dtype_size(dtype);
  const uint64_t s0 = c->seq + 1;
  const size_t vstride = 2 * (size_t)n * sizeof(uint64_t);
  const size_t voff = c->vec_off + (s0 & 1) * vstride;
  uint64_t *vec = (uint64_t *)(c->ctl_block + voff);
  size_t my_max = 0;
  for (int p = 0; p < n; p++) {
    vec[p] = send_counts[p];
    vec[n + p] = send_displs[p];
    my_max = send_counts[p] > my_max ? send_counts[p] : my_max;
  }
  td__coll_pub pub = {.kind = TD__COLL_ALL_TO_ALLV, .dtype = dtype, .aux = {my_max},
                      .loc = TD__COLL_LOC_NONE};
  const int src_direct = td__coll_src_direct(c, src, sext, &pub);
  TD_CHECK(td__coll_begin(c, name, &pub, TD__CHECK_DTYPE));
  /* Column check: what every peer sends me against what I expect. */
  uint64_t verdict[3] = {0, 0, 0};
  int bad = 0, all_direct = 1, any_direct = 0;
  size_t gmax = 0;
  for (int p = 0; p < n; p++) {
    const td__coll_slot *s = td__coll_peer_slot(c, p);
    const uint64_t *pv = (const uint64_t *)(c->peer_block[p] + voff);
    if (!bad && pv[r] != recv_counts[p]) {
      bad = 1;
      verdict[0] = (uint64_t)p;
      verdict[1] = pv[r];
      verdict[2] = recv_counts[p];
    }
    gmax = s->aux[0] > gmax ? s->aux[0] : gmax;
    all_direct &= (s->mode & TD__COLL_SRC_DIRECT) != 0;
    any_direct |= (s->mode & TD__COLL_SRC_DIRECT) != 0;
  }
  td__coll_pub vpub = {.kind = TD__COLL_ALL_TO_ALLV, .aux = {(uint64_t)bad}, .loc = pub.loc,
                       .mode = pub.mode, .inline_data = verdict, .inline_bytes = sizeof verdict};
  if ((st = td__coll_step(c, &vpub)) != TD_OK)
    goto fail;
  for (int p = 0; p < n; p++) {
    const td__coll_slot *s = td__coll_peer_slot(c, p);
    if (!s->aux[0])
      continue;
    uint64_t v[3];
    memcpy(v, s->data, sizeof v);
    return td__error(TD_ERR_MISMATCH,
                     "%s: rank %d sends %" PRIu64 " elements to rank %d (its send_counts[%d]), but rank "
                     "%d expects %" PRIu64 " (its recv_counts[%d]); every rank's send_counts[r] must "
                     "equal rank r's recv_counts for it",
                     name, (int)v[0], v[1], p, p, p, v[2], (int)v[0]);
  }
  char *out = dst;
  const char *in = src;
  size_t q = all_direct ? (gmax ? gmax : 1) : c->piece / (size_t)n / es;
  size_t pieces = (gmax + q - 1) / q;
  td_status rd = TD_OK; /* a failed read still ends the call's steps with the peers */
  for (size_t k = 0; k < pieces; k++) {
    const size_t from = k * q;
    td__coll_pub kpub = {.kind = TD__COLL_ALL_TO_ALLV, .loc = pub.loc, .mode = pub.mode};
    if (!all_direct) {
      if (!src_direct) {
        char *region = td__coll_region(c, c->seq + 1);
        for (int d = 0; d < n; d++)
          if (from < send_counts[d])
            memcpy(region + (size_t)d * q * es, in + (send_displs[d] + from) * es,
                   td__min(q, send_counts[d] - from) * es);
        kpub.loc = td__coll_off(c, region);
      }
      if ((st = td__coll_step(c, &kpub)) != TD_OK)
        goto fail;
    }
    for (int i = 1; i < n; i++) {
      int p = (r + i) % n;
      if (from >= recv_counts[p])
        continue;
      const td__coll_slot *s = td__coll_peer_slot(c, p);
      char *to = out + (recv_displs[p] + from) * es;
      const size_t len = td__min(q, recv_counts[p] - from) * es;
      if (s->mode & TD__COLL_SRC_DIRECT) {
        const uint64_t *pv = (const uint64_t *)(c->peer_block[p] + voff);
        td_status e = td__coll_read(c, p, s, (pv[n + r] + from) * es, to, len);
        if (rd == TD_OK)
          rd = e;
      } else {
        memcpy(to, td__coll_peer_at(c, p, s->loc) + (size_t)r * q * es, len);
      }
    }
  }
  if (recv_counts[r])
    memcpy(out + recv_displs[r] * es, in + send_displs[r] * es, recv_counts[r] * es);
  if (any_direct && (st = td__coll_done(c)) != TD_OK)
    goto fail;
  if ((st = rd) != TD_OK)
    goto fail;
  return TD_OK;
fail:
  td__error_prefix("%s: ", name);
  return st;
}
