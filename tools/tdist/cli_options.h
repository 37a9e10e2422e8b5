/* SPDX-License-Identifier: Apache-2.0
 * The options every tdist subcommand accepts, in one table per command
 * (tools layer): each parser reads its options from here (td_cli_arg,
 * td_cli_positional), and tests/tools/test_cli_help.c checks that each one
 * appears in that command's --help, so an option cannot be added without
 * its help line. No dependencies: the test compiles cli_options.c alone. */
#ifndef TD_TOOLS_CLI_OPTIONS_H
#define TD_TOOLS_CLI_OPTIONS_H

#include <stddef.h>

typedef struct td_cli_options {
  const char *command;            /* as typed after `tdist `: "run", "bench coll", "tune gemm", ... */
  const char *const *valued;      /* options that take a value (--opt V or --opt=V) */
  size_t nvalued;
  const char *const *flags;       /* options that take none, --help last */
  size_t nflags;
  const char *const *aliases;     /* other spellings the command accepts (tune gemm's -M), or NULL */
  size_t naliases;
} td_cli_options;

extern const td_cli_options td_cli_options_run, td_cli_options_explain, td_cli_options_bench_coll,
    td_cli_options_bench_exec, td_cli_options_bench_ops, td_cli_options_tune_gemm, td_cli_options_calibrate,
    td_cli_options_doctor;

/** Every command's table, one per command line (the four operator bench
 * kinds share td_cli_options_bench_ops' options); *count gets their number.
 * Hidden internals (bench coll's --worker, run by its own parent) are not
 * listed. */
const td_cli_options *td_cli_options_all(size_t *count);

#endif
