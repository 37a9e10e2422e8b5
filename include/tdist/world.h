/* SPDX-License-Identifier: Apache-2.0
 * Ranks, worlds and teams.
 *
 * A world is the set of ranks of one job. It is created either from the
 * environment of a launched process (tdrun, torchrun or Open MPI's mpirun on
 * one host; one process per rank, transport `shm`) or as a *local world*:
 * N ranks that are threads of one process (transport `local`). Every rank
 * holds its own td_world handle; a handle is used by one thread at a time.
 *
 * Teams are subsets of the world, made collectively by splitting a parent
 * team (strided, like nvshmem_team_split_strided, or by color/key, like
 * MPI_Comm_split). Team ranks are numbered 0..size-1 in the team. */
#ifndef TDIST_WORLD_H
#define TDIST_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_world td_world;
typedef struct td_team td_team;
typedef struct td_local_world td_local_world;

/** Options for creating a world. Initialise with td_world_opts_init(); a zero
 * or NULL field means "take the environment variable, else the default". */
typedef struct td_world_opts {
  size_t heap_size;      /* symmetric heap bytes per rank (TD_SYMM_HEAP_SIZE; default 256 MiB) */
  int timeout_ms;        /* deadline of every wait (TD_TIMEOUT_MS; default 60000) */
  const char *transport; /* "local", "shm" (default for launched processes); NULL = choose */
} td_world_opts;

/** Fills *opts with "use environment / default" values. */
void td_world_opts_init(td_world_opts *opts);

/** Creates this process's rank of a launched world from one launcher's
 * variables: tdist's own (TD_RANK, TD_WORLD_SIZE, TD_LOCAL_RANK,
 * TD_LOCAL_WORLD_SIZE, TD_JOB_ID, set by tdrun with TD_LAUNCHER=tdrun),
 * torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * TORCHELASTIC_RUN_ID, MASTER_PORT) or Open MPI's (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
 * OMPI_COMM_WORLD_LOCAL_SIZE). With none of them set, creates a world of one
 * rank. Values are decimal digits only (no spaces); ranks 0..4095, sizes
 * 1..4096.
 * Precedence when several sets are present: sets that agree on rank and size
 * are used in the order tdrun, torchrun, Open MPI. Sets that disagree (a
 * stale `export RANK=0 WORLD_SIZE=1` under mpirun, TD_* left in a shell) are
 * resolved in favour of the launcher visibly running: Open MPI's set (mpirun
 * sets it for each process), tdrun's when TD_LAUNCHER=tdrun, torchrun's when
 * TORCHELASTIC_RUN_ID is set; if none or more than one of the disagreeing
 * sets is so marked, fails with TD_ERR_INVALID_ARG naming every set and its
 * values.
 * Collective over all ranks of the job: blocks until every rank has attached
 * (deadline TD_ATTACH_TIMEOUT_MS, default the larger of TD_TIMEOUT_MS and
 * 60000), or fails with TD_ERR_TIMEOUT naming the ranks that never arrived
 * (and, when the job id came from the parent's pid, which variables were
 * missing). A rank that dies during start-up makes the others fail at once
 * with TD_ERR_PEER_FAILED, and a rank that finds shared memory whose creator
 * died removes it.
 * The job id that names the shared memory is TD_JOB_ID, else
 * TORCHELASTIC_RUN_ID-MASTER_PORT, else Open MPI's OMPI_MCA_ess_base_jobid /
 * PMIX_NAMESPACE, else the parent's pid.
 * Errors: TD_ERR_INVALID_ARG (malformed variable: names it and its value;
 * conflicting launcher sets; unknown transport; `local` asked for several
 * processes), TD_ERR_UNSUPPORTED (ranks on more than one host),
 * TD_ERR_TIMEOUT, TD_ERR_PEER_FAILED (a rank died during start-up),
 * TD_ERR_BUSY (a live job already uses this job id, or this rank number is
 * taken), TD_ERR_MISMATCH (ranks disagree on world size or heap size),
 * TD_ERR_SYSTEM (shared memory could not be created/mapped),
 * TD_ERR_NO_MEMORY (also: the heaps of all ranks do not fit in /dev/shm's
 * free space; the message gives both numbers). *out written only on success.
 * Not thread-safe. */
td_status td_world_init(const td_world_opts *opts, td_world **out);

/** Creates a local world of `nranks` ranks that live in this process. Hand
 * td_local_world_rank(lw, r) to the thread that plays rank r. Errors:
 * TD_ERR_INVALID_ARG (nranks < 1 or > 4096), TD_ERR_NO_MEMORY. */
td_status td_local_world_create(int nranks, const td_world_opts *opts, td_local_world **out);
/** The world handle of rank r of a local world; NULL if r is out of range. */
td_world *td_local_world_rank(td_local_world *lw, int rank);
/** Frees a local world after every rank's thread has stopped using it. NULL is allowed. */
void td_local_world_destroy(td_local_world *lw);

/** Convenience: creates a local world of nranks, runs fn(world, rank, arg) on
 * one thread per rank, joins them and destroys the world. Returns TD_OK if
 * every rank returned TD_OK, else the first failing rank's status, with the
 * calling thread's last-error message set to that rank's message, prefixed by
 * "rank R: " unless it already starts so. If a rank fails, the others' waits fail with TD_ERR_PEER_FAILED
 * instead of waiting for their deadline. */
typedef td_status (*td_rank_fn)(td_world *world, int rank, void *arg);
td_status td_local_world_run(int nranks, const td_world_opts *opts, td_rank_fn fn, void *arg);

/** Leaves the world: barrier with all ranks (so no peer still reads this
 * rank's heap), then unmaps and frees. NULL is allowed. For a local world
 * rank, only detaches; memory goes with td_local_world_destroy. Returns the
 * barrier's status (TD_ERR_TIMEOUT, TD_ERR_PEER_FAILED: the rank is released
 * anyway), or TD_ERR_STATE when this local-world rank was already finalized.
 * When the world team is broken (an earlier call timed out, failed with a
 * peer or mismatched: see rma.h), skips the barrier and returns at once
 * TD_ERR_STATE / TD_ERR_PEER_FAILED naming that first failure. */
td_status td_world_finalize(td_world *world);

/** This rank's number in the world, and the number of ranks. */
int td_world_rank(const td_world *world);
int td_world_size(const td_world *world);
/** Ranks on this host and this rank's index among them (equal to world values on one host). */
int td_world_local_rank(const td_world *world);
int td_world_local_size(const td_world *world);
/** "local" or "shm". */
const char *td_world_transport(const td_world *world);
/** The team of all ranks (owned by the world; do not destroy). */
td_team *td_world_team(td_world *world);
/** Deadline of every wait in milliseconds, as configured. */
int td_world_timeout_ms(const td_world *world);

/** Value for td_team_split's color meaning "not in any new team". */
#define TD_COLOR_UNDEFINED (-1)

/** Collective over `parent`: makes the team of parent ranks start,
 * start+stride, ..., (size members). Members get the new team in *out;
 * non-members get *out = NULL and TD_OK. Errors: TD_ERR_INVALID_ARG (range
 * outside the parent, size < 1, stride < 1), TD_ERR_MISMATCH (ranks passed
 * different start/stride/size: every rank gets the error naming the values),
 * TD_ERR_NO_MEMORY (a member already belongs to 64 live teams), TD_ERR_TIMEOUT.
 * Invalid arguments on one rank make every rank fail, naming that rank. */
td_status td_team_split_strided(td_team *parent, int start, int stride, int size, td_team **out);

/** Collective over `parent`, like MPI_Comm_split: ranks with the same color
 * form a team, ordered by (key, parent rank). color TD_COLOR_UNDEFINED gives
 * *out = NULL. Errors: TD_ERR_INVALID_ARG (color < -1 on any rank: every rank
 * fails, naming it), TD_ERR_NO_MEMORY (a member already belongs to 64 live
 * teams), TD_ERR_TIMEOUT. */
td_status td_team_split(td_team *parent, int color, int key, td_team **out);

/** Collective over the team: the members exchange how many objects made on
 * the team still exist (barrier), then run the upper layers' slot
 * destructors, release symmetric blocks still allocated on the team and free
 * it. The world team and NULL are ignored.
 *
 * The team must outlive every object made on it: operators (td_*_create of
 * ops.h), executors (td_exec_create) and NCCL communicators (td_nccl_create).
 * While any rank still has one, every rank returns TD_ERR_STATE alike (the
 * message names this rank's objects by count and kind, e.g. "2 operators and
 * 1 executor", and the other team ranks that have some), nothing is destroyed
 * and the team stays usable: destroy the objects, then the team again.
 * Errors: TD_ERR_STATE (objects still use the team, as above; or the team
 * was broken by an earlier failure and this rank still has such objects:
 * the team is kept for them), TD_ERR_TIMEOUT, TD_ERR_PEER_FAILED,
 * TD_ERR_MISMATCH (the members made different calls; in these three the team
 * is freed anyway unless this rank still has objects on it). Like free(),
 * destroying the same team twice is undefined. */
td_status td_team_destroy(td_team *team);

int td_team_rank(const td_team *team);
int td_team_size(const td_team *team);
/** The world this team belongs to. */
td_world *td_team_world(td_team *team);
/** Rank `rank` of team `src` expressed as a rank of team `dst`; -1 when that
 * rank is not a member of dst or `rank` is out of range. */
int td_team_translate_rank(const td_team *src, int rank, const td_team *dst);

#ifdef __cplusplus
}
#endif
#endif
