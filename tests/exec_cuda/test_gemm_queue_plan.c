/* SPDX-License-Identifier: Apache-2.0
 * The compiler's cuda kernel-queue plans, checked without a GPU: for a
 * Hopper target (TD_CUDA_TARGET_SM=90) every GEMM task of the MLP carries
 * TD_GEMM_QUEUE with the tile configuration of the tuning cache when the
 * cache has an entry for its shape, and the default rule's otherwise; whole
 * rank parts, not fine tiles; nothing when turned off, for another target,
 * or with caller-chosen tiles. Also: the packed configuration round-trips,
 * td_plan_validate refuses malformed ones with a message, and the
 * orchestration-only executor kernel (spec.queue) compiles for sm_80 and
 * sm_90a through NVRTC. Links tdist_gemm_cuda (the Hopper GEMM's host side:
 * default rule and cache) as the tdist CLI does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/cuda/codegen.h"
#include "exec/cuda/gemm_target.h"
#include "exec/gemm_queue_cfg.h"
#include "jit/jit.h"
#include "tdist/program.h"
#include "tdist/schedule.h"
#include "tile/cuda/gemm.h"

#define GPU "Test GPU 9000"

static const char *const mlp =
    "dim M = 512, H = 256, F = 1024\n"
    "input  x  : bf16[M, H]  shard(0)\n"
    "weight w1 : bf16[H, F]  shard(1)\n"
    "weight w2 : bf16[F, H]  shard(0)\n"
    "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\n"
    "output y\n";

static char cache_dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(cache_dir, sizeof cache_dir, "/tmp/td-gq-XXXXXX");
  if (!mkdtemp(cache_dir))
    return -1;
  setenv("TD_CACHE_DIR", cache_dir, 1);
  setenv("TD_CUDA_TARGET_SM", "90", 1);
  setenv("TD_CUDA_TARGET_NAME", GPU, 1);
  unsetenv("TD_CUDA_GEMM_QUEUE");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/gemm-tune.json", cache_dir);
  unlink(path);
  rmdir(cache_dir);
  return 0;
}

static td_compiled *compile(int ranks, const td_compile_opts *opts) {
  td_program *p = NULL;
  assert_int_equal(td_program_parse(mlp, strlen(mlp), "mlp.td", &p), TD_OK);
  td_compile_opts co;
  if (opts)
    co = *opts;
  else
    td_compile_opts_init(&co);
  co.nranks = ranks;
  co.backend_cuda = 1;
  td_compiled *c = NULL;
  if (td_program_compile(p, &co, &c) != TD_OK)
    fail_msg("compile: %s", td_last_error());
  td_program_destroy(p);
  return c;
}

static int same(const td__gemm_qcfg *q, const td_gemm_config *c) {
  return q->bm == c->bm && q->bn == c->bn && q->stages == c->stages && q->cluster == c->cluster &&
         q->group_m == c->group_m;
}

/* Task t's packed configuration is the cache entry for its shape when there
 * is one; else a configuration compiled for its dtype and B layout, the
 * default rule's own when that one is compiled. */
static void check_config(const td_task *t, const td_plan *plan, const td__gemm_qcfg *q) {
  td_gemm_config cfg;
  const int m = (int)t->c.rows, n = (int)t->c.cols, k = (int)t->a.cols;
  const int layout = (t->op & TD_GEMM_TRANS_B) ? TD_GEMM_B_NK : TD_GEMM_B_KN;
  const td_dtype dt = td_plan_buffer(plan, t->c.buf)->dtype;
  if (td__gemm_tune_lookup(GPU, dt, layout, m, n, k, &cfg) == TD_OK) {
    assert_true(same(q, &cfg));
    return;
  }
  td_gemm_config list[64], def = td__gemm_cuda_default_config(TD_GEMM_SM90, m, n, k);
  int count = td__gemm_cuda_configs(TD_GEMM_SM90, dt, layout, list, 64), found = 0, def_compiled = 0;
  for (int i = 0; i < count && i < 64; i++) {
    found |= same(q, &list[i]);
    def_compiled |= list[i].bm == def.bm && list[i].bn == def.bn && list[i].stages == def.stages &&
                    list[i].cluster == def.cluster && list[i].group_m == def.group_m;
  }
  assert_true(found);
  if (def_compiled)
    assert_true(same(q, &def));
}

/* Every GEMM is a whole-row queue task with a configuration check_config accepts; returns how many. */
static int check_queue_gemms(const td_compiled *c, int ranks) {
  const td_plan *plan = td_compiled_plan(c);
  int gemms = 0;
  for (int r = 0; r < ranks; r++) {
    const td_schedule *s = td_plan_schedule(plan, r);
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      if (t->kind != TD_TASK_GEMM)
        continue;
      gemms++;
      assert_true(t->op & TD_GEMM_QUEUE);
      assert_int_equal(t->c.cols, td_plan_buffer(plan, t->c.buf)->cols); /* whole rows */
      td__gemm_qcfg q;
      assert_int_equal(td__gemm_qcfg_unpack(t->op, &q), 1);
      check_config(t, plan, &q);
    }
  }
  return gemms;
}

static void test_default_rule_without_cache_entry(void **state) {
  (void)state;
  td_compiled *c = compile(4, NULL);
  /* AG -> GEMM: one GEMM per source rank's part; GEMM -> RS: one per destination rank. */
  assert_int_equal(check_queue_gemms(c, 4), 4 * (4 + 4));
  td_compiled_destroy(c);
}

static void test_cache_entry_is_used(void **state) {
  (void)state;
  /* Store, for the up-projection's shape (128 x 256 x 256 per rank part), a
   * compiled configuration other than the default rule's. */
  td_gemm_config list[64], def = td__gemm_cuda_default_config(TD_GEMM_SM90, 128, 256, 256);
  int n = td__gemm_cuda_configs(TD_GEMM_SM90, TD_BF16, TD_GEMM_B_KN, list, 64);
  assert_true(n > 1);
  int pick = -1;
  for (int i = 0; i < n && i < 64 && pick < 0; i++)
    if (list[i].bm != def.bm || list[i].bn != def.bn || list[i].stages != def.stages)
      pick = i;
  assert_true(pick >= 0);
  assert_int_equal(td__gemm_tune_store(GPU, TD_BF16, TD_GEMM_B_KN, 128, 256, 256, &list[pick], 1.0), TD_OK);
  td_compiled *c = compile(4, NULL);
  check_queue_gemms(c, 4);
  /* Both projections are 128 x 256 x 256 per rank part here: all carry the stored configuration. */
  const td_schedule *s = td_plan_schedule(td_compiled_plan(c), 1);
  int seen = 0;
  for (uint32_t i = 0; i < s->ntasks; i++) {
    td__gemm_qcfg q;
    if (s->tasks[i].kind == TD_TASK_GEMM && s->tasks[i].a.cols == 256 && s->tasks[i].c.cols == 256 &&
        td__gemm_qcfg_unpack(s->tasks[i].op, &q) == 1) {
      assert_int_equal(q.bm, list[pick].bm);
      assert_int_equal(q.bn, list[pick].bn);
      assert_int_equal(q.stages, list[pick].stages);
      seen++;
    }
  }
  assert_int_equal(seen, 8);
  /* explain says where the configuration came from. */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_int_equal(td_compiled_explain(c, f), TD_OK);
  fclose(f);
  assert_non_null(strstr(text, "gemm: kernel queue on " GPU));
  assert_non_null(strstr(text, "32 from the tuning cache"));
  assert_non_null(strstr(text, "queue[bm"));
  free(text);
  td_compiled_destroy(c);
  char path[128];
  snprintf(path, sizeof path, "%s/gemm-tune.json", cache_dir);
  unlink(path);
}

static int count_queue_flags(const td_compiled *c, int ranks) {
  int n = 0;
  for (int r = 0; r < ranks; r++) {
    const td_schedule *s = td_plan_schedule(td_compiled_plan(c), r);
    for (uint32_t i = 0; i < s->ntasks; i++)
      n += s->tasks[i].kind == TD_TASK_GEMM && (s->tasks[i].op & TD_GEMM_QUEUE);
  }
  return n;
}

/* A cuBLAS entry in the tuning cache (tdist tune gemm may pick cuBLAS) has no
 * tile fields: the queue GEMM gets the compiled pick instead (returns 2), and
 * the plan still runs every GEMM on the queue, none on sub-tile grids. */
static void test_cublas_cache_entry_falls_back(void **state) {
  (void)state;
  const td_gemm_config cub = {TD_GEMM_CUBLAS, 0, 0, 0, 0, 0, 0, 1};
  assert_int_equal(td__gemm_tune_store(GPU, TD_BF16, TD_GEMM_B_KN, 128, 256, 256, &cub, 1.0), TD_OK);
  td__cuda_gemm_target tg = {.queue = 1, .sm = 90};
  snprintf(tg.gpu, sizeof tg.gpu, "%s", GPU);
  td__gemm_qcfg q, want;
  assert_int_equal(td__cuda_gemm_target_config(&tg, TD_BF16, 0, 128, 256, 256, &q), 2);
  assert_int_equal(td__cuda_gemm_pick_compiled(TD_BF16, 0, 128, 256, 256, &want), 0);
  assert_memory_equal(&q, &want, sizeof q);
  assert_true(td__gemm_qcfg_pack(&q) != 0u);
  td_compiled *c = compile(4, NULL);
  assert_int_equal(count_queue_flags(c, 4), 4 * (4 + 4));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_int_equal(td_compiled_explain(c, f), TD_OK);
  fclose(f);
  assert_non_null(strstr(text, "; 0 on sub-tile grids"));
  free(text);
  td_compiled_destroy(c);
  char path[128];
  snprintf(path, sizeof path, "%s/gemm-tune.json", cache_dir);
  unlink(path);
}

static void test_off_other_target_or_given_tiles(void **state) {
  (void)state;
  setenv("TD_CUDA_GEMM_QUEUE", "0", 1);
  td_compiled *c = compile(2, NULL);
  assert_int_equal(count_queue_flags(c, 2), 0);
  td_compiled_destroy(c);
  unsetenv("TD_CUDA_GEMM_QUEUE");
  setenv("TD_CUDA_TARGET_SM", "80", 1);
  c = compile(2, NULL);
  assert_int_equal(count_queue_flags(c, 2), 0);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_int_equal(td_compiled_explain(c, f), TD_OK);
  fclose(f);
  assert_non_null(strstr(text, "no kernel queue: the target GPU is sm_80, not Hopper"));
  free(text);
  td_compiled_destroy(c);
  setenv("TD_CUDA_TARGET_SM", "90", 1);
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.tile_rows = 64;
  c = compile(2, &co);
  assert_int_equal(count_queue_flags(c, 2), 0);
  td_compiled_destroy(c);
}

static void test_pack_round_trip(void **state) {
  (void)state;
  td_gemm_config list[128];
  for (int layout = 0; layout < 2; layout++) {
    int n = td__gemm_cuda_configs(TD_GEMM_SM90, TD_BF16, layout, list, 128);
    for (int i = 0; i < n && i < 128; i++) {
      td__gemm_qcfg q = {90, list[i].bm, list[i].bn, list[i].bk, list[i].stages, list[i].cluster, list[i].group_m};
      uint32_t packed = td__gemm_qcfg_pack(&q);
      assert_true(packed != 0);
      td__gemm_qcfg back;
      assert_int_equal(td__gemm_qcfg_unpack(packed | TD_GEMM_QUEUE, &back), 1);
      assert_memory_equal(&back, &q, sizeof q);
    }
  }
  td__gemm_qcfg bad = {90, 96, 128, 64, 4, 1, 8};
  assert_int_equal(td__gemm_qcfg_pack(&bad), 0u);
  td__gemm_qcfg none;
  assert_int_equal(td__gemm_qcfg_unpack(TD_GEMM_QUEUE, &none), 0);
}

/* A one-task plan whose GEMM op is `op`, validated. */
static td_status validate_gemm_op(uint32_t op) {
  td_plan *plan = NULL;
  assert_int_equal(td_plan_create(1, &plan), TD_OK);
  td_buffer_desc d = {.kind = TD_BUF_LOCAL, .dtype = TD_BF16, .rows = 16, .cols = 16};
  int32_t b[3];
  for (int i = 0; i < 3; i++) {
    snprintf(d.name, sizeof d.name, "b%d", i);
    assert_int_equal(td_plan_add_buffer(plan, &d, &b[i]), TD_OK);
  }
  td_task t = {.kind = TD_TASK_GEMM, .worker = TD_WORKER_COMPUTE, .op = op, .alpha = 1.0f};
  t.a = (td_view){b[0], TD_PEER_SELF, 0, 0, 16, 16};
  t.b = (td_view){b[1], TD_PEER_SELF, 0, 0, 16, 16};
  t.c = (td_view){b[2], TD_PEER_SELF, 0, 0, 16, 16};
  snprintf(t.label, sizeof t.label, "q");
  uint32_t idx;
  assert_int_equal(td_plan_add_task(plan, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  td_status st = td_plan_validate(plan);
  td_plan_destroy(plan);
  return st;
}

static void test_validate_refuses_malformed_configs(void **state) {
  (void)state;
  td__gemm_qcfg q = {90, 128, 128, 64, 4, 1, 8};
  const uint32_t packed = td__gemm_qcfg_pack(&q);
  assert_int_equal(validate_gemm_op(TD_GEMM_QUEUE | packed), TD_OK);
  assert_int_equal(validate_gemm_op(TD_GEMM_QUEUE), TD_OK);
  /* Configuration bits without the queue flag. */
  assert_int_equal(validate_gemm_op(packed), TD_ERR_SCHEDULE);
  assert_non_null(strstr(td_last_error(), "have unknown bits"));
  assert_non_null(strstr(td_last_error(), "QUEUE (8)"));
  /* Stages 1 is outside 2..8. */
  const uint32_t one_stage = (packed & ~(15u << (TD_GEMM_CFG_SHIFT + 7))) | (1u << (TD_GEMM_CFG_SHIFT + 7));
  assert_int_equal(validate_gemm_op(TD_GEMM_QUEUE | one_stage), TD_ERR_SCHEDULE);
  assert_non_null(strstr(td_last_error(), "queue tile configuration"));
  assert_non_null(strstr(td_last_error(), "malformed"));
}

static void compile_queue_kernel(const char *arch) {
  td__cuda_spec spec = {256, (1u << TD_TASK_KIND_COUNT) - 1, 1, 1};
  char *src = NULL;
  assert_int_equal(td__cuda_codegen(&spec, &src), TD_OK);
  assert_non_null(strstr(src, "#define TD_EXEC_QUEUE 1"));
  td__jit_image img = {0};
  if (td__jit_compile(src, "td_exec.cu", arch, NULL, 0, &img) != TD_OK)
    fail_msg("queue kernel on %s: %s", arch, td_last_error());
  td__jit_image_free(&img);
  free(src);
}

static void test_queue_kernels_compile(void **state) {
  (void)state;
  compile_queue_kernel("sm_80");
  compile_queue_kernel("sm_90a");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_rule_without_cache_entry),
      cmocka_unit_test(test_cache_entry_is_used),
      cmocka_unit_test(test_cublas_cache_entry_falls_back),
      cmocka_unit_test(test_off_other_target_or_given_tiles),
      cmocka_unit_test(test_pack_round_trip),
      cmocka_unit_test(test_validate_refuses_malformed_configs),
      cmocka_unit_test(test_queue_kernels_compile),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
