/* SPDX-License-Identifier: Apache-2.0
 * `tdist explain PROGRAM --ranks N`: compiles a `.td` program and prints, per
 * rank, the schedule the compiler produced (task order, worker class, deps,
 * waits, raises) with the perf model's predicted timeline and the predicted
 * share of communication hidden under compute. --sequential shows the
 * baseline plan instead; --dump writes the plan's text form. Exit status, as
 * `tdist run`'s: 0 explained; 1 a failure of this machine (a --dump write
 * that fails, out of memory) or a tdist bug; 2 a usage or input error: a bad
 * option, an unreadable program or calibration file, a program that does not
 * parse or compile for its --dims and --ranks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"
#include "out_check.h"
#include "tdist/tdist.h"

static void td__explain_usage(FILE *out) {
  fprintf(out,
          "usage: tdist explain PROGRAM.td --ranks N [options]\n"
          "  --ranks N          ranks, 1..64\n"
          "  --backend cpu|cuda backend the plan is for (default cpu)\n"
          "  --dims M=..,H=..   bind symbolic dims (once, each dim once)\n"
          "  --sequential       explain the sequential baseline plan\n"
          "  --chunks C         sub-chunks per rank part, 1..64 (default: perf model)\n"
          "  --tile-rows T      tile rows, 1..1048576 (default: perf model)\n"
          "  --dump FILE        also write the plan's text form (td_plan_dump)\n"
          "exit status: 0 explained; 1 a --dump write failed, or a failure of this machine; 2 a usage\n"
          "  or input error: a bad option, an unreadable PROGRAM or calibration file, a program that\n"
          "  does not parse or compile for its --dims and --ranks\n");
}

int td_cmd_explain(int argc, char **argv) {
  const char *path = NULL, *backend = "cpu", *dims = NULL, *dump = NULL;
  long long ranks = 0, chunks = 0, tile_rows = 0;
  int sequential = 0;
  /* Options that take a value: the name is checked before the value, so a
   * misspelt last option is "unknown", not "needs a value". */
  const char *const *valued = td_cli_options_explain.valued; /* cli_options.c */
  td_cli_seen seen = {0}; /* every option once, not the last one silently winning */
  for (int i = 1; i < argc; i++) {
    const char *a, *val;
    char name[32];
    int inl; /* --opt=value: the same as --opt value */
    int known = td_cli_arg(argc, argv, i, valued, td_cli_options_explain.nvalued, name, sizeof name, &a, &val, &inl);
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      td__explain_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--sequential")) {
      if (inl) {
        fprintf(stderr, "tdist explain: option --sequential takes no value\n");
        return 2;
      }
      if (!td_cli_once("tdist explain", &seen, a, NULL))
        return 2;
      sequential = 1;
    } else if (a[0] == '-' && a[1] == '-') {
      if (!known) {
        char hint[200];
        fprintf(stderr, "tdist explain: unknown option '%s'%s (see tdist explain --help)\n", a,
                td_cli_option_hint(a, &td_cli_options_explain, hint, sizeof hint));
        return 2;
      }
      if (!val) {
        fprintf(stderr, "tdist explain: option %s needs a value\n", a);
        return 2;
      }
      if (!td_cli_once("tdist explain", &seen, a, !strcmp(a, "--dims") ? "give every dim in one list (--dims "
                       "M=..,H=..)" : NULL))
        return 2;
      int ok = 1;
      if (!strcmp(a, "--ranks"))
        ok = td_cli_int("tdist explain", a, val, 1, 64, &ranks);
      else if (!strcmp(a, "--chunks"))
        ok = td_cli_int("tdist explain", a, val, 1, 64, &chunks);
      else if (!strcmp(a, "--tile-rows"))
        ok = td_cli_int("tdist explain", a, val, 1, 1 << 20, &tile_rows);
      else if (!strcmp(a, "--backend"))
        backend = val;
      else if (!strcmp(a, "--dims")) {
        ok = td_cli_dims_check("tdist explain", val);
        dims = val;
      }
      else if (!strcmp(a, "--dump"))
        dump = val;
      else {
        char hint[200];
        fprintf(stderr, "tdist explain: unknown option '%s'%s (see tdist explain --help)\n", a,
                td_cli_option_hint(a, &td_cli_options_explain, hint, sizeof hint));
        return 2;
      }
      if (!ok)
        return 2;
      i += !inl;
    } else if (!path) {
      path = a;
    } else {
      fprintf(stderr, "tdist explain: unexpected argument '%s' (one PROGRAM only)\n", a);
      return 2;
    }
  }
  if (td_cli_check_program_args("tdist explain", path, ranks, backend, td__explain_usage))
    return 2;
  if (td_cli_check_output("tdist explain", "--dump", dump))
    return 2;
  {
    const char *others[1] = {path}, *what[1] = {"the program"};
    if (td_cli_check_distinct("tdist explain", "--dump", dump, others, what, 1))
      return 2;
  }
  td_program *prog = NULL;
  td_status lst = td_program_load(path, &prog);
  if (lst != TD_OK) {
    fprintf(stderr, "tdist explain: %s\n", td_last_error());
    return td_cli_exit_status(lst);
  }
  if (dims && td_program_set_dims(prog, dims) != TD_OK) {
    fprintf(stderr, "tdist explain: %s\n", td_last_error());
    td_program_destroy(prog);
    return 2;
  }
  td_perf_model model;
  if (td_perf_model_load_checked(&model) != TD_OK) { /* a broken calibration file is refused, not used */
    fprintf(stderr, "tdist explain: %s\n", td_last_error());
    td_program_destroy(prog);
    return 2;
  }
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.model = &model;
  co.nranks = (int)ranks;
  co.overlap = !sequential;
  co.chunks_per_rank = (int)chunks;
  co.tile_rows = tile_rows;
  co.backend_cuda = !strcmp(backend, "cuda"); /* no f32 weight prepacking or staging */
  td_compiled *c = NULL;
  int rc = 0;
  td_status cst = td_program_compile(prog, &co, &c);
  if (cst != TD_OK) {
    fprintf(stderr, "tdist explain: %s\n", td_last_error());
    rc = td_cli_exit_status(cst);
  } else {
    printf("backend %s, %s plan\n", backend, sequential ? "sequential (baseline)" : "overlapped");
    if (td_compiled_explain(c, stdout) != TD_OK) {
      fprintf(stderr, "tdist explain: %s\n", td_last_error());
      rc = 1;
    }
    if (dump) { /* a full disk often fails only at fflush/fclose: check every step */
      FILE *f = fopen(dump, "w");
      int bad = !f || td_plan_dump(td_compiled_plan(c), f) != TD_OK;
      bad |= f && fflush(f) != 0;
      bad |= f && ferror(f);
      if (f && fclose(f) != 0)
        bad = 1;
      if (bad) {
        fprintf(stderr, "tdist explain: cannot write the plan to '%s': %s\n", dump,
                errno ? strerror(errno) : td_last_error());
        rc = 1;
      }
    }
  }
  td_compiled_destroy(c);
  td_program_destroy(prog);
  return rc;
}
