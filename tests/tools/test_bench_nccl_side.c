/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench <op> --backend cuda`, the NCCL + cuBLAS side (label gpu; the
 * device tool's machines): with one GPU per rank it runs for every operator,
 * also with M not divisible by the ranks (padded parts, per-part GEMMs), its
 * result matches the sequential baseline within bf16 rounding, and every
 * tdist side gets a speedup over it in the JSON; with more ranks than GPUs
 * it is skipped with the reason (ranks sharing a GPU) and the run still
 * exits 0. The fused variant is left out (TD_OPS_FUSED=0): this checks the
 * baseline, not the operators. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli_test_util.h"

static int gpus;

static int setup(void **state) {
  (void)state;
  const char *dir = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", dir ? dir : ".");
  setenv("TD_OPS_FUSED", "0", 1);
  if (cudaGetDeviceCount(&gpus) != cudaSuccess)
    gpus = 0;
  return 0;
}

static cJSON *side(cJSON *c, const char *name) {
  cJSON *s;
  cJSON_ArrayForEach(s, cJSON_GetObjectItem(c, "sides")) {
    if (!strcmp(cJSON_GetObjectItem(s, "side")->valuestring, name))
      return s;
  }
  return NULL;
}

/* One run of `op` with `ranks` ranks; checks the nccl+cublas side ran (or was skipped when `skip`). */
static void one(const char *op, int ranks, const char *shape, int skip) {
  char json[256], args[1024];
  static char out[1 << 16];
  snprintf(json, sizeof json, "/tmp/td_bench_nccl_%s_%d_%ld.json", op, ranks, (long)getpid());
  snprintf(args, sizeof args, "bench %s --backend cuda --ranks %d --iters 2 --warmup 1 --variants none %s --json %s",
           op, ranks, shape, json);
  int rc = run(args, out, sizeof out);
  if (rc != 0)
    fprintf(stderr, "tdist %s: status %d\n%s\n", args, rc, out);
  assert_int_equal(rc, 0);
  cJSON *j = load_json(json);
  cJSON *env = cJSON_GetObjectItem(j, "environment");
  assert_int_equal(cJSON_GetObjectItem(env, "gpu_count")->valueint, gpus);
  assert_non_null(cJSON_GetObjectItem(env, "p2p"));
  cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "results")) {
    assert_null(cJSON_GetObjectItem(c, "error"));
    cJSON *n = side(c, "nccl+cublas"), *a = side(c, "tdist auto");
    assert_non_null(n);
    assert_non_null(a);
    if (skip) {
      cJSON *why = cJSON_GetObjectItem(n, "skipped");
      assert_non_null(why);
      assert_non_null(strstr(why->valuestring, "share GPU"));
      assert_non_null(strstr(out, "skipped: ranks 0 and"));
      assert_null(cJSON_GetObjectItem(a, "speedup_vs_nccl_cublas"));
      continue;
    }
    assert_null(cJSON_GetObjectItem(n, "error"));
    assert_null(cJSON_GetObjectItem(n, "skipped"));
    double p50 = cJSON_GetObjectItem(n, "p50_s")->valuedouble;
    assert_true(p50 > 0);
    /* bf16 sums in another order than the baseline's f32 accumulation */
    cJSON *d = cJSON_GetObjectItem(n, "max_rel_diff");
    assert_non_null(d);
    assert_true(d->valuedouble < 3e-2);
    cJSON *sp = cJSON_GetObjectItem(a, "speedup_vs_nccl_cublas");
    assert_non_null(sp);
    assert_true(sp->valuedouble > 0);
    if (strcmp(op, "all_reduce")) { /* the GEMM alone: no result to compare, no speedup */
      cJSON *g = side(c, "gemm only");
      assert_non_null(g);
      assert_true(cJSON_GetObjectItem(g, "p50_s")->valuedouble > 0);
      assert_null(cJSON_GetObjectItem(g, "max_rel_diff"));
      assert_null(cJSON_GetObjectItem(g, "speedup_vs_nccl_cublas"));
    }
  }
  cJSON_Delete(j);
  unlink(json);
}

static void test_one_gpu_per_rank(void **state) {
  (void)state;
  if (gpus < 2)
    skip(); /* one GPU: only the skipped form below applies */
  int r = gpus < 4 ? gpus : 4;
  one("ag_gemm", r, "--shape 1001x1024x512", 0); /* M not divisible: padded parts, one GEMM per part */
  one("gemm_rs", r, "--shape 1001x512x1024", 0);
  one("gemm_ar", r, "--shape 1000x512x1024", 0);
  one("all_reduce", r, "--sizes 64K,1000", 0);
}

static void test_shared_gpu_skipped(void **state) {
  (void)state;
  if (gpus < 1)
    skip();
  one("gemm_ar", gpus + 1, "--shape 256x256x256", 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_gpu_per_rank),
      cmocka_unit_test(test_shared_gpu_skipped),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
