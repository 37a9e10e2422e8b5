/* SPDX-License-Identifier: Apache-2.0
 * Verdict exchange of the executor's collective calls (executor layer).
 *
 * Every collective entry point of an executor (create, run, trace_write,
 * destroy) starts with one round of this exchange: each rank posts which
 * call it is in, whether it can go on (its status and message) and, at
 * create, its plan's fingerprint, and waits until every rank posted the same
 * round. So a rank that cannot go on (bad argument, unbound buffer, file not
 * written, different plan) still takes part, and every rank fails at once
 * with a message naming that rank and its reason, instead of one rank
 * skipping the call and its peers waiting for their deadline. The round also
 * acts as a barrier.
 *
 * Layout: a symmetric block of 2 x n slots of 1 KiB; round k uses row
 * k % 2. Round k overwrites what round k - 2 left in that row, which its
 * owner p may still be reading (a round that failed, e.g. by a timeout,
 * lets this rank go on without having seen p's round k - 1). So this rank
 * puts round k into p's row only after it has seen p's post of round k - 1
 * (acquire): p posts k - 1 only after it finished reading round k - 2, so the
 * overwrite is ordered after p's reads. Peers that are ready get the post at
 * once; a late peer is waited for within the round's deadline (it could not
 * complete round k without posting k - 1 first anyway). A slot's payload is
 * put first and its round word set last (release), so whoever sees the
 * round sees the payload. Only the header and the message up to its NUL
 * travel (a rank that is fine sends 24 bytes).
 *
 * td_exec_create runs one round after every stretch of rank-local work
 * (td__agree_create_step): a rank whose step failed still posts, carrying
 * its status and message, so all ranks stop after the same round with the
 * same status and a message naming the failing rank and its reason, and
 * none makes a collective call that its peers skip. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/backend.h"
#include "prim/prim_impl.h"
#include "tdist/rma.h"
#include "tdist/symm.h"


struct td__agree {
  td_team *team;
  int rank, n;
  td__agree_slot *slots; /* symmetric: [2][n] */
  uint64_t round;
  unsigned char *posted; /* [n]: this round's post already put to rank p */
};

static const char *td__agree_op_name(int op) {
  static const char *names[] = {"td_exec_create", "td_exec_create (allocation)", "td_exec_create (workers)",
                                "td_exec_run", "td_exec_trace_write", "td_exec_trace_write (file)",
                                "td_exec_destroy", "td_exec_create (device)", "td_exec_create (rank records)",
                                "td_exec_create (kernel and grid)", "td_exec_create (device tables)",
                                "td_exec_run (task upload)"};
  return op >= 0 && op < (int)(sizeof names / sizeof names[0]) ? names[op] : "an unknown call";
}

td_status td__agree_create(td_team *team, td__agree **out) {
  td__agree *a = calloc(1, sizeof *a);
  int n = td_team_size(team);
  if (a && !(a->posted = calloc((size_t)n, 1))) {
    free(a);
    a = NULL;
  }
  td_status st = a ? TD_OK : td__error(TD_ERR_NO_MEMORY, "td_exec_create: out of memory");
  /* Joined even without memory for `a`, so that peers do not wait for us. */
  void *blk = NULL;
  td_status as = td_symm_alloc(team, td__agree_block_bytes(n), 64, &blk);
  if (as != TD_OK) {
    td__agree_abandon(a);
    td__error_prefix("td_exec_create: rank %d: the executor's control block (%zu bytes): ", td_team_rank(team),
                     td__agree_block_bytes(n));
    return as;
  }
  if (st == TD_OK) {
    memset(blk, 0, td__agree_block_bytes(n));
    a->team = team;
    a->rank = td_team_rank(team);
    a->n = n;
    a->slots = blk;
  }
  /* No peer may post into our slots before they are zeroed. */
  td_status bs = td_team_barrier(team);
  if (st == TD_OK)
    st = bs;
  if (st != TD_OK) {
    td_symm_free(team, blk);
    td__agree_abandon(a);
    return st;
  }
  *out = a;
  return TD_OK;
}

td_status td__agree_destroy(td__agree *a) {
  if (!a)
    return TD_OK;
  td_status st = td_symm_free(a->team, a->slots);
  td__agree_abandon(a);
  return st;
}

void td__agree_abandon(td__agree *a) {
  if (a)
    free(a->posted);
  free(a);
}

/* Whether peer p's post of `round` (or a later one) is in slot s (acquire). */
static int td__agree_seen(const td__agree_slot *s, uint64_t round) {
  return atomic_load_explicit((const _Atomic uint64_t *)&s->round, memory_order_acquire) >= round;
}

/* Waits for peer p's post of `round` in slot s, until deadline_ns; `round`
 * is this call's (a->round) or, before overwriting p's row, the one before. */
static td_status td__agree_wait(td__agree *a, const td__agree_slot *s, int p, int op, uint64_t round,
                                int64_t deadline_ns, int64_t timeout_ms) {
  td_world *w = td_team_world(a->team);
  uint64_t v = 0;
  td_status st = td__wait_raw(w, (const _Atomic uint64_t *)&s->round, TD_CMP_GE, round, deadline_ns, &v);
  if (st == TD_ERR_PEER_FAILED) {
    char what[96];
    snprintf(what, sizeof what, "%s (waiting for rank %d to join)", td__agree_op_name(op), p);
    return td__peer_failed_error(w, what);
  }
  if (st == TD_ERR_TIMEOUT && round < a->round)
    return td__error(TD_ERR_TIMEOUT, "%s: rank %d: rank %d did not finish the previous collective call of this "
                     "executor (call %" PRIu64 ") within %lld ms, so it cannot join this one (call %" PRIu64
                     "); every rank must make the same executor calls in the same order",
                     td__agree_op_name(op), a->rank, p, round, (long long)timeout_ms, a->round);
  if (st == TD_ERR_TIMEOUT)
    return td__error(TD_ERR_TIMEOUT, "%s: rank %d: rank %d did not join this collective call within %lld ms "
                     "(call %" PRIu64 " of this executor): it is slower than the timeout (TD_TIMEOUT_MS), "
                     "stuck, or in other calls; every rank must make the same executor calls in the same order",
                     td__agree_op_name(op), a->rank, p, (long long)timeout_ms, a->round);
  return TD_OK;
}

/* Puts this rank's post into slot `my` of peer p: payload (the header, and
 * the message up to its NUL when there is one), then the round word (release). */
static td_status td__agree_put(td__agree *a, td__agree_slot *my, const td__agree_slot *post, int p) {
  size_t bytes = offsetof(td__agree_slot, msg) - sizeof post->round;
  if (post->status != TD_OK)
    bytes += strlen(post->msg) + 1;
  TD_CHECK(td_putmem(a->team, (char *)my + sizeof post->round, (const char *)post + sizeof post->round, bytes, p));
  return td_signal_op(a->team, &my->round, a->round, TD_SIGNAL_SET, p);
}

td_status td__agree_round(td__agree *a, int op, td_status mine, const char *msg, uint64_t fingerprint,
                    int64_t timeout_ms, td__agree_result *res) {
  char own[1024]; /* msg may be td_last_error()'s buffer, which td__error rewrites */
  snprintf(own, sizeof own, "%s", mine != TD_OK && msg ? msg : "");
  msg = own;
  res->bad_rank = -1;
  res->other_op = 0;
  res->status = TD_OK;
  res->failed_rank = -1;
  res->failed_status = TD_OK;
  res->failed_msg[0] = 0;
  a->round++;
  int row = (int)(a->round & 1);
  td__agree_slot post;
  memset(&post, 0, sizeof post);
  post.op = op;
  post.status = (int32_t)mine;
  post.fingerprint = fingerprint;
  snprintf(post.msg, sizeof post.msg, "%.*s", (int)sizeof post.msg - 1, own);
  td__agree_slot *my = &a->slots[(size_t)row * (size_t)a->n + (size_t)a->rank];
  /* Peer p's post of the previous round sits in our other row, at p. */
  const td__agree_slot *prev = &a->slots[(size_t)(row ^ 1) * (size_t)a->n];
  int64_t deadline = td__now_ns() + timeout_ms * 1000000;
  /* First to every peer already done with the previous round, then to the
   * late ones as they get there (see the file comment). */
  for (int p = 0; p < a->n; p++) {
    a->posted[p] = (unsigned char)td__agree_seen(&prev[p], a->round - 1);
    if (a->posted[p])
      TD_CHECK(td__agree_put(a, my, &post, p));
  }
  for (int p = 0; p < a->n; p++) {
    if (a->posted[p])
      continue;
    TD_CHECK(td__agree_wait(a, &prev[p], p, op, a->round - 1, deadline, timeout_ms));
    TD_CHECK(td__agree_put(a, my, &post, p));
  }
  for (int p = 0; p < a->n; p++) {
    const td__agree_slot *s = &a->slots[(size_t)row * (size_t)a->n + (size_t)p];
    TD_CHECK(td__agree_wait(a, s, p, op, a->round, deadline, timeout_ms));
  }
  /* Everyone posted: the first rank in another call, else the first rank
   * that failed (this one, else the likely cause), else the first
   * fingerprint that differs from rank 0's. */
  const td__agree_slot *row0 = &a->slots[(size_t)row * (size_t)a->n];
  int cause = -1;
  for (int p = 0; p < a->n; p++)
    if (row0[p].op == op && row0[p].status != TD_OK &&
        (cause < 0 || td__status_secondary((td_status)row0[p].status) <
                          td__status_secondary((td_status)row0[cause].status)))
      cause = p;
  if (cause >= 0) {
    res->failed_rank = cause;
    res->failed_status = (td_status)row0[cause].status;
    snprintf(res->failed_msg, sizeof res->failed_msg, "%s", cause == a->rank ? post.msg : row0[cause].msg);
  }
  for (int p = 0; p < a->n; p++)
    if (row0[p].op != op) {
      res->bad_rank = p;
      res->other_op = row0[p].op;
      return td__error(TD_ERR_STATE, "%s: rank %d: rank %d is in %s at the same time; every rank must make the "
                       "same executor calls in the same order", td__agree_op_name(op), a->rank, p,
                       td__agree_op_name(row0[p].op));
    }
  if (mine != TD_OK) { /* this rank's own failure first: it is the one to fix here */
    res->bad_rank = a->rank;
    res->status = mine;
    return td__error(mine, "%s", own);
  }
  if (cause >= 0) {
    res->bad_rank = cause;
    res->status = res->failed_status;
    return td__error(TD_ERR_PEER_FAILED, "%s: rank %d: rank %d failed with %s: %s", td__agree_op_name(op),
                     a->rank, cause, td_status_name(res->failed_status), res->failed_msg);
  }
  for (int p = 1; p < a->n; p++)
    if (row0[p].fingerprint != row0[0].fingerprint) {
      res->bad_rank = p;
      char others[256] = "";
      size_t len = 0;
      for (int q = p + 1; q < a->n && len < sizeof others - 16; q++)
        if (row0[q].fingerprint != row0[0].fingerprint) {
          int k = snprintf(others + len, sizeof others - len, " %d", q);
          len += k > 0 ? (size_t)k : 0;
        }
      return td__error(TD_ERR_MISMATCH, "%s: rank %d: the ranks pass different plans: rank %d's plan "
                       "(fingerprint 0x%016" PRIx64 ") differs from rank 0's (0x%016" PRIx64 ")%s%s; every "
                       "rank must pass an equal plan (same buffers, signals and every rank's schedule)",
                       td__agree_op_name(op), a->rank, p, row0[p].fingerprint, row0[0].fingerprint,
                       len ? "; also ranks" : "", others);
    }
  return TD_OK;
}

int td__status_secondary(td_status st) {
  switch (st) {
  case TD_ERR_PEER_FAILED:
  case TD_ERR_MISMATCH:
  case TD_ERR_STATE:
    return 2;
  case TD_ERR_TIMEOUT:
    return 1;
  default:
    return 0;
  }
}

/* The reason without a leading "td_exec_create: " (the wrapper names the call). */
static const char *td__create_reason(const char *msg) {
  static const char call[] = "td_exec_create: ";
  return strncmp(msg, call, sizeof call - 1) == 0 ? msg + sizeof call - 1 : msg;
}

/* Whether two ranks' messages give the same reason: equal but for their
 * numbers (rank numbers, and sizes that may differ by a rank's share). */
static int td__same_reason(const char *x, const char *y) {
  for (;;) {
    int dx = *x >= '0' && *x <= '9', dy = *y >= '0' && *y <= '9';
    if (dx && dy) {
      while (*x >= '0' && *x <= '9')
        x++;
      while (*y >= '0' && *y <= '9')
        y++;
      continue;
    }
    if (*x != *y)
      return 0;
    if (!*x)
      return 1;
    x++, y++;
  }
}

static _Thread_local int td__create_cause = -1;

int td__exec_create_cause(void) { return td__create_cause; }

void td__exec_set_create_cause(int rank) { td__create_cause = rank; }

td_status td__agree_create_step(td__agree *a, int op, td_status mine, uint64_t fingerprint, int64_t timeout_ms) {
  char own[1024]; /* td_last_error()'s buffer is rewritten by the round */
  snprintf(own, sizeof own, "%s", mine != TD_OK ? td_last_error() : "");
  td__agree_result res;
  td_status st = td__agree_round(a, op, mine, own, fingerprint, timeout_ms, &res);
  if (st == TD_OK || res.failed_rank < 0)
    return st; /* agreed, or no rank's failure to carry: the round's own error names who and why */
  const td__agree_slot *row0 = &a->slots[(size_t)(a->round & 1) * (size_t)a->n];
  for (int p = 0; p < a->n; p++)
    if (row0[p].op != op)
      return st; /* a rank in another call: a call-order mistake, which the round's message names */
  const int cause = res.failed_rank;
  td__create_cause = cause;
  /* The other failing ranks, by number (their messages stay on their ranks). */
  char others[160] = "";
  size_t len = 0;
  int nothers = 0, cut = 0;
  for (int p = 0; p < a->n; p++)
    if (p != cause && row0[p].status != TD_OK) {
      if (len < sizeof others - 24) {
        int k = snprintf(others + len, sizeof others - len, "%s%d", nothers ? ", " : "", p);
        len += k > 0 ? (size_t)k : 0;
      } else if (!cut) {
        snprintf(others + len, sizeof others - len, " ...");
        cut = 1;
      }
      nothers++;
    }
  /* Every rank failed with the same status for the same reason: none failed
   * because of another, so each names itself as the cause (for
   * td__exec_create_cause too) and no rank is blamed on another. */
  int same = a->n > 1 && nothers == a->n - 1;
  for (int p = 0; same && p < a->n; p++)
    same = row0[p].status == row0[cause].status && td__same_reason(row0[p].msg, row0[cause].msg);
  if (same) {
    td__create_cause = a->rank;
    return td__error(mine, "td_exec_create: rank %d failed to create the executor: %s (every rank failed the same "
                     "way)", a->rank, td__create_reason(own));
  }
  char also[200] = "";
  if (nothers && nothers == a->n - 1)
    snprintf(also, sizeof also, " (every rank failed, not all for this reason)");
  else if (nothers)
    snprintf(also, sizeof also, " (rank%s %s failed too)", nothers > 1 ? "s" : "", others);
  const char *why = td__create_reason(cause == a->rank ? own : res.failed_msg);
  if (cause == a->rank)
    return td__error(res.failed_status, "td_exec_create: rank %d failed to create the executor: %s%s", cause, why,
                     also);
  if (mine != TD_OK)
    return td__error(res.failed_status, "td_exec_create: rank %d: rank %d failed to create the executor: %s%s; "
                     "this rank failed too, with %s: %s", a->rank, cause, why, also, td_status_name(mine),
                     td__create_reason(own));
  return td__error(res.failed_status, "td_exec_create: rank %d: rank %d failed to create the executor: %s%s",
                   a->rank, cause, why, also);
}
