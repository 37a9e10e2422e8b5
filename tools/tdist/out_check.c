/* SPDX-License-Identifier: Apache-2.0
 * Early check of the CLI's output files (tools layer): see out_check.h. */
#include "out_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

static int td__same_file(const char *a, const char *b) {
  if (!strcmp(a, b))
    return 1;
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int td_cli_check_distinct(const char *cmd, const char *option, const char *path, const char *const *paths,
                          const char *const *what, int n) {
  if (!path)
    return 0;
  for (int k = 0; k < n; k++)
    if (paths[k] && td__same_file(path, paths[k])) {
      fprintf(stderr, "%s: %s %s is also %s ('%s'): writing it would overwrite that file; give another path\n",
              cmd, option, path, what[k], paths[k]);
      return -1;
    }
  return 0;
}
