/* SPDX-License-Identifier: Apache-2.0
 * A rank program for the tdrun tests: it misbehaves on request.
 *
 *   tdrun_helper DIR SPEC...     SPEC is R=ACTIONS (for rank R) or *=ACTIONS
 *
 * ACTIONS is a '+'-separated list run in order. Before the list runs, each
 * rank writes its pid to DIR/pid.R, does the set-up actions (child, escape,
 * shm, ignore_term) wherever they stand in the list, writes DIR/ready.R, and waits until
 * every rank is ready, so a test knows every process and segment it must
 * later find gone.
 *   child      fork a grandchild that sleeps in the rank's process group
 *   escape     fork a grandchild that leaves the group (setsid) and sleeps
 *   exit:N     exit with status N
 *   kill9      kill itself with SIGKILL
 *   after_dead:R  wait until rank R's process has ended (gone, or a zombie
 *              tdrun has not reaped yet): a rank reacting to a peer's death
 *   sleep      sleep until killed
 *   ignore_term  ignore SIGTERM from now on
 *   print:N    N lines on stdout, N on stderr, then a partial line on stdout
 *   env        print the TD_* variables as NAME=VALUE lines
 *   shm        create /dev/shm/tdist-$TD_JOB_ID-testR; write the id to DIR/job.R
 *   meet       wait until $TDRUN_TEST_MEET_COUNT files are in $TDRUN_TEST_MEET
 *              (after adding one): proves two jobs ran at the same time
 * With no action left, the rank exits with status 0. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static int rank, world;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Writes text to dir/name atomically (rename), so readers never see half. */
static void write_file(const char *d, const char *name, const char *text) {
  char tmp[4096], path[4096];
  snprintf(tmp, sizeof tmp, "%s/.%s.%ld", d, name, (long)getpid());
  snprintf(path, sizeof path, "%s/%s", d, name);
  FILE *f = fopen(tmp, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    perror("tdrun_helper: write_file");
    exit(90);
  }
}

static int count_files(const char *d, const char *prefix) {
  DIR *dp = opendir(d);
  int n = 0;
  struct dirent *e;
  while (dp && (e = readdir(dp)) != NULL)
    n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (dp)
    closedir(dp);
  return n;
}

static void wait_files(const char *d, const char *prefix, int count) {
  for (int i = 0; i < 3000; i++) {
    if (count_files(d, prefix) >= count)
      return;
    sleep_ms(10);
  }
  fprintf(stderr, "tdrun_helper: rank %d: gave up waiting for %d %s* files in %s\n", rank, count, prefix, d);
  exit(91);
}

static void sleep_forever(void) {
  for (;;)
    pause();
}

static void spawn_grandchild(int leave_group) {
  pid_t pid = fork();
  if (pid < 0) {
    perror("tdrun_helper: fork");
    exit(92);
  }
  if (pid == 0) {
    if (leave_group)
      setsid();
    sleep_forever();
  }
  char name[32], text[32];
  snprintf(name, sizeof name, "gc.%d", rank);
  snprintf(text, sizeof text, "%ld\n", (long)pid);
  write_file(dir, name, text);
}

static void print_lines(int n) {
  /* Long lines through stdio's 4 KiB buffer: writes end mid-line, so tdrun
   * must put lines back together. */
  char payload[201];
  memset(payload, 'a' + rank % 26, 200);
  payload[200] = '\0';
  for (int k = 0; k < n; k++)
    printf("rank %d line %d %s\n", rank, k, payload);
  for (int k = 0; k < n; k++)
    fprintf(stderr, "rank %d err %d\n", rank, k);
  printf("rank %d tail", rank);
  fflush(stdout);
}

static void do_shm(void) {
  const char *job = getenv("TD_JOB_ID");
  char name[256], file[32];
  snprintf(name, sizeof name, "/tdist-%s-test%d", job ? job : "none", rank);
  int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) {
    perror("tdrun_helper: shm_open");
    exit(93);
  }
  close(fd);
  snprintf(file, sizeof file, "job.%d", rank);
  write_file(dir, file, job ? job : "none");
}

static void do_meet(void) {
  const char *meet = getenv("TDRUN_TEST_MEET");
  const char *count = getenv("TDRUN_TEST_MEET_COUNT");
  if (!meet || !count) {
    fprintf(stderr, "tdrun_helper: meet needs TDRUN_TEST_MEET and TDRUN_TEST_MEET_COUNT\n");
    exit(94);
  }
  char name[128];
  snprintf(name, sizeof name, "meet.%s.%d", getenv("TD_JOB_ID"), rank);
  write_file(meet, name, "here\n");
  wait_files(meet, "meet.", atoi(count));
}

/* Whether process pid has ended: gone, or a zombie not yet reaped. */
static int ended(long pid) {
  if (kill((pid_t)pid, 0) != 0)
    return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static void wait_dead(int r) {
  char path[4096];
  snprintf(path, sizeof path, "%s/pid.%d", dir, r);
  FILE *f = fopen(path, "r");
  long pid = 0;
  if (!f || fscanf(f, "%ld", &pid) != 1) {
    fprintf(stderr, "tdrun_helper: after_dead: no pid of rank %d\n", r);
    exit(93);
  }
  fclose(f);
  while (!ended(pid))
    sleep_ms(1);
}

static void run_action(const char *a) {
  if (!strncmp(a, "exit:", 5)) {
    fflush(NULL);
    exit(atoi(a + 5));
  } else if (!strcmp(a, "kill9")) {
    fflush(NULL);
    raise(SIGKILL);
  } else if (!strncmp(a, "after_dead:", 11)) {
    wait_dead(atoi(a + 11));
  } else if (!strcmp(a, "sleep")) {
    sleep_forever();
  } else if (!strcmp(a, "ignore_term")) {
    signal(SIGTERM, SIG_IGN);
  } else if (!strncmp(a, "print:", 6)) {
    print_lines(atoi(a + 6));
  } else if (!strcmp(a, "env")) {
    const char *names[] = {"TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE", "TD_JOB_ID",
                           "TD_LAUNCHER"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      printf("%s=%s\n", names[i], getenv(names[i]) ? getenv(names[i]) : "(unset)");
    fflush(stdout);
  } else if (!strcmp(a, "meet")) {
    do_meet();
  } else if (strcmp(a, "child") && strcmp(a, "escape") && strcmp(a, "shm")) {
    fprintf(stderr, "tdrun_helper: unknown action '%s'\n", a);
    exit(95);
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || !getenv("TD_RANK") || !getenv("TD_WORLD_SIZE")) {
    fprintf(stderr, "usage: tdrun -n N tdrun_helper DIR SPEC...  (TD_RANK and TD_WORLD_SIZE must be set)\n");
    return 96;
  }
  dir = argv[1];
  rank = atoi(getenv("TD_RANK"));
  world = atoi(getenv("TD_WORLD_SIZE"));
  char actions[1024] = "";
  for (int i = 2; i < argc; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq)
      continue;
    int star = eq - argv[i] == 1 && argv[i][0] == '*';
    int mine = star || (argv[i][0] >= '0' && argv[i][0] <= '9' && atoi(argv[i]) == rank);
    /* A rank-specific spec wins over '*', whatever the order. */
    if (mine && (!star || actions[0] == '\0'))
      snprintf(actions, sizeof actions, "%s", eq + 1);
  }

  char name[32], text[32];
  snprintf(name, sizeof name, "pid.%d", rank);
  snprintf(text, sizeof text, "%ld\n", (long)getpid());
  write_file(dir, name, text);
  if (strstr(actions, "child"))
    spawn_grandchild(0);
  if (strstr(actions, "escape"))
    spawn_grandchild(1);
  if (strstr(actions, "shm"))
    do_shm();
  if (strstr(actions, "ignore_term"))
    signal(SIGTERM, SIG_IGN); /* before "ready": a test may signal right after */
  snprintf(name, sizeof name, "ready.%d", rank);
  write_file(dir, name, "1\n");
  wait_files(dir, "ready.", world);

  for (char *a = strtok(actions, "+"); a; a = strtok(NULL, "+"))
    run_action(a);
  return 0;
}
