/* SPDX-License-Identifier: Apache-2.0
 * Early check of the CLI's output files (tools layer): see out_check.h. */
#include "out_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"

int td_cli_check_output(const char *cmd, const char *option, const char *path) {
  if (!path)
    return 0;
  /* a directory would fail open with "Is a directory"; said in the words every input check uses */
  const char *kind = td__path_not_a_file(path);
  if (kind) {
    fprintf(stderr, "%s: %s %s is %s, expected a file (checked before running)\n", cmd, option, path, kind);
    return -1;
  }
  int existed = access(path, F_OK) == 0;
  FILE *f = *path ? fopen(path, "a") : NULL;
  if (!f) {
    fprintf(stderr, "%s: %s %s cannot be written: %s (checked before running)\n", cmd, option, path,
            *path ? strerror(errno) : "empty file name");
    return -1;
  }
  fclose(f);
  if (!existed)
    unlink(path);
  return 0;
}
