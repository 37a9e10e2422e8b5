/* SPDX-License-Identifier: Apache-2.0
 * Single-copy reads from a peer's ordinary (non-symmetric) memory
 * (collectives layer).
 *
 * Data-movement collectives (all_gather, broadcast, all_to_all(v)) let peers
 * read a rank's src in place when it is symmetric. An ordinary src used to be
 * staged: copied by its owner into scratch, then copied out by every peer --
 * two passes over memory where Open MPI's shared-memory transport makes one
 * with cross-memory attach (CMA). Here too: ranks that are threads of one
 * process read each other's memory with memcpy, ranks that are processes of
 * one host with process_vm_readv(2). Whether that works is probed once per
 * team, when its collective state is created, and agreed by every rank (a
 * kernel may forbid CMA: Yama ptrace_scope, seccomp, other users), so every
 * rank chooses the same path for a call. TD_COLL_SINGLE_COPY=0 turns it off.
 * The owner must not return (and free or rewrite src) while peers still read,
 * so a call that published a raw src ends with the same "done" step as one
 * that published a symmetric src. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "coll/coll_internal.h"
#include "core/error.h"
#include "tdist/config.h"
#include "tdist/rma.h"

/* A value a probe read must find: tells a mapped but wrong address apart. */
static uint64_t td__probe_magic(int rank) { return 0x7d15c0117ea0c0deull ^ (uint64_t)rank; }

static td_status td__read_other(pid_t pid, void *dst, const void *src, size_t len) {
  char *d = dst;
  uintptr_t s = (uintptr_t)src;
  while (len > 0) {
    struct iovec l = {d, len}, r = {(void *)s, len};
    ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return td__error(TD_ERR_SYSTEM, "process_vm_readv of %zu bytes at %p from process %d failed: %s", len,
                       (void *)s, (int)pid, got < 0 ? strerror(errno) : "nothing read");
    d += got, s += (uintptr_t)got, len -= (size_t)got;
  }
  return TD_OK;
}

td_status td__coll_direct_probe(td__coll *c) {
  td__coll_ctl *me = (td__coll_ctl *)c->ctl_block;
  int64_t on = 1;
  /* a bad value still takes part in both syncs (peers would wait for it), then fails */
  td_status cfg = td_config_int("TD_COLL_SINGLE_COPY", &on);
  if (cfg != TD_OK)
    on = 0;
  c->probe_word = td__probe_magic(c->rank);
  me->probe_pid = (uint64_t)getpid();
  me->probe_addr = (uint64_t)(uintptr_t)&c->probe_word;
  me->probe_ok = 0;
  td_status st = td_team_sync(c->team); /* every rank's pid and probe address are out */
  if (st != TD_OK)
    return st;
  int ok = on != 0;
  for (int p = 0; p < c->size && ok; p++) {
    const td__coll_ctl *pc = (const td__coll_ctl *)c->peer_block[p];
    c->peer_pid[p] = (int)pc->probe_pid;
    if (p == c->rank)
      continue;
    uint64_t v = 0;
    if ((pid_t)pc->probe_pid == getpid())
      v = *(const uint64_t *)(uintptr_t)pc->probe_addr;
    else if (td__read_other((pid_t)pc->probe_pid, &v, (const void *)(uintptr_t)pc->probe_addr, sizeof v) != TD_OK)
      ok = 0; /* CMA forbidden here: stage instead (not an error) */
    ok &= v == td__probe_magic(p);
  }
  me->probe_ok = cfg != TD_OK ? 3 : 1 + (uint64_t)ok; /* 3: this rank's TD_COLL_SINGLE_COPY is bad */
  if ((st = td_team_sync(c->team)) != TD_OK) /* every verdict is out */
    return st;
  int all = 1, bad = -1;
  for (int p = 0; p < c->size; p++) {
    uint64_t v = ((const td__coll_ctl *)c->peer_block[p])->probe_ok;
    all &= v == 2;
    if (v == 3 && bad < 0)
      bad = p;
  }
  c->raw_ok = all;
  /* probe_word is only read between the two syncs above */
  if (cfg != TD_OK)
    return cfg;
  if (bad >= 0) /* every rank fails the same first call, not only the one with the bad value */
    return td__error(TD_ERR_INVALID_ARG, "collectives: rank %d's TD_COLL_SINGLE_COPY does not parse (see its "
                     "error); allowed 0 to 1", bad);
  return TD_OK;
}

int td__coll_src_direct(const td__coll *c, const void *src, size_t bytes, td__coll_pub *pub) {
  if (bytes <= c->stage_small || bytes <= TD__COLL_INLINE)
    return 0;
  if (td__coll_is_symm(c, src, bytes)) {
    pub->loc = td__coll_off(c, src);
    pub->mode = TD__COLL_SRC_SYMM;
    return 1;
  }
  if (!c->raw_ok || !src)
    return 0;
  pub->loc = (uint64_t)(uintptr_t)src;
  pub->mode = TD__COLL_SRC_RAW;
  return 1;
}

td_status td__coll_read(const td__coll *c, int p, const td__coll_slot *s, size_t off, void *dst, size_t len) {
  if (len == 0)
    return TD_OK;
  if (s->mode & TD__COLL_SRC_SYMM) {
    memcpy(dst, td__coll_peer_at(c, p, s->loc) + off, len);
    return TD_OK;
  }
  const char *at = (const char *)(uintptr_t)s->loc + off;
  if ((pid_t)c->peer_pid[p] == getpid()) {
    memcpy(dst, at, len);
    return TD_OK;
  }
  td_status st = td__read_other((pid_t)c->peer_pid[p], dst, at, len);
  if (st != TD_OK)
    td__error_prefix("reading rank %d's src in place: ", p);
  return st;
}

void td__coll_peers_src_direct(const td__coll *c, int n, int *all, int *any) {
  int a = 1, o = 0;
  for (int p = 0; p < n; p++) {
    int d = (td__coll_peer_slot(c, p)->mode & TD__COLL_SRC_DIRECT) != 0;
    a &= d;
    o |= d;
  }
  *all = a;
  *any = o;
}
