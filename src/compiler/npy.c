/* SPDX-License-Identifier: Apache-2.0
 * Compiler runner support: reading a NumPy `.npy` file (format versions 1-3)
 * holding a 1-D or 2-D C-order array of little-endian f2/f4/f8 or i4/i8,
 * converted to doubles, so `tdist run --input x=x.npy` can feed real data
 * instead of seeded random values. Only the header fields the format
 * requires are read ('descr', 'fortran_order', 'shape'); anything else is
 * refused with a message naming the file and the problem. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "core/error.h"
#include "core/file.h"

/* Finds 'key': in the header dict and returns a pointer just after the colon. */
static const char *td__npy_field(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(hdr, pat);
  if (!p)
    return NULL;
  p = strchr(p + strlen(pat), ':');
  if (!p)
    return NULL;
  p++;
  while (*p == ' ')
    p++;
  return p;
}

td_status td__npy_load(const char *path, int64_t *rows, int64_t *cols, double **out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return td__error(TD_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  /* fopen takes a directory and reading it gives nothing: say what it is, not "bad magic" */
  const char *kind = td__fd_not_a_file(fileno(f));
  if (kind) {
    fclose(f);
    return td__error(TD_ERR_INVALID_ARG, "%s is %s, expected a file (a .npy array)", path, kind);
  }
  unsigned char pre[12];
  td_status st = TD_OK;
  char *hdr = NULL;
  void *raw = NULL;
  double *data = NULL;
  size_t n = fread(pre, 1, 10, f);
  if (n != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s' is not a .npy file (bad magic)", path);
    goto out;
  }
  if (pre[6] < 1 || pre[6] > 3) { /* 2 and 3 differ from 1 only in the header length and encoding */
    st = td__error(TD_ERR_INVALID_ARG, "'%s': .npy format version %d.%d is not supported (1.0, 2.0 or 3.0)", path,
                   pre[6], pre[7]);
    goto out;
  }
  size_t hlen = pre[8] | (size_t)pre[9] << 8;
  if (pre[6] >= 2) { /* versions 2 and 3: 4-byte header length */
    if (fread(pre + 10, 1, 2, f) != 2) {
      st = td__error(TD_ERR_INVALID_ARG, "'%s': truncated header", path);
      goto out;
    }
    hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (hlen == 0 || hlen > (1u << 20) || !(hdr = calloc(1, hlen + 1)) || fread(hdr, 1, hlen, f) != hlen) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': truncated or oversized header", path);
    goto out;
  }
  const char *descr = td__npy_field(hdr, "descr"), *fo = td__npy_field(hdr, "fortran_order"),
             *shape = td__npy_field(hdr, "shape");
  if (!descr || !fo || !shape) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': header lacks descr, fortran_order or shape", path);
    goto out;
  }
  if (!strncmp(fo, "True", 4)) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': Fortran-order arrays are not supported (save with C order)", path);
    goto out;
  }
  /* NumPy writes exactly True or False; anything else (1, 0, 'False') is not a file it wrote. */
  if (strncmp(fo, "False", 5) || (fo[5] != ',' && fo[5] != ' ' && fo[5] != '}')) {
    const char *e = strpbrk(fo, ",}");
    int len = e && e - fo < 32 ? (int)(e - fo) : 16;
    st = td__error(TD_ERR_INVALID_ARG, "'%s': fortran_order is %.*s; it must be True or False", path, len, fo);
    goto out;
  }
  char code[8] = "";
  if (sscanf(descr, "'%7[^']'", code) != 1 || (code[0] != '<' && code[0] != '|')) {
    /* The dtype as written: up to its closing quote (or a bounded prefix). */
    const char *q = descr[0] == '\'' ? strchr(descr + 1, '\'') : NULL;
    int len = q && q - descr < 32 ? (int)(q - descr) + 1 : 16;
    st = td__error(TD_ERR_INVALID_ARG, "'%s': dtype %.*s is not little-endian (save with '<' byte order, e.g. "
                   "'<f4')", path, len, descr);
    goto out;
  }
  const char *c = code + 1;
  size_t es = !strcmp(c, "f2") ? 2 : !strcmp(c, "f4") || !strcmp(c, "i4") ? 4 : !strcmp(c, "f8") || !strcmp(c, "i8") ? 8 : 0;
  if (!es) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': dtype '%s' is not supported (f2, f4, f8, i4, i8)", path, code);
    goto out;
  }
  long long d0 = 0, d1 = 0;
  int end2 = 0, end1 = 0;
  sscanf(shape, "(%lld, %lld)%n", &d0, &d1, &end2);
  if (!end2 && (sscanf(shape, "(%lld,)%n", &d0, &end1), end1)) {
    d1 = d0;
    d0 = 1;
  } else if (!end2) {
    /* The shape as written: up to its ')' (or the dict's end), without the header's padding. */
    const char *close = strpbrk(shape, ")}\n");
    int len = close ? (int)(close - shape) + (*close == ')') : (int)strlen(shape);
    while (len > 0 && (shape[len - 1] == ' ' || shape[len - 1] == ','))
      len--;
    if (len > 40)
      len = 40;
    if (close && *close == ')')
      st = td__error(TD_ERR_INVALID_ARG, "'%s': shape %.*s is not 1-D or 2-D", path, len, shape);
    else
      st = td__error(TD_ERR_INVALID_ARG, "'%s': malformed header: shape '%.*s' has no closing ')' (expected "
                     "(N,) or (ROWS, COLS))", path, len, shape);
    goto out;
  }
  if (d0 < 1 || d1 < 1 || d0 > (1LL << 31) || d1 > (1LL << 31) || (double)d0 * (double)d1 > 1e10) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': shape (%lld, %lld) is empty or too large", path, d0, d1);
    goto out;
  }
  size_t count = (size_t)(d0 * d1);
  /* The data after the header must be exactly what the header declares: more
   * means the header does not describe the file (wrong shape or dtype). */
  long at = ftell(f);
  long long have = -1;
  if (at >= 0 && fseek(f, 0, SEEK_END) == 0) {
    long end = ftell(f);
    have = end >= at ? (long long)(end - at) : -1;
    if (fseek(f, at, SEEK_SET) != 0)
      have = -1;
  }
  if (have < 0) {
    st = td__error(TD_ERR_SYSTEM, "'%s': cannot find the file's size: %s", path, strerror(errno));
    goto out;
  }
  if ((unsigned long long)have != (unsigned long long)count * es) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': size mismatch: the header declares shape (%lld, %lld) of '%s', "
                   "%llu bytes of data, but the file holds %lld bytes after the header", path, d0, d1, code,
                   (unsigned long long)count * es, have);
    goto out;
  }
  raw = malloc(count * es);
  data = malloc(count * sizeof *data);
  if (!raw || !data) {
    st = td__error(TD_ERR_NO_MEMORY, "'%s': out of memory for %zu elements", path, count);
    goto out;
  }
  if (fread(raw, es, count, f) != count) {
    st = td__error(TD_ERR_INVALID_ARG, "'%s': file holds fewer than the %zu elements its header declares", path,
                   count);
    goto out;
  }
  for (size_t i = 0; i < count; i++) {
    const unsigned char *p = (const unsigned char *)raw + i * es;
    if (!strcmp(c, "f2")) {
      data[i] = td_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    } else if (!strcmp(c, "f4")) {
      float v;
      memcpy(&v, p, 4);
      data[i] = v;
    } else if (!strcmp(c, "f8")) {
      memcpy(&data[i], p, 8);
    } else if (!strcmp(c, "i4")) {
      int32_t v;
      memcpy(&v, p, 4);
      data[i] = v;
    } else {
      int64_t v;
      memcpy(&v, p, 8);
      data[i] = (double)v;
    }
  }
  *rows = d0;
  *cols = d1;
  *out = data;
  data = NULL;
out:
  fclose(f);
  free(hdr);
  free(raw);
  free(data);
  return st;
}
