/* SPDX-License-Identifier: Apache-2.0
 * tdrun: tdist's launcher. `tdrun -n N PROGRAM [ARGS]` starts N ranks of
 * PROGRAM on this host, relays their output line by line, and ends the job
 * as a whole: when one rank fails, the others are stopped; when tdrun is
 * signalled, the ranks are; when the job ends, nothing it started or the
 * shared memory it made is left behind.
 *
 * One thread, one poll loop: a signalfd carries SIGCHLD, SIGINT, SIGTERM and
 * SIGHUP; each rank's stdout and stderr are pipes; the deadlines (the grace
 * before SIGKILL, --timeout) are poll timeouts. Layer: tools. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tdrun.h"

/* Grace given to ranks after a signal forwarded from the user before SIGKILL:
 * longer than TDRUN_GRACE_MS since the ranks may be handling it on purpose. */
#define TDRUN_FORWARD_GRACE_MS 1000
/* How long tdrun waits for output still in the pipes once every rank ended. */
#define TDRUN_DRAIN_MS 1000

static long long tdrun__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The job as the event loop sees it. */
typedef struct tdrun_job {
  tdrun_options opts;
  char id[TDRUN_JOB_ID_MAX];
  tdrun_rank *ranks;
  int running;              /* ranks not yet reaped */
  int stopping;             /* tdrun has signalled the ranks to end */
  long long kill_at_ms;     /* when to send SIGKILL; 0 = not scheduled */
  long long deadline_ms;    /* --timeout; 0 = none */
  int exit_code;            /* set by the first cause of failure */
  int have_cause;           /* a failure, signal or timeout decided exit_code */
} tdrun_job;

static void tdrun__begin_stop(tdrun_job *job, int sig, int grace_ms) {
  tdrun__signal_ranks(job->ranks, job->opts.nranks, sig);
  job->stopping = 1;
  job->kill_at_ms = tdrun__now_ms() + grace_ms;
}

static void tdrun__describe(int rank, int status, char *out, size_t size) {
  if (WIFEXITED(status))
    snprintf(out, size, "rank %d exited with status %d", rank, WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(out, size, "rank %d was killed by signal %d (%s)%s", rank, WTERMSIG(status),
             tdrun__signal_name(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
  else
    snprintf(out, size, "rank %d ended with wait status %#x", rank, (unsigned)status);
}

/* Writes out what a rank printed before it ended, so that tdrun's message
 * about it comes after its last lines. Bounded: a grandchild may still write. */
static void tdrun__drain_rank(tdrun_job *job, int rank) {
  tdrun_rank *r = &job->ranks[rank];
  for (int i = 0; i < 64 && tdrun__relay_read(r, rank, 0, job->opts.prefix) == 2; i++) {
  }
  for (int i = 0; i < 64 && tdrun__relay_read(r, rank, 1, job->opts.prefix) == 2; i++) {
  }
}

/* Whether an end is the root cause of a failure rather than its consequence:
 * a rank killed by a signal (tdrun has sent none yet) is what the others,
 * exiting with a "peer failed" status soon after, react to. */
static int tdrun__cause_rank(const tdrun_job *job, const int *ended, int n) {
  int first = -1;
  for (int k = 0; k < n; k++) {
    int status = job->ranks[ended[k]].status;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      continue;
    if (WIFSIGNALED(status))
      return ended[k];
    if (first < 0)
      first = ended[k];
  }
  return first;
}

/* Reaps every rank that has ended so far, then decides the cause from all of
 * them together: waitpid(-1) returns zombies in no useful order, so the first
 * one returned may be a rank that only exited because another died. */
static void tdrun__reap(tdrun_job *job) {
  int status;
  pid_t pid;
  int *ended = malloc(sizeof(int) * (size_t)job->opts.nranks), n = 0;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    int rank = -1;
    for (int i = 0; i < job->opts.nranks; i++)
      if (job->ranks[i].pid == pid && job->ranks[i].running)
        rank = i;
    if (rank < 0 && pid == tdrun__guard_pid()) {
      /* Only tdrun__kill_leftovers ends the guard on purpose, and it reaps
       * it itself: this end is unexpected. Not fatal: the job goes on. */
      char how[64];
      if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(status),
                 tdrun__signal_name(WTERMSIG(status)));
      else
        snprintf(how, sizeof how, "exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      fprintf(stderr, "tdrun: its guard process (pid %ld) %s; the job goes on, but if tdrun is now killed with "
              "SIGKILL, what the ranks started may be left running\n", (long)pid, how);
    }
    if (rank < 0)
      continue; /* the guard, or a re-parented grandchild (tdrun is a subreaper) */
    tdrun_rank *r = &job->ranks[rank];
    r->running = 0;
    r->status = status;
    job->running--;
    if (ended)
      ended[n++] = rank;
  }
  int cause = -1;
  if (!job->stopping && !job->have_cause && ended)
    cause = tdrun__cause_rank(job, ended, n);
  char what[160];
  if (cause >= 0) {
    status = job->ranks[cause].status;
    tdrun__describe(cause, status, what, sizeof what);
    tdrun__drain_rank(job, cause);
    job->have_cause = 1;
    job->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    int others = 0; /* other ranks that failed in this batch: say so, they are not the cause */
    for (int k = 0; k < n; k++)
      others += ended[k] != cause && !(WIFEXITED(job->ranks[ended[k]].status) &&
                                       WEXITSTATUS(job->ranks[ended[k]].status) == 0);
    char also[64] = "";
    if (others)
      snprintf(also, sizeof also, " (%d other rank%s failed with it)", others, others == 1 ? "" : "s");
    if (job->running > 0)
      fprintf(stderr, "tdrun: %s%s; stopping the other %d rank%s\n", what, also, job->running,
              job->running == 1 ? "" : "s");
    else
      fprintf(stderr, "tdrun: %s%s\n", what, also);
    tdrun__begin_stop(job, SIGTERM, TDRUN_GRACE_MS);
  }
  for (int k = 0; job->opts.verbose && k < n; k++)
    if (ended[k] != cause) {
      tdrun__describe(ended[k], job->ranks[ended[k]].status, what, sizeof what);
      fprintf(stderr, "tdrun: %s\n", what);
    }
  free(ended);
}

static void tdrun__on_signal(tdrun_job *job, int sig) {
  if (sig == SIGCHLD) {
    tdrun__reap(job);
    return;
  }
  if (job->stopping) {
    /* A second interrupt: the user does not want to wait for the grace. */
    fprintf(stderr, "tdrun: got %s again; killing all ranks\n", tdrun__signal_name(sig));
    tdrun__signal_ranks(job->ranks, job->opts.nranks, SIGKILL);
    return;
  }
  fprintf(stderr, "tdrun: got %s; forwarding it to all ranks\n", tdrun__signal_name(sig));
  if (!job->have_cause) {
    job->have_cause = 1;
    job->exit_code = 128 + sig;
  }
  tdrun__begin_stop(job, sig, TDRUN_FORWARD_GRACE_MS);
}

static void tdrun__on_deadlines(tdrun_job *job) {
  long long now = tdrun__now_ms();
  if (job->deadline_ms && now >= job->deadline_ms && !job->stopping) {
    fprintf(stderr, "tdrun: job timed out after %g s (--timeout); stopping %d running rank%s\n",
            job->opts.timeout_s, job->running, job->running == 1 ? "" : "s");
    if (!job->have_cause) {
      job->have_cause = 1;
      job->exit_code = 124;
    }
    tdrun__begin_stop(job, SIGTERM, TDRUN_GRACE_MS);
  }
  if (job->kill_at_ms && now >= job->kill_at_ms) {
    tdrun__signal_ranks(job->ranks, job->opts.nranks, SIGKILL);
    job->kill_at_ms = 0;
  }
}

/* Polls the signalfd (when sfd >= 0) and every open pipe until `until_ms`
 * or the next deadline; returns after one round of events. */
static void tdrun__poll_once(tdrun_job *job, int sfd, struct pollfd *pfds, int *owner, long long until_ms) {
  int n = job->opts.nranks, count = 0;
  if (sfd >= 0) {
    pfds[count] = (struct pollfd){.fd = sfd, .events = POLLIN};
    owner[count++] = -1;
  }
  for (int i = 0; i < n; i++) {
    if (job->ranks[i].out_fd >= 0) {
      pfds[count] = (struct pollfd){.fd = job->ranks[i].out_fd, .events = POLLIN};
      owner[count++] = 2 * i;
    }
    if (job->ranks[i].err_fd >= 0) {
      pfds[count] = (struct pollfd){.fd = job->ranks[i].err_fd, .events = POLLIN};
      owner[count++] = 2 * i + 1;
    }
  }
  long long wake = until_ms;
  if (job->kill_at_ms && (!wake || job->kill_at_ms < wake))
    wake = job->kill_at_ms;
  if (job->deadline_ms && !job->stopping && (!wake || job->deadline_ms < wake))
    wake = job->deadline_ms;
  int timeout = -1;
  if (wake) {
    long long left = wake - tdrun__now_ms();
    timeout = left < 0 ? 0 : (int)(left > 60000 ? 60000 : left);
  }
  int ready = poll(pfds, (nfds_t)count, timeout);
  if (ready < 0 && errno != EINTR) {
    fprintf(stderr, "tdrun: poll failed: %s\n", strerror(errno));
    exit(1);
  }
  for (int k = 0; ready > 0 && k < count; k++) {
    if (!pfds[k].revents)
      continue;
    if (owner[k] < 0) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
        tdrun__on_signal(job, (int)si.ssi_signo);
    } else {
      int rank = owner[k] / 2;
      tdrun__relay_read(&job->ranks[rank], rank, owner[k] % 2, job->opts.prefix);
    }
  }
}

/* 2 pipes per rank: lift the open-file limit as far as we are allowed. */
static void tdrun__raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  tdrun_job job;
  memset(&job, 0, sizeof job);
  int parsed = tdrun__parse_options(argc, argv, &job.opts);
  if (parsed != 0)
    return parsed > 0 ? 0 : 2;
  int n = job.opts.nranks;

  signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the launcher */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  tdrun__raise_fd_limit();
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  job.ranks = calloc((size_t)n, sizeof *job.ranks);
  struct pollfd *pfds = calloc((size_t)(2 * n + 1), sizeof *pfds);
  int *owner = calloc((size_t)(2 * n + 1), sizeof *owner);
  if (sfd < 0 || !job.ranks || !pfds || !owner) {
    fprintf(stderr, "tdrun: cannot set up the launcher for %d ranks: %s\n", n, strerror(errno));
    return 1;
  }
  tdrun__make_job_id(job.id);
  tdrun__remove_stale_shm(job.opts.verbose); /* dead jobs' leftovers (cleanup.c) */
  if (job.opts.verbose)
    fprintf(stderr, "tdrun: job %s: starting %d rank%s of %s\n", job.id, n, n == 1 ? "" : "s",
            job.opts.program_path);
  for (int i = 0; i < n; i++) {
    job.ranks[i].out_fd = job.ranks[i].err_fd = -1;
  }
  if (job.opts.timeout_s > 0)
    job.deadline_ms = tdrun__now_ms() + (long long)(job.opts.timeout_s * 1000.0 + 0.5);

  /* What a rank forks does not inherit its PDEATHSIG: the guard kills the
   * ranks' groups if tdrun itself is SIGKILLed (guard.c). */
  int guard = tdrun__guard_start(job.id);
  for (int i = 0; i < n; i++) {
    if (tdrun__spawn_rank(&job.opts, job.id, i, &job.ranks[i]) != 0) {
      job.have_cause = 1;
      job.exit_code = 1;
      tdrun__begin_stop(&job, SIGKILL, 0);
      break;
    }
    tdrun__guard_add(guard, job.ranks[i].pid);
    job.running++;
  }

  while (job.running > 0) {
    tdrun__poll_once(&job, sfd, pfds, owner, 0);
    tdrun__on_deadlines(&job);
  }

  /* Every rank has ended: remove what they left, then the last output. */
  tdrun__kill_leftovers(job.ranks, n);
  long long drain_until = tdrun__now_ms() + TDRUN_DRAIN_MS;
  for (;;) {
    int open_pipes = 0;
    for (int i = 0; i < n; i++)
      open_pipes += (job.ranks[i].out_fd >= 0) + (job.ranks[i].err_fd >= 0);
    if (open_pipes == 0 || tdrun__now_ms() >= drain_until)
      break;
    tdrun__poll_once(&job, -1, pfds, owner, drain_until);
  }
  for (int i = 0; i < n; i++)
    tdrun__relay_flush(&job.ranks[i], i, job.opts.prefix);
  tdrun__remove_job_shm(job.id, job.opts.verbose);
  if (guard >= 0)
    close(guard); /* the guard was killed with the leftovers above */

  free(owner);
  free(pfds);
  free(job.ranks);
  free(job.opts.program_path);
  close(sfd);
  return job.exit_code;
}
