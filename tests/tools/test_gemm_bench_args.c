/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's option checks (bench/gemm/gemm_bench_args.c, tester report
 * item 8), on the CPU: every bad value of every option is refused with a
 * message naming the option, the value and what it allows, before the
 * benchmark would probe the GPU; good values parse to what they say. The
 * compiled XV set is passed in, as gemm_bench passes its own. */
#define _POSIX_C_SOURCE 200809L /* strtok_r, mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm_bench_args.h"

static const int xv[] = {0, 16, 32, 48, 128};

/* Parses the space-separated words of `line` after a program name. */
static int parse(const char *line, gb_args *o, char *err, size_t cap) {
  static char buf[1024];
  char *argv[64] = {"gemm_bench"};
  int argc = 1;
  snprintf(buf, sizeof buf, "%s", line);
  for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && argc < 63; t = strtok_r(NULL, " ", &save))
    argv[argc++] = t;
  err[0] = '\0';
  return gb_parse_args(argc, argv, xv, (int)(sizeof xv / sizeof xv[0]), o, err, cap);
}

static void refused(const char *line, const char *needle) {
  gb_args o;
  char err[512];
  int rc = parse(line, &o, err, sizeof err);
  if (rc != 2 || !strstr(err, needle))
    fprintf(stderr, "'%s': rc %d, message '%s', expected '%s'\n", line, rc, err, needle);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(err, needle));
}

static void test_defaults_and_values(void **state) {
  (void)state;
  gb_args o;
  char err[512];
  assert_int_equal(parse("", &o, err, sizeof err), 0);
  assert_int_equal(o.iters, 50);
  assert_int_equal(o.nshapes, 7);
  assert_int_equal(o.with_hooks, 0);
  assert_string_equal(o.configs, "all");
  assert_int_equal(o.streams, 1);
  assert_int_equal(parse("--streams 8 --layout kn", &o, err, sizeof err), 0);
  assert_int_equal(o.streams, 8);
  assert_int_equal(parse("--shapes=128x3584x8192,7x5x3 --iters 9 --layout=kn --hook-modes both,wait_gpu "
                         "--hook-variants 128,0 --stamps 3 --configs 64x64x8,sm80", &o, err, sizeof err), 0);
  assert_int_equal(o.nshapes, 2);
  assert_int_equal(o.shapes[1][0], 7);
  assert_int_equal(o.shapes[1][1], 5);
  assert_int_equal(o.shapes[1][2], 3);
  assert_int_equal(o.iters, 9);
  assert_int_equal(o.layout_kn, 1);
  assert_int_equal(o.modes, (1u << 0) | (1u << 3)); /* both, wait_gpu */
  assert_string_equal(gb_mode_names[0], "both");
  assert_string_equal(gb_mode_names[3], "wait_gpu");
  assert_int_equal(o.nvariants, 2);
  assert_int_equal(o.variants[0], 128);
  assert_int_equal(o.stamps, 3);
  assert_int_equal(o.with_hooks, 1);
  assert_int_equal(parse("--help", &o, err, sizeof err), 0);
  assert_int_equal(o.help, 1);
}

static void test_hook_options(void **state) {
  (void)state;
  refused("--hook-modes bogus", "--hook-modes expects a comma-separated list of both, wait, raise");
  refused("--hook-modes wait,,raise", "got 'wait,,raise'");
  refused("--hook-modes wait,wait", "--hook-modes names a mode twice");
  refused("--hook-variants 7", "--hook-variants expects a comma-separated list of the variants compiled in "
                               "(0,16,32,48,128), got '7'");
  refused("--hook-variants abc", "got 'abc'");
  refused("--hook-variants 16,16", "names a variant twice");
  refused("--stamps abc", "--stamps expects a whole number 1..1000000, got 'abc'");
  refused("--stamps -5", "--stamps expects a whole number 1..1000000, got '-5'");
  refused("--stamps 0", "got '0'");
}

static void test_counts_layout_shapes(void **state) {
  (void)state;
  refused("--iters -3", "--iters expects a whole number 1..1000000, got '-3'");
  refused("--iters x", "--iters expects a whole number 1..1000000, got 'x'");
  refused("--iters 5x", "got '5x'");
  refused("--layout xyz", "--layout expects nk (B as [N,K]) or kn (B as [K,N]), got 'xyz'");
  refused("--shapes abc", "--shapes expects a comma-separated list of MxNxK, each 1..1048576, got 'abc'");
  refused("--shapes 0x0x0", "got '0x0x0'");
  refused("--shapes -5x8x8", "got '-5x8x8'");
  refused("--shapes 8x8", "got '8x8'");
  refused("--shapes 8x8x8x8", "got '8x8x8x8'");
  refused("--shapes 8x8x8,", "got '8x8x8,'");
  refused("--configs 12x", "--configs expects all or a comma-separated list of BMxBNxSTAGES");
  refused("--streams 0", "--streams expects a whole number 1..16, got '0'");
  refused("--streams 17", "--streams expects a whole number 1..16, got '17'");
  refused("--streams 2x", "got '2x'");
  refused("--streams 2 --hooks", "--streams 2 times plain launches only");
  refused("--stamps 3 --streams 4", "need --streams 1");
  refused("--streams -1", "--streams expects a whole number 1..16, got '-1'");
  refused("--streams=", "--streams expects a whole number 1..16, got ''");
  refused("--streams +3", "got '+3'");
  refused("--streams", "--streams needs a value");
  refused("--streams 2 --streams 2", "--streams given twice");
  refused("--streams 2 --hook-modes wait", "need --streams 1");
  refused("--hook-variants 16 --streams=3", "--streams 3 times plain launches only");
  { /* the bounds themselves, and --streams 1 with the hook options */
    gb_args o;
    char err[512];
    assert_int_equal(parse("--streams=16", &o, err, sizeof err), 0);
    assert_int_equal(o.streams, 16);
    assert_int_equal(parse("--streams 1 --hooks", &o, err, sizeof err), 0);
    assert_int_equal(o.streams, 1);
    assert_int_equal(o.with_hooks, 1);
  }
}

static void test_option_syntax(void **state) {
  (void)state;
  refused("--json --iters 3", "--json needs a value");
  refused("--iters", "--iters needs a value");
  refused("--frobnicate", "unknown option '--frobnicate'");
  refused("--iters 3 --iters 4", "--iters given twice");
  refused("--hooks=1", "option --hooks takes no value");
}

static void test_json_checked_up_front(void **state) {
  (void)state;
  refused("--json /nonexistent/x.json", "--json /nonexistent/x.json: directory /nonexistent does not exist");
  refused("--json /tmp", "--json /tmp is a directory");
  refused("--json=", "--json needs a file name");
  gb_args o;
  char err[512], line[600], dir[] = "/tmp/gb_args_XXXXXX";
  assert_non_null(mkdtemp(dir));
  snprintf(line, sizeof line, "--json %s/out.json", dir);
  assert_int_equal(parse(line, &o, err, sizeof err), 0);
  assert_non_null(strstr(o.json, "/out.json"));
  assert_int_equal(access(line + 7, F_OK), -1); /* checked, not created */
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_values),   cmocka_unit_test(test_hook_options),
      cmocka_unit_test(test_counts_layout_shapes),  cmocka_unit_test(test_option_syntax),
      cmocka_unit_test(test_json_checked_up_front),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
