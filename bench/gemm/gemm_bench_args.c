/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's command line (bench layer). Every option is parsed and
 * checked here, before gemm_bench probes the GPU, so a typo costs an exit 2
 * naming the option and what it allows instead of a run that silently
 * measures something else (or nothing): the same strictness as `tdist
 * bench`. Plain C with no CUDA so a CPU test links it directly. */
#define _POSIX_C_SOURCE 200809L
#include "gemm_bench_args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const gb_mode_names[GB_MODE_COUNT] = {"both", "wait", "raise", "wait_gpu", "raise_gpu", "both_gpu"};

static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return 2;
}

/* A whole decimal number in [lo, hi], nothing else; -1 when malformed or out of range. */
static int parse_int(const char *s, size_t len, int lo, int hi, int *out) {
  if (!len || len > 12)
    return -1;
  long long v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i]))
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

/* Calls item(s, len, ctx) for each comma-separated item of list; an empty
 * list or item (",x", "x,", "x,,y") is malformed: -1. Stops at item's first non-zero. */
static int each_item(const char *list, int (*item)(const char *, size_t, void *), void *ctx) {
  if (!*list)
    return -1;
  for (const char *p = list;;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (!n)
      return -1;
    int rc = item(p, n, ctx);
    if (rc)
      return rc;
    if (!end)
      return 0;
    p = end + 1;
  }
}

static int shape_item(const char *s, size_t n, void *ctx) {
  gb_args *o = ctx;
  if (o->nshapes == GB_MAX_SHAPES)
    return 2;
  int *d = o->shapes[o->nshapes];
  const char *x1 = memchr(s, 'x', n), *x2 = x1 ? memchr(x1 + 1, 'x', n - (size_t)(x1 + 1 - s)) : NULL;
  if (!x2 || parse_int(s, (size_t)(x1 - s), 1, GB_MAX_DIM, &d[0]) ||
      parse_int(x1 + 1, (size_t)(x2 - x1 - 1), 1, GB_MAX_DIM, &d[1]) ||
      parse_int(x2 + 1, n - (size_t)(x2 + 1 - s), 1, GB_MAX_DIM, &d[2]))
    return -1;
  o->nshapes++;
  return 0;
}

static int mode_item(const char *s, size_t n, void *ctx) {
  gb_args *o = ctx;
  for (int i = 0; i < GB_MODE_COUNT; i++)
    if (strlen(gb_mode_names[i]) == n && !strncmp(s, gb_mode_names[i], n)) {
      if (o->modes & (1u << i))
        return 3; /* named twice */
      o->modes |= 1u << i;
      return 0;
    }
  return -1;
}

struct xv_ctx {
  gb_args *o;
  const int *xv;
  int nxv;
};

static int variant_item(const char *s, size_t n, void *ctx) {
  struct xv_ctx *c = ctx;
  int v, known = 0;
  if (parse_int(s, n, 0, INT_MAX, &v))
    return -1;
  for (int i = 0; i < c->nxv; i++)
    known |= c->xv[i] == v;
  if (!known)
    return -1;
  for (int i = 0; i < c->o->nvariants; i++)
    if (c->o->variants[i] == v)
      return 3;
  if (c->o->nvariants == GB_MAX_VARIANTS)
    return 2;
  c->o->variants[c->o->nvariants++] = v;
  return 0;
}

static int config_item(const char *s, size_t n, void *ctx) {
  (void)ctx;
  if (n == 4 && !strncmp(s, "sm80", 4))
    return 0;
  int d;
  const char *x1 = memchr(s, 'x', n), *x2 = x1 ? memchr(x1 + 1, 'x', n - (size_t)(x1 + 1 - s)) : NULL;
  if (!x2 || parse_int(s, (size_t)(x1 - s), 1, 1024, &d) || parse_int(x1 + 1, (size_t)(x2 - x1 - 1), 1, 1024, &d) ||
      parse_int(x2 + 1, n - (size_t)(x2 + 1 - s), 1, 64, &d))
    return -1;
  return 0;
}

/* --json's file must be creatable now: checked before the run, not after minutes of GPU time. */
static int check_json(const char *path, char *err, size_t cap) {
  struct stat st;
  if (!*path)
    return fail(err, cap, "--json needs a file name (got '')");
  if (!stat(path, &st) && S_ISDIR(st.st_mode))
    return fail(err, cap, "--json %s is a directory; give a file name", path);
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (slash && (size_t)(slash - path) >= sizeof dir)
    return fail(err, cap, "--json path too long (%zu bytes)", strlen(path));
  if (slash)
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  else
    snprintf(dir, sizeof dir, ".");
  if (stat(dir, &st) || !S_ISDIR(st.st_mode))
    return fail(err, cap, "--json %s: directory %s does not exist", path, dir);
  if (access(dir, W_OK) || (!access(path, F_OK) && access(path, W_OK)))
    return fail(err, cap, "--json %s: not writable", path);
  return 0;
}

int gb_parse_args(int argc, char **argv, const int *xv, int nxv, gb_args *out, char *err, size_t cap) {
  static const char *const valued[] = {"--shapes", "--configs", "--iters", "--layout", "--hook-modes",
                                       "--hook-variants", "--stamps", "--json", "--streams"};
  enum { NV = sizeof valued / sizeof valued[0] };
  int given[NV] = {0};
  gb_args o;
  memset(&o, 0, sizeof o);
  o.configs = "all", o.iters = 50, o.streams = 1;
  const char *shapes = "8192x3584x8192,8192x8192x3584,8192x1280x8192,4096x3584x8192,1024x3584x8192,"
                       "128x3584x8192,8192x8192x8192";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *eq = strchr(a, '='), *v = NULL;
    size_t alen = eq && !strncmp(a, "--", 2) ? (size_t)(eq - a) : strlen(a);
    int k = -1;
    for (int j = 0; j < NV; j++)
      if (strlen(valued[j]) == alen && !strncmp(a, valued[j], alen))
        k = j;
    if (k < 0) {
      if (!strcmp(a, "--help") || !strcmp(a, "-h"))
        o.help = 1;
      else if (!strcmp(a, "--hooks"))
        o.with_hooks = 1;
      else if (alen < strlen(a) && (!strncmp(a, "--help", alen) || !strncmp(a, "--hooks", alen)))
        return fail(err, cap, "option %.*s takes no value (got '%s')", (int)alen, a, a);
      else
        return fail(err, cap, "unknown option '%s'", a);
      continue;
    }
    const char *name = valued[k];
    if (a[alen] == '=')
      v = a + alen + 1;
    else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
      v = argv[++i];
    else
      return fail(err, cap, "%s needs a value", name);
    if (given[k]++)
      return fail(err, cap, "%s given twice; give it once", name);
    int rc = 0;
    switch (k) {
    case 0: /* --shapes */
      shapes = v;
      break;
    case 1: /* --configs */
      if (strcmp(v, "all") && each_item(v, config_item, NULL))
        return fail(err, cap, "--configs expects all or a comma-separated list of BMxBNxSTAGES (e.g. 128x256x4) "
                    "and sm80, got '%s'", v);
      o.configs = v;
      break;
    case 2: /* --iters */
    case 6: /* --stamps */
      if (parse_int(v, strlen(v), 1, GB_MAX_COUNT, k == 2 ? &o.iters : &o.stamps))
        return fail(err, cap, "%s expects a whole number 1..%d, got '%s'", name, GB_MAX_COUNT, v);
      if (k == 6)
        o.with_hooks = 1;
      break;
    case 3: /* --layout */
      if (strcmp(v, "nk") && strcmp(v, "kn"))
        return fail(err, cap, "--layout expects nk (B as [N,K]) or kn (B as [K,N]), got '%s'", v);
      o.layout_kn = !strcmp(v, "kn");
      break;
    case 4: /* --hook-modes */
      rc = each_item(v, mode_item, &o);
      if (rc == 3)
        return fail(err, cap, "--hook-modes names a mode twice ('%s')", v);
      if (rc)
        return fail(err, cap, "--hook-modes expects a comma-separated list of both, wait, raise, wait_gpu, "
                    "raise_gpu, both_gpu, got '%s'", v);
      o.with_hooks = 1;
      break;
    case 5: { /* --hook-variants */
      struct xv_ctx c = {&o, xv, nxv};
      char list[256] = "";
      for (int j = 0; j < nxv; j++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", j ? "," : "", xv[j]);
      rc = each_item(v, variant_item, &c);
      if (rc == 3)
        return fail(err, cap, "--hook-variants names a variant twice ('%s')", v);
      if (rc)
        return fail(err, cap, "--hook-variants expects a comma-separated list of the variants compiled in (%s), "
                    "got '%s'", list, v);
      o.with_hooks = 1;
      break;
    }
    case 7: /* --json */
      if ((rc = check_json(v, err, cap)))
        return rc;
      o.json = v;
      break;
    case 8: /* --streams */
      if (parse_int(v, strlen(v), 1, GB_MAX_STREAMS, &o.streams))
        return fail(err, cap, "--streams expects a whole number 1..%d, got '%s'", GB_MAX_STREAMS, v);
      break;
    }
  }
  int rc = each_item(shapes, shape_item, &o);
  if (rc == 2)
    return fail(err, cap, "--shapes gives more than %d shapes", GB_MAX_SHAPES);
  if (rc)
    return fail(err, cap, "--shapes expects a comma-separated list of MxNxK, each 1..%d, got '%s'", GB_MAX_DIM,
                shapes);
  if (o.streams > 1 && o.with_hooks)
    return fail(err, cap, "--streams %d times plain launches only; the hook options (--hooks, --hook-modes, "
                "--hook-variants, --stamps) need --streams 1", o.streams);
  *out = o;
  return 0;
}

void gb_usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s [--shapes MxNxK,..] [--configs all|BMxBNxS,..[,sm80]] [--layout nk|kn] [--iters N]\n"
          "       [--hooks] [--hook-modes both,wait,raise,wait_gpu,raise_gpu,both_gpu] [--hook-variants XV,..]\n"
          "       [--stamps N] [--streams S] [--json FILE]\n"
          "  --shapes         GEMM shapes, each dimension 1..%d (default: the Llama-3-70B TP-8 set)\n"
          "  --configs        tile configurations to sweep (default all; sm80 adds the sm80 ones)\n"
          "  --layout         B as [N,K] (nk, default) or [K,N] (kn)\n"
          "  --iters          timed launches per measurement, 1..%d (default 50)\n"
          "  --hooks          also time the best configuration with wait + raise hooks (mode 'both')\n"
          "  --hook-modes     hook modes to time (implies --hooks): both (wait + raise), wait, raise, and\n"
          "                   the same at GPU scope with _gpu\n"
          "  --hook-variants  measurement variants of the hook paths (implies --hooks), one of those\n"
          "                   compiled in (gemm_bench_xv.cu)\n"
          "  --stamps         launches of the stamped variants, 1..%d (implies --hooks)\n"
          "  --streams        S GEMMs of each shape at once, one per stream, each with its own A, B and C\n"
          "                   (the ranks sharing one GPU in `tdist bench ag_gemm`), 1..%d (default 1);\n"
          "                   a figure is the time of all S; not with the hook options\n"
          "  --json           write the results to FILE (its directory must exist)\n"
          "Options take `--opt VALUE` or `--opt=VALUE`, each at most once. Exit 2 on a bad option\n"
          "(before the GPU is probed), 1 on a failed check.\n",
          prog, GB_MAX_DIM, GB_MAX_COUNT, GB_MAX_COUNT, GB_MAX_STREAMS);
}
