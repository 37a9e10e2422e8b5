/* SPDX-License-Identifier: Apache-2.0
 * Core services: what a user-given path is, before it is read as a file.
 * Internal (td__), shared by every loader of a file the user names (a .td
 * program, a --input .npy, the calibration file) and by the CLI's output
 * checks, so that a directory is said to be one instead of reading as an
 * empty program, "bad magic" or "not a JSON object". */
#ifndef TD_CORE_FILE_H
#define TD_CORE_FILE_H

/** What the open file `fd` is when it cannot be read as a file: "a
 * directory", "a block device" or "a socket"; NULL for a regular file, a
 * pipe (process substitution) or a character device (/dev/stdin, /dev/null),
 * which read as files do, and when fstat fails (the read that follows will
 * say why). Thread-safe. */
const char *td__fd_not_a_file(int fd);

/** The same for `path` (stat, following links); NULL also when it does not
 * exist (the caller's open says that). Thread-safe. */
const char *td__path_not_a_file(const char *path);

#endif
