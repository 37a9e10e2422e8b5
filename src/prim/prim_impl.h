/* SPDX-License-Identifier: Apache-2.0
 * Internal to src/prim: the layout of the control area and the world and
 * team structures (primitives layer). Layers above use prim_internal.h.
 *
 * A world's region (attached by a transport) is laid out as
 *   [region header + pid table][td__ctl][td__rank_ctl x N] ... [heap 0][heap 1]...[heap N-1]
 * with the control part padded to TD__REGION_ALIGN and each heap's stride a
 * multiple of it. Every process maps the region at its own address, so
 * symmetric addresses are translated by offset from the heap base. */
#ifndef TD_PRIM_IMPL_H
#define TD_PRIM_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "prim/prim_internal.h"
#include "tdist/rma.h"
#include "tdist/symm.h"
#include "tdist/world.h"
#include "transport/transport.h"

enum {
  TD__MAX_TEAMS = 64,    /* live teams a rank may belong to at once (barrier flag sets) */
  TD__BAR_ROUNDS = 13,   /* dissemination rounds: enough for 4096 ranks */
  TD__MAX_BLOCKS = 512,  /* live symmetric blocks per rank */
  TD__POST_WORDS = 8,    /* words a rank posts in one collective call */
  TD__MAX_RANKS = 4096,
};

/** One live symmetric block of a rank, as recorded in its table. */
typedef struct td__block {
  uint64_t offset;   /* from the heap base */
  uint64_t bytes;    /* as requested (a zero-size block occupies one byte) */
  uint64_t team_uid; /* team it was allocated on */
} td__block;

/** World-wide control data. */
typedef struct td__ctl {
  _Alignas(64) _Atomic int32_t failed; /* 0, or world rank + 1 of the first rank that failed; set
                                          only after failed_status, so a reader that sees it also
                                          sees the status */
  _Atomic int32_t failed_status;       /* that rank's status */
  _Atomic int32_t failed_claim;        /* world rank + 1 of the rank that won the right to set them */
  _Atomic uint64_t next_team_uid;      /* team uids are handed out from here */
} td__ctl;

/** Control data of one rank. Other ranks write its doorbell, barrier flags
 * and (leader-free collectives) read its posted words and block table. */
typedef struct td__rank_ctl {
  _Alignas(64) _Atomic uint32_t doorbell; /* futex word: incremented by every wake of this rank */
  _Atomic uint32_t sleepers;              /* >0 while this rank sleeps on the doorbell */
  _Atomic uint32_t left;                  /* 1 after td_world_finalize: not a failure when its pid goes */
  _Alignas(64) _Atomic uint64_t post_tag; /* team uid << 40 | operation << 32 | call number */
  _Atomic uint64_t doing; /* last team call entered: td__doing_word(); only this rank writes it */
  uint64_t post[TD__POST_WORDS];
  _Alignas(64) _Atomic uint64_t bar[TD__MAX_TEAMS][TD__BAR_ROUNDS]; /* epochs received per round */
  uint32_t nblocks;
  td__block blocks[TD__MAX_BLOCKS]; /* sorted by offset; written by this rank only */
} td__rank_ctl;

struct td_team {
  td_world *world;
  uint64_t uid;      /* world-unique id */
  int index;         /* which barrier flag set it uses (0..TD__MAX_TEAMS-1) */
  int rank, size;
  int *members;      /* world rank of each team rank */
  uint64_t coll_seq; /* collective calls made on this team */
  uint64_t bar_epoch;
  uint64_t calls;    /* team calls of the primitives layer (barriers, alloc, free, split, destroy) */
  int call_kind;     /* TD__OP_* of the call in progress */
  /* TD_OK, or why the team is unusable (a timeout, peer failure or call
   * mismatch). Atomic: executor workers waiting on the team read it while the
   * rank's main thread may break the team; broken_why is written once, by the
   * thread that wins `breaking`, before `broken` is stored (release). */
  _Atomic int broken;
  _Atomic int breaking;
  char broken_why[384];
  void *slots[TD__SLOT_COUNT];
  void (*dtors[TD__SLOT_COUNT])(void *);
  /* Objects of the layers above that keep a pointer to this team (operators,
   * executors, NCCL communicators), per TD__TEAM_USER_* kind: td_team_destroy
   * refuses while any rank has one, instead of leaving them a freed team.
   * Atomic: an object may be made or destroyed on another thread of the rank. */
  _Atomic int users[TD__TEAM_USER_KINDS];
};

struct td_world {
  int rank, size, local_rank, local_size;
  int timeout_ms;
  size_t heap_size, heap_stride;
  const td__transport *tp;
  td__region region;
  td__ctl *ctl;
  td__rank_ctl *ranks;
  char *heaps; /* heap of world rank 0 in this mapping */
  td_team *team;
  td_local_world *lw; /* non-NULL for a rank of a local world */
  uint64_t epoch_hwm; /* highest barrier epoch this rank used on any team */
  uint64_t team_mask; /* barrier flag sets in use by this rank's teams */
  int finalized;
  unsigned spin_iters, yield_iters; /* wait policy, from ranks per core (wait.c) */
  uint64_t freed[64]; /* heap offsets of recently freed blocks, to say "already freed" */
  unsigned nfreed;
};

static inline char *td__heap(const td_world *w, int world_rank) {
  return w->heaps + (size_t)world_rank * w->heap_stride;
}

static inline int64_t td__deadline_ns(const td_world *w);

/* world.c */
size_t td__ctl_bytes(int size);
td_status td__world_setup(td_world *w, int rank, int size, const td__transport *tp, td__region region,
                          int timeout_ms, size_t heap_size);
void td__world_teardown_teams(td_world *w);

/* wait.c */
int64_t td__now_ns(void);
void td__wait_policy(td_world *w);
int td__cmp_holds(td_cmp cmp, uint64_t v, uint64_t value);
/* Waits without writing a message: TD_OK, TD_ERR_TIMEOUT or TD_ERR_PEER_FAILED. */
td_status td__wait_raw(td_world *w, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                       int64_t deadline_ns, uint64_t *observed);
void td__wake_world_rank(td_world *w, int world_rank);
/* Message for TD_ERR_PEER_FAILED; returns the status. */
td_status td__peer_failed_error(td_world *w, const char *what);
void td__set_failed(td_world *w, int world_rank, td_status st);

/* barrier.c */
td_status td__barrier(td_team *t, int64_t deadline_ns, const char *what);

/* team.c: leader-free collective exchange. Post words, wait until every member
 * posted this call; read td__team_posted(); then td__team_gather_end (a
 * barrier) before returning, so nobody overwrites a post still being read. */
enum {
  TD__OP_ALLOC = 1,
  TD__OP_FREE = 2,
  TD__OP_SPLIT_STRIDED = 3,
  TD__OP_SPLIT = 4,
  TD__OP_BARRIER_ALL = 5,
  TD__OP_TEAM_SYNC = 6,
  TD__OP_TEAM_BARRIER = 7,
  TD__OP_TEAM_DESTROY = 8,
};
const char *td__op_name(uint64_t op);
/* Starts team call `op`: counts it and publishes (team, call number, op) in
 * this rank's `doing` word, so a member waiting in another call with the same
 * number can tell the ranks called different things. Nested parts of a call
 * (the barrier closing an exchange) do not start a call. */
void td__team_call(td_team *t, int op);
/* TD_OK, or the error of a team found broken earlier (message names the cause). */
td_status td__team_usable(td_team *t, const char *what);
/* Records that the team is broken by `st` (a timeout, peer failure or call
 * mismatch) with the current message as the reason; returns st. */
td_status td__team_break(td_team *t, td_status st);
/* Waits like td__wait_raw, but also fails with TD_ERR_MISMATCH (message set)
 * when a member is in a different team call with the same call number. */
td_status td__team_wait(td_team *t, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value, int64_t deadline_ns,
                        uint64_t *observed, const char *what);
td_status td__team_gather(td_team *t, int op, const uint64_t words[TD__POST_WORDS], int64_t deadline_ns,
                          const char *what);
const uint64_t *td__team_posted(const td_team *t, int team_rank);
td_status td__team_gather_end(td_team *t, int64_t deadline_ns, const char *what);
td_team *td__team_new(td_world *w, uint64_t uid, int index, int rank, int size, const int *members,
                      uint64_t epoch);
void td__team_free(td_team *t);
void td__team_run_dtors(td_team *t);

/* symm.c */
void td__symm_release_team(td_team *t);
td_status td__check_symm(const td_world *w, const void *ptr, size_t bytes, const char *fn, const char *arg);
td_status td__check_pe(const td_team *t, int pe, const char *fn);

static inline int64_t td__deadline_ns(const td_world *w) {
  return td__now_ns() + (int64_t)w->timeout_ms * 1000000;
}

#endif
