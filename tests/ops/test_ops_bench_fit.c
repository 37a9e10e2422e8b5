/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench` (cpu) before and around a case's allocations:
 *  - a case whose sides cannot fit the symmetric heap is refused before any
 *    operand is allocated, with the total, the heap size and the remedy, and
 *    the message is whole in the table and the JSON (not cut at 255), and
 *    a heap of exactly the size it asks for runs the case;
 *  - with TD_SYMM_HEAP_SIZE unset a cpu case over the default heap (up to
 *    2 GiB) runs on a heap of its own need, said on stderr and in the JSON;
 *  - --sizes beyond any heap is refused while parsing, naming the limit;
 *  - the sides' operands fitting is not enough: the executors' and the
 *    team's blocks count too (the sides are alive together);
 *  - on cpu, --m alone sets the M of the CPU-sized set (no GPU-sized model);
 *  - ranks x workers far beyond the cores draws one note on stderr;
 *  - --help states the exit statuses and what --compute-workers 0 means. */
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

static char out[1 << 17];

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static void test_heap_refused_up_front(void **state) {
  (void)state;
  char json[256], cmd[512];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_fit_%ld.json", (long)getpid());
  /* 8 GiB per side: refused before allocating (the old path filled 8 GB first) */
  snprintf(cmd, sizeof cmd, "bench all_reduce --ranks 2 --sizes 8G --iters 1 --json %s", json);
  int rc = run(cmd, out, sizeof out);
  assert_int_equal(rc, 1);
  /* The figure counts the operands, each side's executor control block and
   * signal words, and the team's collective block: a little over 56 GiB. */
  const char *head = "not run: the 3 tdist sides of this case need at least ";
  const char *at = strstr(out, head);
  assert_non_null(at);
  long long need = atoll(at + strlen(head));
  assert_true(need > 60129542144LL && need < 60129542144LL + (8LL << 20));
  char *msg = strndup(at, strcspn(at, "|\n"));
  while (msg[strlen(msg) - 1] == ' ')
    msg[strlen(msg) - 1] = '\0';
  char ask[64];
  snprintf(ask, sizeof ask, "set TD_SYMM_HEAP_SIZE=%lldM (or more)", (need + (1 << 20) - 1) >> 20);
  assert_non_null(strstr(msg, ask));
  assert_non_null(strstr(msg, "(tdist auto 16.0 GiB, tdist one_shot 24.0 GiB, tdist two_shot 16.0 GiB, the team's "
                              "collective block 2.0 MiB; the sides are alive together"));
  assert_non_null(strstr(msg, "TD_SYMM_HEAP_SIZE is 268435456 bytes (256.0 MiB)"));
  assert_true(strlen(msg) > 255);
  if (!strstr(out, msg))
    fprintf(stderr, "%s\n", out);
  assert_int_equal(count_of(out, msg), 4); /* every side's row, whole */
  cJSON *root = load_json(json);
  unlink(json);
  cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0);
  assert_string_equal(cJSON_GetObjectItem(c, "error")->valuestring, msg);
  /* nothing was made: no 0 bytes held beside a message naming 56 GiB, but the figure it was refused on */
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(c, "memory_bytes_all_sides_per_rank")));
  assert_true(cJSON_GetObjectItem(c, "heap_bytes_needed_per_rank")->valuedouble == (double)need);
  cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(c, "sides")) { assert_string_equal(cJSON_GetObjectItem(s, "error")->valuestring, msg); }
  cJSON_Delete(root);
  free(msg);
  /* a GEMM operator too: ag_gemm's gathered A alone is 4 GiB per side */
  rc = run("bench ag_gemm --ranks 2 --shape 65536x64x16384 --iters 1 --variants none", out, sizeof out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "symmetric heap per rank together (tdist auto 4.0 GiB,"));
  /* past the largest heap the config accepts: said so, no TD_SYMM_HEAP_SIZE value suggested */
  rc = run("bench all_reduce --ranks 2 --sizes 512G --iters 1 --variants none", out, sizeof out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "that is more than the largest heap TD_SYMM_HEAP_SIZE allows (1024G): run fewer sides"));
  assert_null(strstr(out, "set TD_SYMM_HEAP_SIZE="));
}

/* B4: a heap of exactly the size the refusal asks for runs every side: the
 * figure counts what the executors and the team's collectives take too. */
static void suggested_heap_runs(const char *args) {
  setenv("TD_SYMM_HEAP_SIZE", "4096", 1);
  int rc = run(args, out, sizeof out);
  assert_int_equal(rc, 1);
  const char *at = strstr(out, "set TD_SYMM_HEAP_SIZE=");
  assert_non_null(at);
  char heap[32];
  snprintf(heap, sizeof heap, "%lldM", atoll(at + strlen("set TD_SYMM_HEAP_SIZE=")));
  setenv("TD_SYMM_HEAP_SIZE", heap, 1);
  rc = run(args, out, sizeof out);
  unsetenv("TD_SYMM_HEAP_SIZE");
  if (rc != 0)
    fprintf(stderr, "TD_SYMM_HEAP_SIZE=%s tdist %s:\n%s\n", heap, args, out);
  assert_int_equal(rc, 0);
  assert_null(strstr(out, "not run"));
  assert_null(strstr(out, "TD_ERR"));
}

static void test_suggested_heap_runs(void **state) {
  (void)state;
  suggested_heap_runs("bench all_reduce --backend cpu --ranks 2 --sizes 1M --iters 1");
  suggested_heap_runs("bench gemm_ar --backend cpu --ranks 2 --shape 256x128x128 --iters 1");
}

/* With TD_SYMM_HEAP_SIZE unset a cpu case over the default heap (all_reduce
 * 64M: ~450 MiB with its sides) runs on a heap of its own need, said on
 * stderr and in the JSON; set, the same case is refused as before; and past
 * BO_AUTO_HEAP_MAX (2 GiB) it is refused too (test_heap_refused_up_front). */
static void test_heap_sized_when_unset(void **state) {
  (void)state;
  char json[256], cmd[512];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_auto_%ld.json", (long)getpid());
  snprintf(cmd, sizeof cmd, "bench all_reduce --backend cpu --ranks 2 --sizes 64M --iters 1 --warmup 0 --json %s",
           json);
  int rc = run(cmd, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "TD_SYMM_HEAP_SIZE is unset and this case's sides need "));
  assert_null(strstr(out, "not run"));
  cJSON *root = load_json(json);
  unlink(json);
  cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "results"), 0);
  double need = cJSON_GetObjectItem(c, "heap_bytes_needed_per_rank")->valuedouble;
  double got = cJSON_GetObjectItem(c, "heap_bytes_per_rank_auto")->valuedouble;
  assert_true(need > 268435456.0 && got >= need && got < need + 1048576.0);
  cJSON_Delete(root);
  setenv("TD_SYMM_HEAP_SIZE", "256M", 1); /* chosen by the user: refused, with the remedy */
  rc = run("bench all_reduce --backend cpu --ranks 2 --sizes 64M --iters 1 --warmup 0", out, sizeof out);
  unsetenv("TD_SYMM_HEAP_SIZE");
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "set TD_SYMM_HEAP_SIZE="));
  assert_null(strstr(out, "is unset"));
}

static void test_sizes_limit_at_parse(void **state) {
  (void)state;
  expect_usage_error("bench all_reduce --sizes 8K,600G", "tdist bench all_reduce: --sizes 600G (644245094400 bytes) "
                     "(in '8K,600G') is too large: at most 549755813888 bytes (512G): every all_reduce side holds "
                     "twice the size in symmetric heap, and TD_SYMM_HEAP_SIZE is at most 1 TiB");
  expect_usage_error("bench all_reduce --sizes 17179869188000", "--sizes 17179869188000 is too large: at most "
                     "549755813888 bytes (512G)");
  /* beyond size_t: too large, not "malformed" */
  expect_usage_error("bench all_reduce --sizes 99999999999999999999", "--sizes 99999999999999999999 is too large");
  expect_usage_error("bench all_reduce --sizes 20000000000G", "--sizes 20000000000G is too large");
}

static void test_shared_heap_said(void **state) {
  (void)state;
  char json[256], cmd[8192];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_fit2_%ld.json", (long)getpid());
  /* 7 MiB: each side fits alone and the operands (2 + 3 + 2 MiB) fit, but
   * with the executors' blocks and the team's collective block they do not:
   * refused before any side is made (it used to fail at the last side). */
  snprintf(cmd, sizeof cmd, "env TD_SYMM_HEAP_SIZE=7M '%s' bench all_reduce --sizes 1M --iters 1 --warmup 0 "
           "--json %s 2>&1", tdist_bin, json);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = 0;
  int st = pclose(p);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  assert_non_null(strstr(out, "the sides of a case are alive together (they alternate call by call), so their "
                              "memory adds up"));
  assert_non_null(strstr(out, "not run: the 3 tdist sides of this case need at least "));
  assert_non_null(strstr(out, "the team's collective block 2.0 MiB"));
  assert_null(strstr(out, "TD_ERR_HEAP_EXHAUSTED")); /* nothing was allocated */
  cJSON *root = load_json(json);
  unlink(json);
  assert_non_null(strstr(cJSON_GetObjectItem(root, "note")->valuestring, "their memory adds up"));
  cJSON_Delete(root);
}

static void test_cpu_m_alone(void **state) {
  (void)state;
  int rc = run("bench gemm_rs --ranks 2 --m 16 --iters 1 --warmup 0 --variants none", out, sizeof out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "cpu backend: the CPU-sized default shapes (cpu-small, cpu-medium; M 16 from --m), 2 "
                              "cases"));
  assert_non_null(strstr(out, "case 1/2: cpu-small M=16 (M=16 N=2048 K=1024)"));
  assert_non_null(strstr(out, "case 2/2: cpu-medium M=16 (M=16 N=4096 K=2048)"));
  assert_null(strstr(out, "llama"));
  assert_null(strstr(out, "check 4091xR"));
}

static void test_oversubscription_note(void **state) {
  (void)state;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 64) {
    print_message("%ld cores: 16 ranks x 9 workers is not oversubscribed here; skipped\n", cores);
    skip();
  }
  int rc = run("bench gemm_rs --ranks 16 --shape 32x16x16 --iters 1 --warmup 0 --variants none "
               "--compute-workers 8 --comm-workers 1", out, sizeof out);
  assert_int_equal(rc, 0);
  char needle[256];
  snprintf(needle, sizeof needle, "tdist bench gemm_rs: note: 16 ranks x 9 workers (8 compute + 1 comm) = 144 "
           "threads on %ld cores (%ldx oversubscribed)", cores, 144 / cores);
  assert_int_equal(count_of(out, needle), 1);
  assert_non_null(strstr(out, "lower --ranks or the worker counts"));
  /* 2 ranks x 2 workers: no note */
  rc = run("bench gemm_rs --ranks 2 --shape 32x16x16 --iters 1 --warmup 0 --variants none --compute-workers 1 "
           "--comm-workers 1", out, sizeof out);
  assert_int_equal(rc, 0);
  assert_null(strstr(out, "oversubscribed"));
}

static void test_help_exit_status(void **state) {
  (void)state;
  int rc = run("bench ag_gemm --help", out, sizeof out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "Exit status: 0 all cases ran; 1 a case or side failed; 2 a bad option or variable, "
                              "or no\nusable GPU"));
  assert_non_null(strstr(out, "(0, the default:\nthe executor chooses"));
  assert_non_null(strstr(out, "[--backend cpu|cuda] [--ranks N]"));
  assert_non_null(strstr(out, "On cpu, --m without\n--models sets the M of the CPU-sized set."));
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  unsetenv("TD_SYMM_HEAP_SIZE"); /* the default heap (256M) in the messages */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heap_refused_up_front), cmocka_unit_test(test_suggested_heap_runs), cmocka_unit_test(test_heap_sized_when_unset),
      cmocka_unit_test(test_sizes_limit_at_parse),
      cmocka_unit_test(test_shared_heap_said),      cmocka_unit_test(test_cpu_m_alone),
      cmocka_unit_test(test_oversubscription_note), cmocka_unit_test(test_help_exit_status),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
