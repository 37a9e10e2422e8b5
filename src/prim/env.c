/* SPDX-License-Identifier: Apache-2.0
 * Reading a launched process's place in its job from the environment
 * (primitives layer): tdrun's TD_* variables, torchrun's, or Open MPI's, in
 * that order. A malformed variable is an error naming it and its value; a
 * process with none of them is a world of one rank.
 *
 * The job id names the shared memory of the job, so it must be the same on
 * every rank of a job and differ between concurrent jobs: TD_JOB_ID (tdrun),
 * TORCHELASTIC_RUN_ID + MASTER_PORT (torchrun), OMPI_MCA_ess_base_jobid or
 * PMIX_NAMESPACE (Open MPI 4.1 sets both), else the parent's pid (every
 * launcher we know starts all local ranks from one parent). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "prim/env.h"
#include "tdist/config.h"

static td_status td__env_int(const char *name, int min, int max, int required, int def, int *out) {
  const char *text = getenv(name);
  if (!text || !*text) {
    if (required)
      return td__error(TD_ERR_INVALID_ARG, "%s is not set, but the launcher set other variables of its set",
                       name);
    *out = def;
    return TD_OK;
  }
  errno = 0;
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (end == text || *end || errno)
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not a decimal integer", name, text);
  if (v < min || v > max)
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is out of range; allowed %d to %d", name, text, min, max);
  *out = (int)v;
  return TD_OK;
}

static void td__env_copy(char *dst, size_t cap, const char *a, const char *b) {
  if (b)
    snprintf(dst, cap, "%s-%s", a, b);
  else
    snprintf(dst, cap, "%s", a);
}

static td_status td__env_check(td__launch *l, const char *rank_name, const char *size_name,
                               const char *lrank_name, const char *lsize_name) {
  if (l->rank >= l->size)
    return td__error(TD_ERR_INVALID_ARG, "%s=%d is not below %s=%d", rank_name, l->rank, size_name, l->size);
  if (l->local_size > l->size)
    return td__error(TD_ERR_INVALID_ARG, "%s=%d is larger than %s=%d", lsize_name, l->local_size, size_name,
                     l->size);
  if (l->local_rank >= l->local_size)
    return td__error(TD_ERR_INVALID_ARG, "%s=%d is not below %s=%d", lrank_name, l->local_rank, lsize_name,
                     l->local_size);
  return TD_OK;
}

td_status td__launch_from_env(td__launch *out) {
  td__launch l;
  memset(&l, 0, sizeof l);
  const int max = 1 << 20;
  if (getenv("TD_RANK") || getenv("TD_WORLD_SIZE")) {
    l.source = "tdrun (TD_RANK, TD_WORLD_SIZE)";
    TD_CHECK(td__env_int("TD_RANK", 0, max, 1, 0, &l.rank));
    TD_CHECK(td__env_int("TD_WORLD_SIZE", 1, max, 1, 1, &l.size));
    TD_CHECK(td__env_int("TD_LOCAL_RANK", 0, max, 0, l.rank, &l.local_rank));
    TD_CHECK(td__env_int("TD_LOCAL_WORLD_SIZE", 1, max, 0, l.size, &l.local_size));
    TD_CHECK(td__env_check(&l, "TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE"));
    const char *id = getenv("TD_JOB_ID");
    if (id && *id)
      td__env_copy(l.job_id, sizeof l.job_id, id, NULL);
  } else if (getenv("RANK") || getenv("WORLD_SIZE")) {
    l.source = "torchrun (RANK, WORLD_SIZE)";
    TD_CHECK(td__env_int("RANK", 0, max, 1, 0, &l.rank));
    TD_CHECK(td__env_int("WORLD_SIZE", 1, max, 1, 1, &l.size));
    TD_CHECK(td__env_int("LOCAL_RANK", 0, max, 0, l.rank, &l.local_rank));
    TD_CHECK(td__env_int("LOCAL_WORLD_SIZE", 1, max, 0, l.size, &l.local_size));
    TD_CHECK(td__env_check(&l, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    const char *port = getenv("MASTER_PORT");
    if (run && *run)
      td__env_copy(l.job_id, sizeof l.job_id, run, port && *port ? port : NULL);
    else if (port && *port)
      td__env_copy(l.job_id, sizeof l.job_id, "port", port);
  } else if (getenv("OMPI_COMM_WORLD_RANK") || getenv("OMPI_COMM_WORLD_SIZE")) {
    l.source = "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)";
    TD_CHECK(td__env_int("OMPI_COMM_WORLD_RANK", 0, max, 1, 0, &l.rank));
    TD_CHECK(td__env_int("OMPI_COMM_WORLD_SIZE", 1, max, 1, 1, &l.size));
    TD_CHECK(td__env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, max, 0, l.rank, &l.local_rank));
    TD_CHECK(td__env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, max, 0, l.size, &l.local_size));
    TD_CHECK(td__env_check(&l, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_LOCAL_SIZE"));
    const char *id = getenv("OMPI_MCA_ess_base_jobid");
    if (!id || !*id)
      id = getenv("PMIX_NAMESPACE");
    if (id && *id)
      td__env_copy(l.job_id, sizeof l.job_id, "ompi", id);
  } else {
    l.source = "no launcher variables (a world of one rank)";
    l.size = l.local_size = 1;
  }
  l.found = l.size > 1 || strncmp(l.source, "no ", 3) != 0;
  if (!l.job_id[0])
    snprintf(l.job_id, sizeof l.job_id, "ppid%ld", (long)getppid());
  *out = l;
  return TD_OK;
}
