/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: the collective argument check of every create call. Each
 * rank validates its own arguments, then the ranks exchange a small record
 * (their verdict, message and arguments) with one host all-gather, so that a
 * bad argument on one rank, or arguments that differ between ranks, make
 * every rank fail with the same status and a message naming the rank. No
 * rank ever starts compiling or allocating while another has given up. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/ops_internal.h"
#include "tdist/coll.h"
#include "tdist/config.h"

/* The record every rank contributes; plain integers so that memcmp-free
 * field comparisons are exact. */
typedef struct td__tp_args {
  int32_t status;
  int32_t kind, dtype, variant, backend, chunks, compute_workers, comm_workers;
  int32_t timeout_ms; /* opts.timeout_ms as passed (0 = the world's) */
  int64_t m, n, k, tile_rows, tile_cols;
  uint64_t count;
  char msg[200];
} td__tp_args;

static td_status td__tp_local_check(const td__tp_desc *d, const td_tp_opts *o, int nranks, int have_out) {
  const char *kn = td_tp_kind_name(d->kind);
  if (!have_out)
    return td__error(TD_ERR_INVALID_ARG, "%s: out is NULL", kn);
  /* every operator knob, whichever backend and schedule would read it: a bad value is this call's error on
   * every rank now (through the exchange), not silence on one path and a failure on another */
  td_status env = td_config_check_prefix("TD_OPS_");
  if (env != TD_OK) {
    td__error_prefix("%s: ", kn);
    return env;
  }
  if (d->dtype != TD_F32 && d->dtype != TD_F16 && d->dtype != TD_BF16)
    return td__error(TD_ERR_INVALID_ARG, "%s: dtype %s (%d) is not supported; use f32, f16 or bf16", kn,
                     td_dtype_name(d->dtype), (int)d->dtype);
  if (d->kind == TD_TP_ALL_REDUCE) {
    if (d->count < 1)
      return td__error(TD_ERR_INVALID_ARG, "%s: count is 0; it must be >= 1", kn);
  } else if (d->m < 1 || d->n < 1 || d->k < 1) {
    return td__error(TD_ERR_INVALID_ARG, "%s: M=%" PRId64 ", N=%" PRId64 ", K=%" PRId64 "; every dim must be >= 1",
                     kn, d->m, d->n, d->k);
  }
  if (d->min_k_ranks && d->k < nranks)
    return td__error(TD_ERR_SHAPE, "%s: the contraction dim K=%" PRId64 " is split over %d ranks; K must be >= "
                     "the rank count", kn, d->k, nranks);
  if ((int)o->backend < 0 || o->backend >= TD_EXEC_BACKEND_COUNT)
    return td__error(TD_ERR_INVALID_ARG, "%s: backend %d is unknown; use TD_EXEC_CPU or TD_EXEC_CUDA", kn,
                     (int)o->backend);
  if ((int)o->variant < 0 || o->variant >= TD_TP_VARIANT_COUNT ||
      (o->variant != TD_TP_AUTO && !(d->variants & (1u << o->variant)))) {
    char allowed[160] = "auto";
    for (int v = 1; v < TD_TP_VARIANT_COUNT; v++)
      if (d->variants & (1u << v)) {
        strncat(allowed, ", ", sizeof allowed - strlen(allowed) - 1);
        strncat(allowed, td_tp_variant_name((td_tp_variant)v), sizeof allowed - strlen(allowed) - 1);
      }
    return td__error(TD_ERR_INVALID_ARG, "%s: variant %s (%d) does not apply; allowed: %s", kn,
                     td_tp_variant_name(o->variant), (int)o->variant, allowed);
  }
  if (o->chunks_per_rank < 0 || o->chunks_per_rank > 64 || o->tile_rows < 0 || o->tile_cols < 0 ||
      o->compute_workers < 0 || o->comm_workers < 0 || o->compute_workers > 1024 || o->comm_workers > 1024 ||
      o->timeout_ms < 0)
    return td__error(TD_ERR_INVALID_ARG, "%s: options out of range (chunks_per_rank %d: 0..64; tile_rows %" PRId64
                     ", tile_cols %" PRId64 ": >= 0; compute_workers %d, comm_workers %d: 0..1024; timeout_ms %d: "
                     ">= 0; 0 = chosen)", kn, o->chunks_per_rank, o->tile_rows, o->tile_cols, o->compute_workers,
                     o->comm_workers, o->timeout_ms);
  return TD_OK;
}

static void td__tp_args_fill(td__tp_args *a, td_status st, const td__tp_desc *d, const td_tp_opts *o) {
  memset(a, 0, sizeof *a);
  a->status = (int32_t)st;
  a->kind = (int32_t)d->kind, a->dtype = (int32_t)d->dtype, a->variant = (int32_t)o->variant;
  a->backend = (int32_t)o->backend, a->chunks = o->chunks_per_rank;
  a->compute_workers = o->compute_workers, a->comm_workers = o->comm_workers;
  a->timeout_ms = o->timeout_ms;
  a->m = d->m, a->n = d->n, a->k = d->k, a->count = d->count;
  a->tile_rows = o->tile_rows, a->tile_cols = o->tile_cols;
  if (st != TD_OK)
    snprintf(a->msg, sizeof a->msg, "%s", td_last_error());
}

static int td__tp_args_same(const td__tp_args *x, const td__tp_args *y) {
  return x->kind == y->kind && x->dtype == y->dtype && x->variant == y->variant && x->backend == y->backend &&
         x->chunks == y->chunks && x->compute_workers == y->compute_workers &&
         x->comm_workers == y->comm_workers && x->m == y->m && x->n == y->n && x->k == y->k &&
         x->count == y->count && x->tile_rows == y->tile_rows && x->tile_cols == y->tile_cols;
}

td_status td__tp_check(td_team *team, const td__tp_desc *d, const td_tp_opts *o, int have_out) {
  int n = td_team_size(team);
  td_status mine = td__tp_local_check(d, o, n, have_out);
  td__tp_args *all = calloc((size_t)n, sizeof *all);
  if (!all) /* rare; peers then meet the exchange's deadline, which names this rank */
    return td__error(TD_ERR_NO_MEMORY, "%s: out of memory for the argument check", td_tp_kind_name(d->kind));
  td__tp_args rec;
  td__tp_args_fill(&rec, mine, d, o);
  /* Every rank takes part even when its own check failed, so nobody hangs. */
  td_status st = td_all_gather(team, all, &rec, sizeof rec, TD_U8);
  if (st != TD_OK) {
    free(all);
    td__error_prefix("%s: exchanging the arguments: ", td_tp_kind_name(d->kind));
    return st;
  }
  for (int r = 0; r < n; r++)
    if (all[r].status != TD_OK) {
      td_status s = (td_status)all[r].status;
      char msg[240];
      snprintf(msg, sizeof msg, "%s", all[r].msg);
      free(all);
      return td__error(s, "rank %d: %s", r, msg);
    }
  for (int r = 1; r < n; r++)
    if (!td__tp_args_same(&all[0], &all[r])) {
      const td__tp_args *a = &all[0], *b = &all[r];
      td_status s = td__error(TD_ERR_MISMATCH,
                              "%s: ranks passed different arguments: rank 0 (kind %s, M=%" PRId64 ", N=%" PRId64
                              ", K=%" PRId64 ", count=%" PRIu64 ", dtype %s, variant %s, backend %d, chunks %d, "
                              "tiles %" PRId64 "x%" PRId64 ", workers %d+%d) vs rank %d (kind %s, M=%" PRId64
                              ", N=%" PRId64 ", K=%" PRId64 ", count=%" PRIu64 ", dtype %s, variant %s, backend %d, "
                              "chunks %d, tiles %" PRId64 "x%" PRId64 ", workers %d+%d)",
                              td_tp_kind_name(d->kind), td_tp_kind_name((td_tp_kind)a->kind), a->m, a->n, a->k,
                              a->count, td_dtype_name((td_dtype)a->dtype), td_tp_variant_name((td_tp_variant)a->variant),
                              a->backend, a->chunks, a->tile_rows, a->tile_cols, a->compute_workers,
                              a->comm_workers, r, td_tp_kind_name((td_tp_kind)b->kind), b->m, b->n, b->k, b->count,
                              td_dtype_name((td_dtype)b->dtype), td_tp_variant_name((td_tp_variant)b->variant),
                              b->backend, b->chunks, b->tile_rows, b->tile_cols, b->compute_workers, b->comm_workers);
      free(all);
      return s;
    }
  /* Apart: the shapes agree, but the ranks would give up at different times
   * (one failing a call the others still wait in). */
  for (int r = 1; r < n; r++)
    if (all[r].timeout_ms != all[0].timeout_ms) {
      td_status s = td__error(TD_ERR_MISMATCH,
                              "%s: ranks passed different opts.timeout_ms: rank 0 %d, rank %d %d (0 = the world's "
                              "TD_TIMEOUT_MS); every rank must pass the same value so that all wait alike",
                              td_tp_kind_name(d->kind), (int)all[0].timeout_ms, r, (int)all[r].timeout_ms);
      free(all);
      return s;
    }
  free(all);
  return TD_OK;
}

int td__tp_cross_overlap(int n, const td__tp_ranges *first, size_t stride, int *p, int *q, int *qi) {
  static const int order[3] = {2, 0, 1}; /* another rank's output first, then its inputs */
#define TD__RANK_RANGES(r) ((const td__tp_ranges *)((const char *)first + (size_t)(r) * stride))
  for (int x = 0; x < n; x++) {
    const uint64_t c0 = TD__RANK_RANGES(x)->lo[2], cn = TD__RANK_RANGES(x)->len[2];
    for (int y = 0; cn && y < n; y++)
      for (int j = 0; y != x && j < 3; j++) {
        const int i = order[j];
        const uint64_t o0 = TD__RANK_RANGES(y)->lo[i], on = TD__RANK_RANGES(y)->len[i];
        if (on && o0 < c0 + cn && c0 < o0 + on) {
          *p = x, *q = y, *qi = i;
          return 1;
        }
      }
  }
#undef TD__RANK_RANGES
  return 0;
}
