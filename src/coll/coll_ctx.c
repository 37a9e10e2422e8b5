/* SPDX-License-Identifier: Apache-2.0
 * The collectives' per-team state and the step protocol (collectives layer).
 *
 * On a team's first collective call every member allocates, collectively, one
 * symmetric block: the control block (two slots), the all_to_allv vectors and
 * two scratch regions of `piece` bytes. The state hangs off the team's
 * TD__SLOT_COLL pointer and is freed by the team's destructor hook; the block
 * goes with the team. A step is: fill own slot, store seq (release), ring the
 * peers' doorbells, wait until every peer's slot carries the same seq. See
 * coll_internal.h for why two slots and two regions suffice. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll_internal.h"
#include "core/error.h"
#include "prim/prim_internal.h"
#include "tdist/rma.h"
#include "tdist/symm.h"

static const char *const td__kind_names[TD__COLL_KIND_COUNT] = {
    [TD__COLL_BAD_ARGS] = "(invalid arguments)", [TD__COLL_ALL_GATHER] = "td_all_gather",
    [TD__COLL_REDUCE_SCATTER] = "td_reduce_scatter", [TD__COLL_ALL_REDUCE] = "td_all_reduce",
    [TD__COLL_BROADCAST] = "td_broadcast", [TD__COLL_ALL_TO_ALL] = "td_all_to_all",
    [TD__COLL_ALL_TO_ALLV] = "td_all_to_allv",
};

static const char *td__kind_name(uint32_t k) {
  return k < TD__COLL_KIND_COUNT ? td__kind_names[k] : "(unknown)";
}

static void td__coll_free(void *p) {
  td__coll *c = p;
  if (!c)
    return;
  free(c->peer_block);
  free(c->peer_base);
  free(c->srcs);
  free(c->peer_pid);
  free(c);
}

/* Scratch piece: 1 MiB, or less on a small heap so the block stays a small
 * share of it. Every rank has the same heap size, so every rank agrees. */
/* Offset of scratch region 0 in a team's block: the control part, then the
 * all_to_allv vectors (2 x 2 x n words), on a 4 KiB boundary. */
static size_t td__coll_scratch_off(int n) {
  size_t vec_bytes = 2 * 2 * (size_t)n * sizeof(uint64_t);
  return (sizeof(td__coll_ctl) + vec_bytes + 4095) & ~(size_t)4095;
}

size_t td__coll_block_bytes_max(int n) {
  size_t least = ((size_t)n * 64 + 4095) & ~(size_t)4095; /* as td__coll_piece */
  size_t piece = TD__COLL_PIECE_MAX > least ? TD__COLL_PIECE_MAX : least;
  return td__coll_scratch_off(n) + 2 * piece;
}

static size_t td__coll_piece(td_world *w, int n) {
  size_t used = 0, total = 0;
  td_symm_usage(w, &used, &total);
  size_t piece = total / 32;
  if (piece > TD__COLL_PIECE_MAX)
    piece = TD__COLL_PIECE_MAX;
  /* Reductions and all_to_all split a region in n parts of at least 64 bytes. */
  size_t least = ((size_t)n * 64 + 4095) & ~(size_t)4095;
  piece &= ~(size_t)4095;
  return piece < least ? least : piece;
}

static td_status td__coll_create(td_team *team, td__coll **out) {
  td_world *w = td_team_world(team);
  int n = td_team_size(team);
  td__coll *c = calloc(1, sizeof *c);
  if (!c)
    return td__error(TD_ERR_NO_MEMORY, "collectives: no memory for the team state");
  c->team = team;
  c->rank = td_team_rank(team);
  c->size = n;
  c->timeout_ms = td_world_timeout_ms(w);
  c->piece = td__coll_piece(w, n);
  /* Ranks of a local world are threads of this process; launched ranks share the host. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int on_host = td_world_local_size(w);
  c->spin_ns = cores > 0 && on_host <= cores ? TD__COLL_SPIN_NS : 0;
  c->stage_small = c->spin_ns ? 0 : TD__COLL_STAGE_SMALL;
  c->vec_off = sizeof(td__coll_ctl);
  c->scratch_off = td__coll_scratch_off(n);
  size_t block = c->scratch_off + 2 * c->piece;
  c->peer_block = calloc((size_t)n, sizeof *c->peer_block);
  c->peer_base = calloc((size_t)n, sizeof *c->peer_base);
  c->srcs = calloc((size_t)n, sizeof *c->srcs);
  c->peer_pid = calloc((size_t)n, sizeof *c->peer_pid);
  if (!c->peer_block || !c->peer_base || !c->srcs || !c->peer_pid) {
    td__coll_free(c);
    return td__error(TD_ERR_NO_MEMORY, "collectives: no memory for the team state");
  }
  void *blk = NULL;
  td_status st = td_symm_alloc(team, block, 4096, &blk);
  if (st != TD_OK) {
    td__coll_free(c);
    td__error_prefix("collectives: allocating the team's %zu-byte control and scratch block: ", block);
    return st;
  }
  c->ctl_block = blk;
  /* Slots start at seq 0 = "before the first step"; the counter starts there too. */
  memset(blk, 0, c->scratch_off);
  size_t heap_bytes = 0;
  void *base = NULL;
  for (int p = 0; p < n; p++) {
    st = td_symm_heap_base(w, td__team_world_rank(team, p), &base, &heap_bytes);
    if (st == TD_OK)
      st = td_symm_at(team, blk, p, (void **)&c->peer_block[p]);
    if (st != TD_OK) {
      td__coll_free(c);
      return st;
    }
    c->peer_base[p] = base;
  }
  c->my_base = c->peer_base[c->rank];
  /* Nobody may publish step 1 into a peer's block before the peer has cleared it. */
  st = td_team_sync(team);
  if (st == TD_OK)
    st = td__coll_direct_probe(c);
  if (st != TD_OK) {
    td__coll_free(c);
    return st;
  }
  *out = c;
  return TD_OK;
}

td_status td__coll_get(td_team *team, td__coll **out) {
  if (!team)
    return td__error(TD_ERR_INVALID_ARG, "collective called with a NULL team");
  void **slot = td__team_slot(team, TD__SLOT_COLL);
  if (!slot)
    return td__error(TD_ERR_INTERNAL, "collectives: the team has no collective slot");
  if (!*slot) {
    td__coll *c = NULL;
    TD_CHECK(td__coll_create(team, &c));
    *slot = c;
    td__team_set_slot_dtor(team, TD__SLOT_COLL, td__coll_free);
  }
  *out = *slot;
  return TD_OK;
}

int td__coll_is_symm(const td__coll *c, const void *p, size_t bytes) {
  return p && bytes > 0 && td_symm_contains(td_team_world(c->team), p, bytes);
}

static int td__coll_spin(const td__coll *c, const _Atomic uint64_t *w, uint64_t s);

static td_status td__coll_publish_wait(td__coll *c, const td__coll_pub *pub) {
  /* On a team broken by an earlier failure peers may still read our slots: fail before writing one. */
  TD_CHECK(td__team_check_usable(c->team, "a collective step"));
  uint64_t s = c->seq + 1;
  td__coll_slot *slot = &((td__coll_ctl *)c->ctl_block)->slot[s & 1];
  if (pub) {
    slot->kind = pub->kind;
    slot->dtype = pub->dtype;
    slot->op = pub->op;
    slot->root = pub->root;
    slot->count = pub->count;
    slot->loc = pub->loc;
    slot->mode = pub->mode;
    slot->aux[0] = pub->aux[0];
    slot->aux[1] = pub->aux[1];
    if (pub->inline_data && pub->inline_bytes)
      memcpy(slot->data, pub->inline_data, pub->inline_bytes);
  } else {
    slot->kind = TD__COLL_KIND_COUNT;
    slot->loc = TD__COLL_LOC_NONE;
    slot->mode = 0;
  }
  /* When ranks outnumber cores waiters often sleep: a seq_cst store, then
   * seq_cst loads of the peers' may_sleep (a waiter stores may_sleep, fences,
   * then loads seq), so one of us sees the other. With a core per rank a
   * waiter sleeps only after polling TD__COLL_SPIN_NS; there the full barrier
   * (~as dear as a doorbell) is skipped, and a waiter that misses this store
   * in the rare race sees it at its next bounded (1 ms) sleep. */
  if (c->spin_ns)
    atomic_store_explicit(&slot->seq, s, memory_order_release);
  else
    atomic_store_explicit(&slot->seq, s, memory_order_seq_cst);
  c->seq = s;
  for (int p = 0; p < c->size; p++)
    if (p != c->rank &&
        atomic_load_explicit(&((td__coll_ctl *)c->peer_block[p])->may_sleep, memory_order_seq_cst))
      td__wake(c->team, p);
  td__coll_ctl *me = (td__coll_ctl *)c->ctl_block;
  td_status st = TD_OK;
  int sleepy = 0;
  for (int p = 0; p < c->size && st == TD_OK; p++) {
    if (p == c->rank)
      continue;
    const _Atomic uint64_t *w = &((td__coll_ctl *)c->peer_block[p])->slot[s & 1].seq;
    if (td__coll_spin(c, w, s))
      continue;
    if (!sleepy) {
      sleepy = 1;
      atomic_store_explicit(&me->may_sleep, 1, memory_order_seq_cst);
      atomic_thread_fence(memory_order_seq_cst);
    }
    st = td__wait_u64_call(c->team, w, TD_CMP_GE, s, "a collective step of a peer", NULL);
  }
  if (sleepy) /* stored only when set, so peers keep the line cached */
    atomic_store_explicit(&me->may_sleep, 0, memory_order_relaxed);
  return st;
}

td_status td__coll_step(td__coll *c, const td__coll_pub *pub) { return td__coll_publish_wait(c, pub); }

static int64_t td__coll_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void td__coll_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Polls *w for up to c->spin_ns; 1 when it reached s. When ranks outnumber
 * cores the rank we wait for may need this core: poll once per sched_yield
 * instead (as Open MPI does when oversubscribed), a bounded number of times,
 * then leave the rest to the runtime's wait, which can sleep. */
static int td__coll_spin(const td__coll *c, const _Atomic uint64_t *w, uint64_t s) {
  if (c->spin_ns <= 0) {
    for (int i = 0; i < TD__COLL_YIELDS; i++) {
      if (atomic_load_explicit(w, memory_order_acquire) >= s)
        return 1;
      sched_yield();
    }
    return 0;
  }
  int64_t until = 0;
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(w, memory_order_acquire) >= s)
      return 1;
    td__coll_relax();
    if ((i & 255) == 0) {
      int64_t now = td__coll_now_ns();
      if (!until)
        until = now + c->spin_ns;
      else if (now >= until)
        return 0;
    }
  }
}

td_status td__coll_done(td__coll *c) { return td__coll_publish_wait(c, NULL); }

/* Appends "rank R: value" for every rank to buf; long teams are cut short. */
static void td__list_values(const td__coll *c, char *buf, size_t cap, int field) {
  size_t len = strlen(buf);
  for (int p = 0; p < c->size && len + 48 < cap; p++) {
    const td__coll_slot *s = td__coll_peer_slot(c, p);
    char v[40];
    switch (field) {
    case 0: snprintf(v, sizeof v, "%s", td__kind_name(s->kind)); break;
    case 1: snprintf(v, sizeof v, "%" PRIu64, s->count); break;
    case 2: snprintf(v, sizeof v, "%s", td_dtype_name((td_dtype)s->dtype)); break;
    case 3: snprintf(v, sizeof v, "%s", td_red_op_name((td_red_op)s->op)); break;
    default: snprintf(v, sizeof v, "%d", (int)s->root); break;
    }
    len += (size_t)snprintf(buf + len, cap - len, "%srank %d: %s", p ? ", " : "", p, v);
    if (p + 1 < c->size && len + 48 >= cap)
      len += (size_t)snprintf(buf + len, cap - len, ", ...");
  }
}

/* The runtime's call number of a collective kind (prim_internal.h): counted
 * with the team's barriers and allocations, so a member in td_barrier_all
 * while the others are in td_all_reduce is told, not left to time out. */
static int td__coll_call_kind(td__coll_kind kind) {
  return kind >= TD__COLL_ALL_GATHER && kind < TD__COLL_KIND_COUNT ? TD__CALL_ALL_GATHER + (kind - TD__COLL_ALL_GATHER)
                                                                   : TD__CALL_ALL_GATHER;
}

td_status td__coll_begin(td__coll *c, const char *name, const td__coll_pub *pub, unsigned check) {
  td__team_begin_call(c->team, td__coll_call_kind(pub->kind));
  td_status st = td__coll_publish_wait(c, pub);
  if (st != TD_OK) {
    td__error_prefix("%s: ", name);
    return st;
  }
  const td__coll_slot *mine = td__coll_peer_slot(c, c->rank);
  int bad_kind = 0, bad_args = -1, bad[5] = {0};
  for (int p = 0; p < c->size; p++) {
    const td__coll_slot *s = td__coll_peer_slot(c, p);
    if (s->kind == TD__COLL_BAD_ARGS && bad_args < 0)
      bad_args = p;
    bad_kind |= s->kind != mine->kind;
    bad[1] |= (check & TD__CHECK_COUNT) && s->count != mine->count;
    bad[2] |= (check & TD__CHECK_DTYPE) && s->dtype != mine->dtype;
    bad[3] |= (check & TD__CHECK_OP) && s->op != mine->op;
    bad[4] |= (check & TD__CHECK_ROOT) && s->root != mine->root;
  }
  char buf[1024];
  if (bad_args >= 0) {
    /* The failing rank's verdict travels in its slot's inline data (NUL-terminated). */
    const td__coll_slot *s = td__coll_peer_slot(c, bad_args);
    char verdict[TD__COLL_INLINE];
    memcpy(verdict, s->data, sizeof verdict);
    verdict[sizeof verdict - 1] = '\0';
    return td__error(TD_ERR_MISMATCH,
                     "%s: rank %d's arguments failed its own checks, so every rank of the team fails this call; "
                     "its error: %s",
                     name, bad_args, verdict[0] ? verdict : "(not given)");
  }
  static const char *const what[5] = {"made different collective calls", "passed different counts",
                                      "passed different dtypes", "passed different reduction ops",
                                      "passed different roots"};
  for (int f = 0; f < 5; f++) {
    if (f == 0 ? !bad_kind : !bad[f])
      continue;
    snprintf(buf, sizeof buf, "%s: the ranks of the team %s (", name, what[f]);
    td__list_values(c, buf, sizeof buf, f);
    return td__error(TD_ERR_MISMATCH, "%s); every rank must make the same call with the same %s",
                     buf, f == 0 ? "arguments, in the same order" : "value");
  }
  return TD_OK;
}

td_status td__coll_bad_args(td_team *team, td__coll_kind kind, td_status st) {
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", td_last_error());
  td__coll *c = NULL;
  if (team && td__coll_get(team, &c) == TD_OK) {
    td__team_begin_call(team, td__coll_call_kind(kind));
    td__coll_pub pub = {.kind = TD__COLL_BAD_ARGS, .loc = TD__COLL_LOC_NONE};
    char verdict[TD__COLL_INLINE];
    size_t len = strnlen(saved, sizeof verdict - 1); /* peers quote it, cut to the slot's inline bytes */
    memcpy(verdict, saved, len);
    verdict[len] = '\0';
    pub.inline_data = verdict;
    pub.inline_bytes = strlen(verdict) + 1;
    (void)td__coll_publish_wait(c, &pub);
  }
  return td__error(st, "%s", saved);
}

void td__coll_stage_chunks(td__coll *c, td__coll_pub *pub, const char *src, size_t count, size_t es,
                           size_t k, size_t q, int src_symm) {
  if (src_symm) {
    pub->loc = td__coll_off(c, src);
    pub->mode |= TD__COLL_SRC_SYMM;
    return;
  }
  char *region = td__coll_region(c, c->seq + 1);
  size_t from = k * q;
  for (int d = 0; d < c->size; d++) {
    size_t off, len;
    td_chunk_range(count, c->size, d, &off, &len);
    if (from < len)
      memcpy(region + (size_t)d * q * es, src + (off + from) * es,
             (len - from < q ? len - from : q) * es);
  }
  pub->loc = td__coll_off(c, region);
  pub->mode &= ~(unsigned)TD__COLL_SRC_SYMM;
}

const char *td__coll_chunk_src(const td__coll *c, int p, int chunk, size_t count, size_t es,
                               size_t k, size_t q) {
  const td__coll_slot *s = td__coll_peer_slot(c, p);
  const char *at = td__coll_peer_at(c, p, s->loc);
  if (!(s->mode & TD__COLL_SRC_SYMM))
    return at + (size_t)chunk * q * es;
  size_t off, len;
  td_chunk_range(count, c->size, chunk, &off, &len);
  return at + (off + k * q) * es;
}
