/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench` (cpu) per side: what the table and JSON say about each side.
 * The memory a side adds excludes the team's one-time collective block (it
 * is allocated before the first side is measured), so tdist auto shows the
 * same MiB/rank as the forced side of the variant it ran, whichever order
 * the variants come in. (A side whose operator could not be created shows
 * its forced variant, or '-' for auto, with the creation error; its only cpu
 * trigger, K < ranks for gemm_rs/gemm_ar, is now refused with the options:
 * test_ops_bench_cli's test_k_below_ranks_up_front.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_test_util.h"

static cJSON *side_named(cJSON *sides, const char *name) {
  cJSON *s;
  cJSON_ArrayForEach(s, sides) {
    if (!strcmp(cJSON_GetObjectItem(s, "side")->valuestring, name))
      return s;
  }
  return NULL;
}

static void auto_memory_matches(const char *kind, const char *args) {
  char json[256], cmd[1024];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_mem_%s_%ld.json", kind, (long)getpid());
  snprintf(cmd, sizeof cmd, "bench %s --ranks 2 --iters 1 --warmup 0 %s --json %s", kind, args, json);
  static char out[1 << 16];
  int rc = run(cmd, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "tdist %s: status %d\n%s\n", cmd, rc, out);
  assert_int_equal(rc, 0);
  cJSON *j = load_json(json);
  cJSON *sides = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "results"), 0), "sides");
  cJSON *au = side_named(sides, "tdist auto");
  assert_non_null(au);
  char forced[64];
  snprintf(forced, sizeof forced, "tdist %s", cJSON_GetObjectItem(au, "variant")->valuestring);
  cJSON *fo = side_named(sides, forced);
  if (!fo)
    fprintf(stderr, "tdist %s: auto ran %s, which is not among the forced sides\n", cmd, forced);
  assert_non_null(fo);
  double ma = cJSON_GetObjectItem(au, "memory_bytes_per_rank")->valuedouble;
  double mf = cJSON_GetObjectItem(fo, "memory_bytes_per_rank")->valuedouble;
  if (ma != mf)
    fprintf(stderr, "tdist %s: auto %.0f bytes/rank, %s %.0f\n", cmd, ma, forced, mf);
  assert_true(ma == mf);
  cJSON_Delete(j);
  unlink(json);
}

static void test_first_side_not_charged(void **state) {
  (void)state;
  /* every variant forced, in both orders: auto's is among them wherever it lands */
  auto_memory_matches("ag_gemm", "--shape 64x64x64 --variants sm,sequential,copy_engine,ring");
  auto_memory_matches("ag_gemm", "--shape 64x64x64 --variants ring,copy_engine,sequential,sm");
  auto_memory_matches("gemm_rs", "--shape 64x32x32 --variants sequential,sm");
  auto_memory_matches("all_reduce", "--sizes 64K --variants two_shot,one_shot");
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_first_side_not_charged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
