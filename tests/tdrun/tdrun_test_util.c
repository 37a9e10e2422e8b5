/* SPDX-License-Identifier: Apache-2.0
 * Support for the tdrun tests (see tdrun_test_util.h). Failures to set up
 * (no tdrun, fork failure) abort the test process with a message: they mean
 * the test could not run, not that tdrun is wrong. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tdrun/tdrun_test_util.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void tdt_die(const char *what) {
  fprintf(stderr, "tdrun test setup failed: %s: %s\n", what, strerror(errno));
  abort();
}

static const char *tdt_env_path(const char *var, const char *file, char *buf, size_t size) {
  const char *v = getenv(var);
  if (!v) {
    fprintf(stderr, "tdrun test setup failed: %s is not set (run the test through ctest)\n", var);
    abort();
  }
  if (!file)
    return v;
  snprintf(buf, size, "%s/%s", v, file);
  return buf;
}

const char *tdt_tdrun(void) { return tdt_env_path("TD_TDRUN", NULL, NULL, 0); }

const char *tdt_helper(void) {
  static char buf[4096];
  return tdt_env_path("TD_TEST_DIR", "tdrun_helper", buf, sizeof buf);
}

pid_t tdt_start(char *const argv[], int *out_fd, int *err_fd) {
  int op[2], ep[2];
  if (pipe(op) != 0 || pipe(ep) != 0)
    tdt_die("pipe");
  pid_t pid = fork();
  if (pid < 0)
    tdt_die("fork");
  if (pid == 0) {
    dup2(op[1], STDOUT_FILENO);
    dup2(ep[1], STDERR_FILENO);
    close(op[0]);
    close(op[1]);
    close(ep[0]);
    close(ep[1]);
    execv(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(op[1]);
  close(ep[1]);
  *out_fd = op[0];
  *err_fd = ep[0];
  return pid;
}

static void tdt_append(char **buf, size_t *len, const char *p, size_t n) {
  char *nb = realloc(*buf, *len + n + 1);
  if (!nb)
    tdt_die("realloc");
  memcpy(nb + *len, p, n);
  *len += n;
  nb[*len] = '\0';
  *buf = nb;
}

void tdt_finish(pid_t pid, int out_fd, int err_fd, tdt_result *res) {
  size_t out_len = 0, err_len = 0;
  res->out = NULL;
  res->err = NULL;
  tdt_append(&res->out, &out_len, "", 0);
  tdt_append(&res->err, &err_len, "", 0);
  int fds[2] = {out_fd, err_fd};
  while (fds[0] >= 0 || fds[1] >= 0) {
    struct pollfd p[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      tdt_die("poll");
    }
    for (int k = 0; k < 2; k++) {
      if (fds[k] < 0 || !p[k].revents)
        continue;
      char buf[65536];
      ssize_t got = read(fds[k], buf, sizeof buf);
      if (got > 0) {
        if (k == 0)
          tdt_append(&res->out, &out_len, buf, (size_t)got);
        else
          tdt_append(&res->err, &err_len, buf, (size_t)got);
      } else if (got == 0 || errno != EINTR) {
        close(fds[k]);
        fds[k] = -1;
      }
    }
  }
  while (waitpid(pid, &res->status, 0) < 0) {
    if (errno != EINTR)
      tdt_die("waitpid");
  }
}

void tdt_run(char *const argv[], tdt_result *res) {
  int out_fd, err_fd;
  pid_t pid = tdt_start(argv, &out_fd, &err_fd);
  tdt_finish(pid, out_fd, err_fd, res);
}

void tdt_result_free(tdt_result *res) {
  free(res->out);
  free(res->err);
  res->out = res->err = NULL;
}

int tdt_exit_code(const tdt_result *res) { return WIFEXITED(res->status) ? WEXITSTATUS(res->status) : -1; }

char *tdt_mkdtemp(void) {
  char *dir = strdup("/tmp/tdrun-test-XXXXXX");
  if (!dir || !mkdtemp(dir))
    tdt_die("mkdtemp");
  return dir;
}

void tdt_rmdir(char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
        continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
  free(dir);
}

static int tdt_count_prefix(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int n = 0;
  size_t plen = strlen(prefix);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strncmp(e->d_name, prefix, plen) == 0;
  closedir(d);
  return n;
}

static void tdt_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int tdt_wait_files(const char *dir, const char *prefix, int count) {
  for (int i = 0; i < 3000; i++) {
    if (tdt_count_prefix(dir, prefix) >= count)
      return 0;
    tdt_sleep_ms(10);
  }
  return -1;
}

char *tdt_read_file(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  char *buf = NULL;
  size_t len = 0;
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
    tdt_append(&buf, &len, chunk, got);
  fclose(f);
  if (!buf)
    tdt_append(&buf, &len, "", 0);
  return buf;
}

pid_t tdt_read_pid(const char *dir, const char *name) {
  char *text = tdt_read_file(dir, name);
  pid_t pid = text ? (pid_t)atol(text) : 0;
  free(text);
  return pid;
}

int tdt_pid_alive(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = '\0';
  char *paren = strrchr(buf, ')');
  char state = 'Z';
  if (paren)
    sscanf(paren + 1, " %c", &state);
  return state != 'Z' && state != 'X';
}

int tdt_pid_alive_after_wait(pid_t pid) {
  /* tdrun kills and reaps before it exits, so this normally returns at once;
   * the wait only covers a zombie being reaped by an init that is slow. */
  for (int i = 0; i < 500 && tdt_pid_alive(pid); i++)
    tdt_sleep_ms(10);
  return tdt_pid_alive(pid);
}

int tdt_count_job_shm(const char *job_id) {
  char prefix[256];
  snprintf(prefix, sizeof prefix, "tdist-%s", job_id);
  return tdt_count_prefix("/dev/shm", prefix);
}

int tdt_count_lines(const char *text) {
  int n = 0;
  const char *p = text;
  for (; *p; p++)
    n += *p == '\n';
  if (p != text && p[-1] != '\n')
    n++;
  return n;
}

static char **tdt_helper_argv(const char *dir, const char *const *opts, const char *const *specs) {
  size_t n = 0, m = 0;
  while (opts && opts[n])
    n++;
  while (specs && specs[m])
    m++;
  char **argv = calloc(n + m + 5, sizeof *argv);
  if (!argv)
    tdt_die("calloc");
  size_t k = 0;
  argv[k++] = (char *)tdt_tdrun();
  for (size_t i = 0; i < n; i++)
    argv[k++] = (char *)opts[i];
  argv[k++] = (char *)tdt_helper();
  argv[k++] = (char *)dir;
  for (size_t i = 0; i < m; i++)
    argv[k++] = (char *)specs[i];
  return argv;
}

pid_t tdt_start_helper(const char *dir, const char *const *opts, const char *const *specs, int *out_fd, int *err_fd) {
  char **argv = tdt_helper_argv(dir, opts, specs);
  pid_t pid = tdt_start(argv, out_fd, err_fd);
  free(argv);
  return pid;
}

void tdt_run_helper(const char *dir, const char *const *opts, const char *const *specs, tdt_result *res) {
  int out_fd, err_fd;
  pid_t pid = tdt_start_helper(dir, opts, specs, &out_fd, &err_fd);
  tdt_finish(pid, out_fd, err_fd, res);
}

int tdt_expect_all_gone(const char *dir, int nranks) {
  int checked = 0;
  for (int r = 0; r < nranks; r++) {
    const char *kinds[] = {"pid", "gc"};
    for (int k = 0; k < 2; k++) {
      char name[32];
      snprintf(name, sizeof name, "%s.%d", kinds[k], r);
      pid_t pid = tdt_read_pid(dir, name);
      if (pid <= 0)
        continue;
      checked++;
      int alive = tdt_pid_alive_after_wait(pid);
      if (alive) {
        fprintf(stderr, "%s (pid %ld) still runs after tdrun ended\n", name, (long)pid);
        kill(pid, SIGKILL);
      }
      assert_false(alive);
    }
  }
  return checked;
}
