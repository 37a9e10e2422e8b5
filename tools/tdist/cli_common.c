/* SPDX-License-Identifier: Apache-2.0
 * Option parsing and output files shared by the CLI subcommands (tools
 * layer); see cli_common.h. One copy, so every command accepts and refuses
 * the same input with the same words. */
#include "cli_common.h"

#include "cli_options.h"
#include "core/suggest.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int td_cli_exit_status(td_status status) {
  switch (status) {
  case TD_ERR_INVALID_ARG:
  case TD_ERR_NOT_FOUND:
  case TD_ERR_PARSE:
  case TD_ERR_SHAPE:
    return 2;
  default:
    return 1;
  }
}

int td_cli_int(const char *cmd, const char *opt, const char *text, long long lo, long long hi,
               long long *out) {
  char *end;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (!text || !*text || isspace((unsigned char)*text) || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "%s: %s expects an integer in %lld..%lld, got '%s'\n", cmd, opt, lo, hi,
            text ? text : "(nothing)");
    return 0;
  }
  *out = v;
  return 1;
}

/* One item of a list: the whole of [text, text+len) must be the integer.
 * Returns 1 with *out set; 0 when it is no integer; -1 when it is one (all
 * digits, perhaps a sign) outside lo..hi, too large for long long included. */
static int td__cli_item(const char *text, size_t len, long long lo, long long hi, long long *out) {
  char buf[32];
  size_t digits = len && (text[0] == '-' || text[0] == '+');
  int numeric = len > digits;
  for (size_t k = digits; k < len; k++)
    numeric &= isdigit((unsigned char)text[k]) != 0;
  if (!len || len >= sizeof buf)
    return numeric ? -1 : 0;
  memcpy(buf, text, len);
  buf[len] = 0;
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (*end || isspace((unsigned char)buf[0]) || !numeric)
    return 0;
  if (errno || v < lo || v > hi)
    return -1;
  *out = v;
  return 1;
}

int td_cli_int_list(const char *cmd, const char *opt, const char *text, char sep, long long lo, long long hi,
                    const char *what, const char *item, long long *out, int min, int max, int *count) {
  long long tmp[64];
  if (!text) {
    fprintf(stderr, "%s: %s needs a value (expects %s)\n", cmd, opt, what);
    return 0;
  }
  int items = 1;
  for (const char *p = text; *p; p++)
    items += *p == sep;
  if (max > 64)
    max = 64;
  if (items > max) {
    fprintf(stderr, "%s: %s %s: at most %d %ss, got %d (expects %s)\n", cmd, opt, text, max, item, items, what);
    return 0;
  }
  int n = 0;
  for (const char *p = text;; n++) {
    const char *q = strchr(p, sep);
    size_t len = q ? (size_t)(q - p) : strlen(p);
    int rc = td__cli_item(p, len, lo, hi, &tmp[n]);
    if (rc <= 0) {
      /* "value 1 of 1 is -5", not "value 1 (-5)": the position and the value are easy to mistake otherwise */
      if (!len)
        fprintf(stderr, "%s: %s %s: %s %d of %d is empty (expects %s, each in %lld..%lld)\n", cmd, opt, text, item,
                n + 1, items, what, lo, hi);
      else if (rc < 0)
        fprintf(stderr, "%s: %s %s: %s %d of %d is %.*s; each must be in %lld..%lld (expects %s)\n", cmd, opt, text,
                item, n + 1, items, (int)(len < 40 ? len : 40), p, lo, hi, what);
      else
        fprintf(stderr, "%s: %s %s: %s %d of %d is '%.*s', not an integer (expects %s, each in %lld..%lld)\n", cmd,
                opt, text, item, n + 1, items, (int)(len < 40 ? len : 40), p, what, lo, hi);
      return 0;
    }
    if (!q)
      break;
    p = q + 1;
  }
  n++;
  if (n < min) {
    fprintf(stderr, "%s: %s %s: %s%d %ss needed, got %d (expects %s)\n", cmd, opt, text,
            min == max ? "exactly " : "at least ", min, item, n, what);
    return 0;
  }
  memcpy(out, tmp, (size_t)n * sizeof *out);
  *count = n;
  return 1;
}

int td_cli_once(const char *cmd, td_cli_seen *seen, const char *name, const char *hint) {
  for (int k = 0; k < seen->n; k++)
    if (!strcmp(seen->names[k], name)) {
      fprintf(stderr, "%s: %s given twice; %s\n", cmd, name,
              hint ? hint : "give each option once (the last one would otherwise win without a word)");
      return 0;
    }
  /* more distinct options than any subcommand has: nothing left to compare against, so accept */
  if (seen->n < (int)(sizeof seen->names / sizeof seen->names[0]))
    snprintf(seen->names[seen->n++], sizeof seen->names[0], "%s", name);
  return 1;
}

void td_cli_positional(const char *cmd, const char *arg, const char *const *valued, size_t n_valued,
                       const char *const *flags, size_t n_flags) {
  char list[1024] = "";
  size_t len = 0;
  for (size_t k = 0; k < n_valued + n_flags && len < sizeof list; k++) {
    const char *o = k < n_valued ? valued[k] : flags[k - n_valued];
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s%s", k ? ", " : "", o, k < n_valued ? " V" : "");
  }
  fprintf(stderr, "%s: unexpected argument '%s': %s takes no positional arguments, only the options %s (see %s "
          "--help)\n", cmd, arg, cmd, list, cmd);
}

int td_cli_write_text(const char *cmd, const char *path, const char *text) {
  if (!text) {
    fprintf(stderr, "%s: cannot write %s: out of memory\n", cmd, path);
    return -1;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(errno));
    return -1;
  }
  size_t len = strlen(text);
  int err = fwrite(text, 1, len, f) != len ? errno : 0;
  if ((fflush(f) || ferror(f)) && !err)
    err = errno ? errno : EIO;
  if (fclose(f) && !err)
    err = errno;
  if (err) {
    fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(err));
    return -1;
  }
  return 0;
}

int td_cli_copy_file(const char *cmd, const char *src, const char *path) {
  FILE *in = fopen(src, "rb");
  if (!in) {
    fprintf(stderr, "%s: cannot read %s: %s\n", cmd, src, strerror(errno));
    return -1;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(errno));
    fclose(in);
    return -1;
  }
  char buf[1 << 16];
  int err = 0, rerr = 0;
  size_t n;
  while (!err && (n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, f) != n)
      err = errno ? errno : EIO;
  if (!err && ferror(in))
    rerr = errno ? errno : EIO;
  fclose(in);
  if (!err && (fflush(f) || ferror(f)))
    err = errno ? errno : EIO;
  if (fclose(f) && !err)
    err = errno;
  if (rerr && !err) {
    fprintf(stderr, "%s: cannot read %s: %s\n", cmd, src, strerror(rerr));
    return -1;
  }
  if (err) {
    fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(err));
    return -1;
  }
  return 0;
}

int td_cli_check_program_args(const char *cmd, const char *path, long long ranks,
                              const char *backend, void (*usage)(FILE *)) {
  if (!path) {
    fprintf(stderr, "%s: no PROGRAM given\n", cmd);
    usage(stderr);
    return -1;
  }
  if (!ranks) {
    fprintf(stderr, "%s: --ranks N is required\n", cmd);
    return -1;
  }
  if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
    char hint[200];
    fprintf(stderr, "%s: unknown backend '%s' (cpu or cuda)%s\n", cmd, backend,
            td_cli_hint(backend, "cpu,cuda", hint, sizeof hint));
    return -1;
  }
  return 0;
}

int td_cli_arg(int argc, char **argv, int i, const char *const *valued, size_t n, char *buf, size_t cap,
               const char **name, const char **value, int *inline_value) {
  const char *a = argv[i];
  const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
  *inline_value = eq != NULL;
  if (eq) {
    size_t len = (size_t)(eq - a) < cap - 1 ? (size_t)(eq - a) : cap - 1;
    memcpy(buf, a, len);
    buf[len] = 0;
    *name = buf;
    *value = eq + 1;
  } else {
    *name = a;
    *value = i + 1 < argc ? argv[i + 1] : NULL;
  }
  for (size_t k = 0; k < n; k++)
    if (!strcmp(*name, valued[k]))
      return 1;
  return 0;
}

/* Runs `git -C DIR ARGS` and returns its exit status (-1 when it could not
 * run); its first output line goes to line (cap bytes) when line is non-NULL. */
static int td__git_in(const char *dir, const char *args, char *line, size_t cap) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "git -C '%s' %s 2>/dev/null", dir, args);
  FILE *f = popen(cmd, "r");
  if (!f)
    return -1;
  char tmp[64] = "";
  if (!fgets(tmp, sizeof tmp, f))
    tmp[0] = 0;
  while (fgetc(f) != EOF) /* drain, so git never dies of SIGPIPE */
    ;
  int st = pclose(f);
  tmp[strcspn(tmp, "\n")] = 0;
  if (line)
    snprintf(line, cap, "%s", tmp);
  return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

void td_cli_git_revision(char *buf, size_t cap) {
  if (!buf || !cap)
    return;
  snprintf(buf, cap, "unknown");
  const char *env = getenv("TD_GIT_REV"); /* set by scripts where the tree has no .git */
  if (env && *env) {
    snprintf(buf, cap, "%s", env);
    return;
  }
#ifdef TD_SOURCE_DIR
  /* The tree this binary was built from (CMake bakes its path in), never the
   * working directory's repository: an installed tdist run inside another
   * project would otherwise record that project's HEAD. The tree must still
   * be a tdist tree (it may have moved or been replaced since the build). */
  const char *dir = TD_SOURCE_DIR;
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/include/tdist/status.h", dir);
  if (strchr(dir, '\'') || strlen(dir) > 4000 || access(probe, R_OK) != 0)
    return;
  char rev[64];
  if (td__git_in(dir, "rev-parse --short HEAD", rev, sizeof rev) != 0 || !rev[0])
    return;
  /* An edit not committed makes the figures unreproducible from the
   * revision alone: mark it, as scripts/gpu-multi-prep.sh does. */
  int dirty = td__git_in(dir, "diff --quiet HEAD -- src include tools bench", NULL, 0) == 1;
  snprintf(buf, cap, "%s%s", rev, dirty ? "+dirty" : "");
#endif
}

/* The items' own form beyond this (a declared dim, a value in range) is
 * td_program_set_dims's to check; here only what the library would let
 * through silently or word poorly. */
int td_cli_dims_check(const char *cmd, const char *list) {
  if (!list || !*list) {
    fprintf(stderr, "%s: --dims expects NAME=VALUE[,NAME=VALUE...], got ''\n", cmd);
    return 0;
  }
  for (const char *p = list; p;) {
    const char *end = strchr(p, ','), *eq = strchr(p, '=');
    size_t item = end ? (size_t)(end - p) : strlen(p);
    if (item == 0) {
      fprintf(stderr, "%s: --dims has an empty item (a leading, trailing or doubled comma), got '%s'\n", cmd, list);
      return 0;
    }
    for (size_t k = 0; k < item; k++)
      if (isspace((unsigned char)p[k])) {
        fprintf(stderr, "%s: --dims items take no spaces (NAME=VALUE,NAME=VALUE), got '%s'\n", cmd, list);
        return 0;
      }
    if (eq && (!end || eq < end) && (size_t)(eq - p) + 1 == item) {
      fprintf(stderr, "%s: --dims gives %.*s an empty value, got '%s'\n", cmd, (int)(eq - p), p, list);
      return 0;
    }
    size_t len = eq && (!end || eq < end) ? (size_t)(eq - p) : item;
    for (const char *q = end ? end + 1 : NULL; q && len;) {
      const char *qe = strchr(q, ','), *qq = strchr(q, '=');
      size_t ql = qq && (!qe || qq < qe) ? (size_t)(qq - q) : qe ? (size_t)(qe - q) : strlen(q);
      if (ql == len && !strncmp(p, q, len)) {
        fprintf(stderr, "%s: --dims names %.*s twice, got '%s'\n", cmd, (int)len, p, list);
        return 0;
      }
      q = qe ? qe + 1 : NULL;
    }
    p = end ? end + 1 : NULL;
  }
  return 1;
}

const char *td_cli_hint(const char *text, const char *names, char *buf, size_t cap) {
  char near[160];
  if (!buf || cap == 0)
    return "";
  buf[0] = '\0';
  if (text && names && td__suggest(text, names, NULL, near, sizeof near))
    snprintf(buf, cap, " (did you mean %s?)", near);
  return buf;
}

const char *td_cli_option_hint(const char *name, const struct td_cli_options *o, char *buf, size_t cap) {
  if (!buf || cap == 0)
    return "";
  buf[0] = '\0';
  char all[1024] = "";
  size_t used = 0;
  const char *const *lists[3] = {o ? o->valued : NULL, o ? o->flags : NULL, o ? o->aliases : NULL};
  const size_t counts[3] = {o ? o->nvalued : 0, o ? o->nflags : 0, o ? o->naliases : 0};
  for (int l = 0; l < 3; l++)
    for (size_t i = 0; lists[l] && i < counts[l]; i++) {
      const int w = snprintf(all + used, sizeof all - used, "%s,", lists[l][i]);
      if (w < 0 || (size_t)w >= sizeof all - used)
        return buf; /* a table too long to list: no hint rather than half of one */
      used += (size_t)w;
    }
  return td_cli_hint(name, all, buf, cap);
}
