/* SPDX-License-Identifier: Apache-2.0
 * Options of every tdist subcommand follow one rule set (cli_common.h's
 * td_cli_once and td_cli_positional): an option given twice is refused
 * (exit 2, "--X given twice"), never the last one silently winning, in
 * `run`, `explain`, `bench coll`, `bench exec`, `bench <op>`, `tune gemm`
 * and `calibrate`, with --opt=value and --opt value counting alike (tune
 * gemm takes --opt=value too, as every other subcommand); tdist
 * run's --input repeats once per NAME; a list naming an entry twice (bench
 * coll --op) names it; and a word where only options go is an unexpected
 * positional argument, listed with the options the command takes, not an
 * "unknown option"; a misspelt option names the option meant. Everything here is refused while parsing: nothing
 * runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_test_util.h"

static char tmpdir[256], prog[512];

/* `tdist CMD PROGRAM REST` refused with exit 2 and `needle` in its output. */
static void expect_prog(const char *cmd, const char *rest, const char *needle) {
  char args[1024];
  snprintf(args, sizeof args, "%s '%s' %s", cmd, prog, rest);
  expect_usage_error(args, needle);
}

static void test_run_repeats(void **state) {
  (void)state;
  expect_prog("run", "--ranks 2 --ranks 3", "tdist run: --ranks given twice; give each option once");
  expect_prog("run", "--ranks 2 --json a.json --json=b.json", "tdist run: --json given twice");
  expect_prog("run", "--ranks 2 --trace=a --trace b", "tdist run: --trace given twice");
  expect_prog("run", "--ranks 2 --iters 1 --iters 2", "tdist run: --iters given twice");
  expect_prog("run", "--ranks 2 --seed 1 --seed=1", "tdist run: --seed given twice"); /* even the same value */
  expect_prog("run", "--ranks 2 --backend cpu --backend cuda", "tdist run: --backend given twice");
  expect_prog("run", "--ranks 2 --check --check", "tdist run: --check given twice");
  expect_prog("run", "--ranks 2 --no-baseline --no-baseline", "tdist run: --no-baseline given twice");
  expect_prog("run", "--ranks 2 --dims M=8 --dims H=8", "tdist run: --dims given twice; give every dim in one list");
  /* --input repeats, once per NAME */
  expect_prog("run", "--ranks 2 --input x=a.npy --input x=b.npy", "tdist run: --input x given twice");
}

static void test_explain_repeats(void **state) {
  (void)state;
  expect_prog("explain", "--ranks 2 --ranks=4", "tdist explain: --ranks given twice");
  expect_prog("explain", "--ranks 2 --chunks 2 --chunks 3", "tdist explain: --chunks given twice");
  expect_prog("explain", "--ranks 2 --dump a --dump b", "tdist explain: --dump given twice");
  expect_prog("explain", "--ranks 2 --sequential --sequential", "tdist explain: --sequential given twice");
  expect_prog("explain", "--ranks 2 --dims M=8 --dims M=16", "tdist explain: --dims given twice");
}

static void test_bench_repeats(void **state) {
  (void)state;
  expect_usage_error("bench coll --min 8 --min 16", "tdist bench coll: --min given twice");
  expect_usage_error("bench coll --max=64 --max 128", "tdist bench coll: --max given twice");
  expect_usage_error("bench coll --ranks 2 --ranks 2", "tdist bench coll: --ranks given twice");
  expect_usage_error("bench coll --json a --json b", "tdist bench coll: --json given twice");
  expect_usage_error("bench coll --no-mpi --no-mpi", "tdist bench coll: --no-mpi given twice");
  expect_usage_error("bench coll --staged --staged", "tdist bench coll: --staged given twice");
  expect_usage_error("bench coll --op all_gather --op all_reduce", "tdist bench coll: --op given twice; give every "
                     "collective in one list (--op all_gather,all_reduce)");
  expect_usage_error("bench exec --iters 1 --iters=2", "tdist bench exec: --iters given twice");
  expect_usage_error("bench exec --size 64 --size 128", "tdist bench exec: --size given twice");
  /* --size sets M, N and K: beside one of them, one would win by position */
  expect_usage_error("bench exec --size 64 --m 32", "tdist bench exec: --size sets M, N and K; give it alone or "
                     "--m, --n and --k, not both (--size and --m given)");
  expect_usage_error("bench exec --k 32 --size 64", "(--k and --size given)");
  expect_usage_error("bench ag_gemm --ranks 2 --ranks=3", "tdist bench ag_gemm: --ranks given twice");
  expect_usage_error("tune gemm --M 64 --M 128 --N 8 --K 8", "tdist tune gemm: --M given twice");
  expect_usage_error("tune gemm -M 64 --M 128 --N 8 --K 8", "tdist tune gemm: --M given twice"); /* one option */
  expect_usage_error("tune gemm --M 8 --N 8 --K 8 --no-store --no-store", "tdist tune gemm: --no-store given twice");
  expect_usage_error("calibrate --quick --quick", "tdist calibrate: --quick given twice");
}

/* bench coll --op: an entry named twice, or beside 'all' that holds it, is named. */
static void test_op_list_duplicates(void **state) {
  (void)state;
  expect_usage_error("bench coll --op all_gather,all_gather", "tdist bench coll: --op all_gather,all_gather names "
                     "all_gather twice");
  expect_usage_error("bench coll --op all_reduce,all_to_all,all_reduce", "names all_reduce twice");
  expect_usage_error("bench coll --op all,all", "--op all,all names all twice");
  expect_usage_error("bench coll --op all,all_gather", "--op all,all_gather: all already includes every collective");
  expect_usage_error("bench coll --op reduce_scatter,all", "--op reduce_scatter,all: all already includes");
}

/* A word where only options go: an unexpected positional argument, with what is allowed. */
static void test_positional_arguments(void **state) {
  (void)state;
  static char out[1 << 16];
  expect_usage_error("bench coll extra", "tdist bench coll: unexpected argument 'extra': tdist bench coll takes no "
                     "positional arguments, only the options --ranks V, --min V, --max V, --iters V, --repeat V, "
                     "--json V, --op V, --staged, --no-mpi, --help (see tdist bench coll --help)");
  expect_usage_error("bench exec 4096", "tdist bench exec: unexpected argument '4096': tdist bench exec takes no "
                     "positional arguments, only the options --json V, --size V,");
  expect_usage_error("tune gemm --M 8 extra", "tdist tune gemm: unexpected argument 'extra': tdist tune gemm takes "
                     "no positional arguments, only the options --M V, --N V, --K V,");
  expect_usage_error("bench ag_gemm --ranks 2 stray", "tdist bench ag_gemm: unexpected argument 'stray'");
  int rc = run("bench gemm_ar extra", out, sizeof out);
  assert_int_equal(rc, 2);
  assert_null(strstr(out, "unknown option")); /* a word is not a misspelt option */
  /* a misspelt option is still one */
  expect_usage_error("bench coll --extra", "tdist bench coll: unknown or incomplete option '--extra'");
  expect_usage_error("bench exec --extra 1", "tdist bench exec: unknown option '--extra'");
}

/* tune gemm reads its options with the same helpers as every subcommand (td_cli_arg): --opt=value is --opt value
 * (it was "unknown or incomplete option '--M=64'"), and -M, --M and --M=64 are one option. Parsing succeeds, so the
 * command goes on to need a GPU or a CUDA build: exit 1, never the usage error. */
static void test_tune_inline_values(void **state) {
  (void)state;
  static char out[1 << 16];
  int rc = run("tune gemm --M=64 --N=8 --K=8 --iters=1 --dtype=bf16 --layout=kn --arch=90", out, sizeof out);
  if (rc != 1)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 1);
  assert_null(strstr(out, "unknown"));
  assert_true(strstr(out, "no usable GPU") || strstr(out, "this build has no CUDA GEMM tiles"));
  expect_usage_error("tune gemm --M=64 --M 128 --N 8 --K 8", "tdist tune gemm: --M given twice");
  expect_usage_error("tune gemm -M 64 --M=128 --N 8 --K 8", "tdist tune gemm: --M given twice");
  expect_usage_error("tune gemm --M=x --N 8 --K 8", "tdist tune gemm: --M expects an integer in 1..1048576, got 'x'");
  expect_usage_error("tune gemm --M= --N 8 --K 8", "--M expects an integer in 1..1048576, got ''");
  expect_usage_error("tune gemm --M 8 --N 8 --K 8 --layout=xy", "tdist tune gemm: --layout must be nk or kn, not 'xy'");
  expect_usage_error("tune gemm --M 8 --N 8 --K 8 --no-store=1", "tdist tune gemm: option --no-store takes no value");
  expect_usage_error("tune gemm --M 8 --N 8 --K", "tdist tune gemm: option --K needs a value");
  expect_usage_error("tune gemm --M 8 --N 8 --K 8 --Q=1", "tdist tune gemm: unknown or incomplete option '--Q'");
}

/* A misspelt option is answered with the option meant (the command's own table, a few edits away, ties all
 * named); one that is nothing like any option gets no guess. */
static void test_option_did_you_mean(void **state) {
  (void)state;
  expect_prog("run", "--itres 3", "tdist run: unknown option '--itres' (did you mean '--iters'?) (see tdist run --help)");
  expect_prog("explain", "--chunk 2", "(did you mean '--chunks'?)");
  expect_usage_error("bench ag_gemm --rank 2", "tdist bench ag_gemm: unknown option --rank (did you mean '--ranks'?)");
  expect_usage_error("bench exec --tile 2", "tdist bench exec: unknown option '--tile' (did you mean '--tiles'?)");
  expect_usage_error("rnu", "tdist: unknown command 'rnu' (did you mean 'run'?)");
  expect_usage_error("bench ag_gmm", "tdist bench: unknown kind 'ag_gmm' (did you mean 'ag_gemm'?)");
  expect_prog("run", "--ranks 2 --backend cdua", "unknown backend 'cdua' (cpu or cuda) (did you mean 'cuda'?)");
  char args[1024];
  static char out[1 << 16];
  snprintf(args, sizeof args, "run '%s' --zz 1", prog);
  assert_int_equal(run(args, out, sizeof out), 2);
  assert_non_null(strstr(out, "tdist run: unknown option '--zz' (see tdist run --help)"));
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_optrules_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  snprintf(prog, sizeof prog, "%s/small.td", tmpdir);
  static const char small[] = "dim M = 8, H = 8\ninput x : f32[M, H] shard(0)\noutput y = all_gather(x)\n";
  FILE *f = fopen(prog, "w");
  if (!f || fputs(small, f) < 0 || fclose(f))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_repeats),        cmocka_unit_test(test_explain_repeats),
      cmocka_unit_test(test_bench_repeats),      cmocka_unit_test(test_op_list_duplicates),
      cmocka_unit_test(test_positional_arguments), cmocka_unit_test(test_tune_inline_values),
      cmocka_unit_test(test_option_did_you_mean),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(prog);
  rmdir(tmpdir);
  return rc;
}
