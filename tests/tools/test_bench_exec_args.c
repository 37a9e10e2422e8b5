/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench exec`'s input checks, all made before anything is allocated
 * or run (exit 2, a message saying what was wrong and what is allowed):
 * a GEMM whose matrices do not fit host memory (TD_RUN_HOST_MEMORY, else
 * physical: the same limit as the operator benches and tdist run) is
 * refused with what it needs, the limit and the largest --size that fits;
 * --micro's mode has no GEMM, so --size, --m, --n, --k, --tiles and --json
 * beside it are refused (they were dropped without a word), and --tiles
 * beyond M rows is refused (it was clamped to M without a word). Cases that
 * fit run (tiny sizes, one timed run). */
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

static char out[1 << 16];

/* `env ENV tdist ARGS` (ENV may be ""): exit status `want` and `needle` in the output. */
static void expect_env(const char *env, const char *args, int want, const char *needle) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, tdist_bin, args);
  int rc = run_cmd(cmd, out, sizeof out);
  if (rc != want || !strstr(out, needle))
    fprintf(stderr, "%s: status %d, output:\n%s\n", cmd, rc, out);
  assert_int_equal(rc, want);
  assert_non_null(strstr(out, needle));
}

/* --size 65536 needs 64 GiB (A, B and two C of 2^32 floats): refused, not allocated. */
static void test_memory_check(void **state) {
  (void)state;
  expect_env("TD_RUN_HOST_MEMORY=16G", "bench exec --size 65536", 2,
             "tdist bench exec: the f32 GEMM 65536 x 65536 x 65536 needs at least 68719476736 bytes (64.0 GiB) of "
             "host memory (A M x K, B K x N and two C M x N, OpenBLAS's and the executor's, 4 bytes an element), but "
             "TD_RUN_HOST_MEMORY allows 17179869184 bytes (16.0 GiB); give a smaller --size (at most 32768 fits)");
  assert_null(strstr(out, "# tdist bench exec")); /* nothing ran */
  /* dims given one by one: the remedy names them */
  expect_env("TD_RUN_HOST_MEMORY=1M", "bench exec --m 300 --n 300 --k 300 --iters 1", 2,
             "needs at least 1440000 bytes (1.4 MiB) of host memory");
  assert_non_null(strstr(out, "give smaller dims (--m, --n, --k; --size 256 fits)"));
  /* the defaults (4096^3, 256 MiB) are checked too */
  expect_env("TD_RUN_HOST_MEMORY=100M", "bench exec --iters 1", 2, "the f32 GEMM 4096 x 4096 x 4096 needs at least "
             "268435456 bytes (256.0 MiB)");
  /* a case that fits runs */
  expect_env("TD_RUN_HOST_MEMORY=1M", "bench exec --size 64 --iters 1", 0, "# tdist bench exec: f32 GEMM 64 x 64 x 64");
  /* against this machine's own memory, where it has less than the 64 GiB */
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (pages > 0 && psz > 0 && (double)pages * (double)psz < 68719476736.0)
    expect_env("", "bench exec --size 65536", 2, "but this machine has ");
}

/* Options --micro does not use, and more tiles than rows. */
static void test_option_combinations(void **state) {
  (void)state;
  static const char *const gemm_only[] = {"--size 64", "--m 64", "--n=64", "--k 64", "--tiles 2", "--json x.json"};
  for (size_t i = 0; i < sizeof gemm_only / sizeof gemm_only[0]; i++) {
    char args[256], want[256], name[16];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(gemm_only[i], " ="), gemm_only[i]);
    snprintf(want, sizeof want, "tdist bench exec: %s does not apply with --micro (it times empty tasks, no GEMM, and "
             "writes no JSON); --micro takes --workers and --iters only", name);
    snprintf(args, sizeof args, "bench exec --micro 10 %s", gemm_only[i]);
    expect_env("", args, 2, want);
    snprintf(args, sizeof args, "bench exec %s --micro 10", gemm_only[i]); /* either order */
    expect_env("", args, 2, want);
  }
  expect_env("", "bench exec --micro 10 --workers 1 --iters 1", 0, "empty task, 1 rank:");
  expect_env("", "bench exec --size 64 --tiles 65", 2, "tdist bench exec: --tiles 65 is more than M = 64: each tile is "
             "a block of rows of C, so --tiles must be in 1..M (1..64 here)");
  expect_env("", "bench exec --m 8 --n 64 --k 64 --tiles 9", 2, "--tiles must be in 1..M (1..8 here)");
  expect_env("", "bench exec --size 8 --tiles 8 --iters 1", 0, "8 tiles");
  /* the default, one tile per worker, stays within M */
  expect_env("", "bench exec --size 2 --workers 4 --iters 1", 0, "2 tiles, 4 workers");
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory_check),
      cmocka_unit_test(test_option_combinations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
