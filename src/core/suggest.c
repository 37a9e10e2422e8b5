/* SPDX-License-Identifier: Apache-2.0
 * "Did you mean": the nearest allowed item by edit distance (suggest.h). */
#include "core/suggest.h"

#include <ctype.h>
#include <string.h>

enum { TD__SUGGEST_MAX = 63 };

/* Case and '-' / '_' are one character class each: batched_one, Batched-One
 * and batched-one are the same name misspelt no times. */
static char td__fold(char c) {
  return c == '_' ? '-' : (char)tolower((unsigned char)c);
}

/* Edit distance of a[0..na) and b[0..nb), both at most TD__SUGGEST_MAX: insertions, deletions, substitutions
 * and swaps of two neighbours (the optimal string alignment distance: "smh" is one edit from "shm"), in three
 * rows. */
static size_t td__edit_distance_n(const char *a, size_t na, const char *b, size_t nb) {
  size_t two[TD__SUGGEST_MAX + 1], prev[TD__SUGGEST_MAX + 1], cur[TD__SUGGEST_MAX + 1];
  for (size_t j = 0; j <= nb; j++)
    prev[j] = j;
  for (size_t i = 1; i <= na; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= nb; j++) {
      const size_t sub = prev[j - 1] + (td__fold(a[i - 1]) != td__fold(b[j - 1]));
      const size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      size_t d = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
      if (i > 1 && j > 1 && td__fold(a[i - 1]) == td__fold(b[j - 2]) && td__fold(a[i - 2]) == td__fold(b[j - 1]) &&
          two[j - 2] + 1 < d)
        d = two[j - 2] + 1;
      cur[j] = d;
    }
    memcpy(two, prev, (nb + 1) * sizeof prev[0]);
    memcpy(prev, cur, (nb + 1) * sizeof prev[0]);
  }
  return prev[nb];
}

size_t td__edit_distance(const char *a, const char *b) {
  const size_t na = strlen(a), nb = strlen(b);
  if (na > TD__SUGGEST_MAX || nb > TD__SUGGEST_MAX)
    return TD__SUGGEST_MAX + 1;
  return td__edit_distance_n(a, na, b, nb);
}

int td__suggest(const char *text, const char *allowed, const char *sep, char *buf, size_t cap) {
  if (buf && cap)
    buf[0] = '\0';
  if (!text || !allowed || !buf || cap == 0)
    return 0;
  const size_t nt = strlen(text);
  if (nt == 0 || nt > TD__SUGGEST_MAX)
    return 0;
  const char *seps = sep ? sep : ",";
  const char *best = NULL;
  size_t best_len = 0, best_d = (size_t)-1;
  for (const char *p = allowed; *p;) {
    const size_t len = strcspn(p, seps);
    if (len > 0 && len <= TD__SUGGEST_MAX) {
      if (len == nt && strncmp(p, text, len) == 0)
        return 0; /* not a miss */
      const size_t d = td__edit_distance_n(text, nt, p, len);
      const size_t longer = nt > len ? nt : len, limit = longer / 3 > 1 ? longer / 3 : 1;
      if (d <= limit && d < best_d) {
        best = p, best_len = len, best_d = d;
      }
    }
    p += len;
    p += strspn(p, seps);
  }
  if (!best || best_len + 1 > cap)
    return 0;
  memcpy(buf, best, best_len);
  buf[best_len] = '\0';
  return 1;
}
