/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench coll`: option errors (exit status 2 and a message naming the
 * option), numbers parsed strictly by bench coll, bench exec and tune gemm,
 * JSON write failures reported (exit 1), an unknown bench kind, a tiny run on 2 rank processes whose JSON
 * has a positive time for every collective and size, and, where Open MPI and
 * the baseline program are built, a tiny run with the MPI column. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
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
  expect_usage_error("bench nope", "unknown kind 'nope'");
  expect_usage_error("bench coll --ranks 0", "tdist bench coll: --ranks expects an integer in 1..256, got '0'");
  expect_usage_error("bench coll --op allgather", "--op allgather: give all_gather");
  expect_usage_error("bench coll --min 9x", "--min 9x: unit 'x' is not one of K, M, G");
  expect_usage_error("bench coll --min 64 --max 8", "need 4 <= --min <= --max");
  expect_usage_error("bench coll --iters -1", "--iters expects an integer in 1..1000000, got '-1'");
  expect_usage_error("bench coll --repeat 0", "--repeat expects an integer in 1..100, got '0'");
  expect_usage_error("bench coll --frobnicate", "unknown or incomplete option '--frobnicate'");
  /* An output file that cannot be written is refused before anything runs. */
  expect_usage_error("bench coll --no-mpi --json /nonexistent-dir/x.json",
                     "tdist bench coll: --json /nonexistent-dir/x.json cannot be written: No such file or directory");
  expect_usage_error("bench exec --json /nonexistent-dir/x.json", "tdist bench exec: --json /nonexistent-dir/x.json");
  expect_usage_error("bench all_reduce --json /nonexistent-dir/x.json", "tdist bench: --json /nonexistent-dir/x.json");
  static char out[1 << 16];
  assert_int_equal(run("bench coll --no-mpi --json /nonexistent-dir/x.json", out, sizeof out), 2);
  assert_null(strstr(out, "all_gather")); /* no benchmark row was printed */
}

/* A size that does not parse says which value, the units allowed and the
 * maximum; one beyond it says the maximum and why; --sizes (bench
 * all_reduce's option) points at --min/--max. */
static void test_size_messages(void **state) {
  (void)state;
  expect_usage_error("bench coll --max 1T", "tdist bench coll: --max 1T: unit 'T' is not one of K, M, G; give a whole "
                     "number of bytes with an optional unit K, M or G (powers of 1024, an optional B after it: e.g. 8, "
                     "64K, 256M, 1G), at most 549722259392 bytes (511.97G)");
  expect_usage_error("bench coll --min 1T", "--min 1T: unit 'T' is not one of K, M, G");
  expect_usage_error("bench coll --max=-5", "--max -5: not a byte size; give a whole number of bytes");
  expect_usage_error("bench coll --max 100000000000000000000", "--max 100000000000000000000 is too large: at most "
                     "549722259392 bytes (511.97G)");
  expect_usage_error("bench coll --max 20000000000G", "--max 20000000000G is too large");
  expect_usage_error("bench coll --max 549722259393", "--max 549722259393 is too large");
  expect_usage_error("bench coll --sizes 1T", "--sizes is not an option of bench coll (it is bench all_reduce's): "
                     "bench coll times every size from --min to --max");
  expect_usage_error("bench coll --sizes=8K", "--sizes is not an option of bench coll");
  expect_usage_error("bench all_reduce --sizes 1T", "tdist bench all_reduce: --sizes 1T: unit 'T' is not one of K, "
                     "M, G; give a whole number of bytes with an optional unit K, M or G");
  expect_usage_error("bench all_reduce --sizes 8K,1T", "--sizes 1T (in '8K,1T'): unit 'T'");
  expect_usage_error("bench all_reduce --sizes 8K,1T", "at most 549755813888 bytes (512G)");
}

/* --max beyond the 1 TiB heap limit or /dev/shm is refused at parse time
 * and an existing --json file is left as it was; --op lists have no empty
 * item; --opt=value is --opt value. */
static void test_sizes_lists_inline(void **state) {
  (void)state;
  char json[] = "/tmp/td_coll_keep_XXXXXX";
  int fd = mkstemp(json);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "{\"keep\": 1}", 11), 11);
  close(fd);
  char args[256];
  snprintf(args, sizeof args, "bench coll --no-mpi --min 99999G --max 99999G --json %s", json);
  expect_usage_error(args, "--min 99999G (107373108658176 bytes) is too large: at most 549722259392 bytes (511.97G): "
                     "each rank's symmetric heap holds 2 x --max + 64 MiB, and a heap is at most 1 TiB");
  char buf[64] = "";
  FILE *f = fopen(json, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  assert_string_equal(buf, "{\"keep\": 1}");
  unlink(json);
  if (!access("/dev/shm", F_OK))
    expect_usage_error("bench coll --no-mpi --ranks 256 --max 500G", "bytes free; lower --max or --ranks");
  expect_usage_error("bench coll --op all_gather,", "(no empty item), got 'all_gather,'");
  expect_usage_error("bench coll --op ,all_gather", "got ',all_gather'");
  expect_usage_error("bench coll --op all_gather,,all_reduce", "got 'all_gather,,all_reduce'");
  expect_usage_error("bench coll --ranks=0", "--ranks expects an integer in 1..256, got '0'");
  expect_usage_error("bench coll --staged=1", "unknown or incomplete option '--staged' (a flag takes no value)");
  expect_usage_error("bench coll --iters", "tdist bench coll: --iters needs a value");
  expect_usage_error("bench exec --size=64abc", "--size expects an integer in 1..65536, got '64abc'");
  static char out[1 << 16];
  assert_int_equal(run("bench coll --no-mpi --ranks=2 --op=all_reduce --min=64 --max=64 --iters=2", out, sizeof out),
                   0);
  assert_non_null(strstr(out, "# all_reduce"));
}

/* Numbers are parsed strictly (no atoi): values that used to wrap through
 * int or lose trailing junk are refused with the option's range, by `bench
 * coll`, `bench exec` and `tune gemm` alike. */
static void test_strict_numbers(void **state) {
  (void)state;
  expect_usage_error("bench coll --ranks 4294967298", "--ranks expects an integer in 1..256, got '4294967298'");
  expect_usage_error("bench coll --ranks 2abc", "--ranks expects an integer in 1..256, got '2abc'");
  expect_usage_error("bench coll --iters 4294967297", "--iters expects an integer in 1..1000000, got '4294967297'");
  expect_usage_error("bench coll --repeat ''", "--repeat expects an integer in 1..100, got ''");
  expect_usage_error("bench exec --size 64 --tiles 2147483648",
                     "tdist bench exec: --tiles expects an integer in 1..1048576, got '2147483648'");
  expect_usage_error("bench exec --micro 4294967295", "--micro expects an integer in 1..1000000, got '4294967295'");
  expect_usage_error("bench exec --workers 4294967297", "--workers expects an integer in 1..1024, got '4294967297'");
  expect_usage_error("bench exec --size 64abc", "--size expects an integer in 1..65536, got '64abc'");
  expect_usage_error("bench exec --iters 0", "--iters expects an integer in 1..100000, got '0'");
  expect_usage_error("bench exec --m ' 8'", "--m expects an integer in 1..65536, got ' 8'");
  expect_usage_error("tune gemm --M 4096x --N 8 --K 8", "tdist tune gemm: --M expects an integer in 1..1048576");
  expect_usage_error("tune gemm --M 8 --N 8 --K 8 --iters 4294967297", "--iters expects an integer in 1..100000");
}

/* A JSON file that fails to be written (here: a full device) is an error
 * (status 1, the file and the reason named), not a silent success. */
static void test_json_write_failure(void **state) {
  (void)state;
  if (access("/dev/full", W_OK))
    skip();
  static char out[1 << 16];
  int rc = run("bench exec --size 32 --iters 1 --json /dev/full", out, sizeof out);
  if (rc != 1 || !strstr(out, "tdist bench exec: cannot write /dev/full: No space left on device"))
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "tdist bench exec: cannot write /dev/full: No space left on device"));
  assert_null(strstr(out, "differs")); /* the result itself was right */
  rc = run("bench coll --no-mpi --ranks 2 --op all_reduce --min 64 --max 64 --iters 2 --json /dev/full", out,
           sizeof out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "tdist bench coll: cannot write /dev/full: No space left on device"));
}

static void test_tiny_run_json(void **state) {
  (void)state;
  char json[256], args[512];
  snprintf(json, sizeof json, "/tmp/td_bench_cli_%ld.json", (long)getpid());
  snprintf(args, sizeof args, "bench coll --ranks 2 --min 8 --max 1K --iters 3 --no-mpi --json %s", json);
  static char out[1 << 16];
  int rc = run(args, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "# all_reduce"));
  FILE *f = fopen(json, "r");
  assert_non_null(f);
  static char text[1 << 16];
  size_t len = fread(text, 1, sizeof text - 1, f);
  text[len] = '\0';
  fclose(f);
  unlink(json);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  assert_int_equal(cJSON_GetObjectItem(root, "ranks")->valueint, 2);
  cJSON *res = cJSON_GetObjectItem(root, "results");
  assert_int_equal(cJSON_GetArraySize(res), 4 * 8); /* 4 collectives x 8 B..1 KiB */
  cJSON *e;
  cJSON_ArrayForEach(e, res) {
    cJSON *t = cJSON_GetObjectItem(e, "tdist_us");
    assert_non_null(t);
    assert_true(t->valuedouble > 0);
    assert_null(cJSON_GetObjectItem(e, "mpi_us"));
  }
  cJSON_Delete(root);
}

static void test_with_mpi(void **state) {
  (void)state;
  char base[4096];
  snprintf(base, sizeof base, "%s", tdist_bin);
  snprintf(strrchr(base, '/') + 1, sizeof base - (size_t)(strrchr(base, '/') + 1 - base), "td_mpi_coll_bench");
  if (access(base, X_OK) || system("command -v mpirun >/dev/null 2>&1")) {
    skip();
  }
  static char out[1 << 16];
  int rc = run("bench coll --ranks 2 --op all_reduce --min 8 --max 64 --iters 2", out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  /* the 64-byte row has both sides and a ratio: 11 columns after the size */
  const char *row = strstr(out, "          64");
  assert_non_null(row);
  double v[8];
  assert_int_equal(sscanf(row, " %*s %*s %*s | %lf %lf %lf | %lf %lf %lf | %lf", &v[0], &v[1], &v[2], &v[3],
                          &v[4], &v[5], &v[6]), 7);
  assert_true(v[0] > 0 && v[3] > 0 && v[6] > 0);
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_option_errors), cmocka_unit_test(test_size_messages),
                                     cmocka_unit_test(test_strict_numbers),
                                     cmocka_unit_test(test_sizes_lists_inline),
                                     cmocka_unit_test(test_json_write_failure), cmocka_unit_test(test_tiny_run_json),
                                     cmocka_unit_test(test_with_mpi)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
