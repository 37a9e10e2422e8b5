/* SPDX-License-Identifier: Apache-2.0
 * `tdist doctor`: the build, the configuration table with current values, and
 * a check that each configuration variable parses. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "tdist/tdist.h"

int td_cmd_doctor(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: tdist doctor\n  prints the build and every configuration variable with its value\n");
    return 0;
  }
  printf("tdist %s\n\nconfiguration variables:\n", td_version());
  td_config_dump(stdout);
  static const char *ints[] = {"TD_TIMEOUT_MS", "TD_SYMM_HEAP_SIZE"};
  int bad = 0;
  for (unsigned i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    int64_t v;
    if (td_config_int(ints[i], &v) != TD_OK) {
      fprintf(stderr, "doctor: %s\n", td_last_error());
      bad = 1;
    }
  }
  return bad;
}
