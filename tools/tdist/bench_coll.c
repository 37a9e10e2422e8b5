/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench coll`: times tdist's host collectives (all_gather,
 * reduce_scatter, all_reduce, all_to_all on f32, sum) from 8 B to 256 MiB on N
 * rank *processes*, and in the same run Open MPI's (bench/mpi_coll_bench.c
 * under mpirun, btl self,vader), and prints an nccl-tests-style table with
 * the ratio of bus bandwidths, optionally as JSON (tools layer).
 *
 * The parent forks N copies of this executable with TD_RANK & co. set (the
 * `--worker` mode below) and reads rank 0's result lines; then it runs the MPI
 * baseline and reads its lines. Both sides use the same rule: sizes as
 * nccl-tests counts them, counts rounded down to a multiple of N, warm-up,
 * ROUNDS timed rounds of `iters` calls after a barrier, the slowest rank's
 * mean per round, the median round. */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sys/statvfs.h>

#include "cli_common.h"
#include "out_check.h"
#include "bench.h"
#include "tdist/tdist.h"

enum { BC_ROUNDS = 5, BC_MAX_OPS = 4, BC_MAX_ROWS = 64 };
/* The largest --min/--max: each worker's symmetric heap holds two buffers of
 * --max bytes plus 64 MiB (and 128 bytes of alignment; bc_run_tdist), and a
 * heap is at most 1 TiB (TD_SYMM_HEAP_SIZE's limit). */
#define BC_MAX_BYTES ((((size_t)1 << 40) - ((size_t)64 << 20) - 128) / 2)

static const char *const bc_op_names[BC_MAX_OPS] = {"all_gather", "reduce_scatter", "all_reduce",
                                                    "all_to_all"};

typedef struct bc_opts {
  int ranks;
  unsigned ops; /* bit i: bc_op_names[i] */
  size_t min, max;
  int iters; /* per round; 0 = by size */
  const char *json;
  int no_mpi;
  int staged; /* tdist side uses ordinary (non-symmetric) buffers */
  int repeat; /* whole runs of both sides, alternating; the best of them is kept */
} bc_opts;

typedef struct bc_row {
  size_t bytes, count;
  double td_us, mpi_us; /* < 0: not measured */
} bc_row;

static void bc_usage(FILE *out) {
  fprintf(out,
          "usage: tdist bench coll [--ranks N] [--op all_gather|reduce_scatter|all_reduce|all_to_all|all]\n"
          "                        [--min BYTES] [--max BYTES] [--iters K] [--json FILE] [--staged] [--no-mpi]\n"
          "  --ranks N   rank processes on this host, 1..256 (default 2)\n"
          "  --op        collectives to time, comma-separated, each once (default all)\n"
          "  --min/--max sizes in bytes, doubling, K/M/G suffixes (powers of 1024; default 8 .. 256M;\n"
          "              4 .. %zu, just under 512G); the size is nccl-tests': the whole N-rank\n"
          "              buffer for all_gather, reduce_scatter, all_to_all\n"
          "  --iters K   calls per timed round, 1..1000000 (default: ~32 MiB of traffic, 2..1000);\n"
          "              %d rounds, median\n"
          "  --repeat R  run both sides R times, alternating, and keep each size's best time (default 1;\n"
          "              use 3+ on a shared machine)\n"
          "  --json FILE also write the results as JSON\n"
          "  --staged    tdist uses ordinary (non-symmetric) buffers: read in place by peers where the OS\n"
          "              allows (TD_COLL_SINGLE_COPY=1, the default), else staged through scratch\n"
          "  --no-mpi    skip the Open MPI baseline (mpirun ... td_mpi_coll_bench)\n",
          BC_MAX_BYTES, BC_ROUNDS);
}

static int bc_iters_for(size_t bytes, int fixed) {
  if (fixed > 0)
    return fixed;
  size_t it = ((size_t)32 << 20) / (bytes ? bytes : 1);
  return it < 2 ? 2 : it > 1000 ? 1000 : (int)it;
}

/* Elements of f32 for a size: rounded down to a multiple of n except all_reduce. */
static size_t bc_total(int op, size_t bytes, int n) {
  size_t total = bytes / 4;
  return op == 2 ? total : total - total % (size_t)n;
}

static double bc_busbw_factor(int op, int n) {
  return op == 2 ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
}

static int bc_parse(int argc, char **argv, bc_opts *o, int *worker) {
  *o = (bc_opts){.ranks = 2, .min = 8, .max = (size_t)256 << 20, .repeat = 1};
  static const char *const valued[] = {"--ranks", "--min", "--max", "--iters", "--repeat", "--json", "--op"};
  static const char *const flags[] = {"--staged", "--no-mpi", "--help"};
  td_cli_seen seen = {0}; /* every option once, not the last one silently winning */
  for (int i = 1; i < argc; i++) {
    char nbuf[32];
    const char *a, *v;
    int inl;
    int known = td_cli_arg(argc, argv, i, valued, sizeof valued / sizeof valued[0], nbuf, sizeof nbuf, &a, &v,
                           &inl);
    if (!strcmp(a, "--sizes")) { /* bench all_reduce's option: say what bench coll takes instead */
      fprintf(stderr, "tdist bench coll: --sizes is not an option of bench coll (it is bench all_reduce's): bench "
              "coll times every size from --min to --max, doubling (bytes, e.g. --min 8K --max 1G)\n");
      return -1;
    }
    if (known && !v) {
      fprintf(stderr, "tdist bench coll: %s needs a value\n", a);
      return -1;
    }
    if (inl && !known) {
      fprintf(stderr, "tdist bench coll: unknown or incomplete option '%s' (a flag takes no value)\n", a);
      return -1;
    }
    /* the value handlers below step over a separate value with i++; --opt=value has none */
    if (inl)
      i--;
    int flag = !strcmp(a, "--staged") || !strcmp(a, "--no-mpi");
    if ((known || flag) && !td_cli_once("tdist bench coll", &seen, a, !strcmp(a, "--op") ? "give every collective "
                                        "in one list (--op all_gather,all_reduce)" : NULL))
      return -1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      bc_usage(stdout);
      return 1;
    } else if (!strcmp(a, "--worker")) {
      *worker = 1;
    } else if (!strcmp(a, "--staged")) {
      o->staged = 1;
    } else if (!strcmp(a, "--no-mpi")) {
      o->no_mpi = 1;
    } else if (v && !strcmp(a, "--ranks")) {
      long long x;
      if (!td_cli_int("tdist bench coll", a, v, 1, 256, &x))
        return -1;
      o->ranks = (int)x, i++;
    } else if (v && (!strcmp(a, "--min") || !strcmp(a, "--max"))) {
      if (td_bench_bytes_arg("tdist bench coll", a, v, NULL, BC_MAX_BYTES, "each rank's symmetric heap holds 2 x "
                             "--max + 64 MiB, and a heap is at most 1 TiB", !strcmp(a, "--min") ? &o->min : &o->max))
        return -1;
      i++;

    } else if (v && !strcmp(a, "--iters")) {
      long long x;
      if (!td_cli_int("tdist bench coll", a, v, 1, 1000000, &x))
        return -1;
      o->iters = (int)x, i++;
    } else if (v && !strcmp(a, "--repeat")) {
      long long x;
      if (!td_cli_int("tdist bench coll", a, v, 1, 100, &x))
        return -1;
      o->repeat = (int)x, i++;
    } else if (v && !strcmp(a, "--json")) {
      o->json = v, i++;
    } else if (v && !strcmp(a, "--op")) {
      char buf[256];
      size_t vl = strlen(v);
      if (!vl || vl >= sizeof buf || v[0] == ',' || v[vl - 1] == ',' || strstr(v, ",,")) {
        fprintf(stderr, "tdist bench coll: --op expects a comma-separated list of all_gather, reduce_scatter, "
                        "all_reduce, all_to_all or all (no empty item), got '%s'\n", v);
        return -1;
      }
      snprintf(buf, sizeof buf, "%s", v);
      i++;
      /* a collective named twice, or beside 'all' which holds it, would still be timed once: refused as the
       * typo it usually is, naming it (as bench all_reduce's --sizes and ag_gemm's --models do) */
      int all = 0;
      for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned bits = !strcmp(t, "all") ? (1u << BC_MAX_OPS) - 1 : 0;
        for (int k = 0; k < BC_MAX_OPS; k++)
          if (!strcmp(t, bc_op_names[k]))
            bits = 1u << k;
        if (!bits) {
          fprintf(stderr, "tdist bench coll: --op %s: give all_gather, reduce_scatter, all_reduce, "
                          "all_to_all or all\n", t);
          return -1;
        }
        if (bits & o->ops) {
          int t_all = !strcmp(t, "all");
          if (t_all != all)
            fprintf(stderr, "tdist bench coll: --op %s: all already includes every collective; give all alone or "
                    "a list of collectives\n", v);
          else
            fprintf(stderr, "tdist bench coll: --op %s names %s twice\n", v, t);
          return -1;
        }
        all |= !strcmp(t, "all");
        o->ops |= bits;
      }
    } else if (a[0] != '-') { /* a word, not a misspelt option: say what bench coll takes */
      td_cli_positional("tdist bench coll", a, valued, sizeof valued / sizeof valued[0], flags,
                        sizeof flags / sizeof flags[0]);
      return -1;
    } else {
      fprintf(stderr, "tdist bench coll: unknown or incomplete option '%s'\n", a);
      bc_usage(stderr);
      return -1;
    }
  }
  if (!o->ops)
    o->ops = (1u << BC_MAX_OPS) - 1;
  if (o->min < 4 || o->min > o->max) {
    fprintf(stderr, "tdist bench coll: need 4 <= --min <= --max (got %zu, %zu)\n", o->min, o->max);
    return -1;
  }
  /* --max beyond the heap limit (BC_MAX_BYTES) was refused while parsing; refuse
   * here what /dev/shm cannot hold, instead of every worker failing on a
   * TD_SYMM_HEAP_SIZE the user never set. */
  struct statvfs vfs;
  size_t heap = 2 * (o->max + 64) + ((size_t)64 << 20);
  if (!*worker && statvfs("/dev/shm", &vfs) == 0) {
    unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    if ((unsigned long long)heap * (unsigned long long)o->ranks > avail) {
      fprintf(stderr, "tdist bench coll: --max %zu bytes with %d ranks needs %llu bytes of shared memory "
              "(%d x (2 x --max + 64 MiB)) but /dev/shm has %llu bytes free; lower --max or --ranks\n", o->max,
              o->ranks, (unsigned long long)heap * (unsigned long long)o->ranks, o->ranks, avail);
      return -1;
    }
  }
  return 0;
}

/* ---- worker: one rank process ---- */

static double bc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float bc_value(int rank, size_t i) { /* never zero, same rule as the MPI baseline */
  return (float)((i * 2654435761u + (size_t)rank * 40503u) % 1000 + 1) * 0.001f;
}

static td_status bc_call(td_team *t, int op, float *dst, const float *src, size_t total, int n) {
  switch (op) {
  case 0: return td_all_gather(t, dst, src, total / (size_t)n, TD_F32);
  case 1: return td_reduce_scatter(t, dst, src, total, TD_F32, TD_SUM);
  case 2: return td_all_reduce(t, dst, src, total, TD_F32, TD_SUM);
  default: return td_all_to_all(t, dst, src, total / (size_t)n, TD_F32);
  }
}

/* Checks one output element of the last call; returns 0 when right. */
static int bc_verify(int op, const float *dst, size_t total, int n, int r) {
  size_t per = total / (size_t)n, i = per ? per - 1 : 0;
  double want, got;
  switch (op) {
  case 0: /* block of rank n-1, its element i */
    want = bc_value(n - 1, i), got = dst[(size_t)(n - 1) * per + i];
    break;
  case 1: /* own chunk, first element: sum over ranks of element r*per */
  case 2:
    want = 0;
    for (int p = 0; p < n; p++)
      want += bc_value(p, op == 1 ? (size_t)r * per : total - 1);
    got = dst[op == 1 ? 0 : total - 1];
    return got < want * (1 - 1e-5) - 1e-6 || got > want * (1 + 1e-5) + 1e-6;
  default: /* from rank n-1, element i of the block meant for rank r */
    want = bc_value(n - 1, (size_t)r * per + i), got = dst[(size_t)(n - 1) * per + i];
    break;
  }
  return want != got;
}

static int bc_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int bc_worker(const bc_opts *o) {
  td_world *w = NULL;
  if (td_world_init(NULL, &w) != TD_OK) {
    fprintf(stderr, "tdist bench coll: worker: td_world_init: %s\n", td_last_error());
    return 1;
  }
  td_team *t = td_world_team(w);
  const int n = td_world_size(w), r = td_world_rank(w);
  if (n <= 2) { /* as mpirun binds 1-2 ranks to cores */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(r % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  float *src = NULL, *dst = NULL;
  td_status st = TD_OK;
  if (o->staged) {
    src = malloc(o->max + 64), dst = malloc(o->max + 64);
    if (!src || !dst)
      st = TD_ERR_NO_MEMORY;
  } else {
    st = td_symm_alloc(t, o->max + 64, 0, (void **)&src);
    if (st == TD_OK)
      st = td_symm_alloc(t, o->max + 64, 0, (void **)&dst);
  }
  if (st != TD_OK) {
    fprintf(stderr, "tdist bench coll: rank %d: buffers of %zu bytes: %s\n", r, o->max, td_last_error());
    td_world_finalize(w);
    return 1;
  }
  for (size_t i = 0; i < o->max / 4; i++)
    src[i] = bc_value(r, i), dst[i] = 0.0f;
  int rc = 0;
  for (int op = 0; op < BC_MAX_OPS && !rc; op++) {
    if (!(o->ops & (1u << op)))
      continue;
    for (size_t bytes = o->min; bytes <= o->max && !rc; bytes *= 2) {
      size_t total = bc_total(op, bytes, n);
      if (!total)
        continue;
      int iters = bc_iters_for(bytes, o->iters), warm = iters / 10 < 2 ? 2 : iters / 10;
      for (int i = 0; i < warm && st == TD_OK; i++)
        st = bc_call(t, op, dst, src, total, n);
      if (st == TD_OK && bc_verify(op, dst, total, n, r)) {
        fprintf(stderr, "tdist bench coll: rank %d: %s of %zu bytes gave a wrong result\n", r,
                bc_op_names[op], total * 4);
        rc = 1;
        break;
      }
      double rounds[BC_ROUNDS];
      for (int k = 0; k < BC_ROUNDS && st == TD_OK; k++) {
        st = td_team_barrier(t);
        double t0 = bc_now();
        for (int i = 0; i < iters && st == TD_OK; i++)
          st = bc_call(t, op, dst, src, total, n);
        double mine = (bc_now() - t0) / iters, worst = 0;
        if (st == TD_OK)
          st = td_all_reduce(t, &worst, &mine, 1, TD_F64, TD_MAX);
        rounds[k] = worst * 1e6;
      }
      if (st != TD_OK) {
        fprintf(stderr, "tdist bench coll: rank %d: %s of %zu bytes: %s: %s\n", r, bc_op_names[op],
                total * 4, td_status_name(st), td_last_error());
        rc = 1;
        break;
      }
      qsort(rounds, BC_ROUNDS, sizeof rounds[0], bc_cmp_double);
      if (r == 0) {
        printf("TDB %s %zu %zu %.3f\n", bc_op_names[op], total * 4, total, rounds[BC_ROUNDS / 2]);
        fflush(stdout);
      }
    }
  }
  if (td_world_finalize(w) != TD_OK && !rc) {
    fprintf(stderr, "tdist bench coll: rank %d: td_world_finalize: %s\n", r, td_last_error());
    rc = 1;
  }
  return rc;
}

/* ---- parent: spawn, read, compare, print ---- */

/* Stores a result line "<TAG> op bytes count us" into rows[op][]. */
static void bc_take_line(const char *line, const char *tag, bc_row rows[][BC_MAX_ROWS], int nrows[],
                         int is_mpi) {
  char op[32];
  size_t bytes, count;
  double us;
  char fmt[64];
  snprintf(fmt, sizeof fmt, "%s %%31s %%zu %%zu %%lf", tag);
  if (sscanf(line, fmt, op, &bytes, &count, &us) != 4)
    return;
  for (int k = 0; k < BC_MAX_OPS; k++) {
    if (strcmp(op, bc_op_names[k]))
      continue;
    int i = 0;
    while (i < nrows[k] && rows[k][i].bytes != bytes)
      i++;
    if (i == nrows[k]) {
      if (i == BC_MAX_ROWS)
        return;
      rows[k][i] = (bc_row){bytes, count, -1, -1};
      nrows[k]++;
    }
    double *slot = is_mpi ? &rows[k][i].mpi_us : &rows[k][i].td_us;
    if (*slot < 0 || us < *slot) /* best of --repeat runs */
      *slot = us;
  }
}

/* Forks the N tdist rank processes and reads rank 0's lines. */
static int bc_run_tdist(const bc_opts *o, int argc, char **argv, bc_row rows[][BC_MAX_ROWS], int nrows[]) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) {
    fprintf(stderr, "tdist bench coll: cannot find this executable: %s\n", strerror(errno));
    return 1;
  }
  exe[len] = '\0';
  int fds[2];
  if (pipe(fds)) {
    fprintf(stderr, "tdist bench coll: pipe: %s\n", strerror(errno));
    return 1;
  }
  char job[64], heap[32], nbuf[16];
  snprintf(job, sizeof job, "bench%ld", (long)getpid());
  snprintf(heap, sizeof heap, "%zu", 2 * (o->max + 64) + ((size_t)64 << 20));
  snprintf(nbuf, sizeof nbuf, "%d", o->ranks);
  char **wargv = calloc((size_t)argc + 4, sizeof *wargv);
  pid_t *pids = calloc((size_t)o->ranks, sizeof *pids);
  if (!wargv || !pids) {
    fprintf(stderr, "tdist bench coll: out of memory\n");
    return 1;
  }
  wargv[0] = exe;
  wargv[1] = "bench";
  for (int i = 0; i < argc; i++)
    wargv[2 + i] = argv[i];
  wargv[2 + argc] = "--worker";
  int rc = 0;
  for (int r = 0; r < o->ranks; r++) {
    pids[r] = fork();
    if (pids[r] < 0) {
      fprintf(stderr, "tdist bench coll: fork: %s\n", strerror(errno));
      rc = 1;
      break;
    }
    if (pids[r] == 0) {
      char rb[16];
      snprintf(rb, sizeof rb, "%d", r);
      setenv("TD_RANK", rb, 1);
      setenv("TD_LOCAL_RANK", rb, 1);
      setenv("TD_WORLD_SIZE", nbuf, 1);
      setenv("TD_LOCAL_WORLD_SIZE", nbuf, 1);
      setenv("TD_JOB_ID", job, 1);
      setenv("TD_SYMM_HEAP_SIZE", heap, 1);
      setenv("TD_TRANSPORT", "shm", 1);
      if (r == 0)
        dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(exe, wargv);
      fprintf(stderr, "tdist bench coll: exec %s: %s\n", exe, strerror(errno));
      _exit(127);
    }
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  char line[512];
  while (in && fgets(line, sizeof line, in))
    bc_take_line(line, "TDB", rows, nrows, 0);
  if (in)
    fclose(in);
  for (int r = 0; r < o->ranks; r++) {
    int status = 0;
    if (pids[r] > 0 && (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))) {
      if (!rc)
        fprintf(stderr, "tdist bench coll: tdist rank %d failed (status 0x%x)\n", r, status);
      rc = 1;
    }
  }
  free(wargv);
  free(pids);
  return rc;
}

/* Runs bench/mpi_coll_bench.c's program under mpirun and reads its lines. */
static int bc_run_mpi(const bc_opts *o, bc_row rows[][BC_MAX_ROWS], int nrows[]) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0)
    return 1;
  exe[len] = '\0';
  char *slash = strrchr(exe, '/');
  snprintf(slash + 1, sizeof exe - (size_t)(slash + 1 - exe), "td_mpi_coll_bench");
  if (access(exe, X_OK)) {
    fprintf(stderr, "tdist bench coll: no MPI baseline (%s not built: is Open MPI installed?); "
                    "use --no-mpi\n", exe);
    return 1;
  }
  char ops[128] = "";
  for (int k = 0; k < BC_MAX_OPS; k++)
    if (o->ops & (1u << k))
      snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", ops[0] ? "," : "", bc_op_names[k]);
  char cmd[8192];
  snprintf(cmd, sizeof cmd,
           "mpirun --allow-run-as-root --oversubscribe -n %d --mca btl self,vader '%s' %s %zu %zu %d",
           o->ranks, exe, ops, o->min, o->max, o->iters);
  FILE *p = popen(cmd, "r");
  if (!p) {
    fprintf(stderr, "tdist bench coll: cannot run '%s': %s\n", cmd, strerror(errno));
    return 1;
  }
  char line[512];
  while (fgets(line, sizeof line, p))
    bc_take_line(line, "MPIB", rows, nrows, 1);
  int status = pclose(p);
  if (status) {
    fprintf(stderr, "tdist bench coll: '%s' failed (status 0x%x)\n", cmd, status);
    return 1;
  }
  return 0;
}

static void bc_print(const bc_opts *o, bc_row rows[][BC_MAX_ROWS], const int nrows[]) {
  const int n = o->ranks;
  printf("# tdist bench coll: %d rank processes, float, sum; tdist %s buffers; baseline %s\n", n,
         o->staged ? "ordinary" : "symmetric",
         o->no_mpi ? "none" : "Open MPI (mpirun --mca btl self,vader)");
  printf("# time: slowest rank's mean per round, median of %d rounds, best of %d run(s); busbw factors "
         "of nccl-tests; ratio = tdist busbw / MPI busbw\n", BC_ROUNDS, o->repeat);
  for (int k = 0; k < BC_MAX_OPS; k++) {
    if (!(o->ops & (1u << k)) || !nrows[k])
      continue;
    printf("#\n# %s\n", bc_op_names[k]);
    printf("# %12s %12s %6s | %10s %8s %8s | %10s %8s %8s | %6s\n", "size(B)", "count", "type",
           "tdist(us)", "algbw", "busbw", "MPI(us)", "algbw", "busbw", "ratio");
    for (int i = 0; i < nrows[k]; i++) {
      const bc_row *row = &rows[k][i];
      double f = bc_busbw_factor(k, n);
      printf("  %12zu %12zu %6s |", row->bytes, row->count, "float");
      if (row->td_us >= 0)
        printf(" %10.2f %8.2f %8.2f |", row->td_us, row->bytes / row->td_us / 1e3,
               row->bytes / row->td_us / 1e3 * f);
      else
        printf(" %10s %8s %8s |", "-", "-", "-");
      if (row->mpi_us >= 0)
        printf(" %10.2f %8.2f %8.2f |", row->mpi_us, row->bytes / row->mpi_us / 1e3,
               row->bytes / row->mpi_us / 1e3 * f);
      else
        printf(" %10s %8s %8s |", "-", "-", "-");
      if (row->td_us > 0 && row->mpi_us > 0)
        printf(" %6.2f\n", row->mpi_us / row->td_us);
      else
        printf(" %6s\n", "-");
    }
  }
}

static int bc_write_json(const bc_opts *o, bc_row rows[][BC_MAX_ROWS], const int nrows[]) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "bench", "coll");
  cJSON_AddStringToObject(root, "tdist_version", td_version());
  cJSON_AddNumberToObject(root, "ranks", o->ranks);
  cJSON_AddStringToObject(root, "dtype", "f32");
  cJSON_AddStringToObject(root, "tdist_buffers", o->staged ? "ordinary" : "symmetric");
  cJSON_AddStringToObject(root, "baseline", o->no_mpi ? "none" : "openmpi btl self,vader");
  cJSON_AddNumberToObject(root, "rounds", BC_ROUNDS);
  cJSON_AddNumberToObject(root, "repeat", o->repeat);
  cJSON *res = cJSON_AddArrayToObject(root, "results");
  for (int k = 0; k < BC_MAX_OPS; k++)
    for (int i = 0; i < nrows[k]; i++) {
      const bc_row *row = &rows[k][i];
      double f = bc_busbw_factor(k, o->ranks);
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "op", bc_op_names[k]);
      cJSON_AddNumberToObject(e, "bytes", (double)row->bytes);
      cJSON_AddNumberToObject(e, "count", (double)row->count);
      if (row->td_us >= 0) {
        cJSON_AddNumberToObject(e, "tdist_us", row->td_us);
        cJSON_AddNumberToObject(e, "tdist_busbw_gbs", row->bytes / row->td_us / 1e3 * f);
      }
      if (row->mpi_us >= 0) {
        cJSON_AddNumberToObject(e, "mpi_us", row->mpi_us);
        cJSON_AddNumberToObject(e, "mpi_busbw_gbs", row->bytes / row->mpi_us / 1e3 * f);
      }
      if (row->td_us > 0 && row->mpi_us > 0)
        cJSON_AddNumberToObject(e, "ratio", row->mpi_us / row->td_us);
      cJSON_AddItemToArray(res, e);
    }
  char *text = cJSON_Print(root);
  int rc = td_cli_write_text("tdist bench coll", o->json, text) != 0;
  cJSON_free(text);
  cJSON_Delete(root);
  return rc;
}

int td_bench_coll(int argc, char **argv) {
  bc_opts o;
  int worker = 0;
  int p = bc_parse(argc, argv, &o, &worker);
  if (p)
    return p > 0 ? 0 : 2;
  if (worker)
    return bc_worker(&o);
  if (td_cli_check_output("tdist bench coll", "--json", o.json))
    return 2;
  static bc_row rows[BC_MAX_OPS][BC_MAX_ROWS];
  int nrows[BC_MAX_OPS] = {0};
  fflush(stdout);
  int rc = 0;
  for (int k = 0; k < o.repeat && !rc; k++) {
    rc = bc_run_tdist(&o, argc, argv, rows, nrows);
    if (!rc && !o.no_mpi && bc_run_mpi(&o, rows, nrows))
      rc = 1;
  }
  bc_print(&o, rows, nrows);
  /* A failed run writes no JSON: an existing file keeps its results rather
   * than being replaced by an empty list. */
  if (o.json && rc)
    fprintf(stderr, "tdist bench coll: the run failed; %s not written\n", o.json);
  else if (o.json && bc_write_json(&o, rows, nrows))
    rc = 1;
  return rc;
}
