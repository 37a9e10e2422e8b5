/* SPDX-License-Identifier: Apache-2.0
 * Teams (primitives layer): the leader-free exchange every collective
 * bookkeeping call uses, team splitting (strided and color/key), destroy,
 * rank translation and the per-layer slots of prim_internal.h.
 *
 * The exchange: each member writes a few words into its own control data and
 * publishes them with a tag (team uid, call number) by a release store; every
 * member then waits until all members show this call's tag and reads their
 * words, so all members compute the same answer from the same inputs (no
 * leader, no second message). A closing barrier keeps a member from
 * overwriting its words while a slower member still reads them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "prim/prim_impl.h"

td_team *td__team_new(td_world *w, uint64_t uid, int index, int rank, int size, const int *members,
                      uint64_t epoch) {
  td_team *t = calloc(1, sizeof *t);
  int *m = malloc(sizeof(int) * (size_t)size);
  if (!t || !m) {
    free(t);
    free(m);
    return NULL;
  }
  memcpy(m, members, sizeof(int) * (size_t)size);
  t->world = w;
  t->uid = uid;
  t->index = index;
  t->rank = rank;
  t->size = size;
  t->members = m;
  t->bar_epoch = epoch;
  w->team_mask |= UINT64_C(1) << index;
  if (epoch > w->epoch_hwm)
    w->epoch_hwm = epoch;
  return t;
}

void td__team_free(td_team *t) {
  if (!t)
    return;
  t->world->team_mask &= ~(UINT64_C(1) << t->index);
  free(t->members);
  free(t);
}

void td__team_run_dtors(td_team *t) {
  for (int id = TD__SLOT_COUNT - 1; id >= 0; id--) {
    if (t->slots[id] && t->dtors[id])
      t->dtors[id](t->slots[id]);
    t->slots[id] = NULL;
  }
}

const char *td__op_name(uint64_t op) {
  static const char *const names[] = {"?", "td_symm_alloc", "td_symm_free", "td_team_split_strided",
                                      "td_team_split", "td_barrier_all", "td_team_sync", "td_team_barrier",
                                      "td_team_destroy"};
  static const char *const coll[] = {"td_all_gather", "td_reduce_scatter", "td_all_reduce", "td_broadcast",
                                     "td_all_to_all", "td_all_to_allv"};
  if (op >= TD__CALL_ALL_GATHER && op < TD__CALL_ALL_GATHER + sizeof coll / sizeof coll[0])
    return coll[op - TD__CALL_ALL_GATHER];
  return op < sizeof names / sizeof names[0] ? names[op] : "?";
}

void td__team_begin_call(td_team *team, int kind) { td__team_call(team, kind); }

/* (team uid, call number, op) as published in td__rank_ctl.doing. */
static uint64_t td__doing_word(uint64_t uid, uint64_t call, int op) {
  return ((uid & 0xffffff) << 40) | ((call & 0xffffffff) << 8) | (uint64_t)(op & 0xff);
}

void td__team_call(td_team *t, int op) {
  if (atomic_load_explicit(&t->broken, memory_order_relaxed) != TD_OK)
    return; /* the call fails at once; keep showing peers the call that broke the team */
  t->calls++;
  t->call_kind = op;
  atomic_store_explicit(&t->world->ranks[t->world->rank].doing, td__doing_word(t->uid, t->calls, op),
                        memory_order_release);
}

td_status td__team_usable(td_team *t, const char *what) {
  int broken = atomic_load_explicit(&t->broken, memory_order_acquire);
  if (broken == TD_OK)
    return TD_OK;
  return td__error(broken == TD_ERR_PEER_FAILED ? TD_ERR_PEER_FAILED : TD_ERR_STATE,
                   "rank %d: %s: the team of %d ranks is broken since an earlier call on it failed, so no "
                   "collective call on it can complete; destroy it (or finalize the world). That failure: %s",
                   t->world->rank, what, t->size, t->broken_why);
}

td_status td__team_check_usable(td_team *team, const char *what) { return td__team_usable(team, what); }

td_status td__team_break(td_team *t, td_status st) {
  int first = 0;
  if ((st == TD_ERR_TIMEOUT || st == TD_ERR_PEER_FAILED || st == TD_ERR_MISMATCH) &&
      atomic_compare_exchange_strong(&t->breaking, &first, 1)) {
    snprintf(t->broken_why, sizeof t->broken_why, "%s", td_last_error());
    atomic_store_explicit(&t->broken, (int)st, memory_order_release);
  }
  return st;
}

/* Whether a member is in another call with this call's number: the ranks
 * called different things, and each waits for something the other never does. */
static int td__team_mismatch(td_team *t, const char *what) {
  td_world *w = t->world;
  uint64_t mine = td__doing_word(t->uid, t->calls, t->call_kind);
  int other = -1;
  for (int i = 0; i < t->size && other < 0; i++) {
    uint64_t d = atomic_load_explicit(&w->ranks[t->members[i]].doing, memory_order_acquire);
    if (i != t->rank && (d >> 8) == (mine >> 8) && d != mine)
      other = i;
  }
  if (other < 0)
    return 0;
  char list[640];
  size_t len = 0;
  list[0] = '\0';
  for (int i = 0; i < t->size && len + 96 < sizeof list; i++) {
    uint64_t d = atomic_load_explicit(&w->ranks[t->members[i]].doing, memory_order_acquire);
    if ((d >> 8) == (mine >> 8))
      len += (size_t)snprintf(list + len, sizeof list - len, "%steam rank %d called %s", len ? ", " : "", i,
                              td__op_name(d & 0xff));
    else
      len += (size_t)snprintf(list + len, sizeof list - len, "%steam rank %d is not at this call", len ? ", " : "",
                              i);
  }
  td__error(TD_ERR_MISMATCH,
            "rank %d: %s: the ranks of the team of %d made different collective calls as call %llu on it (%s); "
            "every rank must make the same calls in the same order (a collective's first call on a team makes "
            "td_symm_alloc and td_team_sync itself)",
            w->rank, what, t->size, (unsigned long long)t->calls, list);
  return 1;
}

td_status td__team_wait(td_team *t, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value, int64_t deadline_ns,
                        uint64_t *observed, const char *what) {
  enum { SLICE_NS = 20000000 }; /* how often a waiting member looks for a mismatched call */
  for (;;) {
    int64_t now = td__now_ns(), slice = now + SLICE_NS < deadline_ns ? now + SLICE_NS : deadline_ns;
    td_status st = td__wait_raw(t->world, addr, cmp, value, slice, observed);
    if (st != TD_ERR_TIMEOUT || slice >= deadline_ns)
      return st;
    if (td__team_mismatch(t, what))
      return TD_ERR_MISMATCH;
  }
}

td_status td__team_gather(td_team *t, int op, const uint64_t words[TD__POST_WORDS], int64_t deadline_ns,
                          const char *what) {
  td_world *w = t->world;
  TD_CHECK(td__team_usable(t, what));
  td__team_call(t, op);
  td__rank_ctl *me = &w->ranks[w->rank];
  uint64_t tag = (t->uid << 40) | ((uint64_t)op << 32) | (++t->coll_seq & UINT32_MAX);
  memcpy(me->post, words, sizeof me->post);
  atomic_store_explicit(&me->post_tag, tag, memory_order_release);
  for (int i = 0; i < t->size; i++)
    if (i != t->rank)
      td__wake_world_rank(w, t->members[i]);
  for (int i = 0; i < t->size; i++) {
    if (i == t->rank)
      continue;
    td_status st = td__team_wait(t, &w->ranks[t->members[i]].post_tag, TD_CMP_EQ, tag, deadline_ns, NULL, what);
    if (st == TD_ERR_MISMATCH)
      return td__team_break(t, st);
    if (st == TD_ERR_PEER_FAILED)
      return td__team_break(t, td__peer_failed_error(w, what));
    if (st != TD_OK) {
      char missing[640];
      size_t len = 0;
      missing[0] = '\0';
      for (int j = 0; j < t->size && len + 96 < sizeof missing; j++) {
        uint64_t other = atomic_load_explicit(&w->ranks[t->members[j]].post_tag, memory_order_acquire);
        if (other == tag)
          continue;
        len += (size_t)snprintf(missing + len, sizeof missing - len, "%steam rank %d (world rank %d)",
                                len ? ", " : "", j, t->members[j]);
        /* Same team and call number, another operation: the ranks called collectives in different orders. */
        if ((other >> 40) == t->uid && (other & UINT32_MAX) == (tag & UINT32_MAX))
          len += (size_t)snprintf(missing + len, sizeof missing - len, " which called %s instead",
                                  td__op_name((other >> 32) & 0xff));
      }
      td__error(TD_ERR_TIMEOUT,
                "rank %d: %s timed out after %d ms: every member of the team of %d ranks must call it; "
                "never arrived: %s",
                w->rank, what, w->timeout_ms, t->size, missing);
      return td__team_break(t, TD_ERR_TIMEOUT);
    }
  }
  return TD_OK;
}

const uint64_t *td__team_posted(const td_team *t, int team_rank) {
  return t->world->ranks[t->members[team_rank]].post;
}

td_status td__team_gather_end(td_team *t, int64_t deadline_ns, const char *what) {
  return td__barrier(t, deadline_ns, what);
}

/* Words posted by a split: which we compare and combine. */
enum { TD__SP_STATUS, TD__SP_A, TD__SP_B, TD__SP_C, TD__SP_MASK, TD__SP_EPOCH, TD__SP_UIDBASE };

static td_status td__split_post(td_team *parent, uint64_t words[TD__POST_WORDS], td_status local, uint64_t a,
                                uint64_t b, uint64_t c, int64_t deadline, const char *what) {
  td_world *w = parent->world;
  words[TD__SP_STATUS] = (uint64_t)local;
  words[TD__SP_A] = a;
  words[TD__SP_B] = b;
  words[TD__SP_C] = c;
  words[TD__SP_MASK] = w->team_mask;
  words[TD__SP_EPOCH] = w->epoch_hwm;
  words[TD__SP_UIDBASE] = parent->rank == 0 ? atomic_fetch_add(&w->ctl->next_team_uid, (uint64_t)parent->size) + 2 : 0;
  return td__team_gather(parent, strcmp(what, "td_team_split") == 0 ? TD__OP_SPLIT : TD__OP_SPLIT_STRIDED, words,
                         deadline, what);
}

/* Ends a split: the closing barrier every member takes (even one that failed,
 * so none waits for it), then this rank's own result. `result`'s message is
 * saved first because the barrier may set another. On failure t is freed. */
static td_status td__split_finish(td_team *parent, int64_t deadline, const char *what, td_status result,
                                  td_team *t, td_team **out) {
  char msg[512] = "";
  if (result != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  td_status st = td__team_gather_end(parent, deadline, what);
  if (st != TD_OK) {
    td__team_free(t);
    return st;
  }
  if (result != TD_OK) {
    td__team_free(t);
    return td__error(result, "%s", msg);
  }
  *out = t;
  return TD_OK;
}

/* Makes this rank's team out of parent ranks `prank[0..n)` (this rank is prank[me]). */
static td_status td__split_make(td_team *parent, const int *prank, int n, int me, const char *what, td_team **out) {
  td_world *w = parent->world;
  uint64_t used = 0, epoch = 0;
  int *members = malloc(sizeof(int) * (size_t)n);
  if (!members)
    return td__error(TD_ERR_NO_MEMORY, "rank %d: %s: no memory for a team of %d", w->rank, what, n);
  int first = prank[0];
  for (int i = 0; i < n; i++) {
    const uint64_t *p = td__team_posted(parent, prank[i]);
    used |= p[TD__SP_MASK];
    if (p[TD__SP_EPOCH] > epoch)
      epoch = p[TD__SP_EPOCH];
    members[i] = parent->members[prank[i]];
    if (prank[i] < first)
      first = prank[i];
  }
  int index = -1;
  for (int b = 0; b < TD__MAX_TEAMS && index < 0; b++)
    if (!(used & (UINT64_C(1) << b)))
      index = b;
  if (index < 0) {
    free(members);
    return td__error(TD_ERR_NO_MEMORY, "rank %d: %s: a member already belongs to %d live teams, the most "
                     "allowed; destroy teams that are no longer used",
                     w->rank, what, TD__MAX_TEAMS);
  }
  uint64_t uid = td__team_posted(parent, 0)[TD__SP_UIDBASE] + (uint64_t)first;
  td_team *t = td__team_new(w, uid, index, me, n, members, epoch);
  free(members);
  if (!t)
    return td__error(TD_ERR_NO_MEMORY, "rank %d: %s: no memory for a team of %d", w->rank, what, n);
  *out = t;
  return TD_OK;
}

td_status td_team_split_strided(td_team *parent, int start, int stride, int size, td_team **out) {
  static const char what[] = "td_team_split_strided";
  if (!parent || !out)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s is NULL", what, parent ? "out" : "parent");
  td_world *w = parent->world;
  td_status local = TD_OK;
  if (start < 0 || stride < 1 || size < 1 || start >= parent->size ||
      (int64_t)start + (int64_t)(size - 1) * stride >= parent->size) {
    local = td__error(TD_ERR_INVALID_ARG,
                      "rank %d: %s(start=%d, stride=%d, size=%d): needs start >= 0, stride >= 1, size >= 1 and "
                      "start + (size-1)*stride below the parent team size %d",
                      w->rank, what, start, stride, size, parent->size);
  }
  int64_t deadline = td__deadline_ns(w);
  uint64_t words[TD__POST_WORDS] = {0};
  TD_CHECK(td__split_post(parent, words, local, (uint64_t)(int64_t)start, (uint64_t)(int64_t)stride,
                          (uint64_t)(int64_t)size, deadline, what));
  td_status result = local;
  if (local == TD_OK) {
    for (int i = 0; i < parent->size && result == TD_OK; i++) {
      const uint64_t *p = td__team_posted(parent, i);
      if (p[TD__SP_STATUS] != TD_OK)
        result = td__error(TD_ERR_INVALID_ARG, "rank %d: %s: team rank %d passed invalid arguments "
                           "(start=%d, stride=%d, size=%d)",
                           w->rank, what, i, (int)(int64_t)p[TD__SP_A], (int)(int64_t)p[TD__SP_B],
                           (int)(int64_t)p[TD__SP_C]);
      else if (p[TD__SP_A] != words[TD__SP_A] || p[TD__SP_B] != words[TD__SP_B] || p[TD__SP_C] != words[TD__SP_C])
        result = td__error(TD_ERR_MISMATCH,
                           "rank %d: %s: members passed different arguments: team rank %d (start=%d, "
                           "stride=%d, size=%d), team rank %d (start=%d, stride=%d, size=%d)",
                           w->rank, what, parent->rank, start, stride, size, i, (int)(int64_t)p[TD__SP_A],
                           (int)(int64_t)p[TD__SP_B], (int)(int64_t)p[TD__SP_C]);
    }
  }
  td_team *t = NULL;
  int me = -1;
  if (result == TD_OK && parent->rank >= start && (parent->rank - start) % stride == 0)
    me = (parent->rank - start) / stride;
  if (result == TD_OK && me >= 0 && me < size) {
    int *prank = malloc(sizeof(int) * (size_t)size);
    if (!prank)
      result = td__error(TD_ERR_NO_MEMORY, "rank %d: %s: no memory", w->rank, what);
    for (int i = 0; prank && i < size; i++)
      prank[i] = start + i * stride;
    if (prank)
      result = td__split_make(parent, prank, size, me, what, &t);
    free(prank);
  }
  return td__split_finish(parent, deadline, what, result, t, out);
}

typedef struct {
  int64_t key;
  int prank;
} td__split_entry;

static int td__split_cmp(const void *a, const void *b) {
  const td__split_entry *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return (x->prank > y->prank) - (x->prank < y->prank);
}

td_status td_team_split(td_team *parent, int color, int key, td_team **out) {
  static const char what[] = "td_team_split";
  if (!parent || !out)
    return td__error(TD_ERR_INVALID_ARG, "%s: %s is NULL", what, parent ? "out" : "parent");
  td_world *w = parent->world;
  td_status local = TD_OK;
  if (color < TD_COLOR_UNDEFINED) {
    local = td__error(TD_ERR_INVALID_ARG, "rank %d: %s: color=%d; allowed: >= 0, or TD_COLOR_UNDEFINED (-1)",
                      w->rank, what, color);
  }
  int64_t deadline = td__deadline_ns(w);
  uint64_t words[TD__POST_WORDS] = {0};
  TD_CHECK(td__split_post(parent, words, local, (uint64_t)(int64_t)color, (uint64_t)(int64_t)key, 0, deadline,
                          what));
  td_status result = local;
  for (int i = 0; i < parent->size && result == TD_OK; i++)
    if (td__team_posted(parent, i)[TD__SP_STATUS] != TD_OK)
      result = td__error(TD_ERR_INVALID_ARG, "rank %d: %s: team rank %d passed an invalid color %d", w->rank,
                         what, i, (int)(int64_t)td__team_posted(parent, i)[TD__SP_A]);
  td_team *t = NULL;
  if (result == TD_OK && color != TD_COLOR_UNDEFINED) {
    td__split_entry *e = malloc(sizeof *e * (size_t)parent->size);
    int n = 0;
    for (int i = 0; e && i < parent->size; i++) {
      const uint64_t *p = td__team_posted(parent, i);
      if ((int)(int64_t)p[TD__SP_A] == color)
        e[n++] = (td__split_entry){(int64_t)p[TD__SP_B], i};
    }
    int *prank = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!e || !prank) {
      result = td__error(TD_ERR_NO_MEMORY, "rank %d: %s: no memory", w->rank, what);
    } else {
      qsort(e, (size_t)n, sizeof *e, td__split_cmp);
      int me = -1;
      for (int i = 0; i < n; i++) {
        prank[i] = e[i].prank;
        if (e[i].prank == parent->rank)
          me = i;
      }
      result = td__split_make(parent, prank, n, me, what, &t);
    }
    free(e);
    free(prank);
  }
  return td__split_finish(parent, deadline, what, result, t, out);
}

void td__team_users_add(td_team *team, int kind, int delta) {
  if (team && kind >= 0 && kind < TD__TEAM_USER_KINDS)
    atomic_fetch_add_explicit(&team->users[kind], delta, memory_order_relaxed);
}

/* "2 operators and 1 executor" for counts[TD__TEAM_USER_KINDS]; "" when all 0. */
static void td__users_text(const uint64_t *counts, char *buf, size_t cap) {
  static const char *const one[] = {"operator", "executor", "NCCL communicator"};
  static const char *const many[] = {"operators", "executors", "NCCL communicators"};
  size_t len = 0;
  int shown = 0, left = 0;
  buf[0] = '\0';
  for (int k = 0; k < TD__TEAM_USER_KINDS; k++)
    left += counts[k] != 0;
  for (int k = 0; k < TD__TEAM_USER_KINDS && len < cap; k++) {
    if (!counts[k])
      continue;
    left--;
    len += (size_t)snprintf(buf + len, cap - len, "%s%llu %s", !shown ? "" : left ? ", " : " and ",
                            (unsigned long long)counts[k], counts[k] == 1 ? one[k] : many[k]);
    shown++;
  }
}

/* The refusal of a destroy while objects made on the team remain. `mine`:
 * this rank's counts; `others`: which other team ranks have some (may be ""). */
static td_status td__team_in_use(td_team *team, const uint64_t *mine, const char *others, const char *also) {
  char what[160];
  td__users_text(mine, what, sizeof what);
  uint64_t total = 0;
  for (int k = 0; k < TD__TEAM_USER_KINDS; k++)
    total += mine[k];
  return td__error(TD_ERR_STATE,
                   "rank %d: td_team_destroy: %s%s%s%s; destroy them first (td_tp_destroy, td_exec_destroy, "
                   "td_nccl_destroy), then call td_team_destroy again: the team must outlive every object made on "
                   "it. Nothing was destroyed; %s",
                   team->world->rank, what[0] ? what : "no object on this rank, but ",
                   what[0] ? (total == 1 ? " still uses this team on this rank" : " still use this team on this rank") : "objects made on this team still exist on other "
                                                                    "ranks, so no rank destroys it",
                   others[0] ? (what[0] ? "; also " : ": ") : "", others,
                   also[0] ? also : "the team is still usable");
}

td_status td_team_destroy(td_team *team) {
  if (!team || team == team->world->team)
    return TD_OK;
  uint64_t mine[TD__POST_WORDS] = {0};
  int in_use = 0;
  for (int k = 0; k < TD__TEAM_USER_KINDS; k++) {
    int c = atomic_load_explicit(&team->users[k], memory_order_relaxed);
    mine[k] = c > 0 ? (uint64_t)c : 0;
    in_use |= c > 0;
  }
  td_status st = td__team_usable(team, "td_team_destroy");
  if (st == TD_OK) {
    /* Destroy is collective: the members exchange their counts, so either all
     * refuse (the team stays usable, its call numbers still alike) or none. */
    int64_t deadline = td__deadline_ns(team->world);
    st = td__team_gather(team, TD__OP_TEAM_DESTROY, mine, deadline, "td_team_destroy");
    char others[320] = "";
    int refuse = 0;
    if (st == TD_OK) {
      size_t len = 0;
      for (int i = 0; i < team->size; i++) {
        const uint64_t *w = td__team_posted(team, i);
        int has = 0;
        for (int k = 0; k < TD__TEAM_USER_KINDS; k++)
          has |= w[k] != 0;
        refuse |= has;
        if (has && i != team->rank && len + 100 < sizeof others) {
          char what[160];
          td__users_text(w, what, sizeof what);
          len += (size_t)snprintf(others + len, sizeof others - len, "%steam rank %d has %s", len ? ", " : "", i,
                                  what);
        }
      }
      st = td__team_gather_end(team, deadline, "td_team_destroy");
    }
    if (st == TD_OK && refuse)
      return td__team_in_use(team, mine, others, "");
  }
  /* A broken team makes no collective step, so each rank decides alone; an
   * object of this rank still holding the team keeps it allocated. */
  if (in_use) {
    char also[640] = "";
    if (st != TD_OK)
      snprintf(also, sizeof also, "the team is kept but broken (destroy it once they are gone): %s", td_last_error());
    return td__team_in_use(team, mine, "", also);
  }
  td__team_run_dtors(team);
  td__symm_release_team(team);
  td__team_free(team);
  return st;
}

int td_team_rank(const td_team *team) { return team ? team->rank : -1; }
int td_team_size(const td_team *team) { return team ? team->size : 0; }
td_world *td_team_world(td_team *team) { return team ? team->world : NULL; }

int td_team_translate_rank(const td_team *src, int rank, const td_team *dst) {
  if (!src || !dst || rank < 0 || rank >= src->size)
    return -1;
  int wr = src->members[rank];
  for (int i = 0; i < dst->size; i++)
    if (dst->members[i] == wr)
      return i;
  return -1;
}

int td__team_world_rank(const td_team *team, int team_rank) {
  if (!team || team_rank < 0 || team_rank >= team->size)
    return -1;
  return team->members[team_rank];
}

void **td__team_slot(td_team *team, int id) {
  if (!team || id < 0 || id >= TD__SLOT_COUNT)
    return NULL;
  return &team->slots[id];
}

void td__team_set_slot_dtor(td_team *team, int id, void (*dtor)(void *)) {
  if (team && id >= 0 && id < TD__SLOT_COUNT)
    team->dtors[id] = dtor;
}
