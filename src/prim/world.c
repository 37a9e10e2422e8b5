/* SPDX-License-Identifier: Apache-2.0
 * Worlds (primitives layer): laying out the region, creating a world from the
 * launch environment (one process per rank) or as a local world (one thread
 * per rank), running a function on every rank of a local world, finalising.
 *
 * The transport attaches the region; this file only computes its layout and
 * points the world's fields into it, so nothing here depends on which
 * transport is used. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/suggest.h"
#include "prim/env.h"
#include "prim/prim_impl.h"
#include "tdist/config.h"

struct td_local_world {
  int n;
  td__region region;
  td_world *worlds;
};

static size_t td__round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static size_t td__ctl_offset(int size) { return td__round_up(td__region_prefix_bytes(size), 64); }

size_t td__ctl_bytes(int size) {
  size_t b = td__ctl_offset(size) + td__round_up(sizeof(td__ctl), 64) + (size_t)size * sizeof(td__rank_ctl);
  return td__round_up(b, TD__REGION_ALIGN);
}

void td_world_opts_init(td_world_opts *opts) {
  if (opts)
    memset(opts, 0, sizeof *opts);
}

/* Heap size and timeout: the options' value, else the environment's, else the default. */
static td_status td__resolve_opts(const td_world_opts *opts, size_t *heap, int *timeout_ms) {
  int64_t v = 0;
  if (opts && opts->heap_size) {
    if (opts->heap_size < 4096)
      return td__error(TD_ERR_INVALID_ARG, "td_world_opts.heap_size=%zu is too small; at least 4096 bytes",
                       opts->heap_size);
    *heap = opts->heap_size;
  } else {
    TD_CHECK(td_config_int("TD_SYMM_HEAP_SIZE", &v));
    *heap = (size_t)v;
  }
  if (opts && opts->timeout_ms) {
    if (opts->timeout_ms < 0)
      return td__error(TD_ERR_INVALID_ARG, "td_world_opts.timeout_ms=%d is negative; use 0 for the default",
                       opts->timeout_ms);
    *timeout_ms = opts->timeout_ms;
  } else {
    TD_CHECK(td_config_int("TD_TIMEOUT_MS", &v));
    *timeout_ms = (int)v;
  }
  return TD_OK;
}

/* Start-up deadline: TD_ATTACH_TIMEOUT_MS, else the larger of the wait
 * deadline and 60 s. Ranks of a big job on few cores start slowly, so a short
 * TD_TIMEOUT_MS (meant for waits between running ranks) must not limit it. */
static td_status td__attach_timeout(int timeout_ms, int *out) {
  int64_t v = 0;
  if (getenv("TD_ATTACH_TIMEOUT_MS") && *getenv("TD_ATTACH_TIMEOUT_MS")) {
    TD_CHECK(td_config_int("TD_ATTACH_TIMEOUT_MS", &v));
    *out = (int)v;
  } else {
    *out = timeout_ms > 60000 ? timeout_ms : 60000;
  }
  return TD_OK;
}

td_status td__world_setup(td_world *w, int rank, int size, const td__transport *tp, td__region region,
                          int timeout_ms, size_t heap_size) {
  w->rank = rank;
  w->size = size;
  w->local_rank = rank;
  w->local_size = size;
  w->timeout_ms = timeout_ms;
  w->heap_size = heap_size;
  w->heap_stride = td__round_up(heap_size, TD__REGION_ALIGN);
  w->tp = tp;
  w->region = region;
  char *base = region.base;
  w->ctl = (td__ctl *)(base + td__ctl_offset(size));
  w->ranks = (td__rank_ctl *)((char *)w->ctl + td__round_up(sizeof(td__ctl), 64));
  w->heaps = base + td__ctl_bytes(size);
  w->team_mask = 1; /* flag set 0 is the world team's */
  td__wait_policy(w);
  int *members = malloc(sizeof(int) * (size_t)size);
  if (!members)
    return td__error(TD_ERR_NO_MEMORY, "world of %d ranks: no memory for the world team", size);
  for (int r = 0; r < size; r++)
    members[r] = r;
  w->team = td__team_new(w, 1, 0, rank, size, members, 0);
  free(members);
  if (!w->team)
    return td__error(TD_ERR_NO_MEMORY, "world of %d ranks: no memory for the world team", size);
  return TD_OK;
}

static size_t td__region_bytes(int size, size_t heap_size) {
  return td__ctl_bytes(size) + (size_t)size * td__round_up(heap_size, TD__REGION_ALIGN);
}

td_status td_local_world_create(int nranks, const td_world_opts *opts, td_local_world **out) {
  if (!out)
    return td__error(TD_ERR_INVALID_ARG, "td_local_world_create: out is NULL");
  if (nranks < 1 || nranks > TD__MAX_RANKS)
    return td__error(TD_ERR_INVALID_ARG, "td_local_world_create: nranks=%d; allowed 1 to %d", nranks,
                     TD__MAX_RANKS);
  if (opts && opts->transport && strcmp(opts->transport, "local") != 0)
    return td__error(TD_ERR_INVALID_ARG, "td_local_world_create: transport '%s'; a local world uses 'local'",
                     opts->transport);
  size_t heap = 0;
  int timeout_ms = 0;
  TD_CHECK(td__resolve_opts(opts, &heap, &timeout_ms));
  td_local_world *lw = calloc(1, sizeof *lw);
  td_world *worlds = calloc((size_t)nranks, sizeof *worlds);
  if (!lw || !worlds) {
    free(lw);
    free(worlds);
    return td__error(TD_ERR_NO_MEMORY, "td_local_world_create: no memory for %d ranks", nranks);
  }
  td__job job = {.job_id = "", .rank = 0, .size = nranks, .region_bytes = td__region_bytes(nranks, heap),
                 .ctl_bytes = td__ctl_bytes(nranks), .timeout_ms = timeout_ms};
  td_status st = td__transport_local.attach(&job, &lw->region);
  if (st != TD_OK) {
    free(lw);
    free(worlds);
    return st;
  }
  lw->n = nranks;
  lw->worlds = worlds;
  for (int r = 0; r < nranks; r++) {
    worlds[r].lw = lw;
    st = td__world_setup(&worlds[r], r, nranks, &td__transport_local, lw->region, timeout_ms, heap);
    if (st != TD_OK) {
      td_local_world_destroy(lw);
      return st;
    }
  }
  *out = lw;
  return TD_OK;
}

td_world *td_local_world_rank(td_local_world *lw, int rank) {
  if (!lw || rank < 0 || rank >= lw->n)
    return NULL;
  return &lw->worlds[rank];
}

void td_local_world_destroy(td_local_world *lw) {
  if (!lw)
    return;
  for (int r = 0; r < lw->n; r++) {
    td_world *w = &lw->worlds[r];
    if (w->team) {
      if (!w->finalized)
        td__team_run_dtors(w->team);
      td__team_free(w->team);
    }
  }
  td__transport_local.detach(&lw->region);
  free(lw->worlds);
  free(lw);
}

typedef struct {
  td_world *world;
  int rank;
  td_rank_fn fn;
  void *arg;
  td_status status;
  char message[1024];
} td__rank_job;

static void *td__rank_main(void *p) {
  td__rank_job *j = p;
  td_clear_error();
  j->status = j->fn(j->world, j->rank, j->arg);
  if (j->status != TD_OK) {
    snprintf(j->message, sizeof j->message, "%s", td_last_error());
    td__set_failed(j->world, j->rank, j->status);
  }
  return NULL;
}

td_status td_local_world_run(int nranks, const td_world_opts *opts, td_rank_fn fn, void *arg) {
  if (!fn)
    return td__error(TD_ERR_INVALID_ARG, "td_local_world_run: fn is NULL");
  td_local_world *lw = NULL;
  TD_CHECK(td_local_world_create(nranks, opts, &lw));
  td__rank_job *jobs = calloc((size_t)nranks, sizeof *jobs);
  pthread_t *threads = calloc((size_t)nranks, sizeof *threads);
  if (!jobs || !threads) {
    free(jobs);
    free(threads);
    td_local_world_destroy(lw);
    return td__error(TD_ERR_NO_MEMORY, "td_local_world_run: no memory for %d ranks", nranks);
  }
  int started = 0;
  td_status st = TD_OK;
  for (; started < nranks; started++) {
    jobs[started] = (td__rank_job){.world = &lw->worlds[started], .rank = started, .fn = fn, .arg = arg};
    if (pthread_create(&threads[started], NULL, td__rank_main, &jobs[started]) != 0) {
      /* The ranks already started will see this rank as failed instead of waiting for it. */
      td__set_failed(&lw->worlds[started], started, TD_ERR_SYSTEM);
      st = td__error(TD_ERR_SYSTEM, "td_local_world_run: could not start the thread of rank %d of %d", started,
                     nranks);
      break;
    }
  }
  for (int r = 0; r < started; r++)
    pthread_join(threads[r], NULL);
  if (st == TD_OK) {
    int f = atomic_load(&lw->worlds[0].ctl->failed) - 1;
    if (f >= 0 && f < nranks && jobs[f].status != TD_OK) {
      /* Most messages already name a rank: their own ("rank F: ") or, when F
       * reports a failure it was told of (a collective argument check, a
       * peer's abandonment), the rank at fault. Add F only where none is named. */
      const char *m = jobs[f].message;
      st = td__rank_tag_len(m) ? td__error(jobs[f].status, "%s", m) : td__error(jobs[f].status, "rank %d: %s", f, m);
    }
  }
  free(threads);
  free(jobs);
  td_local_world_destroy(lw);
  return st;
}

td_status td_world_init(const td_world_opts *opts, td_world **out) {
  if (!out)
    return td__error(TD_ERR_INVALID_ARG, "td_world_init: out is NULL");
  td__launch l;
  TD_CHECK(td__launch_from_env(&l));
  size_t heap = 0;
  int timeout_ms = 0;
  TD_CHECK(td__resolve_opts(opts, &heap, &timeout_ms));
  const char *tname = opts ? opts->transport : NULL;
  if (!tname)
    TD_CHECK(td_config_str("TD_TRANSPORT", &tname));
  if (!tname)
    tname = l.size > 1 ? "shm" : "local";
  const td__transport *tp = td__transport_find(tname);
  if (!tp) {
    char near[32];
    if (td__suggest(tname, "local,shm", NULL, near, sizeof near))
      return td__error(TD_ERR_INVALID_ARG, "td_world_init: transport '%s' is unknown; allowed: local, shm (did you "
                       "mean %s?)", tname, near);
    return td__error(TD_ERR_INVALID_ARG, "td_world_init: transport '%s' is unknown; allowed: local, shm", tname);
  }
  if (tp == &td__transport_local && l.size > 1)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_world_init: transport 'local' cannot join %d processes (from %s); use 'shm', or "
                     "td_local_world_create for ranks that are threads",
                     l.size, l.source);
  if (l.size > TD__MAX_RANKS)
    return td__error(TD_ERR_INVALID_ARG, "td_world_init: world size %d (from %s); at most %d", l.size, l.source,
                     TD__MAX_RANKS);
  if (l.local_size != l.size)
    return td__error(TD_ERR_UNSUPPORTED,
                     "td_world_init: %d of %d ranks are on this host (from %s); the %s transport needs all "
                     "ranks on one host",
                     l.local_size, l.size, l.source, tp->name);
  int attach_ms = 0;
  TD_CHECK(td__attach_timeout(timeout_ms, &attach_ms));
  td_world *w = calloc(1, sizeof *w);
  if (!w)
    return td__error(TD_ERR_NO_MEMORY, "td_world_init: no memory for the world");
  td__job job = {.job_id = l.job_id, .rank = l.rank, .size = l.size, .region_bytes = td__region_bytes(l.size, heap),
                 .ctl_bytes = td__ctl_bytes(l.size), .timeout_ms = attach_ms, .job_id_hint = l.job_id_hint};
  td__region region = {0};
  td_status st = tp->attach(&job, &region);
  if (st != TD_OK) {
    free(w);
    return st;
  }
  st = td__world_setup(w, l.rank, l.size, tp, region, timeout_ms, heap);
  if (st != TD_OK) {
    tp->detach(&region);
    free(w);
    return st;
  }
  w->local_rank = l.local_rank;
  w->local_size = l.local_size;
  *out = w;
  return TD_OK;
}

td_status td_world_finalize(td_world *world) {
  if (!world)
    return TD_OK;
  if (world->finalized)
    return td__error(TD_ERR_STATE, "td_world_finalize: rank %d was already finalized", world->rank);
  td__team_run_dtors(world->team);
  /* A broken world team cannot meet in a barrier: leave without waiting a
   * second deadline, and say why. */
  td_status st = atomic_load(&world->team->broken) != TD_OK ? td__team_usable(world->team, "td_world_finalize")
                                              : td_barrier_all(world);
  /* From here no peer reads this rank's heap; its process may go without being taken for failed. */
  atomic_store_explicit(&world->ranks[world->rank].left, 1, memory_order_release);
  world->finalized = 1;
  if (world->lw)
    return st;
  td__team_free(world->team);
  world->tp->detach(&world->region);
  free(world);
  return st;
}

int td_world_rank(const td_world *world) { return world ? world->rank : -1; }
int td_world_size(const td_world *world) { return world ? world->size : 0; }
int td_world_local_rank(const td_world *world) { return world ? world->local_rank : -1; }
int td_world_local_size(const td_world *world) { return world ? world->local_size : 0; }
const char *td_world_transport(const td_world *world) { return world ? world->tp->name : "none"; }
td_team *td_world_team(td_world *world) { return world ? world->team : NULL; }
int td_world_timeout_ms(const td_world *world) { return world ? world->timeout_ms : 0; }
