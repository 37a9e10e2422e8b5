/* SPDX-License-Identifier: Apache-2.0
 * Host launchers of the device-primitive GPU test kernels (dev_kernels.cu).
 * Each runs one scenario on every rank of `cl` (ranks sharing the GPU), waits
 * for it and returns TD_OK, TD_ERR_CHECK_FAILED (message: which rank saw how
 * many wrong words) or the failing call's status. */
#ifndef TD_TESTS_GPU_DEV_KERNELS_H
#define TD_TESTS_GPU_DEV_KERNELS_H

#include "tdist/device/cuda_local.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forms of the ring test: putmem_signal thread/warp/block, nbi warp/block,
 * putmem_block + notify_block, nbi_block + quiet + signal_op, nbi + fence +
 * signal_op, and getmem (pull) after notify. */
#define GDEV_RING_FORMS 9

/** Ring of `rounds` rounds per form, `words` 8-byte words per transfer. fused:
 * one kernel whose block b plays rank b (for compute-sanitizer). */
td_status gdev_ring(td_cuda_local *cl, int fused, int rounds, size_t words);
/** Pairs (2k, 2k+1) bounce `iters` values with putmem_signal, then notify/wait once. */
td_status gdev_pingpong(td_cuda_local *cl, int iters);
/** All-to-all with putmem_signal_nbi_warp and a group wait per round. */
td_status gdev_alltoall(td_cuda_local *cl, int rounds, size_t words);
/** `rounds` x 2 block barriers with a visibility check between. */
td_status gdev_barrier(td_cuda_local *cl, int rounds);
/** `calls` launches on the same signal words, epoch values, no reset. */
td_status gdev_epochs(td_cuda_local *cl, int calls);
/** Copy-engine put + stream signal, waited by kernels and by stream waits. */
td_status gdev_copy_engine(td_cuda_local *cl, int rounds, size_t words);
/** Rank 0's block 1 waits forever (deliberate deadlock). With status_out
 * (n x blocks words) and a return-on-timeout context, fills each block's
 * td_status. Returns td_cuda_local_sync's status. */
td_status gdev_stuck(td_cuda_local *cl, int blocks, uint64_t *status_out);
/** Launches the deadlock kernel with the given grid (for the co-residency check only). */
td_status gdev_launch_kernel_for_check(td_cuda_local *cl, unsigned blocks, unsigned threads);
/** With one context of any transport (the nccl one): every ring form, then
 * `barriers` x 2 block barriers, one block per rank on a private stream.
 * off[]: src, buf, sig (2 x GDEV_RING_FORMS words), errs (2 words), count,
 * errs2 (2 words): symmetric heap offsets, zeroed. */
td_status gdev_ctx_ring_and_barrier(const td_dev_ctx *ctx, const td_dev_diagnostic *diag, const size_t off[6],
                                    int rounds, size_t words, int barriers);
/** Address of the deadlock kernel, for td_cuda_local_check_coresident. */
const void *gdev_stuck_kernel(void);

#ifdef __cplusplus
}
#endif
#endif
