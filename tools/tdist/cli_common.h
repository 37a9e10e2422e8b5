/* SPDX-License-Identifier: Apache-2.0
 * Option parsing and output files shared by the CLI subcommands (tools
 * layer): `tdist run`, `explain`, `bench` and `tune` read integers and lists
 * of integers with one strict parser (no atoi: trailing junk, overflow and
 * out-of-range values are refused with the same words), check PROGRAM /
 * --ranks / --backend the same way, and report a failed output write. */
#ifndef TD_TOOLS_CLI_COMMON_H
#define TD_TOOLS_CLI_COMMON_H

#include <stdio.h>

#include "tdist/status.h"

/** The exit status of `tdist run` and `explain` for a library call that
 * failed with `status` while reading or compiling the program: 2 (usage or
 * input error: fix the program, its --dims, --ranks or options) for the
 * statuses that mean the caller's input is wrong (TD_ERR_INVALID_ARG,
 * TD_ERR_NOT_FOUND, TD_ERR_PARSE, TD_ERR_SHAPE), else 1 (out of memory, a
 * failure of this machine, or a tdist bug such as TD_ERR_SCHEDULE). */
int td_cli_exit_status(td_status status);

/** Parses `text` (the value of `opt`, given to `cmd`, e.g. "tdist run") as a
 * decimal integer in lo..hi and writes it to *out. Returns 1, or prints
 * "CMD: OPT expects an integer in LO..HI, got 'TEXT'" to stderr and returns 0
 * (out untouched). A NULL text is reported as "(nothing)". */
int td_cli_int(const char *cmd, const char *opt, const char *text, long long lo, long long hi,
               long long *out);

/** Parses `text` (the value of `opt`) as integers in lo..hi separated by
 * `sep` (e.g. ',' for "1024,4096" or 'x' for "8x8x8"): at least `min` and at
 * most `max` (<= 64) of them, no empty item. Writes them to
 * out[0..*count-1] and returns 1, or prints the first problem naming the bad
 * part to stderr and returns 0 (out and count untouched): "CMD: OPT TEXT:
 * ITEM K of N is V; each must be in LO..HI", "... ITEM K of N is 'V', not an
 * integer", "... ITEM K of N is empty", "... at most MAX ITEMs, got N" or
 * "... MIN ITEMs needed,
 * got N", each followed by "(expects WHAT)". `what` describes the form
 * ("a comma-separated list of integers", "MxNxK"); `item` names one part
 * ("value", "dim"; K counts from 1). */
int td_cli_int_list(const char *cmd, const char *opt, const char *text, char sep, long long lo, long long hi,
                    const char *what, const char *item, long long *out, int min, int max, int *count);

/** The options a subcommand has been given so far, so that one given twice
 * is refused instead of the last one silently winning (every subcommand
 * parses with one: `tdist run`, `explain`, `bench KIND`, `tune`,
 * `calibrate`). Zero it before the argument loop. */
typedef struct td_cli_seen {
  int n;
  char names[48][40];
} td_cli_seen;

/** Records that option `name` (its canonical spelling: "--ranks", also for
 * "--ranks=2") was given to `cmd`. Returns 1 the first time; the second time
 * prints "CMD: NAME given twice; HINT" to stderr (hint NULL: "give each
 * option once (the last one would otherwise win without a word)") and
 * returns 0 (callers exit with status 2). Options meant to repeat (tdist
 * run's --input, one per NAME) are not passed here. */
int td_cli_once(const char *cmd, td_cli_seen *seen, const char *name, const char *hint);

struct td_cli_options;

/** The "did you mean" of `text`, a misspelt name from the comma-separated
 * `names` (td__suggest: a few edits, case and -/_ free, ties all named):
 * " (did you mean 'run'?)", or "" when none is near; written into buf (cap
 * bytes) and returned, for the end of an "unknown ..." message. */
const char *td_cli_hint(const char *text, const char *names, char *buf, size_t cap);

/** The "did you mean" of an unknown option `name` of the command whose
 * table is `o` (cli_options.h): " (did you mean '--iters'?)" for the nearest
 * options (td__suggest: a few edits, case and -/_ free, ties all named), or
 * "" when none is near; written into buf (cap bytes) and returned, so that a
 * message can end its "unknown option" with it. */
const char *td_cli_option_hint(const char *name, const struct td_cli_options *o, char *buf, size_t cap);

/** Prints why `arg`, a positional argument (not starting with '-'), is not
 * accepted by `cmd`, a subcommand that takes options only: "CMD: unexpected
 * argument 'ARG': CMD takes no positional arguments, only the options
 * --a, --b, ... (see CMD --help)", the options being `valued` (n_valued of
 * them, those that take a value, shown as "--a V") then `flags`. */
void td_cli_positional(const char *cmd, const char *arg, const char *const *valued, size_t n_valued,
                       const char *const *flags, size_t n_flags);

/** Writes `text` to the file `path` (created or truncated), checking every
 * step: open, write and close (a full disk often fails only at close).
 * Returns 0, or prints "CMD: cannot write PATH: REASON" (strerror) to stderr
 * and returns -1 (callers exit with status 1). NULL text counts as a failure
 * ("out of memory"). */
int td_cli_write_text(const char *cmd, const char *path, const char *text);

/** Copies the file `src` (a temporary file the command wrote) to `path`
 * (created or truncated), checking every step as td_cli_write_text does.
 * Returns 0, or prints "CMD: cannot write PATH: REASON" (or "CMD: cannot read
 * SRC: REASON") to stderr and returns -1 (callers exit with status 1). */
int td_cli_copy_file(const char *cmd, const char *src, const char *path);

/** Reads argument argv[i] of a subcommand as an option: "--opt=value" is
 * split into the name "--opt" (copied into buf, at most cap-1 bytes) and the
 * value "value", with *inline_value = 1; any other argument is its own name
 * and its value is argv[i+1] (NULL past the end), *inline_value = 0 (the
 * caller then skips that next argument if it used it). Returns 1 when the
 * name is one of the `n` options in `valued` (those that take a value), else
 * 0, so a misspelt last option can be called unknown before "needs a value". */
int td_cli_arg(int argc, char **argv, int i, const char *const *valued, size_t n, char *buf, size_t cap,
               const char **name, const char **value, int *inline_value);

/** Checks the arguments every program-taking subcommand needs: a PROGRAM
 * path (else prints "CMD: no PROGRAM given" and then `usage` to stderr),
 * ranks > 0 (else "CMD: --ranks N is required") and a backend of "cpu" or
 * "cuda" (else "CMD: unknown backend 'B' (cpu or cuda)"). Returns 0, or -1
 * after printing the first problem (callers exit with status 2). */
int td_cli_check_program_args(const char *cmd, const char *path, long long ranks,
                              const char *backend, void (*usage)(FILE *));

/** The source revision for a results file: TD_GIT_REV when set (scripts set it
 * where the tree has no .git), else `git rev-parse --short HEAD` of the source
 * tree this binary was built from (TD_SOURCE_DIR, baked in by CMake), with
 * "+dirty" when src, include, tools or bench differ from HEAD; "unknown" when
 * that tree is gone, is no longer a tdist tree or git cannot tell. Never the
 * working directory's repository. Writes at most cap-1 characters to buf.
 * Runs git (popen): not for hot paths; thread-safe. */
void td_cli_git_revision(char *buf, size_t cap);

/** Checks a --dims list (`tdist run` and `explain` share it): not empty, no
 * empty item (",M=8", "M=8,", "M=8,,H=4"), no spaces, no empty value
 * ("M="), and no dim named twice (the library would keep the last; a repeat
 * is almost always a typo). Returns 1, or prints "CMD: --dims ..." naming
 * the problem and the list to stderr and returns 0 (callers exit with 2). */
int td_cli_dims_check(const char *cmd, const char *list);

#endif
