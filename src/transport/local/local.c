/* SPDX-License-Identifier: Apache-2.0
 * The `local` transport (transport layer): every rank is a thread of this
 * process, so the region is one anonymous mapping that all ranks share.
 * MAP_NORESERVE keeps untouched heap pages free, so a world of many ranks with
 * large heaps costs only what is used. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "transport/transport.h"

static td_status td__local_attach(const td__job *job, td__region *out) {
  void *base = td__map_aligned(job->region_bytes, -1);
  if (base == MAP_FAILED)
    return td__error(TD_ERR_NO_MEMORY,
                     "local transport: could not reserve %zu bytes for %d ranks (%s); "
                     "lower TD_SYMM_HEAP_SIZE or the number of ranks",
                     job->region_bytes, job->size, strerror(errno));
  td__region_header *h = base;
  h->nonce = (uint64_t)(uintptr_t)base ^ (uint64_t)getpid();
  h->region_bytes = job->region_bytes;
  h->ctl_bytes = job->ctl_bytes;
  h->world_size = job->size;
  h->creator_pid = (int32_t)getpid();
  _Atomic int32_t *pids = td__region_pids(base);
  for (int r = 0; r < job->size; r++)
    atomic_store_explicit(&pids[r], (int32_t)getpid(), memory_order_relaxed);
  atomic_store_explicit(&h->attached, job->size, memory_order_relaxed);
  atomic_store_explicit(&h->unlinked, 1, memory_order_relaxed);
  atomic_store_explicit(&h->magic, TD__REGION_MAGIC, memory_order_release);
  out->base = base;
  out->bytes = job->region_bytes;
  out->priv = NULL;
  return TD_OK;
}

static void td__local_detach(td__region *region) {
  if (region->base)
    munmap(region->base, region->bytes);
  region->base = NULL;
}

const td__transport td__transport_local = {
    .name = "local",
    .caps = TD__CAP_LSA,
    .attach = td__local_attach,
    .detach = td__local_detach,
};
