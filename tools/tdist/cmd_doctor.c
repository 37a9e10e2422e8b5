/* SPDX-License-Identifier: Apache-2.0
 * `tdist doctor`: the build, the configuration table with current values, a
 * check that each variable set in the environment parses (exit status 1 if
 * one does not), and the TD_* variables that are not in the table (typos). */
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
  int bad = td_config_check_all(stderr);
  if (td_config_unknown(NULL) > 0) {
    printf("\nunknown TD_ variables (tdist does not read them):\n");
    td_config_unknown(stdout);
  }
  if (bad)
    fprintf(stderr, "doctor: %d configuration variable%s do%s not parse\n", bad, bad == 1 ? "" : "s",
            bad == 1 ? "es" : "");
  return bad ? 1 : 0;
}
