/* SPDX-License-Identifier: Apache-2.0
 * The `shm` transport (transport layer): ranks are processes of one host and
 * the region is one POSIX shared-memory object, /tdist-<job id>.
 *
 * Rank 0 creates it with O_EXCL and sizes it with ftruncate (sparse: only
 * touched pages cost memory); the others open it, retrying until the
 * deadline. Once every rank is attached (a counter in the region header) rank
 * 0 removes the name, so nothing is left in /dev/shm even if the job is later
 * killed with SIGKILL. A name left by a dead job (its creator's pid is gone)
 * is never joined: the creator replaces it and the others skip it. Each
 * process maps the region at its own address; the primitives layer translates
 * symmetric addresses by offset. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "transport/transport.h"

static int64_t td__shm_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void td__shm_pause(void) {
  struct timespec ts = {0, 200 * 1000};
  nanosleep(&ts, NULL);
}

static int td__pid_alive(int32_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH); }

/* "/tdist-" + the job id with characters outside [A-Za-z0-9._-] replaced. */
static void td__shm_name(const char *job_id, char *name, size_t cap) {
  size_t n = (size_t)snprintf(name, cap, "/tdist-%s", job_id);
  if (n >= cap)
    n = cap - 1;
  for (size_t i = 7; i < n; i++) {
    char c = name[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '_' || c == '-';
    if (!ok)
      name[i] = '_';
  }
}

/* Looks at an existing object of our name. Returns 1 if it is stale (its
 * creator is dead, or it never finished initialising within a second), 0 if
 * a live job owns it (*owner = its creator's pid), -1 if it vanished. */
static int td__shm_is_stale(const char *name, int64_t first_seen_ms, int32_t *owner) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0)
    return -1;
  struct stat st;
  int stale = -1;
  if (fstat(fd, &st) == 0) {
    if ((size_t)st.st_size >= sizeof(td__region_header)) {
      td__region_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (h != MAP_FAILED) {
        int ready = atomic_load_explicit(&h->magic, memory_order_acquire) == TD__REGION_MAGIC;
        *owner = ready ? h->creator_pid : 0;
        stale = ready ? !td__pid_alive(h->creator_pid) : td__shm_now_ms() - first_seen_ms > 1000;
        munmap(h, sizeof *h);
      }
    } else {
      *owner = 0;
      stale = td__shm_now_ms() - first_seen_ms > 1000;
    }
  }
  close(fd);
  return stale;
}

static td_status td__shm_create(const td__job *job, const char *name, int64_t deadline, td__region *out) {
  int64_t first_seen = -1;
  int fd = -1;
  for (;;) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0)
      break;
    if (errno != EEXIST)
      return td__error(TD_ERR_SYSTEM, "shm transport: rank 0 could not create shared memory %s: %s", name,
                       strerror(errno));
    if (first_seen < 0)
      first_seen = td__shm_now_ms();
    int32_t owner = 0;
    int stale = td__shm_is_stale(name, first_seen, &owner);
    if (stale == 1) {
      shm_unlink(name); /* a dead job's leftover: replace it */
      continue;
    }
    if (stale == 0 && owner > 0)
      return td__error(TD_ERR_BUSY,
                       "shm transport: shared memory %s belongs to a live job (creator pid %d); two jobs "
                       "share the job id '%s': give each its own TD_JOB_ID",
                       name, (int)owner, job->job_id);
    if (td__shm_now_ms() > deadline)
      return td__error(TD_ERR_TIMEOUT, "shm transport: shared memory %s stayed in use past the deadline (%d ms)",
                       name, job->timeout_ms);
    td__shm_pause();
  }
  if (ftruncate(fd, (off_t)job->region_bytes) != 0) {
    td_status st = td__error(TD_ERR_SYSTEM, "shm transport: could not size %s to %zu bytes: %s", name,
                             job->region_bytes, strerror(errno));
    close(fd);
    shm_unlink(name);
    return st;
  }
  void *base = td__map_aligned(job->region_bytes, fd);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name);
    return td__error(TD_ERR_SYSTEM, "shm transport: could not map %s (%zu bytes): %s", name, job->region_bytes,
                     strerror(err));
  }
  td__region_header *h = base;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->nonce = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
  h->region_bytes = job->region_bytes;
  h->ctl_bytes = job->ctl_bytes;
  h->world_size = job->size;
  h->creator_pid = (int32_t)getpid();
  atomic_store_explicit(&td__region_pids(base)[0], (int32_t)getpid(), memory_order_relaxed);
  atomic_store_explicit(&h->attached, 1, memory_order_relaxed);
  atomic_store_explicit(&h->magic, TD__REGION_MAGIC, memory_order_release);
  out->base = base;
  out->bytes = job->region_bytes;
  return TD_OK;
}

static td_status td__shm_join(const td__job *job, const char *name, int64_t deadline, td__region *out) {
  for (;; td__shm_pause()) {
    if (td__shm_now_ms() > deadline)
      return td__error(TD_ERR_TIMEOUT,
                       "shm transport: rank %d found no shared memory %s from rank 0 within %d ms "
                       "(rank 0 never started, or it runs with another TD_JOB_ID)",
                       job->rank, name, job->timeout_ms);
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
      continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(td__region_header)) {
      close(fd);
      continue;
    }
    size_t map_bytes = (size_t)st.st_size;
    void *base = td__map_aligned(map_bytes, fd);
    close(fd);
    if (base == MAP_FAILED)
      continue;
    td__region_header *h = base;
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != TD__REGION_MAGIC ||
        !td__pid_alive(h->creator_pid) || atomic_load_explicit(&h->unlinked, memory_order_acquire)) {
      munmap(base, map_bytes); /* not ready yet, or a dead job's leftover: look again */
      continue;
    }
    if (h->world_size != job->size || h->region_bytes != job->region_bytes || map_bytes != job->region_bytes) {
      td_status st2 = td__error(TD_ERR_MISMATCH,
                                "shm transport: %s was created for %d ranks and %llu bytes, but rank %d "
                                "expects %d ranks and %zu bytes (same TD_WORLD_SIZE and TD_SYMM_HEAP_SIZE "
                                "on every rank, and one TD_JOB_ID per job)",
                                name, (int)h->world_size, (unsigned long long)h->region_bytes, job->rank,
                                job->size, job->region_bytes);
      int32_t none = 0; /* tell the ranks waiting for us not to wait until the deadline */
      atomic_compare_exchange_strong(&h->refused, &none, job->rank + 1);
      munmap(base, map_bytes);
      return st2;
    }
    int32_t expected = 0;
    if (!atomic_compare_exchange_strong(&td__region_pids(base)[job->rank], &expected, (int32_t)getpid())) {
      munmap(base, map_bytes);
      return td__error(TD_ERR_BUSY, "shm transport: rank %d of %s is already taken by pid %d (two processes "
                       "with the same rank, or two jobs with the same TD_JOB_ID)",
                       job->rank, name, (int)expected);
    }
    atomic_fetch_add_explicit(&h->attached, 1, memory_order_acq_rel);
    out->base = base;
    out->bytes = map_bytes;
    return TD_OK;
  }
}

static td_status td__shm_attach(const td__job *job, td__region *out) {
  char name[256];
  td__shm_name(job->job_id, name, sizeof name);
  int64_t deadline = td__shm_now_ms() + job->timeout_ms;
  td__region r = {0};
  td_status st = job->rank == 0 ? td__shm_create(job, name, deadline, &r) : td__shm_join(job, name, deadline, &r);
  if (st != TD_OK)
    return st;
  td__region_header *h = r.base;
  while (atomic_load_explicit(&h->attached, memory_order_acquire) < job->size) {
    int refused = atomic_load_explicit(&h->refused, memory_order_acquire);
    if (refused) {
      if (job->rank == 0)
        shm_unlink(name);
      munmap(r.base, r.bytes);
      return td__error(TD_ERR_MISMATCH,
                       "shm transport: rank %d stopped waiting for the ranks of %s: rank %d found it made for "
                       "another world size or heap size (its own error says which)",
                       job->rank, name, refused - 1);
    }
    if (td__shm_now_ms() > deadline) {
      char missing[512];
      size_t len = 0;
      missing[0] = '\0';
      for (int q = 0; q < job->size && len + 16 < sizeof missing; q++)
        if (atomic_load_explicit(&td__region_pids(r.base)[q], memory_order_acquire) == 0)
          len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", q);
      if (job->rank == 0)
        shm_unlink(name);
      munmap(r.base, r.bytes);
      return td__error(TD_ERR_TIMEOUT,
                       "shm transport: rank %d waited %d ms for all %d ranks to attach to %s; never arrived: "
                       "rank %s",
                       job->rank, job->timeout_ms, job->size, name, missing);
    }
    td__shm_pause();
  }
  if (job->rank == 0) {
    shm_unlink(name); /* every rank holds a mapping now; the name is no longer needed */
    atomic_store_explicit(&h->unlinked, 1, memory_order_release);
  }
  *out = r;
  return TD_OK;
}

static void td__shm_detach(td__region *region) {
  if (region->base)
    munmap(region->base, region->bytes);
  region->base = NULL;
}

const td__transport td__transport_shm = {
    .name = "shm",
    .caps = TD__CAP_LSA | TD__CAP_PROCESS_SHARED | TD__CAP_PEER_PIDS,
    .attach = td__shm_attach,
    .detach = td__shm_detach,
};
