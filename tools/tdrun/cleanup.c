/* SPDX-License-Identifier: Apache-2.0
 * tdrun shared-memory cleanup.
 *
 * The shm transport names a job's segments /dev/shm/tdist-<TD_JOB_ID>, with
 * optional suffixes. A rank killed by SIGKILL cannot unlink them, so tdrun
 * does it once every rank has ended: whatever starts with "tdist-<job id>"
 * belongs to this job. Job ids are "<pid>-<16 hex digits>", so no other job's
 * name can start with this one's. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "tdrun.h"

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
