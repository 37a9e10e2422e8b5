/* SPDX-License-Identifier: Apache-2.0
 * tdrun shared-memory cleanup.
 *
 * The shm transport names a job's segments /dev/shm/tdist-<TD_JOB_ID>, with
 * optional suffixes. A rank killed by SIGKILL cannot unlink them, so tdrun
 * does it once every rank has ended: whatever starts with "tdist-<job id>"
 * belongs to this job. Job ids are "<pid>-<16 hex digits>", so no other job's
 * name can start with this one's.
 *
 * At start tdrun also removes other jobs' leftovers that nothing can use: a
 * /dev/shm/tdist-* region, unchanged for over a minute, whose creator pid is
 * dead (the transport never joins one) or that never finished initialising.
 * Those come from jobs killed before rank 0 removed the name, and from runs
 * outside tdrun (tests, mpirun); `tdist doctor` lists the same ones. Only
 * what td__region_kind takes for a region is touched: a user's file that
 * merely starts with "tdist-" is left alone (and said so under -v). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tdrun.h"
#include "transport/transport.h"

int tdrun__remove_job_shm(const char *job_id, int verbose) {
  char prefix[TDRUN_JOB_ID_MAX + 8];
  snprintf(prefix, sizeof prefix, "tdist-%s", job_id);
  size_t plen = strlen(prefix);
  DIR *d = opendir("/dev/shm");
  if (!d)
    return 0; /* no /dev/shm: the shm transport cannot have made anything */
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, plen) != 0)
      continue;
    /* shm_unlink takes the name without /dev/shm; it also removes names
     * the runtime made with plain open() there. */
    if (shm_unlink(e->d_name) == 0) {
      removed++;
      if (verbose)
        fprintf(stderr, "tdrun: removed /dev/shm/%s left by the job\n", e->d_name);
    } else if (errno != ENOENT) {
      fprintf(stderr, "tdrun: cannot remove /dev/shm/%s: %s\n", e->d_name, strerror(errno));
    }
  }
  closedir(d);
  return removed;
}

/* Whether /dev/shm/<name> is a region nothing can use (see the file
 * comment): 1 with `why` saying what it was, 0 when it is in use or too
 * recent, -1 when it is not a tdist region at all. */
static int tdrun__shm_stale(const char *name, char *why, size_t cap) {
  char path[300];
  snprintf(path, sizeof path, "/%s", name);
  int fd = shm_open(path, O_RDONLY, 0);
  if (fd < 0)
    return 0;
  struct stat st;
  int32_t pid = 0;
  int kind = td__region_kind(fd, name, &pid, &st);
  close(fd);
  if (kind < 0)
    return 0;
  /* Only a minute after its last change: a test (rt_shm_startup) or a
   * joining rank may be looking at a freshly dead creator's region, and
   * the transport's own message about it must stay theirs. */
  if (time(NULL) - st.st_mtime <= 60)
    return 0;
  if (kind == TD__SHM_FOREIGN)
    return -1;
  if (kind == TD__SHM_REGION && !td__creator_gone(pid))
    return 0;
  if (kind == TD__SHM_REGION)
    snprintf(why, cap, "a tdist region whose creator, pid %d, is gone", (int)pid);
  else if (pid > 0 && td__creator_gone(pid))
    snprintf(why, cap, "a tdist region whose creator, pid %d, died before finishing it", (int)pid);
  else if (pid > 0)
    return 0; /* still being made, slowly: its creator lives */
  else
    snprintf(why, cap, "a tdist region whose creator died before finishing it");
  return 1;
}

int tdrun__remove_stale_shm(int verbose) {
  DIR *d = opendir("/dev/shm");
  if (!d)
    return 0;
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "tdist-", 6) != 0)
      continue;
    char why[128];
    int stale = tdrun__shm_stale(e->d_name, why, sizeof why);
    if (stale < 0 && verbose)
      fprintf(stderr, "tdrun: left /dev/shm/%s alone: named like a tdist region, but it has no region header\n",
              e->d_name);
    if (stale <= 0)
      continue;
    if (shm_unlink(e->d_name) == 0) {
      removed++;
      if (verbose)
        fprintf(stderr, "tdrun: removed /dev/shm/%s (stale: %s)\n", e->d_name, why);
    }
  }
  closedir(d);
  return removed;
}
