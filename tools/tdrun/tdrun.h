/* SPDX-License-Identifier: Apache-2.0
 * tdrun internals: the launcher's options, its per-rank state and the small
 * modules it is built from (options.c parses the command line, spawn.c starts
 * and stops ranks, relay.c prefixes and forwards their output, cleanup.c
 * removes what a job leaves behind, main.c runs the event loop).
 *
 * tdrun is a tool, not part of the library: it prints its own messages (always
 * prefixed "tdrun: ") and does not link libtdist. */
#ifndef TDRUN_TDRUN_H
#define TDRUN_TDRUN_H

#include <stddef.h>
#include <sys/types.h>

/* Largest -n accepted; matches the runtime's limit on ranks of one world. */
#define TDRUN_MAX_RANKS 4096
#define TDRUN_STR_(x) #x
#define TDRUN_STR(x) TDRUN_STR_(x)
/* Grace between SIGTERM and SIGKILL when tdrun stops ranks on its own, in ms. */
#define TDRUN_GRACE_MS 500
/* Longest output line kept whole; longer lines are split (each piece prefixed). */
#define TDRUN_MAX_LINE (1u << 20)
/* Job ids: "<pid>-<16 hex digits>", only [A-Za-z0-9_-]. */
#define TDRUN_JOB_ID_MAX 48

typedef struct tdrun_options {
  int nranks;            /* -n / --np */
  int prefix;            /* 1 unless --no-prefix / -q */
  int verbose;           /* -v: print the job id and each rank's end */
  double timeout_s;      /* --timeout; 0 = none */
  const char *program;   /* as given on the command line */
  char *program_path;    /* resolved path that is executed (malloc'd) */
  char **argv;           /* program and its arguments (points into main's argv) */
} tdrun_options;

/* What tdrun knows about one rank. */
typedef struct tdrun_rank {
  pid_t pid;      /* also its process group id; 0 before start */
  int running;    /* not yet reaped */
  int status;     /* wait status once reaped */
  int out_fd;     /* read end of its stdout pipe; -1 when closed or unused */
  int err_fd;     /* read end of its stderr pipe; -1 when closed or unused */
  char *out_buf;  /* partial line of stdout not yet written */
  size_t out_len, out_cap;
  char *err_buf;  /* partial line of stderr not yet written */
  size_t err_len, err_cap;
} tdrun_rank;

/* options.c: parses argv into *opts. Returns -1 after printing what was wrong
 * (exit status 2), 1 after printing help or version (exit status 0), 0 to run. */
int tdrun__parse_options(int argc, char **argv, tdrun_options *opts);

/* spawn.c */
/* Fills id (TDRUN_JOB_ID_MAX bytes) with a job id unique to this invocation. */
void tdrun__make_job_id(char *id);
/* Starts rank `rank` with the job's environment; returns 0 or -1 (printed). */
int tdrun__spawn_rank(const tdrun_options *opts, const char *job_id, int rank, tdrun_rank *r);
/* Sends sig to every running rank's process group. */
void tdrun__signal_ranks(tdrun_rank *ranks, int n, int sig);
/* After every rank has ended: kills what is left of their process groups and
 * any process re-parented to tdrun (tdrun is a child subreaper), and reaps it. */
void tdrun__kill_leftovers(tdrun_rank *ranks, int n);
/* Name of a signal ("SIGKILL"), or "unknown signal". */
const char *tdrun__signal_name(int sig);

/* relay.c */
/* Reads what is available on fd (a rank's stdout or stderr pipe) and writes
 * every complete line, prefixed "[rank] " when prefix is set, to out_fd.
 * Returns 1 on end of file (fd closed and set to -1), 2 when more data may be
 * waiting (it stopped after a few reads, to be fair to other ranks), 0 when
 * the pipe is empty for now. */
int tdrun__relay_read(tdrun_rank *r, int rank, int is_err, int prefix);
/* Writes a rank's partial last lines (a newline is added) and frees buffers. */
void tdrun__relay_flush(tdrun_rank *r, int rank, int prefix);

/* guard.c: starts the guard process, which kills the ranks' process groups
 * and removes the job's /dev/shm names if tdrun dies without cleaning up
 * (SIGKILL). Returns the fd to announce groups on, or -1 (no guard; the ranks
 * still have PDEATHSIG). Call before the first rank starts. */
int tdrun__guard_start(const char *job_id);
/* Tells the guard about a rank's process group (ignored with fd -1). */
void tdrun__guard_add(int fd, pid_t group);
/* The guard's pid (0 when none was started), so tdrun can tell its end
 * from a rank's. */
pid_t tdrun__guard_pid(void);

/* cleanup.c: unlinks every /dev/shm/tdist-<job_id>* entry; returns how many. */
int tdrun__remove_job_shm(const char *job_id, int verbose);
/* cleanup.c: unlinks /dev/shm/tdist-* regions unchanged for over a minute
 * whose creator pid is dead or that never finished initialising (no job can
 * use them); files that are not tdist regions are left alone (td__region_kind).
 * Returns how many it removed. */
int tdrun__remove_stale_shm(int verbose);

#endif
