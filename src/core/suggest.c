/* SPDX-License-Identifier: Apache-2.0
 * "Did you mean": the nearest allowed item by edit distance (suggest.h). */
#include "core/suggest.h"

#include <ctype.h>
#include <stdio.h>
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

/* The distance of allowed item p[0..len) from text when it is near enough to be the one meant, else SIZE_MAX. */
static size_t td__near(const char *text, size_t nt, const char *p, size_t len) {
  if (len == 0 || len > TD__SUGGEST_MAX)
    return (size_t)-1;
  const size_t d = td__edit_distance_n(text, nt, p, len);
  const size_t longer = nt > len ? nt : len, limit = longer / 3 > 1 ? longer / 3 : 1;
  return d <= limit && d < longer ? d : (size_t)-1; /* d < longer: one letter is not near every other letter */
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
  size_t best = (size_t)-1;
  for (const char *p = allowed + strspn(allowed, seps); *p;) {
    const size_t len = strcspn(p, seps);
    if (len == nt && strncmp(p, text, len) == 0)
      return 0; /* not a miss */
    const size_t d = td__near(text, nt, p, len);
    best = d < best ? d : best;
    p += len;
    p += strspn(p, seps);
  }
  if (best == (size_t)-1)
    return 0;
  /* every item at the best distance, in the list's order, at most 3: a tie names them all */
  int n = 0;
  size_t used = 0;
  for (const char *p = allowed + strspn(allowed, seps); *p && n < 3;) {
    const size_t len = strcspn(p, seps);
    if (td__near(text, nt, p, len) == best) {
      const int w = snprintf(buf + used, cap - used, "%s'%.*s'", n ? " or " : "", (int)len, p);
      if (w < 0 || (size_t)w >= cap - used) {
        buf[0] = '\0';
        return 0;
      }
      used += (size_t)w, n++;
    }
    p += len;
    p += strspn(p, seps);
  }
  return n;
}
