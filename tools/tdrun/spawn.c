/* SPDX-License-Identifier: Apache-2.0
 * tdrun process control: starts ranks, signals them, and makes sure nothing
 * they started outlives the job.
 *
 * Each rank runs in its own process group (its pid is the group id), so a
 * signal reaches the rank and everything it forked. A rank also asks the
 * kernel to kill it if tdrun dies (PR_SET_PDEATHSIG), and tdrun is a child
 * subreaper, so processes that escape their group (setsid, double fork) are
 * re-parented to tdrun, which kills and reaps them when the job ends. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tdrun.h"

void tdrun__make_job_id(char *id) {
  unsigned long long r = 0;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
    /* No entropy source: pid, time and an address still make a unique enough id. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = ((unsigned long long)ts.tv_sec << 32) ^ (unsigned long long)ts.tv_nsec ^ (unsigned long long)(uintptr_t)&r;
  }
  snprintf(id, TDRUN_JOB_ID_MAX, "%ld-%016llx", (long)getpid(), r);
}

static const struct {
  int sig;
  const char *name;
} tdrun__signals[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},     {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},     {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},     {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"},       {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
    {SIGSYS, "SIGSYS"},
};

const char *tdrun__signal_name(int sig) {
  for (size_t i = 0; i < sizeof tdrun__signals / sizeof tdrun__signals[0]; i++)
    if (tdrun__signals[i].sig == sig)
      return tdrun__signals[i].name;
  return "unknown signal";
}

/* Runs in the child between fork and exec. tdrun is single-threaded, so
 * setenv and stdio are safe here. Never returns. */
static void tdrun__child(const tdrun_options *opts, const char *job_id, int rank, pid_t parent,
                         int out_w, int err_w) {
  setpgid(0, 0);
  /* If tdrun is already gone, PDEATHSIG would never fire: check after setting it. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
    _exit(127);

  /* Undo what tdrun changed for itself: blocked signals (read through a
   * signalfd) and ignored SIGPIPE would otherwise be inherited across exec. */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);

  if (out_w >= 0 && dup2(out_w, STDOUT_FILENO) < 0)
    _exit(127);
  if (err_w >= 0 && dup2(err_w, STDERR_FILENO) < 0)
    _exit(127);
  /* Only rank 0 may read tdrun's stdin, and not from a terminal: ranks are
   * not in the terminal's foreground group, so a read would stop them. */
  if (rank != 0 || isatty(STDIN_FILENO)) {
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      if (devnull != STDIN_FILENO)
        close(devnull);
    }
  }

  char num[16];
  snprintf(num, sizeof num, "%d", rank);
  setenv("TD_RANK", num, 1);
  setenv("TD_LOCAL_RANK", num, 1);
  snprintf(num, sizeof num, "%d", opts->nranks);
  setenv("TD_WORLD_SIZE", num, 1);
  setenv("TD_LOCAL_WORLD_SIZE", num, 1);
  setenv("TD_JOB_ID", job_id, 1);
  setenv("TD_LAUNCHER", "tdrun", 1);

  execv(opts->program_path, opts->argv);
  fprintf(stderr, "tdrun: rank %d: cannot execute '%s': %s\n", rank, opts->program_path, strerror(errno));
  _exit(127);
}

int tdrun__spawn_rank(const tdrun_options *opts, const char *job_id, int rank, tdrun_rank *r) {
  int out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
  /* Output always goes through tdrun, prefixed or not, so lines stay whole.
   * O_CLOEXEC: other ranks must not inherit this rank's pipe ends, or
   * end-of-file would wait for every rank. */
  if (pipe2(out_p, O_CLOEXEC) != 0 || pipe2(err_p, O_CLOEXEC) != 0) {
    fprintf(stderr, "tdrun: cannot create output pipes for rank %d: %s (too many ranks for the open-file limit?)\n",
            rank, strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (out_p[i] >= 0)
        close(out_p[i]);
      if (err_p[i] >= 0)
        close(err_p[i]);
    }
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "tdrun: cannot start rank %d: fork failed: %s\n", rank, strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (out_p[i] >= 0)
        close(out_p[i]);
      if (err_p[i] >= 0)
        close(err_p[i]);
    }
    return -1;
  }
  if (pid == 0)
    tdrun__child(opts, job_id, rank, parent, out_p[1], err_p[1]);
  /* Also set the group here: whichever of parent and child runs first, the
   * group exists before tdrun may signal it. EACCES (child already exec'd)
   * means the child did it. */
  setpgid(pid, pid);
  r->pid = pid;
  r->running = 1;
  r->status = 0;
  r->out_fd = out_p[0];
  r->err_fd = err_p[0];
  if (out_p[1] >= 0)
    close(out_p[1]);
  if (err_p[1] >= 0)
    close(err_p[1]);
  if (r->out_fd >= 0)
    fcntl(r->out_fd, F_SETFL, fcntl(r->out_fd, F_GETFL) | O_NONBLOCK);
  if (r->err_fd >= 0)
    fcntl(r->err_fd, F_SETFL, fcntl(r->err_fd, F_GETFL) | O_NONBLOCK);
  return 0;
}

void tdrun__signal_ranks(tdrun_rank *ranks, int n, int sig) {
  for (int i = 0; i < n; i++) {
    if (!ranks[i].running || ranks[i].pid <= 0)
      continue;
    if (killpg(ranks[i].pid, sig) != 0)
      kill(ranks[i].pid, sig); /* group not made yet (setpgid race): the rank alone */
  }
}

/* Pids whose parent is tdrun, from /proc; returns how many were signalled. */
static int tdrun__kill_children(pid_t self) {
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0)
      continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
    char *close_paren = strrchr(buf, ')');
    char state;
    long ppid;
    if (!close_paren || sscanf(close_paren + 1, " %c %ld", &state, &ppid) != 2 || ppid != (long)self)
      continue;
    found++;
    if (state != 'Z')
      kill((pid_t)pid, SIGKILL);
  }
  closedir(d);
  return found;
}

void tdrun__kill_leftovers(tdrun_rank *ranks, int n) {
  for (int i = 0; i < n; i++)
    if (ranks[i].pid > 0)
      killpg(ranks[i].pid, SIGKILL); /* ESRCH when the group is already empty */
  pid_t self = getpid();
  /* Each pass kills tdrun's current children; killing one can re-parent its
   * own children to tdrun, hence the loop. 200 passes of 5 ms bound the wait. */
  for (int pass = 0; pass < 200; pass++) {
    int status;
    while (waitpid(-1, &status, WNOHANG) > 0) {
    }
    if (tdrun__kill_children(self) == 0)
      break;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  int status;
  while (waitpid(-1, &status, WNOHANG) > 0) {
  }
}
