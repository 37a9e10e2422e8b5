/* SPDX-License-Identifier: Apache-2.0
 * Waiting and waking (primitives layer).
 *
 * A wait spins briefly, then yields the core, then sleeps on the waiting
 * rank's doorbell: a 32-bit futex word in its control data that every signal
 * to that rank increments. Sleeps last at most 1 ms, so plain stores (no
 * doorbell) are still seen, and the deadline and peer failure are checked
 * between sleeps. This keeps 8 ranks progressing on 2 cores: a waiter gives
 * its core to the rank it waits for instead of spinning its slice away.
 *
 * Wake-ups are cheap when nobody sleeps: the waker increments the doorbell
 * and calls futex_wake only if the rank announced it sleeps. Both sides use
 * sequentially consistent operations on (doorbell, sleepers) so either the
 * waker sees the sleeper or the sleeper sees the new doorbell value. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "prim/prim_impl.h"

enum {
  TD__SPIN_ITERS = 128,         /* polls before yielding, when every rank has a core */
  TD__YIELD_ITERS = 256,        /* then polls with sched_yield between */
  TD__OVER_YIELD_ITERS = 16,    /* yields before sleeping when ranks outnumber cores */
  TD__SLEEP_NS = 1000000,       /* longest futex sleep */
  TD__LIVENESS_NS = 100000000,  /* how often sleeping waiters check peer pids */
};

int64_t td__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int td__cmp_holds(td_cmp cmp, uint64_t v, uint64_t value) {
  switch (cmp) {
  case TD_CMP_EQ: return v == value;
  case TD_CMP_NE: return v != value;
  case TD_CMP_GT: return v > value;
  case TD_CMP_GE: return v >= value;
  case TD_CMP_LT: return v < value;
  case TD_CMP_LE: return v <= value;
  }
  return 0;
}

const char *td_cmp_name(td_cmp cmp) {
  static const char *const names[] = {"eq", "ne", "gt", "ge", "lt", "le"};
  return (unsigned)cmp < 6 ? names[cmp] : "invalid";
}

/* When ranks outnumber cores, spinning only burns the slice of the rank we
 * wait for, and sched_yield does not reliably hand the core to it; sleeping
 * on the doorbell does. Measured on 2 cores with 4 and 8 ranks (docs/perf.md):
 * no spin and 16 yields gave the fastest barriers. */
void td__wait_policy(td_world *w) {
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1)
    cores = 1;
  if (w->size > cores) {
    w->spin_iters = 0;
    w->yield_iters = TD__OVER_YIELD_ITERS;
  } else {
    w->spin_iters = TD__SPIN_ITERS;
    w->yield_iters = TD__YIELD_ITERS;
  }
}

static void td__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int td__futex_private(const td_world *w) { return !(w->tp->caps & TD__CAP_PROCESS_SHARED); }

void td__set_failed(td_world *w, int world_rank, td_status st) {
  /* The first failing rank claims the record, writes its status, then
   * publishes itself: a reader that sees `failed` never sees the status
   * unwritten (it once read TD_OK there, under TSan's scheduling). */
  int32_t expected = 0;
  if (atomic_compare_exchange_strong(&w->ctl->failed_claim, &expected, world_rank + 1)) {
    atomic_store_explicit(&w->ctl->failed_status, (int32_t)st, memory_order_relaxed);
    atomic_store_explicit(&w->ctl->failed, world_rank + 1, memory_order_release);
  }
  for (int r = 0; r < w->size; r++)
    td__wake_world_rank(w, r);
}

/* Whether process `pid` is gone: no such process, or a zombie its parent has
 * not reaped yet (kill(pid, 0) still succeeds on those). */
static int td__pid_gone(int32_t pid) {
  if (kill(pid, 0) != 0)
    return errno == ESRCH;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close_paren = strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

/* Marks a peer whose process is gone (without td_world_finalize) as failed. */
static void td__check_peer_pids(td_world *w) {
  _Atomic int32_t *pids = td__region_pids(w->region.base);
  for (int r = 0; r < w->size; r++) {
    if (r == w->rank || atomic_load_explicit(&w->ranks[r].left, memory_order_acquire))
      continue;
    int32_t pid = atomic_load_explicit(&pids[r], memory_order_relaxed);
    /* `left` is read again once the process is gone: a rank that finalized
     * between the first read and its exit is done, not failed. Its store to
     * `left` precedes its exit, which precedes our seeing it gone. */
    if (pid > 0 && td__pid_gone(pid) && !atomic_load_explicit(&w->ranks[r].left, memory_order_seq_cst)) {
      td__set_failed(w, r, TD_ERR_PEER_FAILED);
      return;
    }
  }
}

td_status td__wait_raw(td_world *w, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                       int64_t deadline_ns, uint64_t *observed) {
  td__rank_ctl *me = &w->ranks[w->rank];
  int64_t next_liveness = 0;
  uint64_t v = 0;
  for (unsigned iter = 0;; iter++) {
    v = atomic_load_explicit(addr, memory_order_acquire);
    if (td__cmp_holds(cmp, v, value))
      break;
    if (atomic_load_explicit(&w->ctl->failed, memory_order_acquire))
      return TD_ERR_PEER_FAILED;
    if (iter < w->spin_iters) {
      td__cpu_relax();
      continue;
    }
    int64_t now = td__now_ns();
    if (now >= deadline_ns) {
      if (observed)
        *observed = v;
      return TD_ERR_TIMEOUT;
    }
    if (iter < w->spin_iters + w->yield_iters) {
      sched_yield();
      continue;
    }
    if ((w->tp->caps & TD__CAP_PEER_PIDS) && now >= next_liveness) {
      td__check_peer_pids(w);
      next_liveness = now + TD__LIVENESS_NS;
      continue;
    }
    atomic_fetch_add_explicit(&me->sleepers, 1, memory_order_seq_cst);
    uint32_t bell = atomic_load_explicit(&me->doorbell, memory_order_seq_cst);
    v = atomic_load_explicit(addr, memory_order_seq_cst);
    if (!td__cmp_holds(cmp, v, value) && !atomic_load_explicit(&w->ctl->failed, memory_order_seq_cst)) {
      int64_t left = deadline_ns - now;
      struct timespec ts = {0, left < TD__SLEEP_NS ? (long)left : TD__SLEEP_NS};
      syscall(SYS_futex, (uint32_t *)&me->doorbell, td__futex_private(w) ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT,
              bell, &ts, NULL, 0);
    }
    atomic_fetch_sub_explicit(&me->sleepers, 1, memory_order_seq_cst);
  }
  if (observed)
    *observed = v;
  return TD_OK;
}

void td__wake_world_rank(td_world *w, int world_rank) {
  if (world_rank < 0 || world_rank >= w->size)
    return;
  td__rank_ctl *rc = &w->ranks[world_rank];
  atomic_fetch_add_explicit(&rc->doorbell, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&rc->sleepers, memory_order_seq_cst))
    syscall(SYS_futex, (uint32_t *)&rc->doorbell, td__futex_private(w) ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE,
            INT_MAX, NULL, NULL, 0);
}

td_status td__peer_failed_error(td_world *w, const char *what) {
  int f = atomic_load_explicit(&w->ctl->failed, memory_order_acquire) - 1;
  td_status st = (td_status)atomic_load_explicit(&w->ctl->failed_status, memory_order_acquire);
  if (f == w->rank)
    return td__error(TD_ERR_PEER_FAILED, "rank %d: %s abandoned: this rank was marked failed earlier", w->rank,
                     what);
  if (st == TD_ERR_PEER_FAILED && (w->tp->caps & TD__CAP_PEER_PIDS))
    return td__error(TD_ERR_PEER_FAILED, "rank %d: %s abandoned: rank %d (pid %d) exited without "
                     "td_world_finalize",
                     w->rank, what, f, (int)atomic_load(&td__region_pids(w->region.base)[f]));
  return td__error(TD_ERR_PEER_FAILED, "rank %d: %s abandoned: rank %d failed with %s", w->rank, what, f,
                   td_status_name(st));
}

/* Describes where `addr` lives: "rank R heap offset 0x..", or "control data". */
static void td__describe_addr(const td_world *w, const void *addr, char *buf, size_t cap) {
  const char *p = addr;
  if (p >= w->heaps && p < td__heap(w, w->size)) {
    size_t off = (size_t)(p - w->heaps);
    int owner = (int)(off / w->heap_stride);
    snprintf(buf, cap, "owned by rank %d at heap offset %zu", owner, off % w->heap_stride);
  } else if (p >= (const char *)w->region.base && p < w->heaps) {
    snprintf(buf, cap, "in the control area");
  } else {
    snprintf(buf, cap, "at address %p (not in the symmetric heap)", addr);
  }
}

/* A wait past its deadline: the message names the signal, the condition and
 * the last value seen; the team is broken (peers may be anywhere). */
static td_status td__wait_timed_out(td_team *team, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                                    const char *what, uint64_t seen) {
  td_world *w = team->world;
  char where[96];
  td__describe_addr(w, addr, where, sizeof where);
  return td__team_break(team, td__error(TD_ERR_TIMEOUT,
                                        "rank %d: timed out after %d ms waiting for %s: signal %s, until value "
                                        "%s %" PRIu64 "; last observed %" PRIu64,
                                        w->rank, w->timeout_ms, what, where, td_cmp_name(cmp), value, seen));
}

td_status td__wait_u64(td_team *team, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                       const char *what, uint64_t *observed) {
  td_world *w = team->world;
  if ((unsigned)cmp > TD_CMP_LE)
    return td__error(TD_ERR_INVALID_ARG, "rank %d: wait on %s: comparison %d is not a td_cmp (0..5)", w->rank,
                     what, (int)cmp);
  TD_CHECK(td__team_usable(team, what));
  uint64_t v = 0;
  td_status st = td__wait_raw(w, addr, cmp, value, td__deadline_ns(w), &v);
  if (st == TD_ERR_PEER_FAILED)
    return td__team_break(team, td__peer_failed_error(w, what));
  if (st == TD_ERR_TIMEOUT)
    return td__wait_timed_out(team, addr, cmp, value, what, v);
  if (observed)
    *observed = v;
  return TD_OK;
}

td_status td__wait_u64_call(td_team *team, const _Atomic uint64_t *addr, td_cmp cmp, uint64_t value,
                            const char *what, uint64_t *observed) {
  td_world *w = team->world;
  if ((unsigned)cmp > TD_CMP_LE)
    return td__wait_u64(team, addr, cmp, value, what, observed); /* its message */
  TD_CHECK(td__team_usable(team, what));
  uint64_t v = 0;
  td_status st = td__team_wait(team, addr, cmp, value, td__deadline_ns(w), &v, what);
  if (st == TD_ERR_MISMATCH)
    return td__team_break(team, st);
  if (st == TD_ERR_PEER_FAILED)
    return td__team_break(team, td__peer_failed_error(w, what));
  if (st == TD_ERR_TIMEOUT)
    return td__wait_timed_out(team, addr, cmp, value, what, v);
  if (observed)
    *observed = v;
  return TD_OK;
}

void td__wake(td_team *team, int team_pe) {
  if (team_pe >= 0 && team_pe < team->size)
    td__wake_world_rank(team->world, team->members[team_pe]);
}
