/* SPDX-License-Identifier: Apache-2.0
 * Internal: the process-wide per-device "stuck" flag (executor layer, cuda
 * backend; set in stream_wait.c).
 *
 * When a host wait of the CUDA executor passes its deadline, GPU work on that
 * device may never finish (a kernel that never ends, or work behind it in a
 * blocked hardware queue). Any device-wide synchronisation on that device
 * from then on - cudaDeviceSynchronize, cudaFree (which synchronises the
 * device), cudaLibraryUnload, cudaIpcCloseMemHandle - would block forever,
 * also for other executors, GEMM handles and fused operators of the process
 * that share the GPU. Code that frees device memory checks the flag first and
 * leaves the memory to the process's exit instead (saying so in its error).
 * The flag is never cleared: the stuck work keeps its streams. */
#ifndef TD_EXEC_CUDA_DEVICE_STUCK_H
#define TD_EXEC_CUDA_DEVICE_STUCK_H

/** Whether some host wait on CUDA device `dev` (an ordinal of this process)
 * passed its deadline, so device-wide synchronisation there may never
 * return. 0 for an ordinal out of range. Thread-safe (an atomic load). */
int td__cuda_device_stuck(int dev);

/** Marks device `dev` stuck for the rest of the process. Ordinals out of
 * range mark every device (the safe side). Thread-safe. */
void td__cuda_mark_device_stuck(int dev);

#endif
