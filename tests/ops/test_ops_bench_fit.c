/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench` (cpu) before and around a case's allocations:
 *  - a case whose sides cannot fit the symmetric heap, the largest heap or
 *    the host's memory is a usage error (exit 2) before any case runs, with
 *    the total, the limit and only the remedies that apply (no heap advice
 *    past the host's memory, no --variants none when given), every such
 *    case named, and a heap of exactly the size it asks for runs the case;
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

/* Runs `env ENV tdist ARGS` (stderr merged); returns the exit status. */
static int run_env(const char *env, const char *args) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, tdist_bin, args);
  return run_cmd(cmd, out, sizeof out);
}

/* A case that cannot fit is a usage error found before anything runs: exit
 * 2, no table, no JSON, the figure it was refused on and the remedy. Host
 * memory is set large (TD_RUN_HOST_MEMORY) so the heap is the limit on any
 * machine. */
static void test_heap_refused_up_front(void **state) {
  (void)state;
  char json[256], cmd[512];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_fit_%ld.json", (long)getpid());
  unlink(json);
  /* 8 GiB per side: refused before allocating (the old path filled 8 GB first) */
  snprintf(cmd, sizeof cmd, "bench all_reduce --ranks 2 --sizes 8G --iters 1 --json %s", json);
  int rc = run_env("TD_RUN_HOST_MEMORY=1048576G", cmd);
  if (rc != 2)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 2);
  /* The figure counts the operands, each side's executor control block and
   * signal words, and the team's collective block: a little over 56 GiB. */
  const char *head = "tdist bench all_reduce: --sizes 8G: the 3 tdist sides of this case need at least ";
  const char *at = strstr(out, head);
  assert_non_null(at);
  long long need = atoll(at + strlen(head));
  assert_true(need > 60129542144LL && need < 60129542144LL + (8LL << 20));
  char ask[64];
  snprintf(ask, sizeof ask, "set TD_SYMM_HEAP_SIZE=%lldM (or more)", (need + (1 << 20) - 1) >> 20);
  assert_non_null(strstr(out, ask));
  assert_non_null(strstr(out, "(tdist auto 16.0 GiB, tdist one_shot 24.0 GiB, tdist two_shot 16.0 GiB, the team's "
                              "collective block 2.0 MiB; the sides are alive together"));
  assert_non_null(strstr(out, "but the default heap (TD_SYMM_HEAP_SIZE unset) is 268435456 bytes (256.0 MiB)"));
  /* more than auto runs: fewer sides is a remedy, with the heap auto alone needs */
  assert_non_null(strstr(out, "run fewer sides (--variants none: the baseline and auto only) with "
                              "TD_SYMM_HEAP_SIZE=16387M"));
  assert_null(strstr(out, "| case |")); /* nothing ran: no table */
  assert_null(strstr(out, "not run"));
  assert_int_equal(access(json, F_OK), -1); /* no JSON of a run that never started */
  /* a GEMM operator too: ag_gemm's gathered A alone is 4 GiB per side; with
   * --variants none given, fewer sides is not suggested */
  rc = run_env("TD_RUN_HOST_MEMORY=1048576G", "bench ag_gemm --ranks 2 --shape 65536x64x16384 --iters 1 "
               "--variants none");
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "tdist bench ag_gemm: --shape 65536x64x16384: the case's one tdist side (tdist auto) "
                              "needs at least "));
  assert_non_null(strstr(out, "symmetric heap per rank (tdist auto 4.0 GiB, the team's collective block 2.0 MiB), "
                              "but the default heap"));
  assert_non_null(strstr(out, "set TD_SYMM_HEAP_SIZE=4099M (or more) or run a smaller case (M, N or K)"));
  assert_null(strstr(out, "--variants none:"));
  assert_null(strstr(out, " need at least")); /* one side needs */
  /* past the largest heap the config accepts: said so, no TD_SYMM_HEAP_SIZE value suggested, exit 2 */
  rc = run_env("TD_RUN_HOST_MEMORY=1048576G", "bench all_reduce --ranks 2 --sizes 512G --iters 1 --variants none");
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "tdist bench all_reduce: --sizes 512G: the case's one tdist side (tdist auto) needs at "
                              "least "));
  assert_non_null(strstr(out, "more than the largest heap TD_SYMM_HEAP_SIZE allows (1024G): no heap can hold it"));
  assert_null(strstr(out, "set TD_SYMM_HEAP_SIZE="));
  assert_null(strstr(out, "--variants none:")); /* already given */
  /* the largest size that fits as things are: the 2 GiB the bench sizes a heap to by itself */
  assert_non_null(strstr(out, "give a smaller size (at most 1022M fits with these sides and ranks)"));
  /* 512G with all the sides: the same limit, on this machine's memory too */
  rc = run("bench all_reduce --sizes 512G", out, sizeof out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "--sizes 512G: the 3 tdist sides of this case need at least"));
  assert_non_null(strstr(out, "allows (1024G): no heap can hold it"));
  assert_null(strstr(out, "not run"));
}

/* The memory notes say only what applies: on cpu the all_reduce buffers are
 * an input and one output per side (no A/B), and when host memory is the
 * limit no heap is advised (one larger than the machine could never be
 * used): the case cannot fit here, and the remedies that can help. */
static void test_host_memory_limit(void **state) {
  (void)state;
  int rc = run_env("TD_RUN_HOST_MEMORY=16G TD_SYMM_HEAP_SIZE=256M",
                   "bench all_reduce --ranks 2 --sizes 4G --iters 1 --variants none");
  if (rc != 2)
    fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "tdist bench all_reduce: --sizes 4G: the case's one tdist side (tdist auto) needs at "
                              "least "));
  assert_non_null(strstr(out, "on cpu the 2 ranks' buffers (the input and one output per side, 2 sides) and these "
                              "heaps need at least "));
  assert_non_null(strstr(out, "but TD_RUN_HOST_MEMORY allows 17179869184 bytes (16.0 GiB): the case cannot fit "
                              "here"));
  assert_null(strstr(out, "TD_SYMM_HEAP_SIZE=")); /* no heap advice past the host's memory */
  assert_null(strstr(out, "A, B"));
  assert_null(strstr(out, "--variants none:"));
  /* one rank would still need the 8 GiB heap: no fewer ranks; the largest size the 256M heap holds */
  assert_null(strstr(out, "fewer ranks"));
  assert_non_null(strstr(out, "the case cannot fit here; give a smaller size (at most 126M fits with these sides and "
                              "ranks)\n"));
  /* the GEMM operators' buffers are A, B and C */
  rc = run_env("TD_RUN_HOST_MEMORY=1G", "bench gemm_rs --ranks 2 --shape 16384x8192x2048 --iters 1");
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "on cpu the 2 ranks' buffers (A, B and one C per side, 4 sides)"));
  assert_null(strstr(out, "TD_SYMM_HEAP_SIZE="));
}

/* B4: a heap of exactly the size the refusal asks for runs every side: the
 * figure counts what the executors and the team's collectives take too. */
static void suggested_heap_runs(const char *args) {
  setenv("TD_SYMM_HEAP_SIZE", "4096", 1);
  int rc = run(args, out, sizeof out);
  assert_int_equal(rc, 2);
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
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "but TD_SYMM_HEAP_SIZE is 268435456 bytes (256.0 MiB); set TD_SYMM_HEAP_SIZE="));
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

/* Every case is checked before the first runs: the ones that cannot fit are
 * each named, then one line for them all with the heap that holds every one;
 * the sides' shared heap counts (each side fits alone, together they do not). */
static void test_shared_heap_said(void **state) {
  (void)state;
  /* 7 MiB: each side of 1M fits alone and the operands (2 + 3 + 2 MiB) fit,
   * but with the executors' blocks and the team's collective block they do
   * not: refused before any side is made (it used to fail at the last side). */
  int rc = run_env("TD_SYMM_HEAP_SIZE=7M", "bench all_reduce --sizes 1M --iters 1 --warmup 0");
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "--sizes 1M: the 3 tdist sides of this case need at least "));
  assert_non_null(strstr(out, "the team's collective block 2.0 MiB; the sides are alive together, as they alternate "
                              "call by call), but TD_SYMM_HEAP_SIZE is 7340032 bytes (7.0 MiB)"));
  assert_null(strstr(out, "TD_ERR_HEAP_EXHAUSTED")); /* nothing was allocated */
  /* several cases: the ones that fit are not run either, the rest are each named */
  rc = run_env("TD_SYMM_HEAP_SIZE=12M", "bench all_reduce --sizes 8K,4M,16M --iters 1 --warmup 0 --variants none");
  assert_int_equal(rc, 2);
  assert_null(strstr(out, "--sizes 8K:"));
  assert_null(strstr(out, "--sizes 4M:"));
  assert_non_null(strstr(out, "tdist bench all_reduce: --sizes 16M: the case's one tdist side (tdist auto) needs"));
  assert_non_null(strstr(out, "1 of 3 cases cannot fit (above), so none was run (every case is checked before the "
                              "first runs)\n"));
  assert_null(strstr(out, "| case |"));
  rc = run_env("TD_SYMM_HEAP_SIZE=12M", "bench all_reduce --sizes 8K,16M,32M --iters 1 --warmup 0 --variants none");
  assert_int_equal(rc, 2);
  const char *at = strstr(out, "--sizes 32M: ");
  assert_non_null(at);
  at = strstr(at, "set TD_SYMM_HEAP_SIZE=");
  assert_non_null(at);
  char all[256];
  snprintf(all, sizeof all, "2 of 3 cases cannot fit (above), so none was run (every case is checked before the "
           "first runs); TD_SYMM_HEAP_SIZE=%lldM holds every one", atoll(at + strlen("set TD_SYMM_HEAP_SIZE=")));
  assert_non_null(strstr(out, all));
  /* the note about the shared heap, on a run that fits */
  char json[256], cmd[512];
  snprintf(json, sizeof json, "/tmp/td_ops_bench_fit2_%ld.json", (long)getpid());
  snprintf(cmd, sizeof cmd, "bench all_reduce --sizes 8K --iters 1 --warmup 0 --variants none --json %s", json);
  rc = run(cmd, out, sizeof out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "the sides of a case are alive together (they alternate call by call), so their "
                              "memory adds up"));
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
                              "a case\nthat cannot fit, or no usable GPU"));
  assert_non_null(strstr(out, "(0, the default:\nthe executor chooses"));
  assert_non_null(strstr(out, "[--backend cpu|cuda] [--ranks N]"));
  assert_non_null(strstr(out, "On cpu, --m without\n--models sets the M of the CPU-sized set."));
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  unsetenv("TD_SYMM_HEAP_SIZE"); /* the default heap (256M) in the messages */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heap_refused_up_front), cmocka_unit_test(test_host_memory_limit),
      cmocka_unit_test(test_suggested_heap_runs), cmocka_unit_test(test_heap_sized_when_unset),
      cmocka_unit_test(test_sizes_limit_at_parse),
      cmocka_unit_test(test_shared_heap_said),      cmocka_unit_test(test_cpu_m_alone),
      cmocka_unit_test(test_oversubscription_note), cmocka_unit_test(test_help_exit_status),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
