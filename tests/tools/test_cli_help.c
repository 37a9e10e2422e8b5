/* SPDX-License-Identifier: Apache-2.0
 * Every option a tdist subcommand accepts is in its help: the parsers read
 * their options from one table per command (tools/tdist/cli_options.c,
 * compiled into this test), and for each command every option of its table
 * (and every other spelling it accepts) must appear in `tdist COMMAND
 * --help` as a word; where the usage synopsis lists options one by one
 * (rather than "[options]") each must be in the synopsis too (bench coll's
 * lacked --repeat, bench exec's --micro). `tdist help COMMAND [KIND]` prints
 * exactly that command's --help (it printed the general usage); `tdist help`
 * alone the general usage; an unknown command is exit 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cli_test_util.h"

static char help[1 << 16], other[1 << 16];

/* Whether `word` (an option such as "--m") occurs in text as a whole word: not
 * part of a longer option ("--max", "--micro") or name. */
static int has_word(const char *text, const char *word) {
  size_t n = strlen(word);
  for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
    char before = p == text ? ' ' : p[-1], after = p[n];
    int inside = isalnum((unsigned char)before) || before == '-' || before == '_' ||
                 isalnum((unsigned char)after) || after == '-' || after == '_';
    if (!inside)
      return 1;
  }
  return 0;
}

/* The usage synopsis: the "usage:" line and the lines after it that go on with
 * "[" or "(" (continuations and "(or: ...)" forms). */
static void synopsis(const char *text, char *out, size_t cap) {
  const char *p = strstr(text, "usage:");
  assert_non_null(p);
  size_t len = 0;
  for (int first = 1; p && *p; first = 0) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    const char *q = p;
    while (*q == ' ')
      q++;
    if (!first && *q != '[' && *q != '(')
      break;
    if (len + l + 2 < cap) {
      memcpy(out + len, p, l);
      len += l;
      out[len++] = '\n';
    }
    p = e ? e + 1 : NULL;
  }
  out[len] = 0;
}

static void test_every_option_in_help(void **state) {
  (void)state;
  size_t count = 0;
  const td_cli_options *all = td_cli_options_all(&count);
  assert_true(count >= 8);
  for (size_t c = 0; c < count; c++) {
    const td_cli_options *t = &all[c];
    char args[256], syn[4096];
    snprintf(args, sizeof args, "%s --help", t->command);
    int rc = run(args, help, sizeof help);
    if (rc != 0)
      fprintf(stderr, "tdist %s: status %d\n%s\n", args, rc, help);
    assert_int_equal(rc, 0);
    synopsis(help, syn, sizeof syn);
    int listed = !strstr(syn, "[options]") && !strstr(syn, "[OPTIONS]");
    for (size_t k = 0; k < t->nvalued + t->nflags + t->naliases; k++) {
      const char *o = k < t->nvalued ? t->valued[k]
                      : k < t->nvalued + t->nflags ? t->flags[k - t->nvalued]
                                                   : t->aliases[k - t->nvalued - t->nflags];
      if (!strcmp(o, "--help"))
        continue; /* the help is where it is asked for */
      int in_help = has_word(help, o), in_syn = has_word(syn, o);
      int is_alias = k >= t->nvalued + t->nflags;
      if (!in_help || (listed && !is_alias && !in_syn))
        fprintf(stderr, "tdist %s: option %s is %s\n--- help:\n%s\n", t->command, o,
                in_help ? "not in the usage synopsis" : "not in the help", help);
      assert_true(in_help);
      if (listed && !is_alias)
        assert_true(in_syn);
    }
  }
}

/* An option's range is in its help: tdist run's --rounds (1..15) was not. */
static void test_ranges_in_help(void **state) {
  (void)state;
  assert_int_equal(run("run --help", help, sizeof help), 0);
  static const char *const run_ranges[] = {"1..64", "1..100000", "1..15", "0..2^62", "1..1048576", "1..1024"};
  for (size_t i = 0; i < sizeof run_ranges / sizeof run_ranges[0]; i++)
    assert_non_null(strstr(help, run_ranges[i]));
  assert_non_null(strstr(help, "report medians, 1..15 (default 3)"));
  assert_int_equal(run("bench coll --help", help, sizeof help), 0);
  assert_non_null(strstr(help, "best time, 1..100"));
}

/* tdist help COMMAND [KIND] is COMMAND [KIND] --help, byte for byte. */
static void test_help_command(void **state) {
  (void)state;
  size_t count = 0;
  const td_cli_options *all = td_cli_options_all(&count);
  for (size_t c = 0; c < count; c++) {
    char a[256], b[256];
    snprintf(a, sizeof a, "help %s", all[c].command);
    snprintf(b, sizeof b, "%s --help", all[c].command);
    assert_int_equal(run(a, help, sizeof help), 0);
    assert_int_equal(run(b, other, sizeof other), 0);
    if (strcmp(help, other))
      fprintf(stderr, "tdist %s differs from tdist %s:\n%s\n---\n%s\n", a, b, help, other);
    assert_string_equal(help, other);
  }
  static const char *const words[] = {"bench", "tune"}; /* a command of kinds: its own list of them */
  for (size_t i = 0; i < 2; i++) {
    char a[64], b[64];
    snprintf(a, sizeof a, "help %s", words[i]);
    snprintf(b, sizeof b, "%s --help", words[i]);
    assert_int_equal(run(a, help, sizeof help), 0);
    assert_int_equal(run(b, other, sizeof other), 0);
    assert_string_equal(help, other);
  }
  assert_int_equal(run("help", help, sizeof help), 0);
  assert_non_null(strstr(help, "usage: tdist COMMAND"));
  assert_non_null(strstr(help, "tdist help COMMAND"));
  expect_usage_error("help nope", "tdist help: unknown command 'nope'");
  expect_usage_error("help bench nope", "tdist bench: unknown kind 'nope'");
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_option_in_help),
      cmocka_unit_test(test_ranges_in_help),
      cmocka_unit_test(test_help_command),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
