/* SPDX-License-Identifier: Apache-2.0
 * tdist CLI entry point: finds the subcommand in the table and runs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "commands.h"
#include "tdist/tdist.h"

/* Each subcommand registers here; a subcommand under construction is not listed. */
static const td_cli_command td__commands[] = {
    {"doctor", "show the build, the configuration variables and what this machine has", td_cmd_doctor, 0, 0},
    {"bench", "time collectives (and other kinds) against a baseline: tdist bench coll", td_cmd_bench, 1, 1},
    {"run", "compile a .td program, run it overlapped and sequential on N ranks, check it", td_cmd_run, 1, 0},
    {"explain", "show a .td program's per-rank schedule and predicted timeline", td_cmd_explain, 1, 0},
    {"calibrate", "measure the compiler's perf model constants on this machine", td_cmd_calibrate, 1, 0},
    {"tune", "search GEMM tile configurations and cache the fastest: tdist tune gemm --M .. --N .. --K ..", td_cmd_tune, 1, 0},
};
enum { TD__NCOMMANDS = sizeof td__commands / sizeof td__commands[0] };

static void td__usage(FILE *out) {
  fprintf(out, "usage: tdist COMMAND [ARGS]   (tdist %s)\n\ncommands:\n", td_version());
  for (int i = 0; i < TD__NCOMMANDS; i++)
    fprintf(out, "  %-10s %s\n", td__commands[i].name, td__commands[i].summary);
  fprintf(out, "\n`tdist COMMAND --help` (or `tdist help COMMAND`, e.g. tdist help bench coll) describes a "
               "command's options; `tdist doctor` lists every TD_* environment variable (variants such as "
               "TD_OPS_FUSED_AG) and the values it allows.\n");
}

/* `tdist help COMMAND [WORDS...]` runs `tdist COMMAND [WORDS...] --help`
 * (tdist help bench coll, tdist help tune gemm): the command's own help,
 * whatever the environment holds, as --help is. */
static int td__help(int argc, char **argv) {
  for (int i = 0; i < TD__NCOMMANDS; i++)
    if (!strcmp(argv[2], td__commands[i].name)) {
      char *args[16];
      int n = 0;
      for (int j = 2; j < argc && n < 14; j++)
        args[n++] = argv[j];
      args[n++] = "--help";
      args[n] = NULL;
      return td__commands[i].main(n, args);
    }
  fprintf(stderr, "tdist help: unknown command '%s'\n", argv[2]);
  td__usage(stderr);
  return 2;
}

int main(int argc, char **argv) {
  /* Ranks sharing a GPU each use several streams (persistent kernel, copy
   * engine, kernel queue), some parked in stream waits; with CUDA's default of
   * 8 hardware queues such streams alias and block each other. Read when the
   * CUDA context is made, so set before any CUDA call; a user's value wins. */
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (argc < 2) {
    td__usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || (!strcmp(argv[1], "help") && argc < 3)) {
    td__usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "help")) /* tdist help COMMAND [KIND]: that command's --help */
    return td__help(argc, argv);
  if (!strcmp(argv[1], "--version")) {
    printf("tdist %s\n", td_version());
    return 0;
  }
  for (int i = 0; i < TD__NCOMMANDS; i++)
    if (!strcmp(argv[1], td__commands[i].name)) {
      const td_cli_command *c = &td__commands[i];
      /* --help does no work: shown whatever the environment holds */
      int help = 0;
      for (int j = 2; j < argc; j++)
        help |= !strcmp(argv[j], "--help") || !strcmp(argv[j], "-h");
      /* A variable that does not parse is an error before any work, even if
       * this command would not read it (doctor reports them itself). */
      if (c->checks_env && !help && td_config_check_all(NULL) > 0) {
        fprintf(stderr, "tdist %s: the environment has configuration variables that do not parse:\n", c->name);
        td_config_check_all(stderr);
        fprintf(stderr, "(`tdist doctor` lists every variable and what it allows)\n");
        return 2;
      }
      /* a misspelt operator knob (TD_OPS_*, our namespace) would be dropped without a word */
      if (c->checks_env && !help && td_config_check_prefix("TD_OPS_") != TD_OK) {
        fprintf(stderr, "tdist %s: %s\n", c->name, td_last_error());
        return 2;
      }
      /* any other TD_* name we do not know: a warning (other tools may set TD_* variables), once; a bench coll
       * rank process (--worker, last) is its parent's, which has warned already */
      if (c->checks_env && !help && strcmp(argv[argc - 1], "--worker"))
        td_config_warn_unknown(stderr, "tdist");
      td_perf_model m; /* the library's operators read it leniently: the CLI refuses a broken one */
      if (c->reads_model && td_perf_model_load_checked(&m) != TD_OK) {
        fprintf(stderr, "tdist %s: %s\n", c->name, td_last_error());
        return 2;
      }
      return td__commands[i].main(argc - 1, argv + 1);
    }
  char names[256] = "", hint[128];
  for (int i = 0; i < TD__NCOMMANDS; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s,", td__commands[i].name);
  fprintf(stderr, "tdist: unknown command '%s'%s\n", argv[1], td_cli_hint(argv[1], names, hint, sizeof hint));
  td__usage(stderr);
  return 2;
}
