/* SPDX-License-Identifier: Apache-2.0
 * Benchmarks: the GPUs' links as JSON (gpu_links.h). */
#include "gpu_links.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

void td_bench_gpu_links_json(cJSON *env, int count) {
  cJSON *links = cJSON_AddArrayToObject(env, "p2p");
  for (int i = 0; i < count; i++)
    for (int j = 0; j < count; j++) {
      if (i == j)
        continue;
      int access = 0, atomics = 0, rank = -1;
      cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, i, j);
      cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i, j);
      cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j);
      cJSON *l = cJSON_CreateObject();
      cJSON_AddNumberToObject(l, "src", i);
      cJSON_AddNumberToObject(l, "dst", j);
      cJSON_AddBoolToObject(l, "access", access);
      cJSON_AddBoolToObject(l, "native_atomics", atomics);
      cJSON_AddNumberToObject(l, "performance_rank", rank);
      cJSON_AddItemToArray(links, l);
    }
  cudaGetLastError(); /* an attribute query may leave an error behind */
  /* nvidia-smi's view (NV18 = 18 NVLinks, SYS = across sockets ...), as text */
  char topo[8192] = "";
  size_t len = 0;
  FILE *f = count > 1 ? popen("nvidia-smi topo -m 2>/dev/null", "r") : NULL;
  if (f) {
    size_t got;
    while (len < sizeof topo - 1 && (got = fread(topo + len, 1, sizeof topo - 1 - len, f)) > 0)
      len += got;
    topo[len] = 0;
    pclose(f);
  }
  cJSON_AddStringToObject(env, "nvidia_smi_topo", len ? topo : count > 1 ? "unavailable" : "one GPU");
}
