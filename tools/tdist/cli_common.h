/* SPDX-License-Identifier: Apache-2.0
 * Option parsing shared by the CLI subcommands that take a `.td` program
 * (tools layer): `tdist run` and `tdist explain` read integers and check
 * PROGRAM / --ranks / --backend the same way, with the same messages. */
#ifndef TD_TOOLS_CLI_COMMON_H
#define TD_TOOLS_CLI_COMMON_H

#include <stdio.h>

/** Parses `text` (the value of `opt`, given to `cmd`, e.g. "tdist run") as a
 * decimal integer in lo..hi and writes it to *out. Returns 1, or prints
 * "CMD: OPT expects an integer in LO..HI, got 'TEXT'" to stderr and returns 0
 * (out untouched). A NULL text is reported as "(nothing)". */
int td_cli_int(const char *cmd, const char *opt, const char *text, long long lo, long long hi,
               long long *out);

/** Checks the arguments every program-taking subcommand needs: a PROGRAM
 * path (else prints "CMD: no PROGRAM given" and then `usage` to stderr),
 * ranks > 0 (else "CMD: --ranks N is required") and a backend of "cpu" or
 * "cuda" (else "CMD: unknown backend 'B' (cpu or cuda)"). Returns 0, or -1
 * after printing the first problem (callers exit with status 2). */
int td_cli_check_program_args(const char *cmd, const char *path, long long ranks,
                              const char *backend, void (*usage)(FILE *));

#endif
