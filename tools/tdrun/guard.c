/* SPDX-License-Identifier: Apache-2.0
 * tdrun's guard: a helper process that outlives tdrun only to clean up after
 * it. A rank asks the kernel to kill it when tdrun dies (PR_SET_PDEATHSIG),
 * but that request is not inherited by what the rank forks: a rank that is
 * `sh -c 'sleep 7'` leaves its sleep behind when tdrun is SIGKILLed (tdrun
 * cannot run its own clean-up then). The guard learns every rank's process
 * group through a pipe whose only writer is tdrun; end-of-file on it means
 * tdrun is gone, and the guard kills those groups with SIGKILL and removes the
 * job's /dev/shm names. When the job ends normally tdrun kills the guard with
 * its other leftovers (tdrun__kill_leftovers) before the pipe closes, so the
 * guard never signals a group id that may since have been reused.
 *
 * The guard runs in a session (and process group) of its own: a signal sent
 * to tdrun's whole group, as `timeout -s KILL`, job schedulers and
 * `kill -9 -PGID` do, must not take the guard down with tdrun. tdrun reaps
 * the guard like any child; if it ends while the job runs, tdrun says so once
 * (tdrun__guard_pid), since from then on a SIGKILL of tdrun would again leave
 * the ranks' children behind.
 *
 * Not covered: a process a rank starts that leaves the rank's group itself
 * (setsid, setpgid). While tdrun lives it is re-parented to tdrun (a child
 * subreaper) and killed at the end; but once tdrun is SIGKILLed it is
 * re-parented past tdrun, to init or an outer subreaper, and nothing the
 * guard can see any longer ties it to this job: the guard knows groups, not
 * every pid, and learning every pid would mean tracking each fork of every
 * rank while the job runs (or making the guard their ancestor, which it is
 * not). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdrun.h"

static void tdrun__guard_run(int rfd, const char *job_id) {
  /* tdrun blocks signals for its signalfd; the guard ignores the ones a
   * terminal or a test harness sends to the whole group, so it lasts until
   * the pipe says tdrun is gone (SIGKILL still ends it). */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  /* Nothing to print: holding tdrun's stdout/stderr would keep a reader of
   * tdrun's output waiting for end-of-file after tdrun has gone. */
  int dn = open("/dev/null", O_RDWR);
  if (dn >= 0) {
    dup2(dn, 0);
    dup2(dn, 1);
    dup2(dn, 2);
    if (dn > 2)
      close(dn);
  }
  int32_t *groups = NULL;
  size_t n = 0, cap = 0, have = 0;
  unsigned char buf[4096];
  for (;;) {
    ssize_t r = read(rfd, buf + have, sizeof buf - have);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break; /* end-of-file: tdrun is gone */
    have += (size_t)r;
    size_t whole = have / sizeof(int32_t) * sizeof(int32_t);
    for (size_t off = 0; off < whole; off += sizeof(int32_t)) {
      if (n == cap) {
        size_t nc = cap ? 2 * cap : 64;
        int32_t *g = realloc(groups, nc * sizeof *g);
        if (!g)
          continue; /* keep what we have: the ranks still have PDEATHSIG */
        groups = g, cap = nc;
      }
      memcpy(&groups[n++], buf + off, sizeof(int32_t));
    }
    memmove(buf, buf + whole, have - whole);
    have -= whole;
  }
  for (size_t i = 0; i < n; i++)
    if (groups[i] > 1)
      killpg((pid_t)groups[i], SIGKILL);
  tdrun__remove_job_shm(job_id, 0);
  _exit(0);
}

static pid_t tdrun__guard = 0; /* the guard's pid; 0 when there is none */

pid_t tdrun__guard_pid(void) { return tdrun__guard; }

int tdrun__guard_start(const char *job_id) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[1]);
    setsid(); /* out of tdrun's group and session: see the file comment */
    tdrun__guard_run(p[0], job_id);
  }
  tdrun__guard = pid;
  close(p[0]);
  return p[1];
}

void tdrun__guard_add(int fd, pid_t group) {
  if (fd < 0 || group <= 0)
    return;
  int32_t g = (int32_t)group;
  ssize_t w;
  do
    w = write(fd, &g, sizeof g); /* 4 bytes: atomic on a pipe */
  while (w < 0 && errno == EINTR);
}
