/* SPDX-License-Identifier: Apache-2.0
 * `tdist run PROGRAM --ranks N ...`: the main job. Compiles a `.td` program,
 * runs the overlapped plan and the sequential baseline (each collective done
 * before its consumer starts, same tiles) on a local world of N ranks with
 * seeded random inputs, checks both against the f64 reference, and prints
 * time, speedup, the share of communication hidden (from the executor's
 * trace) and the error. Exit status: 0 PASS (or ran, without --check); 1 the
 * check FAILed or the run failed on this machine; 2 a usage or input error,
 * found before anything runs: a bad option, an unreadable program, --input
 * or calibration file, a program that does not parse or compile (for its
 * --dims and --ranks), or a run that cannot fit host memory. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_ops.h" /* bo_devices: the same GPU check as tdist bench */
#include "cli_common.h"
#include "cli_options.h"
#include "out_check.h"
#include "commands.h"
#include "tdist/tdist.h"

static void td__run_usage(FILE *out) {
  fprintf(out,
          "usage: tdist run PROGRAM.td --ranks N [options]\n"
          "  --ranks N            ranks of the local world (threads), 1..64\n"
          "  --backend cpu|cuda   where tiles run (default cpu)\n"
          "  --dims M=..,H=..     bind the program's symbolic dims (defaults from the file; once, each dim once)\n"
          "  --iters K            timed launches after one warm-up, 1..100000 (default 10)\n"
          "  --rounds R           alternate overlapped/sequential R times, report medians, 1..15 (default 3)\n"
          "  --check              compare outputs with the single-rank f64 reference\n"
          "  --trace FILE         Chrome trace (Perfetto) of the overlapped run's last launch\n"
          "  --json FILE          write the results as JSON\n"
          "  --seed S             input data seed, 0..2^62 (default 1)\n"
          "  --input NAME=FILE    read input/weight NAME from a .npy file (repeatable, one per NAME)\n"
          "  --chunks C           sub-chunks per rank part, 1..64 (default: perf model)\n"
          "  --tile-rows T        tile rows, 1..1048576 (default: perf model)\n"
          "  --compute-workers W  compute workers per rank, 1..1024 (default: perf model)\n"
          "  --comm-workers W     comm workers per rank, 1..1024 (default: perf model)\n"
          "  --no-baseline        skip the sequential baseline\n"
          "exit status: 0 PASS (or the run ended, without --check); 1 the check FAILed, or the run\n"
          "  failed on this machine (timeout, heap too small, no usable GPU); 2 a usage or input error,\n"
          "  found before anything runs: a bad option, an unreadable PROGRAM, --input or calibration\n"
          "  file, a program that does not parse or compile for its --dims and --ranks, or a run larger\n"
          "  than host memory (TD_RUN_HOST_MEMORY, else physical; every rank runs on this machine)\n");
}

static cJSON *td__result_json(const td_program_run_result *r, int check) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "seconds", r->seconds);
  if (r->comm_hidden >= 0)
    cJSON_AddNumberToObject(o, "comm_hidden_share", r->comm_hidden);
  if (check) {
    cJSON_AddNumberToObject(o, "max_rel_error", r->max_rel_error); /* inf is written as null */
    if (r->nonfinite)
      cJSON_AddBoolToObject(o, "nonfinite_values", 1);
    cJSON_AddNumberToObject(o, "tolerance", r->tolerance);
    cJSON_AddBoolToObject(o, "pass", r->pass);
  }
  return o;
}

static int td__cmp_seconds(const void *a, const void *b) {
  double x = ((const td_program_run_result *)a)->seconds, y = ((const td_program_run_result *)b)->seconds;
  return x < y ? -1 : x > y;
}

/* The round with the median time; the check result is round 0's (the only checked one). */
static td_program_run_result td__median_result(td_program_run_result *r, int n) {
  td_program_run_result first = r[0], sorted[16];
  memcpy(sorted, r, sizeof *r * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, td__cmp_seconds);
  td_program_run_result m = sorted[n / 2];
  m.max_rel_error = first.max_rel_error;
  m.tolerance = first.tolerance;
  m.pass = first.pass;
  m.nonfinite = first.nonfinite;
  return m;
}

static void td__row(const char *name, const td_program_run_result *r, int check) {
  char hidden[16] = "n/a*", err[16] = "-";
  if (r->comm_hidden >= 0)
    snprintf(hidden, sizeof hidden, "%.0f%%", 100.0 * r->comm_hidden);
  if (check)
    snprintf(err, sizeof err, "%.2e", r->max_rel_error);
  printf("  %-11s %12.3f %12s %14s   %s\n", name, r->seconds * 1e3, hidden, err,
         check ? (r->pass ? "PASS" : "FAIL") : "-");
}

int td_cmd_run(int argc, char **argv) {
  const char *path = NULL, *backend = "cpu", *dims = NULL, *trace = NULL, *json = NULL;
  long long ranks = 0, rounds = 3, iters = 10, seed = 1, chunks = 0, tile_rows = 0, cw = 0, mw = 0;
  int check = 0, baseline = 1, ninputs = 0;
  const char *in_names[16], *in_paths[16];
  char in_buf[16][256];
  /* Options that take a value: the name is checked before the value (a misspelt last option is "unknown"). */
  const char *const *valued = td_cli_options_run.valued; /* cli_options.c: the table --help is checked against */
  td_cli_seen seen = {0}; /* every option once (--input once per NAME), not the last one silently winning */
  for (int i = 1; i < argc; i++) {
    const char *a, *val;
    char name[32];
    int inl; /* --opt=value: the same as --opt value */
    int known = td_cli_arg(argc, argv, i, valued, td_cli_options_run.nvalued, name, sizeof name, &a, &val, &inl);
    if (inl && (!strcmp(a, "--check") || !strcmp(a, "--no-baseline") || !strcmp(a, "--help"))) {
      fprintf(stderr, "tdist run: option %s takes no value\n", a);
      return 2;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      td__run_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--check")) {
      if (!td_cli_once("tdist run", &seen, a, NULL))
        return 2;
      check = 1;
    } else if (!strcmp(a, "--no-baseline")) {
      if (!td_cli_once("tdist run", &seen, a, NULL))
        return 2;
      baseline = 0;
    } else if (a[0] == '-' && a[1] == '-') {
      if (!known) {
        char hint[200];
        fprintf(stderr, "tdist run: unknown option '%s'%s (see tdist run --help)\n", a,
                td_cli_option_hint(a, &td_cli_options_run, hint, sizeof hint));
        return 2;
      }
      if (!val) {
        fprintf(stderr, "tdist run: option %s needs a value\n", a);
        return 2;
      }
      if (strcmp(a, "--input") && !td_cli_once("tdist run", &seen, a, !strcmp(a, "--dims") ? "give every dim in one "
                                               "list (--dims M=..,H=..)" : NULL))
        return 2;
      int ok = 1;
      if (!strcmp(a, "--ranks"))
        ok = td_cli_int("tdist run", a, val, 1, 64, &ranks);
      else if (!strcmp(a, "--iters"))
        ok = td_cli_int("tdist run", a, val, 1, 100000, &iters);
      else if (!strcmp(a, "--rounds"))
        ok = td_cli_int("tdist run", a, val, 1, 15, &rounds);
      else if (!strcmp(a, "--seed"))
        ok = td_cli_int("tdist run", a, val, 0, (long long)1 << 62, &seed);
      else if (!strcmp(a, "--chunks"))
        ok = td_cli_int("tdist run", a, val, 1, 64, &chunks);
      else if (!strcmp(a, "--tile-rows"))
        ok = td_cli_int("tdist run", a, val, 1, 1 << 20, &tile_rows);
      else if (!strcmp(a, "--compute-workers"))
        ok = td_cli_int("tdist run", a, val, 1, 1024, &cw);
      else if (!strcmp(a, "--comm-workers"))
        ok = td_cli_int("tdist run", a, val, 1, 1024, &mw);
      else if (!strcmp(a, "--backend"))
        backend = val;
      else if (!strcmp(a, "--dims")) {
        if (!td_cli_dims_check("tdist run", val))
          return 2;
        dims = val;
      }
      else if (!strcmp(a, "--trace"))
        trace = val;
      else if (!strcmp(a, "--json"))
        json = val;
      else if (!strcmp(a, "--input")) {
        const char *eq = strchr(val, '=');
        if (!eq || eq == val || !eq[1] || strlen(val) >= sizeof in_buf[0]) {
          fprintf(stderr, "tdist run: --input expects NAME=FILE.npy, got '%s'\n", val);
          return 2;
        }
        if (ninputs == 16) {
          fprintf(stderr, "tdist run: at most 16 --input options\n");
          return 2;
        }
        snprintf(in_buf[ninputs], sizeof in_buf[0], "%s", val);
        in_buf[ninputs][eq - val] = 0;
        for (int k = 0; k < ninputs; k++)
          if (!strcmp(in_names[k], in_buf[ninputs])) {
            fprintf(stderr, "tdist run: --input %s given twice (one file per input)\n", in_names[k]);
            return 2;
          }
        in_names[ninputs] = in_buf[ninputs];
        in_paths[ninputs] = in_buf[ninputs] + (eq - val) + 1;
        ninputs++;
      }
      else {
        char hint[200];
        fprintf(stderr, "tdist run: unknown option '%s'%s (see tdist run --help)\n", a,
                td_cli_option_hint(a, &td_cli_options_run, hint, sizeof hint));
        return 2;
      }
      if (!ok)
        return 2;
      i += !inl;
    } else if (a[0] == '-' && a[1]) {
      char hint[200];
      fprintf(stderr, "tdist run: unknown option '%s'%s (see tdist run --help)\n", a,
                td_cli_option_hint(a, &td_cli_options_run, hint, sizeof hint));
      return 2;
    } else if (!path) {
      path = a;
    } else {
      fprintf(stderr, "tdist run: unexpected argument '%s' (one PROGRAM only)\n", a);
      return 2;
    }
  }
  if (td_cli_check_program_args("tdist run", path, ranks, backend, td__run_usage))
    return 2;
  if (td_cli_check_output("tdist run", "--json", json) || td_cli_check_output("tdist run", "--trace", trace))
    return 2;
  if (json && trace && !strcmp(json, trace)) {
    fprintf(stderr, "tdist run: --json and --trace name the same file '%s'; give two paths\n", json);
    return 2;
  }
  { /* an output that is the program, an --input file or the other output (a link, ./name) would destroy it */
    const char *ins[17] = {path}, *what[17] = {"the program"}, *tr[1] = {trace}, *trw[1] = {"--trace"};
    for (int k = 0; k < ninputs; k++)
      ins[1 + k] = in_paths[k], what[1 + k] = "an --input file";
    if (td_cli_check_distinct("tdist run", "--json", json, ins, what, 1 + ninputs) ||
        td_cli_check_distinct("tdist run", "--trace", trace, ins, what, 1 + ninputs) ||
        td_cli_check_distinct("tdist run", "--json", json, tr, trw, 1))
      return 2;
  }
  td_program *prog = NULL;
  td_status lst = td_program_load(path, &prog);
  if (lst != TD_OK) { /* a missing file, a parse or shape error: the user's input (exit 2) */
    fprintf(stderr, "tdist run: %s\n", td_last_error());
    return td_cli_exit_status(lst);
  }
  if (dims && (td_program_set_dims(prog, dims) != TD_OK || td_program_check(prog) != TD_OK)) {
    fprintf(stderr, "tdist run: %s\n", td_last_error());
    td_program_destroy(prog);
    return 2;
  }
  /* A broken calibration file is input the user must fix (as for tdist bench
   * and explain): refused here with exit 2, not as a failed run. */
  td_perf_model model;
  if (td_perf_model_load_checked(&model) != TD_OK) {
    fprintf(stderr, "tdist run: %s\n", td_last_error());
    td_program_destroy(prog);
    return 2;
  }
#ifdef TD_HAVE_GEMM_CUDA
  if (!strcmp(backend, "cuda")) { /* a missing GPU is said now, not after the inputs are made */
    int devices[64];
    char msg[1024];
    if (bo_devices(1, (int)ranks, devices, msg, sizeof msg) != 0) {
      fprintf(stderr, "tdist run: --backend cuda: %s\n", msg);
      td_program_destroy(prog);
      return 1;
    }
  }
#endif
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.chunks_per_rank = (int)chunks;
  co.tile_rows = tile_rows;
  co.compute_workers = (int)cw;
  co.comm_workers = (int)mw;
  co.model = &model;
  td_program_run_opts ro = {(int)ranks, backend, (int)iters, (uint64_t)seed, 1, check, NULL, &co, 0, NULL, NULL};
  int rounds_i = (int)rounds;
  ro.ninputs = ninputs;
  ro.input_names = in_names;
  ro.input_paths = in_paths;
  /* Rounds alternate the order (O S, S O, ...) so load from other processes and
   * warm-up effects hit both plans alike; each figure is the median over rounds. */
  td_program_run_result ov = {0}, sq = {0}, res[2][16];
  /* The trace goes to a temporary file first and is copied to --trace after
   * the table, as --json is written: a --trace that cannot take it (a full
   * disk, /dev/full) then costs the trace only, reported as a failed output
   * write, not the run and its table. Where no temporary file can be made the
   * library writes --trace itself. */
  char trace_tmp[4200] = "";
  const char *trace_to = trace;
  if (trace) {
    const char *dir = getenv("TMPDIR");
    snprintf(trace_tmp, sizeof trace_tmp, "%s/tdist-trace-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(trace_tmp);
    if (fd >= 0) {
      close(fd);
      trace_to = trace_tmp;
    } else {
      trace_tmp[0] = 0;
    }
  }
  for (int round = 0; round < rounds_i; round++) {
    for (int k = 0; k < 2; k++) {
      int overlap = (round % 2 == 0) ? k == 0 : k == 1;
      if (!overlap && !baseline)
        continue;
      ro.overlap = overlap;
      ro.check = check && round == 0;
      ro.trace_path = overlap && round == rounds_i - 1 ? trace_to : NULL;
      td_status rst = td_program_run(prog, &ro, &res[overlap][round]);
      if (rst != TD_OK) {
        /* A bad --input (missing file, wrong shape or name, not a .npy we read)
         * is a usage error; td_program_run names it with this prefix. So is a
         * plan that does not compile for these dims and ranks (exit 2 unless
         * the compiler ran out of memory or hit a bug), and a run larger than
         * the host memory (TD_RUN_HOST_MEMORY, else physical): every rank runs
         * here, so no retry can fit it, only smaller dims (exit 2, as tdist
         * bench's fit checks). Those and a plan that does not fit the heap
         * (exit 1: a TD_SYMM_HEAP_SIZE to raise) are found before anything
         * runs: no "run failed" for them. */
        const char *e = td_last_error();
        int compiling = !strncmp(e, "compiling the ", 14);
        int host = rst == TD_ERR_NO_MEMORY && strstr(e, "of host memory (") != NULL;
        int usage = !strncmp(e, "--input ", 8) || (compiling && td_cli_exit_status(rst) == 2) || host;
        int before = usage || compiling || strstr(e, "set TD_SYMM_HEAP_SIZE=") != NULL ||
                     strstr(e, "the largest symmetric heap TD_SYMM_HEAP_SIZE allows") != NULL;
        if (before)
          fprintf(stderr, "tdist run: %s\n", e);
        else
          fprintf(stderr, "tdist run: %s run failed: %s\n", overlap ? "overlapped" : "sequential", e);
        td_program_destroy(prog);
        if (trace_tmp[0])
          unlink(trace_tmp);
        return usage ? 2 : 1;
      }
    }
  }
  ov = td__median_result(res[1], rounds_i);
  if (baseline)
    sq = td__median_result(res[0], rounds_i);
  printf("tdist run %s: %lld ranks, backend %s", path, ranks, backend);
  for (int d = 0; d < td_program_ndims(prog); d++) /* none for a program of literal shapes */
    printf("%s%s=%lld", d ? "," : ", dims ", td_program_dim_name(prog, d), (long long)td_program_dim_value(prog, d));
  printf(", %lld rounds x %lld iters (median), seed %lld\n", rounds, iters, seed);
  printf("  %-11s %12s %12s %14s   %s\n", "plan", "time_ms", "comm_hidden", "max_rel_err", "check");
  td__row("overlapped", &ov, check);
  if (baseline) {
    td__row("sequential", &sq, check);
    printf("  speedup %.3fx (sequential / overlapped)\n", ov.seconds > 0 ? sq.seconds / ov.seconds : 0.0);
  }
  if (ov.comm_hidden < 0 || (baseline && sq.comm_hidden < 0))
    printf("  * no task ran on a communication worker (with at least as many ranks as cores every rank runs one thread;\n"
           "    its transfers run between its compute tasks, so there is no per-rank overlap to measure)\n");
  int pass = !check || (ov.pass && (!baseline || sq.pass));
  if (check)
    printf("  result: %s (tolerance %.1e relative to the reference's largest magnitude)\n",
           pass ? "PASS" : "FAIL", ov.tolerance);
  if (check && (ov.nonfinite || (baseline && sq.nonfinite)))
    printf("  note: the inputs or the reference hold values that are not finite (inf or NaN); an error that is "
           "NaN\n        (e.g. inf - inf) counts as inf, so max_rel_err is inf\n");
  int rc = pass ? 0 : 1;
  if (trace_tmp[0]) {
    fflush(stdout); /* the table first, then a write error after it */
    if (td_cli_copy_file("tdist run", trace_tmp, trace))
      rc = 1;
    else
      printf("  trace: %s\n", trace);
    unlink(trace_tmp);
  } else if (trace) {
    printf("  trace: %s\n", trace);
  }
  if (json) {
    cJSON *j = cJSON_CreateObject();
    char rev[64];
    td_cli_git_revision(rev, sizeof rev); /* as tdist bench --json records it */
    cJSON_AddStringToObject(j, "program", path);
    cJSON_AddStringToObject(j, "git_revision", rev);
    cJSON_AddNumberToObject(j, "ranks", (double)ranks);
    cJSON_AddStringToObject(j, "backend", backend);
    cJSON *jd = cJSON_AddObjectToObject(j, "dims");
    for (int d = 0; d < td_program_ndims(prog); d++)
      cJSON_AddNumberToObject(jd, td_program_dim_name(prog, d), (double)td_program_dim_value(prog, d));
    cJSON_AddNumberToObject(j, "iters", (double)iters);
    cJSON_AddNumberToObject(j, "rounds", (double)rounds);
    cJSON_AddNumberToObject(j, "seed", (double)seed);
    cJSON_AddItemToObject(j, "overlapped", td__result_json(&ov, check));
    if (baseline) {
      cJSON_AddItemToObject(j, "sequential", td__result_json(&sq, check));
      cJSON_AddNumberToObject(j, "speedup", ov.seconds > 0 ? sq.seconds / ov.seconds : 0.0);
    }
    if (check)
      cJSON_AddBoolToObject(j, "pass", pass);
    char *text = cJSON_Print(j);
    if (td_cli_write_text("tdist run", json, text))
      rc = 1;
    free(text);
    cJSON_Delete(j);
  }
  td_program_destroy(prog);
  return rc;
}
