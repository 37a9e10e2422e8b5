/* SPDX-License-Identifier: Apache-2.0
 * Early check of the CLI's output files (tools layer): see out_check.h. */
#include "out_check.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"

/* The file `path` names once every link is followed, as an absolute path in
 * out (cap bytes), also when the file does not exist yet: a dangling link
 * (link -> out.json, neither there) names the file that writing it creates.
 * realpath when the file exists; else each link of the chain is read
 * (readlink, relative targets taken from the link's folder) up to the first
 * name that does not exist, whose folder is resolved (realpath) and joined
 * with its name. Returns 1, or 0 when it cannot tell (a loop of links, a
 * folder that does not exist either, a path too long): out is then path. */
static int td__resolve(const char *path, char *out, size_t cap) {
  char cur[PATH_MAX], dir[PATH_MAX], target[PATH_MAX];
  snprintf(out, cap, "%s", path);
  if (strlen(path) >= sizeof cur)
    return 0;
  if (realpath(path, cur)) {
    snprintf(out, cap, "%s", cur);
    return 1;
  }
  snprintf(cur, sizeof cur, "%s", path);
  for (int hops = 0; hops < 40; hops++) {
    struct stat st;
    if (lstat(cur, &st) == 0 && S_ISLNK(st.st_mode)) {
      ssize_t n = readlink(cur, target, sizeof target - 1);
      if (n <= 0)
        return 0;
      target[n] = '\0';
      if (target[0] == '/') {
        snprintf(cur, sizeof cur, "%s", target);
      } else { /* relative to the link's folder */
        const char *slash = strrchr(cur, '/');
        int dl = slash ? (int)(slash - cur) : 0;
        if ((size_t)dl + 1 + (size_t)n >= sizeof dir)
          return 0;
        size_t at = slash ? (size_t)dl + 1 : 0; /* keep "folder/" of the link, then its target */
        memcpy(dir, cur, at);
        memcpy(dir + at, target, (size_t)n + 1);
        memcpy(cur, dir, at + (size_t)n + 1);
      }
      continue;
    }
    if (lstat(cur, &st) == 0) /* exists, yet realpath failed above (it was made meanwhile): ask again */
      return realpath(cur, dir) ? (snprintf(out, cap, "%s", dir), 1) : 0;
    /* the name at the end of the chain does not exist: its folder must */
    const char *slash = strrchr(cur, '/');
    const char *name = slash ? slash + 1 : cur;
    char folder[PATH_MAX];
    if (slash == cur)
      snprintf(folder, sizeof folder, "/");
    else if (slash)
      snprintf(folder, sizeof folder, "%.*s", (int)(slash - cur), cur);
    else
      snprintf(folder, sizeof folder, ".");
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || !realpath(folder, dir))
      return 0;
    size_t dl = strlen(dir), nl = strlen(name), sep = strcmp(dir, "/") != 0;
    if (dl + sep + nl >= cap)
      return 0;
    memcpy(out, dir, dl);
    memcpy(out + dl, "/", sep);
    memcpy(out + dl + sep, name, nl + 1);
    return 1;
  }
  return 0; /* a loop of links */
}

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
  /* A dangling link is kept: the probe creates the file it points to, so
   * that file is what is removed again, never the link. */
  char made[PATH_MAX];
  if (!existed && !td__resolve(path, made, sizeof made))
    snprintf(made, sizeof made, "%s", path);
  FILE *f = *path ? fopen(path, "a") : NULL;
  if (!f) {
    fprintf(stderr, "%s: %s %s cannot be written: %s (checked before running)\n", cmd, option, path,
            *path ? strerror(errno) : "empty file name");
    return -1;
  }
  fclose(f);
  if (!existed)
    unlink(made);
  return 0;
}

/* The same file: the same string, an existing file of the same device and
 * inode (./a and a, a link and its target), or two names that resolve to the
 * same path where the file does not exist yet (a dangling link and the name
 * it points to: writing one would overwrite what the other wrote). */
static int td__same_file(const char *a, const char *b) {
  if (!strcmp(a, b))
    return 1;
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  char ra[PATH_MAX], rb[PATH_MAX];
  return td__resolve(a, ra, sizeof ra) && td__resolve(b, rb, sizeof rb) && !strcmp(ra, rb);
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
