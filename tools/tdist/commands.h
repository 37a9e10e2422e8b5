/* SPDX-License-Identifier: Apache-2.0
 * The tdist CLI's subcommands. Each lives in its own cmd_<name>.c and
 * returns the process exit status (0 success, 1 failure/FAIL, 2 usage error). */
#ifndef TD_TOOLS_COMMANDS_H
#define TD_TOOLS_COMMANDS_H

typedef struct td_cli_command {
  const char *name;    /* "run", "bench", ... */
  const char *summary; /* one line for `tdist --help` */
  int (*main)(int argc, char **argv); /* argv[0] is the subcommand name */
  int checks_env;   /* refuse to start while a TD_* variable does not parse (all but doctor) */
  int reads_model;  /* refuse to start while the perf model's calibration file is broken (commands that
                     * read it only through the lenient library loader; run and explain check it
                     * themselves) */
} td_cli_command;

int td_cmd_doctor(int argc, char **argv);
int td_cmd_bench(int argc, char **argv);   /* dispatches bench kinds: coll, exec, ... */
int td_cmd_run(int argc, char **argv);
int td_cmd_explain(int argc, char **argv);
int td_cmd_calibrate(int argc, char **argv);
int td_cmd_tune(int argc, char **argv);

#endif
