/* SPDX-License-Identifier: Apache-2.0
 * Internal: the engine shared by the host collectives (collectives layer,
 * above the primitives).
 *
 * Every collective is a sequence of *steps*. A team keeps one step counter
 * that only grows (the epoch: no flag is ever reset). In step s each rank
 * writes what peers need into its own symmetric memory, publishes a slot
 * header whose `seq` word is set to s last (release), then waits until every
 * peer's slot for s carries s (acquire). Two slots and two scratch regions,
 * chosen by the parity of s, give double buffering:
 *
 *  - before publishing step s a rank may rewrite slot s%2 and region s%2:
 *    having seen every peer reach s-1, it knows they finished reading s-2;
 *  - after its wait in step s it may rewrite region (s+1)%2 (peers reached s,
 *    so they finished s-1), which lets a step's output feed the next step.
 *
 * A rank may run at most one step ahead of the slowest peer. The first step
 * of every call also carries the call's description (kind, count, dtype, op,
 * root); all ranks compare all descriptions and, on any difference, fail
 * together with TD_ERR_MISMATCH after that same step, so the counters stay
 * aligned. Data that a rank lets peers read straight from the caller's
 * symmetric buffer needs a final empty "done" step before it may return.
 *
 * Every peer is an LSA peer: addresses are the peer's heap base (as mapped
 * here) plus a heap offset. */
#ifndef TD_COLL_INTERNAL_H
#define TD_COLL_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tdist/coll.h"

/* Bytes of data that travel inside the slot itself (no scratch, one step). */
#define TD__COLL_INLINE 256
/* Largest staging piece (per scratch region); smaller when the heap is small. */
#define TD__COLL_PIECE_MAX ((size_t)1 << 20)
/* When ranks outnumber cores, up to this many bytes a rank stages its data
 * even from a symmetric src: one copy is cheaper than the extra "done" step
 * that direct reads need (several microseconds of context switches). With a
 * core per rank the step is cheaper than the copy (measured, docs/perf.md). */
#define TD__COLL_STAGE_SMALL ((size_t)16 << 10)
/* Up to this many bytes an all_reduce is one-shot (every rank reduces all). */
#define TD__COLL_ONESHOT_MAX ((size_t)64 << 10)
/* Busy-poll budget of a step's wait when every rank has a core of its own; the
 * runtime's wait yields the core after ~128 polls, which on a shared machine
 * hands it to another job for a whole time slice (Open MPI likewise polls
 * without yielding unless oversubscribed). */
#define TD__COLL_SPIN_NS 200000
/* When ranks outnumber cores: polls, each after a sched_yield, before the runtime's wait. */
#define TD__COLL_YIELDS 256
/* Slot loc value: no data in memory (inline, or nothing to read). */
#define TD__COLL_LOC_NONE UINT64_MAX

typedef enum td__coll_kind {
  TD__COLL_BAD_ARGS = 0, /* this rank's arguments failed its local checks */
  TD__COLL_ALL_GATHER,
  TD__COLL_REDUCE_SCATTER,
  TD__COLL_ALL_REDUCE,
  TD__COLL_BROADCAST,
  TD__COLL_ALL_TO_ALL,
  TD__COLL_ALL_TO_ALLV,
  TD__COLL_KIND_COUNT
} td__coll_kind;

/* Mode bits of a slot. */
enum {
  TD__COLL_SRC_SYMM = 1u << 0, /* peers read this rank's data from its symmetric src */
  TD__COLL_DST_SYMM = 1u << 1, /* this rank's dst is symmetric */
  TD__COLL_SRC_RAW = 1u << 2,  /* peers read this rank's ordinary src in place: loc is its address
                                  (memcpy within a process, process_vm_readv across; coll_direct.c) */
  TD__COLL_SRC_DIRECT = TD__COLL_SRC_SYMM | TD__COLL_SRC_RAW,
};

/* One published step: 64 header bytes, then inline data. */
typedef struct td__coll_slot {
  _Atomic uint64_t seq; /* step number; written last (release) */
  uint32_t kind;        /* td__coll_kind, first step of a call */
  uint32_t dtype;
  uint32_t op;
  int32_t root;
  uint64_t count;
  uint64_t loc;  /* heap offset of this rank's data for this step, or TD__COLL_LOC_NONE */
  uint32_t mode; /* TD__COLL_* mode bits */
  uint32_t pad;
  uint64_t aux[2]; /* per-collective extras (all_to_allv verdict) */
  unsigned char data[TD__COLL_INLINE];
} td__coll_slot;

/* Per-rank control block in symmetric memory (same offset on every rank). */
typedef struct td__coll_ctl {
  /* 1 while this rank may be asleep in the runtime's wait: only then do peers
   * ring its doorbell (an atomic on a line it owns, ~50 ns a step otherwise). */
  _Alignas(64) _Atomic uint32_t may_sleep;
  _Alignas(64) td__coll_slot slot[2];
  /* written once, when the team's state is created (td__coll_direct_probe) */
  uint64_t probe_pid, probe_addr, probe_ok;
  /* followed by uint64_t vec[2][2*n]: all_to_allv send counts and displacements */
} td__coll_ctl;

/** The most bytes of symmetric heap a team of n ranks takes for its
 * collectives' control and scratch block (coll_ctx.c; a heap-size check's
 * bound: the real piece may be smaller), before td_symm_alloc's 4 KiB
 * alignment. */
size_t td__coll_block_bytes_max(int n);

/* Per-team, per-rank state, created on the first collective call. */
typedef struct td__coll {
  td_team *team;
  int rank, size;
  int timeout_ms;
  uint64_t seq;          /* last step this rank published */
  char *ctl_block;       /* this rank's symmetric block: control, vectors, scratch */
  size_t vec_off;        /* offset of the all_to_allv vectors inside the block */
  size_t scratch_off;    /* offset of scratch region 0 inside the block */
  size_t piece;          /* bytes of one scratch region */
  char *my_base;         /* this rank's heap base */
  char **peer_block;     /* size entries: peer's copy of ctl_block, mapped here */
  char **peer_base;      /* size entries: peer's heap base, mapped here */
  const void **srcs;     /* size entries: reduction sources of the current piece */
  int64_t spin_ns;       /* busy-poll this long before the runtime's yielding wait */
  size_t stage_small;    /* stage payloads up to this size even from symmetric src */
  int raw_ok;            /* every rank can read every peer's ordinary memory (coll_direct.c) */
  int *peer_pid;         /* size entries: each rank's process id */
  uint64_t probe_word;   /* read by peers once, to test that they can */
} td__coll;

/* What a rank publishes in a step, besides the seq. */
typedef struct td__coll_pub {
  td__coll_kind kind;
  td_dtype dtype;
  td_red_op op;
  int root;
  size_t count;
  uint64_t loc;
  unsigned mode;
  uint64_t aux[2];
  const void *inline_data; /* copied into the slot when non-NULL */
  size_t inline_bytes;
} td__coll_pub;

/* ---- coll_ctx.c ---- */

/** The team's collective state; creates it (collectively) on first use.
 * Errors: TD_ERR_INVALID_ARG (NULL team), TD_ERR_HEAP_EXHAUSTED, TD_ERR_NO_MEMORY,
 * TD_ERR_TIMEOUT. */
td_status td__coll_get(td_team *team, td__coll **out);

/** Publishes step seq+1 with *pub and waits for every peer to publish it. */
td_status td__coll_step(td__coll *c, const td__coll_pub *pub);

/** Publishes an empty step and waits for every peer (the "done" phase). */
td_status td__coll_done(td__coll *c);

/** First step of a call: publishes *pub and checks that all ranks describe the
 * same call (kind, count, dtype, op, root as `check` says); on a difference
 * every rank fails with TD_ERR_MISMATCH naming each rank's value. `name` is
 * the public function's name, for messages. */
enum { TD__CHECK_COUNT = 1, TD__CHECK_DTYPE = 2, TD__CHECK_OP = 4, TD__CHECK_ROOT = 8 };
td_status td__coll_begin(td__coll *c, const char *name, const td__coll_pub *pub, unsigned check);

/** A rank whose own argument checks failed still takes part in the first step
 * of its call `kind` (so peers fail fast with TD_ERR_MISMATCH instead of
 * timing out), then returns `st` with its own message kept. */
td_status td__coll_bad_args(td_team *team, td__coll_kind kind, td_status st);

/** Peer p's slot for the current step. */
static inline const td__coll_slot *td__coll_peer_slot(const td__coll *c, int p) {
  return &((const td__coll_ctl *)c->peer_block[p])->slot[c->seq & 1];
}
/** After the first step: whether all n peers (*all) and whether any (*any)
 * published their src as symmetric (TD__COLL_SRC_SYMM), i.e. can be read in
 * place for the whole call rather than piece by piece from scratch. */
static inline void td__coll_peers_src_symm(const td__coll *c, int n, int *all, int *any) {
  int a = 1, o = 0;
  for (int p = 0; p < n; p++) {
    int sy = (td__coll_peer_slot(c, p)->mode & TD__COLL_SRC_SYMM) != 0;
    a &= sy;
    o |= sy;
  }
  *all = a;
  *any = o;
}
/** This rank's scratch region for step s (parity). */
static inline char *td__coll_region(const td__coll *c, uint64_t s) {
  return c->ctl_block + c->scratch_off + (s & 1) * c->piece;
}
/** Peer p's scratch region for step s, mapped here. */
static inline const char *td__coll_peer_region(const td__coll *c, int p, uint64_t s) {
  return c->peer_block[p] + c->scratch_off + (s & 1) * c->piece;
}
/** Heap offset of a pointer in this rank's heap (the caller knows it is inside). */
static inline uint64_t td__coll_off(const td__coll *c, const void *p) {
  return (uint64_t)((const char *)p - c->my_base);
}
/** Peer p's data at heap offset `off`, mapped here. */
static inline const char *td__coll_peer_at(const td__coll *c, int p, uint64_t off) {
  return c->peer_base[p] + off;
}

/** Whether [p, p+bytes) is in this rank's symmetric heap (bytes > 0). */
int td__coll_is_symm(const td__coll *c, const void *p, size_t bytes);
/** Whether peers should read these bytes straight from src: symmetric and
 * more than c->stage_small. */
static inline int td__coll_read_direct(const td__coll *c, const void *src, size_t bytes) {
  return bytes > c->stage_small && td__coll_is_symm(c, src, bytes);
}

/** For the reductions: publishes piece k of every rank's chunk of `src` (count
 * elements of es bytes, split with td_chunk_range) for the next step, q
 * elements per chunk. A symmetric src is published as is; otherwise chunk d's
 * piece is copied to offset d*q*es of the step's region. */
void td__coll_stage_chunks(td__coll *c, td__coll_pub *pub, const char *src, size_t count, size_t es,
                           size_t k, size_t q, int src_symm);
/** Address of peer p's piece k of chunk `chunk` for the current step (see above). */
const char *td__coll_chunk_src(const td__coll *c, int p, int chunk, size_t count, size_t es,
                               size_t k, size_t q);

/* ---- coll_direct.c ---- */

/** Collective, once per team (from td__coll_get): finds out whether every
 * rank can read every peer's ordinary memory (same process, or
 * process_vm_readv allowed) and sets c->raw_ok on every rank alike; off with
 * TD_COLL_SINGLE_COPY=0. Fills c->peer_pid. Errors: those of td_team_sync,
 * TD_ERR_INVALID_ARG for a bad TD_COLL_SINGLE_COPY. */
td_status td__coll_direct_probe(td__coll *c);

/** Whether peers should read `bytes` of src in place (one copy): symmetric,
 * or ordinary with c->raw_ok, and more than c->stage_small and the inline
 * size. If so fills pub->loc and pub->mode (SRC_SYMM or SRC_RAW) and returns
 * 1; else returns 0 and leaves pub alone (stage it). The call must then end
 * with td__coll_done. */
int td__coll_src_direct(const td__coll *c, const void *src, size_t bytes, td__coll_pub *pub);

/** Copies len bytes at byte offset off of the src that peer p published in
 * place (slot s, mode SRC_SYMM or SRC_RAW) into dst. Errors: TD_ERR_SYSTEM
 * when process_vm_readv fails (message names the rank and the range). */
td_status td__coll_read(const td__coll *c, int p, const td__coll_slot *s, size_t off, void *dst, size_t len);

/** As td__coll_peers_src_symm, for either in-place mode (SRC_DIRECT). */
void td__coll_peers_src_direct(const td__coll *c, int n, int *all, int *any);

/* ---- coll_check.c ---- */

/** Local argument checks shared by the collectives; each names `name`. */
td_status td__coll_check_dtype(const char *name, td_dtype dtype);
td_status td__coll_check_op(const char *name, td_dtype dtype, td_red_op op);
td_status td__coll_check_buf(const char *name, const char *what, const void *p, size_t bytes);
/** Refuses count elements of dtype overflowing size_t: with ranks 0, count
 * is the whole buffer; with ranks > 0 the buffer holds count * ranks
 * elements (the message then says "times RANKS ranks" and "per rank"). */
td_status td__coll_check_count(const char *name, size_t count, td_dtype dtype, int ranks);
/** td__coll_check_buf, then td__coll_check_symm (coll_symm_check.h) on the same range. */
td_status td__coll_check_buf_symm(td_team *team, const char *name, const char *what, const void *p,
                                  size_t bytes);
/** Refuses [a, a+an) and [b, b+bn) overlapping. */
td_status td__coll_check_disjoint(const char *name, const void *a, size_t an, const void *b,
                                  size_t bn);

/* ---- coll_reduce.c ---- */

/** dst[i] = src[0][i] op src[1][i] op ... op src[n-1][i] for i < count,
 * combining in the order 0..n-1; f16/bf16 accumulate in f32 and round once.
 * dst may equal one of the sources (each block is read before it is written). */
void td__coll_reduce(void *dst, const void *const *srcs, int n, size_t count, td_dtype dtype,
                     td_red_op op);

#endif
