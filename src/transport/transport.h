/* SPDX-License-Identifier: Apache-2.0
 * Internal: the transport interface (transport layer).
 *
 * A transport makes one *region* reachable by every rank of a world: a control
 * area followed by one symmetric heap per rank (see src/prim/ctl.h). The
 * primitives layer asks the transport to attach the region, reads its
 * capability flags, and never branches on the transport's name. `local`
 * (threads of one process) and `shm` (processes of one host) fill this table;
 * `nccl` and `mpi` will add theirs. */
#ifndef TD_TRANSPORT_H
#define TD_TRANSPORT_H

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tdist/status.h"

/* Capability flags. */
enum {
  TD__CAP_LSA = 1u << 0,            /* every peer's heap is load/store reachable from this rank */
  TD__CAP_PROCESS_SHARED = 1u << 1, /* peers are other processes: futexes must not be private */
  TD__CAP_PEER_PIDS = 1u << 2,      /* peers have process ids that can be checked for liveness */
};

/** The first bytes of every region, written by the transport when it creates
 * the region. Followed by `world_size` process ids (td__region_pids), then the
 * primitives layer's control data at td__region_prefix_bytes(). */
typedef struct td__region_header {
  _Atomic uint64_t magic; /* TD__REGION_MAGIC, stored last (release) by the creator */
  uint64_t nonce;         /* random per creation: tells a fresh region from a stale one */
  uint64_t region_bytes;
  uint64_t ctl_bytes;
  int32_t world_size;
  int32_t creator_pid;
  _Atomic int32_t attached; /* ranks attached so far */
  _Atomic int32_t unlinked; /* 1 once the creator removed the name; -pid: a dead job's, pid removes it */
  _Atomic int32_t refused;  /* rank + 1 of a rank that found the region unusable: stop waiting for it */
} td__region_header;

#define TD__REGION_MAGIC UINT64_C(0x7464697374726731) /* "tdistrg1" */

/** Whether a region creator's process `pid` is gone (no such process; a pid
 * we may not signal counts as alive). */
static inline int td__creator_gone(int32_t pid) { return pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH); }

/** What the header of the region open as `fd` says, for the stale-region
 * checks of the shm transport, `tdist doctor` and tdrun (which does not link
 * the library, hence inline): *ready = 1 once its creator finished setting it
 * up (the magic, read with acquire), *creator = the creator's pid (0 when not
 * ready); *st = the object's fstat (size, mtime). Returns -1 when fstat
 * fails, else 0 (a region too small for a header is simply not ready). */
static inline int td__region_peek(int fd, int *ready, int32_t *creator, struct stat *st) {
  *ready = 0, *creator = 0;
  if (fstat(fd, st) != 0)
    return -1;
  if ((size_t)st->st_size < sizeof(td__region_header))
    return 0;
  td__region_header *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED)
    return 0;
  *ready = atomic_load_explicit(&h->magic, memory_order_acquire) == TD__REGION_MAGIC;
  *creator = *ready ? h->creator_pid : 0;
  munmap(h, sizeof *h);
  return 0;
}

/** What a /dev/shm object named tdist-* is, for the sweeps of tdrun and
 * `tdist doctor`, which must never take someone else's file for a region. */
enum {
  TD__SHM_FOREIGN = 0,   /* not a tdist region: leave it alone */
  TD__SHM_HALF_MADE = 1, /* a region whose creator has not (yet) written the magic */
  TD__SHM_REGION = 2,    /* a finished region; *creator is its creator's pid */
};

/** Whether `name` (no leading slash) is "tdist-<pid>-<16 hex digits>", the
 * name of a job started by tdrun: only such an empty object is taken for a
 * region whose creator died between creating and sizing it. */
static inline int td__shm_tdrun_name(const char *name) {
  const char *p = name + 6; /* after "tdist-" */
  int digits = 0, hex = 0;
  while (*p >= '0' && *p <= '9')
    p++, digits++;
  if (!digits || *p++ != '-')
    return 0;
  for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
    hex++;
  return hex == 16 && *p == '\0';
}

/** Classifies the /dev/shm object `name` (no leading slash) open as `fd`
 * (see TD__SHM_*), as well as its header allows: a finished region carries
 * the magic; one whose creator died before writing it is either all zeros in
 * its header (as ftruncate left it), or holds the header fields the creator
 * writes before the magic (world size, its own size, creator pid), or is
 * empty (died before ftruncate) with a tdrun job's name. Anything else, and a
 * file too short for a header, is foreign. *st = the object's fstat,
 * *creator = the creator's pid (0 when unknown). Returns -1 when fstat fails. */
static inline int td__region_kind(int fd, const char *name, int32_t *creator, struct stat *st) {
  *creator = 0;
  if (fstat(fd, st) != 0)
    return -1;
  if (st->st_size == 0)
    return td__shm_tdrun_name(name) ? TD__SHM_HALF_MADE : TD__SHM_FOREIGN;
  if ((size_t)st->st_size < sizeof(td__region_header))
    return TD__SHM_FOREIGN;
  td__region_header *h = mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED)
    return TD__SHM_FOREIGN;
  int kind = TD__SHM_FOREIGN;
  uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
  if (magic == TD__REGION_MAGIC) {
    kind = TD__SHM_REGION;
    *creator = h->creator_pid;
  } else if (magic == 0) {
    const unsigned char *b = (const unsigned char *)h;
    int zero = 1;
    for (size_t i = 0; i < sizeof *h && zero; i++)
      zero = b[i] == 0;
    int partial = h->world_size > 0 && h->creator_pid > 0 && h->region_bytes == (uint64_t)st->st_size;
    if (zero || partial)
      kind = TD__SHM_HALF_MADE;
    if (partial)
      *creator = h->creator_pid;
  }
  munmap(h, sizeof *h);
  return kind;
}

/** Process id of every rank (0 until attached); rank r writes entry r. */
static inline _Atomic int32_t *td__region_pids(void *base) {
  return (_Atomic int32_t *)((char *)base + sizeof(td__region_header));
}

/** Bytes of header + pid table, rounded to 64: where control data may start. */
static inline size_t td__region_prefix_bytes(int world_size) {
  size_t b = sizeof(td__region_header) + sizeof(int32_t) * (size_t)world_size;
  return (b + 63) & ~(size_t)63;
}

/** What a transport needs to know to attach a world's region. */
typedef struct td__job {
  const char *job_id;  /* names the shared object (shm); never NULL, may be "" for local */
  int rank;            /* world rank of the attaching process (0 creates) */
  int size;            /* world size */
  size_t region_bytes; /* bytes of the whole region: control area + size heaps */
  size_t ctl_bytes;    /* bytes of the control area at the start of the region */
  int timeout_ms;      /* deadline for finding the region and for every rank to attach (TD_ATTACH_TIMEOUT_MS) */
  const char *job_id_hint; /* NULL, or why the job id may differ between ranks (for timeout messages) */
} td__job;

/** One attached region as mapped in this process. */
typedef struct td__region {
  void *base;   /* start of the mapping (control area first) */
  size_t bytes; /* length of the mapping */
  void *priv;   /* transport's own state */
} td__region;

typedef struct td__transport {
  const char *name;
  unsigned caps;
  /** Creates (rank 0) or joins the region of `job`. For shm every rank waits
   * until all ranks are attached before returning, then the creator removes
   * the name. On failure returns a status with the message set and leaves
   * nothing behind. */
  td_status (*attach)(const td__job *job, td__region *out);
  /** Unmaps the region. */
  void (*detach)(td__region *region);
} td__transport;

extern const td__transport td__transport_local;
extern const td__transport td__transport_shm;

/** Alignment of every region mapping: symmetric allocations may ask for up to
 * this much, and heaps start at multiples of it inside the region. */
#define TD__REGION_ALIGN ((size_t)1 << 20)

/** Maps `bytes` at an address aligned to TD__REGION_ALIGN: anonymous private
 * memory when fd < 0, else the shared object `fd`. MAP_FAILED on failure
 * (errno set). Unmap with munmap(ptr, bytes). */
void *td__map_aligned(size_t bytes, int fd);

/** Finds a transport by name ("local", "shm"); NULL if unknown. */
const td__transport *td__transport_find(const char *name);

#endif
