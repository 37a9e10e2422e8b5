/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` on cpu: option errors
 * (exit status 2 and a message naming the option and its range), runs with
 * no baseline (bf16), the CPU-sized defaults and per-case progress, a JSON
 * write that fails (exit 1), and a tiny run of each
 * operator whose JSON holds the environment and, per side, a positive p50,
 * p99 >= p50 and a result equal to the baseline's within f32 rounding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_test_util.h"

static void test_option_errors(void **state) {
  (void)state;
  expect_usage_error("bench ag_gemm --backend gpu", "--backend gpu: use cpu or cuda");
  expect_usage_error("bench ag_gemm --ranks 0", "tdist bench ag_gemm: --ranks expects an integer in 1..64, got '0'");
  expect_usage_error("bench gemm_rs --shape 3x4", "tdist bench gemm_rs: --shape 3x4: exactly 3 dims needed, got 2 "
                     "(expects MxNxK)");
  expect_usage_error("bench gemm_ar --dtype q8", "--dtype expects f32, bf16 or f16, got 'q8'");
  expect_usage_error("bench ag_gemm --variants sm,fast", "--variants: variant 'fast' is unknown");
  expect_usage_error("bench ag_gemm --variants copy-engine", "--variants: variant 'copy-engine' is unknown; allowed "
                     "for ag_gemm: sequential, sm, copy_engine, ring, or none alone; fused needs --backend cuda (did "
                     "you mean 'copy_engine'?)");
  expect_usage_error("bench all_reduce --sizes 9x", "--sizes 9x: unit 'x' is not one of K, M, G");
  expect_usage_error("bench ag_gemm --models nothing", "--models expects all, check or model names");
  expect_usage_error("bench ag_gemm --frobnicate 1", "unknown option --frobnicate");
  expect_usage_error("bench ag_gemm --iters", "--iters needs a value");
}

/* Numbers parsed strictly with the option's range (no atoi wrap-around or
 * trailing junk), lists refused as a whole, options that do not apply to
 * the operator refused instead of ignored. */
static void test_strict_options(void **state) {
  (void)state;
  expect_usage_error("bench ag_gemm --ranks 4294967298", "--ranks expects an integer in 1..64, got '4294967298'");
  expect_usage_error("bench gemm_ar --iters 4294967297", "--iters expects an integer in 1..100000, got '4294967297'");
  expect_usage_error("bench ag_gemm --shape 8x8x8abc", "--shape 8x8x8abc: dim 3 of 3 is '8abc', not an integer (expects "
                     "MxNxK, each in 1..1048576)");
  expect_usage_error("bench ag_gemm --shape 8x8x8x8", "--shape 8x8x8x8: at most 3 dims, got 4 (expects MxNxK)");
  expect_usage_error("bench ag_gemm --shape 8x-8x8", "--shape 8x-8x8: dim 2 of 3 is -8; each must be in 1..1048576");
  expect_usage_error("bench ag_gemm --shape 4096x0x8", "tdist bench ag_gemm: --shape 4096x0x8: dim 2 of 3 is 0; each must be in "
                     "1..1048576 (expects MxNxK)");
  expect_usage_error("bench ag_gemm --shape 4096xx8", "--shape 4096xx8: dim 2 of 3 is empty");
  expect_usage_error("bench ag_gemm --m 0,abc", "--m 0,abc: value 1 of 2 is 0; each must be in 1..1048576 (expects a "
                     "comma-separated list of integers)");
  expect_usage_error("bench ag_gemm --m 64,", "--m 64,: value 2 of 2 is empty");
  expect_usage_error("bench ag_gemm --m -5", "--m -5: value 1 of 1 is -5; each must be in 1..1048576");
  expect_usage_error("bench gemm_rs --chunks 100000", "--chunks expects an integer in 0..64, got '100000'");
  expect_usage_error("bench ag_gemm --compute-workers 5000", "--compute-workers expects an integer in 0..1024");
  expect_usage_error("bench ag_gemm --comm-workers -1", "--comm-workers expects an integer in 0..1024, got '-1'");
  expect_usage_error("bench all_reduce --warmup 1x", "--warmup expects an integer in 0..10000, got '1x'");
  expect_usage_error("bench all_reduce --shape 8x8x8", "--shape applies to the GEMM operators only");
  expect_usage_error("bench all_reduce --m 64", "--m applies to the GEMM operators only");
  expect_usage_error("bench ag_gemm --sizes 8K", "--sizes applies to all_reduce only");
  expect_usage_error("bench all_reduce --sizes 8K,,64K", "--sizes expects a comma-separated list of byte sizes");
  expect_usage_error("bench gemm_ar --shape 8x8x8 --m 64", "cannot be combined with --m or --models");
}

/* --variants checked against the operator while parsing (a side that cannot
 * exist is refused, not an error row with exit 0); --dtype limited to the
 * operators' three; --opt=value accepted; a side failing at run time exits 1. */
static void test_variants_and_failures(void **state) {
  (void)state;
  expect_usage_error("bench ag_gemm --variants one_shot",
                     "one_shot does not apply to ag_gemm here; allowed: sequential, sm, copy_engine, ring");
  expect_usage_error("bench gemm_rs --variants ring", "ring does not apply to gemm_rs here; allowed: sequential, sm");
  expect_usage_error("bench all_reduce --variants fused", "fused needs --backend cuda");
  expect_usage_error("bench gemm_ar --variants auto", "auto does not apply to gemm_ar");
  expect_usage_error("bench ag_gemm --variants ''", "--variants expects a comma-separated list of variants");
  expect_usage_error("bench ag_gemm --variants sm,", "got 'sm,'");
  expect_usage_error("bench ag_gemm --variants sm,sm", "--variants names sm twice");
  expect_usage_error("bench ag_gemm --variants none,sm", "cannot be combined with other variants");
  expect_usage_error("bench ag_gemm --dtype i32", "--dtype expects f32, bf16 or f16, got 'i32'");
  expect_usage_error("bench ag_gemm --iters=0", "--iters expects an integer in 1..100000, got '0'");
  expect_usage_error("bench ag_gemm --bogus=1", "unknown option --bogus");
  /* a word is no option: said as a positional argument, with the options the kind takes */
  expect_usage_error("bench gemm_ar extra", "tdist bench gemm_ar: unexpected argument 'extra': tdist bench gemm_ar "
                     "takes no positional arguments, only the options --ranks V, --iters V,");
  expect_usage_error("bench all_reduce --sizes 8K extra", "--shape V, --help (see tdist bench all_reduce --help)");
  static char out[1 << 16];
  int rc = run("bench gemm_rs --ranks=2 --iters=1 --warmup=0 --shape=8x8x8 --variants=sm", out, sizeof out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "tdist sm"));
}

/* An unknown variant lists the variants of the operator asked for, never
 * another operator's (ag_gemm used to suggest all_reduce's one_shot). */
static void test_unknown_variant_lists_this_operator(void **state) {
  (void)state;
  static const struct {
    const char *kind, *allowed, *foreign;
  } ops[] = {
      {"ag_gemm", "allowed for ag_gemm: sequential, sm, copy_engine, ring, or none alone", "one_shot"},
      {"gemm_rs", "allowed for gemm_rs: sequential, sm, or none alone", "copy_engine"},
      {"gemm_ar", "allowed for gemm_ar: sequential, one_shot, two_shot, or none alone", "ring"},
      {"all_reduce", "allowed for all_reduce: one_shot, two_shot, or none alone", "sequential"},
  };
  static char out[1 << 16];
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    char args[128];
    snprintf(args, sizeof args, "bench %s --variants bogus", ops[i].kind);
    expect_usage_error(args, "--variants: variant 'bogus' is unknown; ");
    expect_usage_error(args, ops[i].allowed);
    run(args, out, sizeof out);
    assert_null(strstr(out, ops[i].foreign));
  }
}

/* gemm_rs and gemm_ar split K over the ranks: K < ranks is refused with the
 * other option checks (exit 2, nothing run, no JSON written), naming K, the
 * ranks and what is allowed, not by every side at run time. */
static void test_k_below_ranks_up_front(void **state) {
  (void)state;
  expect_usage_error("bench gemm_rs --ranks 4 --shape 8x8x3",
                     "tdist bench gemm_rs: --shape 8x8x3: K=3 is split over --ranks 4 and every rank needs at least "
                     "one element of it");
  expect_usage_error("bench gemm_rs --ranks 4 --shape 8x8x3", "give K >= 4, or --ranks <= 3");
  expect_usage_error("bench gemm_ar --ranks 2 --shape 1x1x1 --variants one_shot", "tdist bench gemm_ar: --shape "
                     "1x1x1: K=1 is split over --ranks 2");
  char json[256], args[512];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_k_%ld.json", (long)getpid());
  snprintf(args, sizeof args, "bench gemm_rs --ranks 2 --iters 1 --warmup 0 --shape 8x8x1 --json %s", json);
  static char out[1 << 16];
  assert_int_equal(run(args, out, sizeof out), 2);
  assert_null(strstr(out, "| case |")); /* refused before the table and any setup */
  assert_null(strstr(out, "case 1/1"));
  assert_int_equal(access(json, F_OK), -1);
  /* K = ranks (one each, parts need not divide M or N) runs; ag_gemm does not split K */
  assert_int_equal(run("bench gemm_rs --ranks 2 --iters 1 --warmup 0 --shape 8x8x2 --variants none", out, sizeof out),
                   0);
  assert_int_equal(run("bench ag_gemm --ranks 2 --iters 1 --warmup 0 --shape 8x8x1 --variants none", out, sizeof out),
                   0);
}

static void tiny(const char *kind, const char *shape_args, int nsides) {
  char json[256], args[1024];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_%s_%ld.json", kind, (long)getpid());
  snprintf(args, sizeof args, "bench %s --backend cpu --ranks 3 --iters 3 --warmup 1 %s --json %s", kind,
           shape_args, json);
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "tdist %s: status %d\n%s\n", args, rc, out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "| case | side | variant |"));
  cJSON *j = load_json(json);
  assert_string_equal(cJSON_GetObjectItem(j, "operator")->valuestring, kind);
  cJSON *env = cJSON_GetObjectItem(j, "environment");
  assert_non_null(cJSON_GetObjectItem(env, "git_revision"));
  assert_non_null(cJSON_GetObjectItem(env, "interconnect"));
  cJSON *res = cJSON_GetObjectItem(j, "results");
  assert_true(cJSON_GetArraySize(res) >= 1);
  cJSON *c;
  cJSON_ArrayForEach(c, res) {
    assert_null(cJSON_GetObjectItem(c, "error"));
    cJSON *sides = cJSON_GetObjectItem(c, "sides"), *s;
    assert_int_equal(cJSON_GetArraySize(sides), nsides);
    cJSON_ArrayForEach(s, sides) {
      assert_null(cJSON_GetObjectItem(s, "error"));
      double p50 = cJSON_GetObjectItem(s, "p50_s")->valuedouble, p99 = cJSON_GetObjectItem(s, "p99_s")->valuedouble;
      assert_true(p50 > 0 && p99 >= p50);
      /* every side but the baseline is compared with it */
      cJSON *d = cJSON_GetObjectItem(s, "max_rel_diff");
      if (!strcmp(cJSON_GetObjectItem(s, "side")->valuestring, "baseline"))
        assert_null(d);
      else
        assert_true(d && d->valuedouble < 1e-4);
    }
  }
  cJSON_Delete(j);
  unlink(json);
}

static void test_tiny_runs(void **state) {
  (void)state;
  tiny("ag_gemm", "--shape 37x20x16", 6);  /* baseline, auto, sequential, sm, copy_engine, ring */
  tiny("gemm_rs", "--shape 37x20x16", 4);  /* baseline, auto, sequential, sm */
  tiny("gemm_ar", "--shape 11x20x16", 5);  /* baseline, auto, sequential, one_shot, two_shot */
  tiny("all_reduce", "--sizes 4K,1000", 4); /* baseline, auto, one_shot, two_shot */
  tiny("gemm_rs", "--shape 37x20x16 --variants none", 2); /* baseline and auto only */
}

/* bf16 on cpu has no baseline (OpenBLAS sgemm is f32): the table shows no
 * speedup ('-') and no difference of auto against itself ('n/a'), says why
 * once, and the JSON leaves those fields out; the other variants are
 * compared with auto. */
static void test_no_baseline(void **state) {
  (void)state;
  char json[256], args[1024];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_nobase_%ld.json", (long)getpid());
  snprintf(args, sizeof args, "bench ag_gemm --ranks 2 --iters 2 --warmup 0 --dtype bf16 --variants sm "
           "--shape 16x8x8 --json %s", json);
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  const char *note = strstr(out, "no baseline on cpu for bf16 (OpenBLAS sgemm is f32 only)");
  assert_non_null(note);
  assert_null(strstr(note + 1, "no baseline on cpu")); /* said once */
  assert_non_null(strstr(out, "none (see above)"));
  assert_null(strstr(out, "0.000 |      0.0")); /* no zero speedup */
  assert_null(strstr(out, "no tdist side could be created"));
  const char *autorow = strstr(out, "| tdist auto ");
  assert_non_null(autorow);
  assert_non_null(strstr(autorow, "|      - |"));
  assert_non_null(strstr(autorow, "|      n/a |"));
  cJSON *j = load_json(json);
  cJSON *sides = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "results"), 0), "sides"), *s;
  assert_int_equal(cJSON_GetArraySize(sides), 3);
  int compared = 0;
  cJSON_ArrayForEach(s, sides) {
    const char *name = cJSON_GetObjectItem(s, "side")->valuestring;
    assert_null(cJSON_GetObjectItem(s, "speedup_vs_baseline"));
    if (!strcmp(name, "tdist sm")) {
      cJSON *d = cJSON_GetObjectItem(s, "max_rel_diff");
      assert_true(d && d->valuedouble < 2e-2);
      assert_string_equal(cJSON_GetObjectItem(s, "diff_against")->valuestring, "tdist auto");
      compared = 1;
    } else {
      assert_null(cJSON_GetObjectItem(s, "max_rel_diff"));
    }
  }
  assert_true(compared);
  cJSON_Delete(j);
  unlink(json);
  /* all_reduce's cpu baseline is a host collective: it exists for bf16 too */
  rc = run("bench all_reduce --ranks 2 --iters 2 --warmup 0 --dtype bf16 --sizes 4K --variants none", out,
           sizeof out);
  assert_int_equal(rc, 0);
  assert_null(strstr(out, "sgemm"));
  assert_null(strstr(out, "n/a | n/a"));
}

/* The cpu backend's defaults are CPU-sized (the help says so), each case is
 * announced as it starts, and a failed JSON write is an error. */
static void test_cpu_defaults_progress_json(void **state) {
  (void)state;
  static char out[1 << 16];
  assert_int_equal(run("bench ag_gemm --help", out, sizeof out), 0);
  assert_non_null(strstr(out, "On --backend cpu the default is instead the\nCPU-sized set cpu-small"));
  int rc = run("bench gemm_rs --ranks 2 --iters 1 --warmup 0 --models cpu-small --m 16,24 --variants none", out,
               sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "tdist bench gemm_rs: case 1/2: cpu-small M=16 (M=16 N=2048 K=1024) ..."));
  assert_non_null(strstr(out, "tdist bench gemm_rs: case 2/2: cpu-small M=24"));
  if (access("/dev/full", W_OK))
    return;
  rc = run("bench gemm_ar --ranks 2 --iters 1 --warmup 0 --shape 8x8x8 --variants none --json /dev/full", out,
           sizeof out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "tdist bench gemm_ar: cannot write /dev/full: No space left on device"));
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_option_errors),
      cmocka_unit_test(test_tiny_runs),
      cmocka_unit_test(test_strict_options),
      cmocka_unit_test(test_variants_and_failures),
      cmocka_unit_test(test_unknown_variant_lists_this_operator),
      cmocka_unit_test(test_k_below_ranks_up_front),
      cmocka_unit_test(test_no_baseline),
      cmocka_unit_test(test_cpu_defaults_progress_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
