/* SPDX-License-Identifier: Apache-2.0
 * The symmetric heap.
 *
 * Every rank owns a heap of the same size. td_symm_alloc is collective over a
 * team and returns, on every member, memory at the same offset in its heap,
 * so td_symm_at(team, ptr, peer) names the peer's copy. On the `local` and
 * `shm` transports every peer is an LSA peer: its copy is directly
 * loadable and storable from this rank. */
#ifndef TDIST_SYMM_H
#define TDIST_SYMM_H

#include <stddef.h>

#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Collective over `team`: allocates `bytes` (may be 0: returns a unique,
 * non-NULL, zero-size block) aligned to `align` bytes (0 = 64; else a power
 * of two up to 1 MiB) at the same heap offset on every member. Memory is not
 * cleared. Every member must pass the same bytes and align; otherwise every
 * member fails with TD_ERR_MISMATCH and a message listing each rank's request,
 * and the heap is unchanged. Errors: TD_ERR_INVALID_ARG, TD_ERR_MISMATCH,
 * TD_ERR_HEAP_EXHAUSTED (message gives requested, free and total bytes; also
 * when a member already holds 512 live blocks),
 * TD_ERR_TIMEOUT (a member never called: message names it). *out written only
 * on success. One call at a time per rank. */
td_status td_symm_alloc(td_team *team, size_t bytes, size_t align, void **out);

/** Collective over the team the block was allocated on: barrier (no member
 * still uses it), then frees. Errors: TD_ERR_INVALID_ARG (ptr not the start of
 * a live block of this team's heap: names the pointer and whether it was
 * never allocated, already freed or allocated on another team; a bad pointer
 * on one member makes every member fail and frees nothing; a block allocated
 * on another team fails at once, without waiting for the members), TD_ERR_MISMATCH
 * (members passed different blocks), TD_ERR_TIMEOUT. NULL is ignored. */
td_status td_symm_free(td_team *team, void *ptr);

/** Address of team rank `peer`'s copy of symmetric address `ptr` (any byte
 * inside a live block). Errors: TD_ERR_INVALID_ARG (peer out of range: names
 * it and the team size; ptr outside the symmetric heap; ptr in the heap but
 * not inside a live block: names the heap offset). Thread-safe, except
 * against a td_symm_alloc / td_symm_free running on this rank. */
td_status td_symm_at(td_team *team, const void *ptr, int peer, void **out);

/** Same as td_symm_at but returns NULL on error (and sets the last error). */
void *td_symm_ptr(td_team *team, const void *ptr, int peer);

/** Whether [ptr, ptr+bytes) lies inside this rank's symmetric heap. */
int td_symm_contains(const td_world *world, const void *ptr, size_t bytes);

/** Base address and size of world rank `peer`'s heap as mapped in this rank
 * (used to build device contexts). Errors: TD_ERR_INVALID_ARG. */
td_status td_symm_heap_base(const td_world *world, int peer, void **base, size_t *size);

/** Bytes of this rank's heap in use and in total. */
void td_symm_usage(const td_world *world, size_t *used, size_t *total);

#ifdef __cplusplus
}
#endif
#endif
