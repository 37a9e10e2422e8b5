/* SPDX-License-Identifier: Apache-2.0
 * The `shm` transport (transport layer): ranks are processes of one host and
 * the region is one POSIX shared-memory object, /tdist-<job id>.
 *
 * Rank 0 creates it with O_EXCL and sizes it with ftruncate (sparse: only
 * touched pages cost memory); the others open it, retrying until the
 * deadline. Once every rank is attached (a counter in the region header) rank
 * 0 removes the name, so nothing is left in /dev/shm even if the job is later
 * killed with SIGKILL. A name left by a dead job (its creator's pid is gone)
 * is never joined: the creator replaces it, and a joiner that finds one
 * removes it (after checking that the name still refers to that dead
 * creator's object), so a job whose rank 0 died during start-up leaves
 * nothing in /dev/shm even when no tdrun cleans up after it. Each
 * process maps the region at its own address; the primitives layer translates
 * symmetric addresses by offset. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
  int stale = -1, ready = 0;
  if (td__region_peek(fd, &ready, owner, &st) == 0)
    stale = ready ? td__creator_gone(*owner) : td__shm_now_ms() - first_seen_ms > 1000;
  close(fd);
  return stale;
}

/* One remover for each dead job's object: whoever finds one (rank 0 about to
 * replace it, a joiner, a joiner that cannot map it) claims its removal in its
 * header (unlinked = -pid) before removing the name, and leaves it alone when
 * another live process holds the claim. Without it a joiner's check, then
 * remove (td__shm_unlink_if) could span rank 0 removing the same object and
 * creating the new job's under the name, and remove that one: no joiner could
 * then open the region (rt_shm's test_stale_segment_replaced timed out so, 2
 * runs in 80 on a loaded 2-core machine). 1: this process may remove it. */
static int td__shm_claim_removal(td__region_header *h) {
  const int32_t me = -(int32_t)getpid();
  int32_t cur = atomic_load_explicit(&h->unlinked, memory_order_acquire);
  for (;;) {
    if (cur == me)
      return 1;
    if (cur > 0 || (cur < 0 && !td__creator_gone(-cur))) /* removed by its creator, or claimed by a live one */
      return 0;
    if (atomic_compare_exchange_weak_explicit(&h->unlinked, &cur, me, memory_order_acq_rel, memory_order_acquire))
      return 1;
  }
}

/* td__shm_claim_removal for the object `name` names now (rank 0's view):
 * 1 when this process may remove it, also when it is too short to hold a
 * header (no joiner removes such an object) or has vanished. */
static int td__shm_claim_name(const char *name) {
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0)
    return 1;
  struct stat st;
  int mine = 1;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(td__region_header)) {
    td__region_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h != MAP_FAILED) {
      mine = td__shm_claim_removal(h);
      munmap(h, sizeof *h);
    }
  }
  close(fd);
  return mine;
}

/* Removes `name` if it still refers to object `ino` (not a newer job's). */
static void td__shm_unlink_if(const char *name, ino_t ino) {
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0)
    return;
  struct stat st;
  int same = fstat(fd, &st) == 0 && st.st_ino == ino;
  close(fd);
  if (same)
    shm_unlink(name);
}

/* Whether /dev/shm can hold the region: it is sparse, but a heap that does not
 * fit would end in SIGBUS at the first touch of a page past the free space. */
static td_status td__shm_check_space(const td__job *job) {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) != 0)
    return TD_OK; /* no /dev/shm to look at: shm_open will say what is wrong */
  unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
  if ((unsigned long long)job->region_bytes > avail)
    return td__error(TD_ERR_NO_MEMORY,
                     "shm transport: rank %d: the job's shared memory needs %zu bytes (%d ranks' symmetric heaps "
                     "and control data) but /dev/shm has only %llu bytes free; lower TD_SYMM_HEAP_SIZE or "
                     "enlarge /dev/shm",
                     job->rank, job->region_bytes, job->size, avail);
  return TD_OK;
}

static td_status td__shm_create(const td__job *job, const char *name, int64_t deadline, td__region *out,
                                ino_t *ino) {
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
    if (stale == 1 && td__shm_claim_name(name)) { /* else a joiner is removing it: look again */
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
  struct stat fst;
  *ino = fstat(fd, &fst) == 0 ? fst.st_ino : 0;
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

/* A joiner that cannot map the whole region (ENOMEM under `ulimit -v`,
 * EACCES, ...) fails at once, and tells the ranks waiting for it through the
 * header's `refused` word, which it reaches with a mapping of the header
 * alone; otherwise they would wait until the attach deadline and then blame
 * a rank that never arrived. Returns the pid of a dead creator (a leftover,
 * removed here: look again) or 0 (this failure is final). */
static int32_t td__shm_refuse_unmappable(const td__job *job, const char *name, int fd, const struct stat *st) {
  td__region_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (h == MAP_FAILED)
    return 0; /* not even the header: the waiting ranks learn of it at their deadline */
  int ready = atomic_load_explicit(&h->magic, memory_order_acquire) == TD__REGION_MAGIC;
  int32_t creator = h->creator_pid;
  if (ready && td__creator_gone(creator)) {
    int mine = td__shm_claim_removal(h);
    munmap(h, sizeof *h);
    if (mine)
      td__shm_unlink_if(name, st->st_ino);
    return creator;
  }
  int32_t none = 0;
  atomic_compare_exchange_strong(&h->refused, &none, job->rank + 1);
  munmap(h, sizeof *h);
  return 0;
}

static td_status td__shm_join(const td__job *job, const char *name, int64_t deadline, td__region *out,
                              ino_t *ino) {
  int32_t dead_creator = 0; /* pid of a dead creator whose leftover we removed; -1: a half-made one */
  ino_t pending = 0;        /* an object seen without its header yet, and since when */
  int64_t pending_since = 0;
  for (;; td__shm_pause()) {
    if (td__shm_now_ms() > deadline) {
      if (dead_creator < 0)
        return td__error(TD_ERR_TIMEOUT,
                         "shm transport: rank %d found shared memory %s that its creator never finished making "
                         "(it died while creating it); removed it and waited %d ms (TD_ATTACH_TIMEOUT_MS) for a "
                         "new rank 0 in vain%s%s",
                         job->rank, name, job->timeout_ms, job->job_id_hint ? "; " : "",
                         job->job_id_hint ? job->job_id_hint : "");
      if (dead_creator > 0)
        return td__error(TD_ERR_TIMEOUT,
                         "shm transport: rank %d found shared memory %s, but its creator (rank 0, pid %d) had "
                         "died before every rank attached; removed it and waited %d ms (TD_ATTACH_TIMEOUT_MS) "
                         "for a new rank 0 in vain%s%s",
                         job->rank, name, (int)dead_creator, job->timeout_ms, job->job_id_hint ? "; " : "",
                         job->job_id_hint ? job->job_id_hint : "");
      return td__error(TD_ERR_TIMEOUT,
                       "shm transport: rank %d found no shared memory %s from rank 0 within %d ms "
                       "(TD_ATTACH_TIMEOUT_MS): rank 0 never started, or it runs with another job id%s%s",
                       job->rank, name, job->timeout_ms, job->job_id_hint ? "; " : "",
                       job->job_id_hint ? job->job_id_hint : "");
    }
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0 && errno != ENOENT && errno != EINTR)
      return td__error(TD_ERR_SYSTEM,
                       "shm transport: rank %d cannot open shared memory %s: %s; every rank of a job must run "
                       "as the same user, and /dev/shm must allow it to create and open files",
                       job->rank, name, strerror(errno));
    if (fd < 0)
      continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(td__region_header)) {
      close(fd);
      continue;
    }
    size_t map_bytes = (size_t)st.st_size;
    void *base = td__map_aligned(map_bytes, fd);
    int map_err = errno;
    if (base == MAP_FAILED) {
      int again = td__shm_refuse_unmappable(job, name, fd, &st);
      close(fd);
      if (again) {
        dead_creator = again;
        continue;
      }
      return td__error(map_err == ENOMEM ? TD_ERR_NO_MEMORY : TD_ERR_SYSTEM,
                       "shm transport: rank %d cannot map %s (%zu bytes: %d ranks' symmetric heaps and control "
                       "data): %s; %s",
                       job->rank, name, map_bytes, job->size, strerror(map_err),
                       map_err == ENOMEM ? "lower TD_SYMM_HEAP_SIZE or raise this process's address-space "
                                           "limit (ulimit -v)"
                                         : "check the permissions and limits of /dev/shm for this user");
    }
    close(fd);
    td__region_header *h = base;
    int ready = atomic_load_explicit(&h->magic, memory_order_acquire) == TD__REGION_MAGIC;
    if (ready && td__creator_gone(h->creator_pid)) {
      /* A dead creator's object (this job's rank 0 died, or an older job's):
       * nobody will ever remove it but us. */
      dead_creator = h->creator_pid;
      if (td__shm_claim_removal(h))
        td__shm_unlink_if(name, st.st_ino);
      munmap(base, map_bytes);
      continue;
    }
    if (!ready && pending != st.st_ino) {
      pending = st.st_ino;
      pending_since = td__shm_now_ms();
    } else if (!ready && td__shm_now_ms() - pending_since > 1000) {
      /* A creator writes the header within microseconds of creating the
       * object; one that has not after a second died doing it (rank 0
       * replaces such an object the same way). */
      dead_creator = -1;
      if (td__shm_claim_removal(h))
        td__shm_unlink_if(name, st.st_ino);
      pending = 0;
      munmap(base, map_bytes);
      continue;
    }
    if (!ready || atomic_load_explicit(&h->unlinked, memory_order_acquire)) {
      munmap(base, map_bytes); /* not ready yet, or already complete: look again */
      continue;
    }
    *ino = st.st_ino;
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
  TD_CHECK(td__shm_check_space(job));
  int64_t deadline = td__shm_now_ms() + job->timeout_ms;
  td__region r = {0};
  ino_t ino = 0;
  td_status st = job->rank == 0 ? td__shm_create(job, name, deadline, &r, &ino)
                                : td__shm_join(job, name, deadline, &r, &ino);
  if (st != TD_OK)
    return st;
  td__region_header *h = r.base;
  int64_t next_check = 0;
  while (atomic_load_explicit(&h->attached, memory_order_acquire) < job->size) {
    int64_t now = td__shm_now_ms();
    if (now >= next_check) {
      /* A rank that attached and died never lets the count reach the size:
       * stop at once, and remove the name (the dead one may be rank 0). */
      next_check = now + 50;
      for (int q = 0; q < job->size; q++) {
        int32_t pid = atomic_load_explicit(&td__region_pids(r.base)[q], memory_order_acquire);
        if (q == job->rank || pid <= 0 || !td__creator_gone(pid))
          continue;
        td__shm_unlink_if(name, ino);
        munmap(r.base, r.bytes);
        return td__error(TD_ERR_PEER_FAILED,
                         "shm transport: rank %d: rank %d (pid %d) died during start-up, before every rank "
                         "attached to %s; removed the shared memory",
                         job->rank, q, (int)pid, name);
      }
    }
    int refused = atomic_load_explicit(&h->refused, memory_order_acquire);
    if (refused) {
      if (job->rank == 0)
        shm_unlink(name);
      munmap(r.base, r.bytes);
      return td__error(TD_ERR_MISMATCH,
                       "shm transport: rank %d stopped waiting for the ranks of %s: rank %d found it unusable "
                       "(made for another world size or heap size, or too large for it to map; its own error "
                       "says which)",
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
                       "shm transport: rank %d waited %d ms (TD_ATTACH_TIMEOUT_MS) for all %d ranks to attach to "
                       "%s; never arrived: rank %s%s%s",
                       job->rank, job->timeout_ms, job->size, name, missing, job->job_id_hint ? "; " : "",
                       job->job_id_hint ? job->job_id_hint : "");
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
