/* SPDX-License-Identifier: Apache-2.0
 * Internal to src/prim: a launched process's place in its job, read from the
 * environment by env.c. */
#ifndef TD_PRIM_ENV_H
#define TD_PRIM_ENV_H

#include "tdist/status.h"

typedef struct td__launch {
  int found;          /* launcher variables were present */
  const char *source; /* which launcher's variables were used, for messages */
  int rank, size, local_rank, local_size;
  char job_id[160];
  const char *job_id_hint; /* when the job id fell back to the parent's pid: which variables were missing */
} td__launch;

/** Reads the launch variables. Errors: TD_ERR_INVALID_ARG naming the variable
 * and its value (not an integer, out of range, rank not below size, one
 * variable of a pair missing: names the one that is set; launcher sets that
 * disagree with no single running launcher: names both sets and their values).
 * *out written only on success. */
td_status td__launch_from_env(td__launch *out);

#endif
