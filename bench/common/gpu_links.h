/* SPDX-License-Identifier: Apache-2.0
 * Benchmarks (bench/, and `tdist bench`): how this machine's GPUs are linked,
 * as JSON fields of a benchmark's environment object. Shared by
 * td_link_bench (bench/link_bench.cu) and `tdist bench`'s cuda part
 * (tools/tdist/bench_ops_cuda.c), so both files describe the links alike. */
#ifndef TD_BENCH_GPU_LINKS_H
#define TD_BENCH_GPU_LINKS_H

#include <cjson/cJSON.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Adds to `env`: "p2p", an array with one object per ordered pair of the
 * first `count` devices (src, dst, access, native_atomics, performance_rank:
 * CUDA's rank of the link, 0 = best), and "nvidia_smi_topo", the text of
 * `nvidia-smi topo -m` (up to 8 KiB; "one GPU" when count < 2,
 * "unavailable" when the command gives nothing). Clears the CUDA error an
 * attribute query may leave. Not thread-safe for one `env`. */
void td_bench_gpu_links_json(cJSON *env, int count);

#ifdef __cplusplus
}
#endif
#endif
