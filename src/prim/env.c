/* SPDX-License-Identifier: Apache-2.0
 * Reading a launched process's place in its job from the environment
 * (primitives layer): tdrun's TD_* variables, torchrun's, or Open MPI's. A
 * malformed variable is an error naming it and its value; a process with none
 * of them is a world of one rank.
 *
 * Several sets may be present at once: a user's stale `export RANK=0
 * WORLD_SIZE=1` under mpirun, or TD_* left over in a shell. Sets that agree
 * (same rank and size) are harmless. Sets that disagree are resolved only
 * when exactly one of them belongs to a launcher that is visibly running:
 * tdrun marks its set with TD_LAUNCHER=tdrun, torchrun with
 * TORCHELASTIC_RUN_ID, and Open MPI's OMPI_COMM_WORLD_* are set by mpirun
 * for each process. Otherwise td_world_init fails naming both sets and their
 * values (see world.h).
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
#include "prim/prim_impl.h"
#include "tdist/config.h"

/* One launcher's variables: rank, size, local rank, local size. */
typedef struct td__env_set {
  const char *launcher;
  const char *var[4];
  const char *marker; /* a variable only the running launcher sets; NULL = the set itself */
  const char *marker_value; /* required value of the marker, or NULL = any non-empty */
} td__env_set;

static const td__env_set td__sets[] = {
    {"tdrun", {"TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE"}, "TD_LAUNCHER", "tdrun"},
    {"torchrun", {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}, "TORCHELASTIC_RUN_ID", NULL},
    {"Open MPI",
     {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
     NULL, NULL},
};
enum { TD__NSETS = sizeof td__sets / sizeof td__sets[0] };

static int td__set_present(const td__env_set *s) { return getenv(s->var[0]) || getenv(s->var[1]); }

static int td__set_running(const td__env_set *s) {
  if (!s->marker)
    return 1;
  const char *m = getenv(s->marker);
  return m && *m && (!s->marker_value || strcmp(m, s->marker_value) == 0);
}

/* Strict decimal: optional '-', digits, nothing else (no spaces either side). */
static td_status td__env_int(const char *name, int min, int max, const char *partner, int def, int *out) {
  const char *text = getenv(name);
  if (!text || !*text) {
    if (partner) {
      const char *pv = getenv(partner);
      return td__error(TD_ERR_INVALID_ARG, "%s is not set, but %s='%s' is; a launcher sets both %s and %s", name,
                       partner, pv ? pv : "", name, partner);
    }
    *out = def;
    return TD_OK;
  }
  const char *d = text + (text[0] == '-');
  int digits = *d != '\0';
  for (const char *c = d; *c; c++)
    digits &= *c >= '0' && *c <= '9';
  if (!digits)
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not a decimal integer (digits only, no spaces); allowed %d to %d",
                     name, text, min, max);
  errno = 0;
  long long v = strtoll(text, NULL, 10);
  if (errno == ERANGE || v < min || v > max)
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

/* Reads and checks one set into *l (rank, size, local rank and size). */
static td_status td__read_set(const td__env_set *s, td__launch *l) {
  const char *const *v = s->var;
  TD_CHECK(td__env_int(v[0], 0, TD__MAX_RANKS - 1, getenv(v[1]) ? v[1] : NULL, 0, &l->rank));
  TD_CHECK(td__env_int(v[1], 1, TD__MAX_RANKS, getenv(v[0]) ? v[0] : NULL, 1, &l->size));
  TD_CHECK(td__env_int(v[2], 0, TD__MAX_RANKS - 1, NULL, l->rank, &l->local_rank));
  TD_CHECK(td__env_int(v[3], 1, TD__MAX_RANKS, NULL, l->size, &l->local_size));
  if (l->rank >= l->size)
    return td__error(TD_ERR_INVALID_ARG, "%s=%d is not below %s=%d", v[0], l->rank, v[1], l->size);
  if (l->local_size > l->size)
    return td__error(TD_ERR_INVALID_ARG, "%s=%d is larger than %s=%d", v[3], l->local_size, v[1], l->size);
  if (l->local_rank >= l->local_size)
    return td__error(TD_ERR_INVALID_ARG, "%s=%d is not below %s=%d", v[2], l->local_rank, v[3], l->local_size);
  return TD_OK;
}

/* "tdrun (TD_RANK='1', TD_WORLD_SIZE='4')" */
static void td__describe_set(const td__env_set *s, char *buf, size_t cap) {
  const char *r = getenv(s->var[0]), *n = getenv(s->var[1]);
  snprintf(buf, cap, "%s (%s=%s%s%s, %s=%s%s%s)", s->launcher, s->var[0], r ? "'" : "", r ? r : "unset",
           r ? "'" : "", s->var[1], n ? "'" : "", n ? n : "unset", n ? "'" : "");
}

/* Chooses the set to use among those present (see the file comment). */
static td_status td__choose_set(int *chosen) {
  int present[TD__NSETS], np = 0;
  for (int i = 0; i < TD__NSETS; i++)
    if (td__set_present(&td__sets[i]))
      present[np++] = i;
  *chosen = np ? present[0] : -1;
  if (np < 2)
    return TD_OK;
  /* Do they agree? Unparsable values count as disagreeing. */
  int agree = 1;
  td__launch first = {0};
  for (int k = 0; k < np && agree; k++) {
    td__launch l = {0};
    if (td__read_set(&td__sets[present[k]], &l) != TD_OK)
      agree = 0;
    else if (k == 0)
      first = l;
    else
      agree = l.rank == first.rank && l.size == first.size;
  }
  td_clear_error();
  if (agree)
    return TD_OK;
  int running = -1, nrunning = 0;
  for (int k = 0; k < np; k++)
    if (td__set_running(&td__sets[present[k]])) {
      running = present[k];
      nrunning++;
    }
  if (nrunning == 1) {
    *chosen = running;
    return TD_OK;
  }
  char msg[768];
  size_t len = 0;
  for (int k = 0; k < np && len < sizeof msg - 1; k++) {
    char d[256];
    td__describe_set(&td__sets[present[k]], d, sizeof d);
    len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s", k ? " and " : "", d);
  }
  return td__error(TD_ERR_INVALID_ARG,
                   "td_world_init: launcher variables disagree: %s; %s, so which launcher started this process is "
                   "ambiguous; unset the stale set (a running tdrun sets TD_LAUNCHER=tdrun, torchrun "
                   "TORCHELASTIC_RUN_ID, mpirun OMPI_COMM_WORLD_*)",
                   msg, nrunning ? "more than one of them is marked as running" : "none is marked as running");
}

td_status td__launch_from_env(td__launch *out) {
  td__launch l;
  memset(&l, 0, sizeof l);
  int k = -1;
  TD_CHECK(td__choose_set(&k));
  static const char *const sources[TD__NSETS] = {"tdrun (TD_RANK, TD_WORLD_SIZE)", "torchrun (RANK, WORLD_SIZE)",
                                                 "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)"};
  if (k < 0) {
    l.source = "no launcher variables (a world of one rank)";
    l.size = l.local_size = 1;
  } else {
    l.source = sources[k];
    TD_CHECK(td__read_set(&td__sets[k], &l));
  }
  if (k == 0) {
    const char *id = getenv("TD_JOB_ID");
    if (id && *id)
      td__env_copy(l.job_id, sizeof l.job_id, id, NULL);
  } else if (k == 1) {
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    const char *port = getenv("MASTER_PORT");
    if (run && *run)
      td__env_copy(l.job_id, sizeof l.job_id, run, port && *port ? port : NULL);
    else if (port && *port)
      td__env_copy(l.job_id, sizeof l.job_id, "port", port);
    else
      l.job_id_hint = "neither TORCHELASTIC_RUN_ID nor MASTER_PORT is set (torchrun sets them; they name the job's "
                      "shared memory), so the job id is the parent's pid: every rank must have the same parent, "
                      "or set TD_JOB_ID";
  } else if (k == 2) {
    const char *id = getenv("OMPI_MCA_ess_base_jobid");
    if (!id || !*id)
      id = getenv("PMIX_NAMESPACE");
    if (id && *id)
      td__env_copy(l.job_id, sizeof l.job_id, "ompi", id);
    else
      l.job_id_hint = "neither OMPI_MCA_ess_base_jobid nor PMIX_NAMESPACE is set (they name the job's shared "
                      "memory), so the job id is the parent's pid: every rank must have the same parent";
  }
  l.found = k >= 0;
  if (!l.job_id[0])
    snprintf(l.job_id, sizeof l.job_id, "ppid%ld", (long)getppid());
  *out = l;
  return TD_OK;
}
