/* SPDX-License-Identifier: Apache-2.0
 * Core services: what a user-given path is (file.h). */
#include "core/file.h"

#include <stddef.h>
#include <sys/stat.h>

static const char *td__kind(const struct stat *sb) {
  return S_ISDIR(sb->st_mode)    ? "a directory"
         : S_ISBLK(sb->st_mode)  ? "a block device"
         : S_ISSOCK(sb->st_mode) ? "a socket"
                                 : NULL;
}

const char *td__fd_not_a_file(int fd) {
  struct stat sb;
  return fstat(fd, &sb) == 0 ? td__kind(&sb) : NULL;
}

const char *td__path_not_a_file(const char *path) {
  struct stat sb;
  return path && stat(path, &sb) == 0 ? td__kind(&sb) : NULL;
}
