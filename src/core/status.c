/* SPDX-License-Identifier: Apache-2.0
 * Status strings and the thread-local last-error message (core layer). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "tdist/status.h"
#include "tdist/version.h"

enum { TD__MSG_CAP = 2048 };
static _Thread_local char td__msg[TD__MSG_CAP];

const char *td_strerror(td_status status) {
  switch (status) {
#define TD__STATUS_TEXT(name, value, text) \
  case name:                               \
    return text;
    TD_STATUS_LIST(TD__STATUS_TEXT)
#undef TD__STATUS_TEXT
  }
  return "unknown status";
}

const char *td_status_name(td_status status) {
  switch (status) {
#define TD__STATUS_NAME(name, value, text) \
  case name:                               \
    return #name;
    TD_STATUS_LIST(TD__STATUS_NAME)
#undef TD__STATUS_NAME
  }
  return "TD_UNKNOWN_STATUS";
}

const char *td_last_error(void) { return td__msg; }

void td_clear_error(void) { td__msg[0] = '\0'; }

td_status td__error(td_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(td__msg, sizeof td__msg, fmt, ap);
  va_end(ap);
  return status;
}

size_t td__rank_tag_len(const char *m) {
  if (strncmp(m, "rank ", 5) != 0 || m[5] < '0' || m[5] > '9')
    return 0;
  size_t i = 5;
  while (m[i] >= '0' && m[i] <= '9')
    i++;
  return m[i] == ':' && m[i + 1] == ' ' ? i + 2 : 0;
}

void td__error_prefix(const char *fmt, ...) {
  char prefix[512];
  char old[TD__MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, td__msg, sizeof old);
  const size_t tag = td__rank_tag_len(prefix);
  const char *rest = old; /* the same rank's tag on both: keep the prefix's */
  if (tag && strncmp(old, prefix, tag) == 0)
    rest = old + tag;
  /* Truncation is intended: the prefix wins, the tail of the old message goes. */
  size_t plen = strlen(prefix);
  if (plen >= sizeof td__msg)
    plen = sizeof td__msg - 1;
  memcpy(td__msg, prefix, plen);
  size_t olen = strnlen(rest, sizeof td__msg - 1 - plen);
  memcpy(td__msg + plen, rest, olen);
  td__msg[plen + olen] = '\0';
}

const char *td_version(void) { return TD_VERSION_STRING; }
