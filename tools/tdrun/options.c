/* SPDX-License-Identifier: Apache-2.0
 * tdrun command-line parsing: `tdrun -n N [options] [--] PROGRAM [ARGS]`.
 *
 * Every mistake gets one line saying what was given and what is allowed, then
 * the exit status 2 (the convention of command-line tools for bad usage).
 * The program is resolved here, before any rank starts, so that a typo fails
 * once and clearly instead of N times inside the ranks. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tdist/version.h"
#include "tdrun.h"

static const char tdrun__usage_line[] = "usage: tdrun -n N [options] [--] PROGRAM [ARGS...]";

static void tdrun__help(FILE *out) {
  fprintf(out,
          "%s\n"
          "\n"
          "Starts N ranks of PROGRAM on this host, each with the environment the tdist\n"
          "runtime reads: TD_RANK, TD_WORLD_SIZE, TD_LOCAL_RANK, TD_LOCAL_WORLD_SIZE,\n"
          "TD_JOB_ID (unique to this run) and TD_LAUNCHER=tdrun.\n"
          "\n"
          "options:\n"
          "  -n N, --np N, -np N  number of ranks to start (1 to %d; required)\n"
          "  --timeout SEC        stop the job after SEC seconds (exit status 124)\n"
          "  --no-prefix, -q      do not prefix output lines with \"[RANK] \"\n"
          "  -v, --verbose        print the job id and how each rank ended\n"
          "  -h, --help           print this help\n"
          "  --version            print tdrun's version\n"
          "  --                   end of options (for a program whose name starts with '-')\n"
          "\n"
          "If a rank exits with a non-zero status or is killed by a signal, tdrun stops\n"
          "the others (SIGTERM, then SIGKILL after %d ms), names the rank and exits with\n"
          "its status (128+signal for a signal). SIGINT, SIGTERM and SIGHUP sent to tdrun\n"
          "are forwarded to every rank. When the job ends, tdrun removes its shared\n"
          "memory (/dev/shm/tdist-<TD_JOB_ID>*) and any process the ranks left behind.\n",
          tdrun__usage_line, TDRUN_MAX_RANKS, TDRUN_GRACE_MS);
}

static int tdrun__bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int tdrun__bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tdrun: ");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s   (tdrun --help lists the options)\n", tdrun__usage_line);
  return -1;
}

static int tdrun__parse_nranks(const char *text, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (!(text[0] >= '0' && text[0] <= '9') || *end != '\0' || errno != 0 || v < 1 || v > TDRUN_MAX_RANKS)
    return -1; /* digits only: strtol would skip leading spaces, and we refuse trailing ones */
  *out = (int)v;
  return 0;
}

static int tdrun__parse_seconds(const char *text, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (!((text[0] >= '0' && text[0] <= '9') || text[0] == '.') || *end != '\0' || errno != 0 || !isfinite(v) ||
      v <= 0 || v > 1e7)
    return -1;
  *out = v;
  return 0;
}

/* Finds the executable the way execvp would, but reports why it cannot run. */
static int tdrun__resolve_program(tdrun_options *opts) {
  const char *prog = opts->program;
  struct stat st;
  if (strchr(prog, '/')) {
    if (stat(prog, &st) != 0)
      return tdrun__bad("program '%s' does not exist (give the path of an executable file)", prog);
    if (S_ISDIR(st.st_mode))
      return tdrun__bad("program '%s' is a directory (give the path of an executable file)", prog);
    if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0)
      return tdrun__bad("program '%s' is not executable (need a regular file with execute permission)",
                        prog);
    opts->program_path = strdup(prog);
    return opts->program_path ? 0 : tdrun__bad("out of memory resolving '%s'", prog);
  }
  const char *path = getenv("PATH");
  if (!path || !*path)
    path = "/usr/local/bin:/usr/bin:/bin";
  int seen_not_executable = 0;
  for (const char *p = path;; ) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char cand[PATH_MAX];
    /* An empty PATH entry means the current directory. */
    int n = snprintf(cand, sizeof cand, "%.*s%s%s", (int)len, len ? p : ".", "/", prog);
    if (n > 0 && (size_t)n < sizeof cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(cand, X_OK) == 0) {
        opts->program_path = strdup(cand);
        return opts->program_path ? 0 : tdrun__bad("out of memory resolving '%s'", prog);
      }
      seen_not_executable = 1;
    }
    if (!colon)
      break;
    p = colon + 1;
  }
  if (seen_not_executable)
    return tdrun__bad("program '%s' was found in PATH but is not executable "
                      "(need a regular file with execute permission)", prog);
  return tdrun__bad("program '%s' not found in PATH (give a path such as ./%s, or a name found in PATH)",
                    prog, prog);
}

/* Value of an option given as "--opt VALUE" or "--opt=VALUE"; NULL if missing. */
static const char *tdrun__value(int argc, char **argv, int *i, const char *arg, size_t name_len) {
  if (arg[name_len] == '=')
    return arg + name_len + 1;
  if (*i + 1 >= argc)
    return NULL;
  return argv[++*i];
}

int tdrun__parse_options(int argc, char **argv, tdrun_options *opts) {
  memset(opts, 0, sizeof *opts);
  opts->prefix = 1;
  int i = 1;
  const char *n_given = NULL, *timeout_given = NULL; /* an option with a value given twice is an error */
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0')
      break; /* the program ("-" alone is a name, not an option) */
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      tdrun__help(stdout);
      return 1;
    }
    if (!strcmp(a, "--version")) {
      printf("tdrun (tdist) %s\n", TD_VERSION_STRING);
      return 1;
    }
    if (!strcmp(a, "--no-prefix") || !strcmp(a, "-q")) {
      opts->prefix = 0;
      continue;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      opts->verbose = 1;
      continue;
    }
    const char *name = NULL, *val = NULL;
    if (!strcmp(a, "-n") || !strncmp(a, "-n=", 3)) {
      name = "-n";
      val = tdrun__value(argc, argv, &i, a, 2);
    } else if (!strncmp(a, "-n", 2) && a[2] >= '0' && a[2] <= '9') {
      name = "-n";
      val = a + 2;
    } else if (!strcmp(a, "--np") || !strncmp(a, "--np=", 5)) {
      name = "--np";
      val = tdrun__value(argc, argv, &i, a, 4);
    } else if (!strcmp(a, "-np")) {
      name = "-np";
      val = tdrun__value(argc, argv, &i, a, 3);
    } else if (!strcmp(a, "--timeout") || !strncmp(a, "--timeout=", 10)) {
      if (timeout_given)
        return tdrun__bad("--timeout is given twice ('%s' and '%s'); give it once", timeout_given, a);
      timeout_given = a;
      if (!(val = tdrun__value(argc, argv, &i, a, 9)))
        return tdrun__bad("%s needs a value: a number of seconds greater than 0", "--timeout");
      if (tdrun__parse_seconds(val, &opts->timeout_s) != 0)
        return tdrun__bad("--timeout needs a number of seconds greater than 0 (up to 1e7), not '%s'", val);
      continue;
    } else {
      return tdrun__bad("unknown option '%s' (allowed: -n/--np N, --timeout SEC, --no-prefix/-q, -v, "
                        "--help, --version; put -- before a program whose name starts with '-')", a);
    }
    if (n_given)
      return tdrun__bad("the number of ranks is given twice (%s and %s); give -n once", n_given, a);
    n_given = a;
    if (!val)
      return tdrun__bad("%s needs a value: the number of ranks, from 1 to " TDRUN_STR(TDRUN_MAX_RANKS), name);
    if (tdrun__parse_nranks(val, &opts->nranks) != 0)
      return tdrun__bad("%s needs the number of ranks: a whole number from 1 to " TDRUN_STR(TDRUN_MAX_RANKS)
                        ", not '%s'", name, val);
  }
  if (i >= argc)
    return tdrun__bad("no program given: name the program each rank runs, after the options");
  if (opts->nranks == 0)
    return tdrun__bad("-n N is required: the number of ranks to start, from 1 to %d", TDRUN_MAX_RANKS);
  opts->program = argv[i];
  opts->argv = argv + i;
  return tdrun__resolve_program(opts);
}
