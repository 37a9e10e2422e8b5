/* SPDX-License-Identifier: Apache-2.0
 * Option parsing shared by `tdist run` and `tdist explain` (tools layer); see
 * cli_common.h. One copy, so both commands accept and refuse the same input
 * with the same words. */
#include "cli_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int td_cli_int(const char *cmd, const char *opt, const char *text, long long lo, long long hi,
               long long *out) {
  char *end;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (!text || !*text || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "%s: %s expects an integer in %lld..%lld, got '%s'\n", cmd, opt, lo, hi,
            text ? text : "(nothing)");
    return 0;
  }
  *out = v;
  return 1;
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
    fprintf(stderr, "%s: unknown backend '%s' (cpu or cuda)\n", cmd, backend);
    return -1;
  }
  return 0;
}
