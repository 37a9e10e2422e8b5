/* SPDX-License-Identifier: Apache-2.0
 * Output files of the CLI (tools layer): checked before any work, so a typo
 * in --json or --trace fails in a millisecond, not after a whole benchmark. */
#ifndef TD_TOOLS_OUT_CHECK_H
#define TD_TOOLS_OUT_CHECK_H

/** Checks that `path` (given with `option` to `cmd`, e.g. "tdist bench coll")
 * can be written: opens it for appending (nothing is written), and removes it
 * again if it did not exist, so a run that fails later leaves nothing behind
 * (for a dangling link, the file it pointed to is removed, never the link).
 * Returns 0, or prints "CMD: OPTION PATH is a directory, expected a file"
 * (or a block device, a socket) or "CMD: OPTION PATH cannot be written:
 * REASON" and returns -1 (callers exit with status 2). A NULL path is fine;
 * a character device (/dev/null) is written as a file is. */
int td_cli_check_output(const char *cmd, const char *option, const char *path);

/** Checks that the output `path` (given with `option`) is none of the n
 * other files `paths` (named by `what`, e.g. "the program", "--trace";
 * NULL entries skipped): the same string, an existing file of the same
 * device and inode (./a and a, a link and its target), or, where the files
 * do not exist yet, two names that resolve to one path once links are
 * followed (a dangling link and the name it points to). Writing it would
 * destroy an input or another output. Returns 0, or prints "CMD: OPTION
 * PATH is also WHAT; give another path" and returns -1 (exit 2). */
int td_cli_check_distinct(const char *cmd, const char *option, const char *path, const char *const *paths,
                          const char *const *what, int n);

#endif
