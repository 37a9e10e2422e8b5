/* SPDX-License-Identifier: Apache-2.0
 * Host collectives on the symmetric heap, named as in NCCL.
 *
 * All are collective over a team and blocking. Buffers may be ordinary memory
 * or symmetric memory; when `src` (or `dst`) is symmetric the data moves
 * directly between heaps (one copy), otherwise it is staged through an
 * internal symmetric scratch area in pipelined pieces. Counts are in
 * elements. Calls are checked: when ranks pass different counts, dtypes, ops
 * or roots, every rank fails with TD_ERR_MISMATCH naming each rank's value.
 * No call needs any reset between calls (signals carry a per-call epoch).
 *
 * Layout for counts that do not divide: td_reduce_scatter splits `count`
 * with td_chunk_range (types.h): team rank r receives
 * count/n + (r < count%n) elements, starting at element offset
 * r*(count/n) + min(r, count%n) of the reduced vector.
 *
 * Reductions of f16/bf16 accumulate in f32 in team-rank order 0..n-1 and
 * round once, so results are identical on every rank and reproducible.
 * Every reduction combines in that order (f32/f64 too), so all ranks get the
 * same bits; integer sum/prod wrap (two's complement). u8 (raw bytes) may be
 * moved but not reduced.
 *
 * In-place forms: td_all_gather with src == dst + rank*count; td_reduce_scatter
 * with dst == src + (this rank's td_chunk_range offset); td_all_reduce with
 * dst == src; td_broadcast at the root with dst == src. Any other overlap of
 * dst and src is TD_ERR_INVALID_ARG; all_to_all(v) have no in-place form.
 *
 * A rank whose own arguments are invalid returns TD_ERR_INVALID_ARG and its
 * peers fail the same call at once with TD_ERR_MISMATCH (not at their
 * deadline). The first call on a team allocates, collectively, a symmetric
 * control and scratch block (about 2 MiB; less on a small heap; else
 * TD_ERR_HEAP_EXHAUSTED), freed with the team. Thread-safety: one call at a time per rank handle.
 *
 * Common errors: TD_ERR_INVALID_ARG (NULL buffer with count > 0, bad dtype or
 * op, overlapping dst/src where not allowed), TD_ERR_MISMATCH, TD_ERR_TIMEOUT,
 * TD_ERR_PEER_FAILED. */
#ifndef TDIST_COLL_H
#define TDIST_COLL_H

#include <stddef.h>

#include "tdist/types.h"
#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

/** dst[r*count .. (r+1)*count) = src of team rank r. dst holds n*count elements. */
td_status td_all_gather(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype);

/** Reduces the `count`-element vectors `src` of all ranks and gives rank r its
 * td_chunk_range part in dst. */
td_status td_reduce_scatter(td_team *team, void *dst, const void *src, size_t count,
                            td_dtype dtype, td_red_op op);

/** dst = reduction over ranks of src (count elements). dst == src allowed. */
td_status td_all_reduce(td_team *team, void *dst, const void *src, size_t count,
                        td_dtype dtype, td_red_op op);

/** dst = src of team rank `root` on every rank (root may pass dst == src).
 * Only the root's src is read: other ranks' src is ignored (NULL, dst or
 * anything else is fine). */
td_status td_broadcast(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype,
                       int root);

/** Block r of src (count elements) goes to rank r; dst block s comes from rank s.
 * src and dst hold n*count elements each. */
td_status td_all_to_all(td_team *team, void *dst, const void *src, size_t count, td_dtype dtype);

/** Uneven all-to-all, like MPI_Alltoallv (elements, not bytes): this rank sends
 * send_counts[r] elements starting at src + send_displs[r] to rank r, and
 * receives recv_counts[s] elements from rank s at dst + recv_displs[s].
 * Rank s's send_counts[r] must equal rank r's recv_counts[s]; a difference is
 * TD_ERR_MISMATCH on every rank. Receive blocks must not overlap each other
 * (TD_ERR_INVALID_ARG naming both peers; send blocks may). */
td_status td_all_to_allv(td_team *team, void *dst, const size_t *recv_counts,
                         const size_t *recv_displs, const void *src, const size_t *send_counts,
                         const size_t *send_displs, td_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
