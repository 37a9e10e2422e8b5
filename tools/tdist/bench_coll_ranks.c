/* SPDX-License-Identifier: Apache-2.0
 * The rank processes of `tdist bench coll` (tools layer): the parent forks
 * N copies of this executable (TD_RANK & co. set, --worker), reads rank 0's
 * result lines, and reaps the ranks as they end (waitpid(-1)). The first
 * rank to fail (a non-zero exit, a signal) stops the others: SIGTERM (and
 * SIGCONT), then SIGKILL after a grace period; every rank is reaped, the
 * job's shared memory (/dev/shm/tdist-<job>) is removed on every path, and
 * the rank that failed first is named. A SIGINT, SIGTERM or SIGHUP to the
 * parent does the same, then ends it by that signal. Without this a rank
 * that died left the others waiting for it until their deadlines (a minute,
 * and far longer with many ranks on few cores) and the parent waiting for
 * rank 0, then rank 1, ... in order. */
#include "bench_coll_ranks.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double bc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A SIGINT, SIGTERM or SIGHUP the parent got while ranks run (0: none): it
 * stops them, removes the job's shared memory and then dies of the signal. */
static volatile sig_atomic_t bc_interrupted;

static void bc_on_signal(int sig) { bc_interrupted = sig; }

/* Seconds a rank has to end after SIGTERM before it is sent SIGKILL. */
#define BC_GRACE_S 2.0

/* The rank processes of one tdist run, as the parent tracks them. */
typedef struct bc_ranks {
  int n;
  pid_t *pids;  /* 0: not started or already reaped */
  int live;     /* started and not yet reaped */
  int failed;   /* the first rank reaped that failed on its own (non-zero exit but BC_EXIT_PEER, or a signal
                 * not ours), -1: none */
  int fstatus;  /* its wait status */
  int peer_failed; /* the first that failed because a peer did (BC_EXIT_PEER), -1: none */
  int pstatus;
  int stopping; /* the others were sent SIGTERM (and SIGCONT, should one be stopped) */
  double kill_at; /* then SIGKILL at this time (0: sent) */
} bc_ranks;

/* Sends `sig` to every rank not yet reaped. */
static void bc_signal_all(bc_ranks *rk, int sig) {
  for (int r = 0; r < rk->n; r++)
    if (rk->pids[r] > 0)
      kill(rk->pids[r], sig);
}

/* Starts stopping every rank still alive: SIGTERM now (SIGCONT too, so a
 * stopped one acts on it), SIGKILL after BC_GRACE_S (bc_reap). */
static void bc_stop_all(bc_ranks *rk) {
  if (rk->stopping)
    return;
  rk->stopping = 1;
  rk->kill_at = bc_now() + BC_GRACE_S;
  bc_signal_all(rk, SIGTERM);
  bc_signal_all(rk, SIGCONT);
}

/* Reaps every rank that has ended, without blocking (waitpid(-1), so the
 * first to fail is seen whatever its rank), and on the first failure stops
 * the others: one failed rank leaves its peers waiting for it until their
 * deadlines, and with many ranks on few cores that is minutes. */
static void bc_reap(bc_ranks *rk) {
  if (rk->stopping && rk->kill_at > 0 && bc_now() >= rk->kill_at) {
    rk->kill_at = 0; /* first: a rank this SIGKILL ends is ours, not a failure */
    bc_signal_all(rk, SIGKILL);
  }
  for (;;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid <= 0)
      return;
    int r = 0;
    while (r < rk->n && rk->pids[r] != pid)
      r++;
    if (r == rk->n)
      continue; /* not a rank of ours */
    rk->pids[r] = 0;
    rk->live--;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      continue;
    /* Zombies are reaped in no particular order: a peer that exited on
     * noticing the failure may come before the rank that failed, so a
     * consequence (BC_EXIT_PEER) stops the run but names the cause only
     * while no rank failed on its own. The signals we sent are not failures. */
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    int ours = rk->stopping && (sig == SIGTERM || (sig == SIGKILL && rk->kill_at == 0));
    int consequence = WIFEXITED(status) && WEXITSTATUS(status) == BC_EXIT_PEER;
    if (ours)
      continue;
    if (!consequence && rk->failed < 0)
      rk->failed = r, rk->fstatus = status;
    if (consequence && rk->peer_failed < 0)
      rk->peer_failed = r, rk->pstatus = status;
    bc_stop_all(rk);
  }
}

/* Removes the job's shared memory, /dev/shm/tdist-<job>: rank 0 removes it
 * once every rank has attached, but a job stopped during start-up (a rank
 * failed, or was killed by bc_stop_all) leaves it. */
static void bc_unlink_shm(const char *job) {
  char name[96];
  snprintf(name, sizeof name, "/tdist-%s", job);
  shm_unlink(name); /* ENOENT when rank 0 removed it: nothing to do */
}

/* Forks the ranks and reads rank 0's lines; see bench_coll_ranks.h. */
int bc_launch_ranks(const bc_launch *l, void (*on_line)(const char *line, void *arg), void *arg) {
  char nbuf[16];
  snprintf(nbuf, sizeof nbuf, "%d", l->ranks);
  bc_ranks rk = {.n = l->ranks, .pids = calloc((size_t)l->ranks, sizeof(pid_t)), .failed = -1, .peer_failed = -1};
  int fds[2] = {-1, -1};
  if (!rk.pids) {
    fprintf(stderr, "tdist bench coll: out of memory\n");
    return 1;
  }
  if (pipe(fds)) {
    fprintf(stderr, "tdist bench coll: pipe: %s\n", strerror(errno));
    free(rk.pids);
    return 1;
  }
  int rc = 0;
  fflush(stdout);
  fflush(stderr);
  static const int stop_sigs[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa, old_sa[3];
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = bc_on_signal;
  sigemptyset(&sa.sa_mask);
  bc_interrupted = 0;
  for (int k = 0; k < 3; k++)
    sigaction(stop_sigs[k], &sa, &old_sa[k]);
  for (int r = 0; r < l->ranks && !bc_interrupted; r++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "tdist bench coll: fork of rank %d of %d: %s; stopping the %d started\n", r, l->ranks,
              strerror(errno), r);
      rc = 1;
      break;
    }
    if (pid == 0) {
      char rb[16];
      snprintf(rb, sizeof rb, "%d", r);
      setenv("TD_RANK", rb, 1);
      setenv("TD_LOCAL_RANK", rb, 1);
      setenv("TD_WORLD_SIZE", nbuf, 1);
      setenv("TD_LOCAL_WORLD_SIZE", nbuf, 1);
      setenv("TD_JOB_ID", l->job, 1);
      setenv("TD_SYMM_HEAP_SIZE", l->heap, 1);
      setenv("TD_TRANSPORT", "shm", 1);
      if (r == 0)
        dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(l->exe, l->argv);
      fprintf(stderr, "tdist bench coll: exec %s: %s\n", l->exe, strerror(errno));
      _exit(127);
    }
    rk.pids[r] = pid;
    rk.live++;
  }
  close(fds[1]);
  if (rc)
    bc_stop_all(&rk);
  /* Read rank 0's lines while watching every rank: a failed rank must stop
   * the run at once, not when rank 0 (waiting for it) gives up. */
  char line[512];
  size_t used = 0;
  int open_in = 1;
  while (open_in || rk.live > 0) {
    if (bc_interrupted)
      bc_stop_all(&rk);
    if (open_in) {
      struct pollfd pfd = {fds[0], POLLIN, 0};
      int pr = poll(&pfd, 1, 50);
      if (pr > 0) {
        ssize_t got = read(fds[0], line + used, sizeof line - 1 - used);
        if (got < 0 && errno == EINTR)
          continue;
        if (got <= 0) {
          open_in = 0;
        } else {
          used += (size_t)got;
          line[used] = '\0';
          char *nl;
          while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            on_line(line, arg);
            used -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, used + 1);
          }
          if (used == sizeof line - 1) /* a line longer than any result line: not one */
            used = 0;
        }
      }
      bc_reap(&rk);
    } else {
      /* polled, not a blocking wait: a signal or the end of the grace period must be acted on */
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
      bc_reap(&rk);
    }
  }
  close(fds[0]);
  bc_unlink_shm(l->job);
  for (int k = 0; k < 3; k++)
    sigaction(stop_sigs[k], &old_sa[k], NULL);
  if (bc_interrupted) { /* end as the signal would have ended us, with nothing left behind */
    int sig = bc_interrupted;
    fprintf(stderr, "tdist bench coll: interrupted (%s): stopped the %d ranks and removed the job's shared "
            "memory\n", strsignal(sig), l->ranks);
    free(rk.pids);
    signal(sig, SIG_DFL);
    raise(sig);
    return 1;
  }
  if (rk.failed >= 0 || rk.peer_failed >= 0) {
    int who = rk.failed >= 0 ? rk.failed : rk.peer_failed, st = rk.failed >= 0 ? rk.fstatus : rk.pstatus;
    char how[128];
    if (WIFSIGNALED(st))
      snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (WEXITSTATUS(st) == BC_EXIT_PEER)
      snprintf(how, sizeof how, "stopped because a peer failed");
    else
      snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
    fprintf(stderr, "tdist bench coll: rank %d of %d failed first (it %s; its own message, if any, is above); "
            "stopped the other ranks and removed the job's shared memory\n", who, l->ranks, how);
    rc = 1;
  }
  free(rk.pids);
  return rc;
}
