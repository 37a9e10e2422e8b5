/* SPDX-License-Identifier: Apache-2.0
 * CPU device contexts (primitives layer, device part, host side).
 *
 * Builds the td_dev_ctx that CPU tile code passes to the td_dev_* bodies of
 * tdist/device/cpu.h, and implements the few of them that are out of line:
 * the wait slow path (through the runtime's deadline wait, so waiting workers
 * sleep instead of spinning when ranks outnumber cores), the doorbell after a
 * signal, and the epoch barrier. One context per rank and team, kept in the
 * team's device slot and freed with the team; the barrier's signal area is a
 * symmetric block of n_pes words allocated on the team. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "prim/prim_internal.h"
#include "tdist/device.h"
#include "tdist/symm.h"

typedef struct td__dev_cpu_state {
  td_dev_ctx ctx;
  uint64_t barrier_epoch; /* barriers this rank has entered */
  uint32_t diag_lock;     /* 0 until a wait claims the diagnostic */
  td_dev_diagnostic diag;
} td__dev_cpu_state;

static void td__dev_cpu_state_free(void *p) { free(p); }

td_status td_dev_ctx_cpu(td_team *team, td_dev_ctx *out) {
  if (team == NULL || out == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_dev_ctx_cpu: %s is NULL", team ? "out" : "team");
  void **slot = td__team_slot(team, TD__SLOT_DEVICE);
  if (slot == NULL)
    return td__error(TD_ERR_INTERNAL, "td_dev_ctx_cpu: the team has no device slot");
  if (*slot != NULL) {
    *out = ((td__dev_cpu_state *)*slot)->ctx;
    return TD_OK;
  }
  const int n = td_team_size(team);
  if (n > TD_DEV_MAX_PEERS)
    return td__error(TD_ERR_UNSUPPORTED,
                     "td_dev_ctx_cpu: team of %d ranks; device contexts address at most %d "
                     "(TD_DEV_MAX_PEERS): split the team",
                     n, TD_DEV_MAX_PEERS);
  td_world *world = td_team_world(team);
  td__dev_cpu_state *s = calloc(1, sizeof *s);
  if (s == NULL)
    return td__error(TD_ERR_NO_MEMORY, "td_dev_ctx_cpu: out of host memory");
  td_dev_ctx *c = &s->ctx;
  c->rank = td_team_rank(team);
  c->n_pes = n;
  c->world_rank = td_world_rank(world);
  c->timeout_ns = (uint64_t)td_world_timeout_ms(world) * 1000000u;
  c->diag = &s->diag;
  c->diag_lock = &s->diag_lock;
  c->barrier_epoch = &s->barrier_epoch;
  c->host = team;
  for (int p = 0; p < n; p++) {
    void *base = NULL;
    size_t size = 0;
    td_status st = td_symm_heap_base(world, td__team_world_rank(team, p), &base, &size);
    if (st != TD_OK) {
      free(s);
      return st;
    }
    c->peer_base[p] = (uintptr_t)base;
    c->heap_size = size;
  }
  void *sig = NULL;
  td_status st = td_symm_alloc(team, (size_t)n * sizeof(uint64_t), 64, &sig);
  if (st != TD_OK) {
    free(s);
    td__error_prefix("td_dev_ctx_cpu: allocating the barrier signal area: ");
    return st;
  }
  memset(sig, 0, (size_t)n * sizeof(uint64_t));
  c->barrier_sig = sig;
  /* Nobody may signal into a peer's area before that peer cleared it. */
  st = td_team_sync(team);
  if (st != TD_OK) {
    free(s);
    return st;
  }
  *slot = s;
  td__team_set_slot_dtor(team, TD__SLOT_DEVICE, td__dev_cpu_state_free);
  *out = *c;
  return TD_OK;
}

/* Team rank whose heap holds [word, word+8), and the offset in it; -1 if none. */
static int td__dev_owner(const td_dev_ctx *ctx, const uint64_t *word, uint64_t *offset) {
  uintptr_t w = (uintptr_t)word;
  for (int p = 0; p < ctx->n_pes; p++) {
    uintptr_t b = ctx->peer_base[p];
    if (b != 0 && w >= b && w + sizeof(uint64_t) <= b + ctx->heap_size) {
      *offset = (uint64_t)(w - b);
      return p;
    }
  }
  *offset = UINT64_MAX;
  return -1;
}

td_status td_dev_cpu_wait(const td_dev_ctx *ctx, const uint64_t *word, td_cmp cmp,
                          uint64_t value) {
  if (ctx == NULL || ctx->host == NULL || word == NULL)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_dev_signal_wait_until: %s (build the context with td_dev_ctx_cpu)",
                     word == NULL ? "signal address is NULL" : "not a CPU device context");
  char what[64];
  snprintf(what, sizeof what, "a signal of the device API (worker %d)", (int)ctx->worker);
  td_status st = td__wait_u64((td_team *)ctx->host, (const _Atomic uint64_t *)word, cmp, value,
                              what, NULL);
  if (st != TD_ERR_TIMEOUT)
    return st;
  uint32_t unclaimed = 0;
  if (ctx->diag_lock != NULL &&
      __atomic_compare_exchange_n(ctx->diag_lock, &unclaimed, 1u, 0, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    td_dev_diagnostic *d = ctx->diag;
    d->rank = ctx->rank;
    d->owner = td__dev_owner(ctx, word, &d->offset);
    d->block = ctx->worker;
    d->thread = 0;
    d->cmp = (uint32_t)cmp;
    d->expected = value;
    d->observed = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    d->waited_ns = ctx->timeout_ns;
    __atomic_store_n(&d->state, 2u, __ATOMIC_RELEASE);
  }
  return st; /* the runtime's message already names rank, word, comparison and values */
}

void td_dev_cpu_wake(const td_dev_ctx *ctx, int pe) {
  if (ctx != NULL && ctx->host != NULL)
    td__wake((td_team *)ctx->host, pe);
}

td_status td_dev_cpu_barrier(const td_dev_ctx *ctx) {
  if (ctx == NULL || ctx->host == NULL || ctx->barrier_sig == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_dev_barrier_all_block: not a CPU device context "
                                         "(build it with td_dev_ctx_cpu)");
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* quiet */
  const uint64_t e = ++*ctx->barrier_epoch;
  for (int p = 0; p < ctx->n_pes; p++) {
    uint64_t *peer = td_dev_symm_at(ctx, &ctx->barrier_sig[ctx->rank], p);
    __atomic_store_n(peer, e, __ATOMIC_RELEASE);
    td_dev_cpu_wake(ctx, p);
  }
  for (int q = 0; q < ctx->n_pes; q++) {
    td_status st = td_dev_signal_wait_until(ctx, &ctx->barrier_sig[q], TD_CMP_GE, e);
    if (st != TD_OK)
      return st;
  }
  return TD_OK;
}

void td_dev_cpu_bad_pe(const td_dev_ctx *ctx, const char *fn, int pe) {
  td__error(TD_ERR_INVALID_ARG, "rank %d (worker %d): %s: pe %d is outside the team (0 to %d); nothing was "
            "written", ctx->rank, (int)ctx->worker, fn, pe, ctx->n_pes - 1);
  uint32_t unclaimed = 0;
  if (ctx->diag_lock != NULL &&
      __atomic_compare_exchange_n(ctx->diag_lock, &unclaimed, 1u, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    td_dev_diagnostic *d = ctx->diag;
    d->rank = ctx->rank;
    d->owner = pe;
    d->block = ctx->worker;
    d->thread = 0;
    d->cmp = 0;
    d->offset = UINT64_MAX;
    d->expected = (uint64_t)ctx->n_pes;
    d->observed = 0;
    d->waited_ns = 0;
    __atomic_store_n(&d->state, TD_DEV_DIAG_BAD_PE, __ATOMIC_RELEASE);
  }
}

td_status td_dev_cpu_bad_count(const td_dev_ctx *ctx, int n) {
  return td__error(TD_ERR_INVALID_ARG, "rank %d: td_dev_wait_until_all: count %d is negative; allowed 0 or more "
                   "signal words", ctx ? ctx->rank : -1, n);
}
