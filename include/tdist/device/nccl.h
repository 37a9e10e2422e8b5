/* SPDX-License-Identifier: Apache-2.0
 * The `nccl` transport of the device API (primitives layer, transports; host
 * side): one process per GPU, symmetric device memory through NCCL >= 2.28
 * symmetric windows, peers on the node reached by plain loads and stores.
 *
 * td_nccl_create builds an NCCL communicator over a tdist team (the unique id
 * travels through the team's symmetric heap with td_broadcast), allocates the
 * device heap with ncclMemAlloc, registers it as one window with
 * NCCL_WIN_COLL_SYMMETRIC, creates the device communicator
 * (ncclDevCommCreate), and resolves the heap base of every LSA peer once,
 * with a small nvcc-built kernel calling ncclGetLsaPointer. The resulting
 * td_dev_ctx holds plain peer base pointers exactly as with the CUDA local
 * transport, so kernels (JIT ones included) never see NCCL types. Peers
 * outside this rank's LSA team (other nodes) get base 0: reaching them needs
 * NCCL's GIN, not done yet.
 *
 * NCCL refuses two ranks of one communicator on one GPU: sharing a GPU is the
 * CUDA local transport's job (tdist/device/cuda_local.h); td_nccl_create
 * checks this across the team and refuses it clearly. Built when NCCL >= 2.28
 * is found; otherwise every call returns TD_ERR_UNSUPPORTED. Present only in
 * builds with CUDA. Thread-safety: one thread per rank, as for teams. */
#ifndef TDIST_DEVICE_NCCL_H
#define TDIST_DEVICE_NCCL_H

#include <stddef.h>

#include "tdist/device.h"
#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_nccl td_nccl;

/** Collective over `team`: communicator, heap of heap_size bytes (0: 64 MiB)
 * on CUDA device `device`, window, device communicator, LSA peer table.
 * timeout_ms 0 takes the world's deadline. Errors: TD_ERR_INVALID_ARG (NULL
 * team/out, device < 0, heap_size below 8192, team larger than
 * TD_DEV_MAX_PEERS), TD_ERR_UNSUPPORTED (built without NCCL >= 2.28; two ranks
 * on one GPU: names both), TD_ERR_CUDA (no such device), TD_ERR_NCCL (names
 * the NCCL call and its message), TD_ERR_TIMEOUT. *out only on success. */
td_status td_nccl_create(td_team *team, int device, size_t heap_size, int timeout_ms,
                         td_nccl **out);
/** Collective: deregisters the window and frees everything. NULL is allowed. */
td_status td_nccl_destroy(td_nccl *nc);
/** Bump allocation on the window heap, same offset on every rank when every
 * rank makes the same calls (zeroed; no free). Errors as td_cuda_local_alloc. */
td_status td_nccl_alloc(td_nccl *nc, size_t bytes, size_t align, size_t *offset);
/** This rank's device address of heap offset `offset`; NULL if out of range. */
void *td_nccl_ptr(const td_nccl *nc, size_t offset);
/** This rank's device context. Errors: TD_ERR_INVALID_ARG (NULL). */
td_status td_nccl_ctx(const td_nccl *nc, td_dev_ctx *out);
/** The diagnostic record of this process's kernels (host address). */
const td_dev_diagnostic *td_nccl_diagnostic(const td_nccl *nc);

/** Internal, exposed for tests: broadcasts `bytes` bytes (at most 4096) from
 * team rank `root`'s `buf` to every member's `buf` through the team's
 * symmetric heap. How the NCCL unique id travels. Errors: TD_ERR_INVALID_ARG,
 * TD_ERR_MISMATCH (ranks passed different sizes or roots), TD_ERR_TIMEOUT. */
td_status td__nccl_bcast_bytes(td_team *team, int root, void *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
