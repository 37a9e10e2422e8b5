/* SPDX-License-Identifier: Apache-2.0
 * Configuration: one table of environment variables (name, type, default,
 * description) that drives parsing, error messages and `tdist doctor`. */
#ifndef TDIST_CONFIG_H
#define TDIST_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "tdist/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Reads integer variable `name` (must be in the table) into *out: the
 * environment's value if set, else the table's default. Byte-size variables
 * accept K, M, G suffixes (powers of 1024). Errors: TD_ERR_INVALID_ARG
 * (malformed or out-of-range value: the message names the variable, the value
 * and what is allowed), TD_ERR_NOT_FOUND (name not in the table). */
td_status td_config_int(const char *name, int64_t *out);
/** Reads string variable `name`: the environment's value or the default (may
 * be NULL). Errors as td_config_int, plus allowed-value checks for enums. */
td_status td_config_str(const char *name, const char **out);
/** Writes the table with current values, one variable a line, for `tdist doctor`.
 * A variable set to the empty string shows as "(empty)": it reads as unset. */
void td_config_dump(FILE *out);
/** Finds environment variables named TD_* that are not in the table (a
 * misspelt TD_TIMEOUT_MS would otherwise be ignored without a word), nor
 * names of tdist's own tests and scripts (TD_BIN_DIR, TD_ITERS, ...), and, when
 * `out` is not NULL, writes one line for each: "NAME (not a tdist variable;
 * did you mean KNOWN?)" when a table name is within 3 edits, else without the
 * suggestion. Returns how many there are. Reads the environment only; not
 * thread-safe against concurrent setenv. */
int td_config_unknown(FILE *out);
/** Once per process: writes to `out` one line for each environment variable
 * named TD_*, set to a non-empty value, that tdist does not know (neither in
 * the table nor a name of tdist's own tests and scripts): "WHO: warning: NAME
 * is not a tdist variable and is ignored; did you mean KNOWN?" (the closest
 * table names, within 3 edits; no suggestion when none is that close). A
 * warning, not an error: other tools may set TD_* variables. The library
 * never calls it (it prints nothing by itself); the tdist CLI does, at
 * start. Returns how many lines it wrote: 0 on every call after the first
 * (from any thread), and for a NULL out. Reads the environment only; not
 * thread-safe against concurrent setenv. */
int td_config_warn_unknown(FILE *out, const char *who);
/** Parses every variable of the table that is set in the environment and,
 * when `out` is not NULL, writes the error message of each one that does not
 * parse (name, value, what is allowed), one a line. Returns how many failed.
 * Not thread-safe against concurrent setenv. */
int td_config_check_all(FILE *out);
/** Parses every variable of the table whose name starts with `prefix` and is
 * set in the environment (an empty value reads as unset); returns TD_OK, or
 * the first failure's status with its message (name, value, what is
 * allowed) as the thread's last error. With a prefix longer than "TD_", a
 * set variable under it that the table does not have is a failure too (a
 * misspelt knob, named with the close table names). The operators call it with "TD_OPS_"
 * when they are created, on every backend, so a misspelt value of a knob
 * the chosen path would not read still fails at once. Errors:
 * TD_ERR_INVALID_ARG (a NULL prefix, or a value that does not parse). Not
 * thread-safe against concurrent setenv. */
td_status td_config_check_prefix(const char *prefix);
/** How many environment variables under `prefix` (longer than "TD_"), set
 * to a non-empty value, the table does not have: the misspelt knobs
 * td_config_check_prefix refuses (0 for a NULL or "TD_" prefix). `tdist
 * doctor` counts those under "TD_OPS_" as problems, since the operators and
 * tdist's other commands refuse to start while one is set. Reads the
 * environment only; not thread-safe against concurrent setenv. */
int td_config_unknown_set(const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
