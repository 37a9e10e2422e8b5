/* SPDX-License-Identifier: Apache-2.0
 * Explain and plan properties. A golden file for a small program (the perf
 * model is fixed here, so predicted times are deterministic; regenerate with
 * TD_UPDATE_GOLDEN=1 after an intended change and review the diff). Plan
 * properties over several programs and world sizes: no task waits on a
 * signal that no raise reaches; AG -> GEMM computes the rank's own chunk
 * first (its first GEMM tile waits on nothing remote); GEMM -> RS produces
 * rank+1's rows first; the overlapped plan is predicted no slower than the
 * sequential one, with some communication hidden. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/tdist.h"

static const td_perf_model model = {5e-6, 4e9, 2e10, 5e9, 3e-6, 2, 1e-8};

static const char *mlp = "dim M = 8, H = 4, F = 8\ninput x : bf16[M, H] shard(0)\n"
                         "weight w1 : bf16[H, F] shard(1)\nweight w2 : bf16[F, H] shard(0)\n"
                         "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\noutput y\n";

static td_compiled *compile(const char *text, const char *dims, int n, int overlap, int chunks, int64_t tile,
                            int64_t one_shot) {
  td_program *p = NULL;
  assert_int_equal(td_program_parse(text, strlen(text), "e.td", &p), TD_OK);
  if (dims)
    assert_int_equal(td_program_set_dims(p, dims), TD_OK);
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.nranks = n;
  co.overlap = overlap;
  co.chunks_per_rank = chunks;
  co.tile_rows = tile;
  co.one_shot_bytes = one_shot;
  co.compute_workers = 1;
  co.comm_workers = 1;
  co.model = &model;
  td_compiled *c = NULL;
  if (td_program_compile(p, &co, &c) != TD_OK)
    print_error("compile: %s\n", td_last_error());
  assert_non_null(c);
  td_program_destroy(p);
  return c;
}

static const char *attn = "dim M = 6, H = 4, QKV = 6\ninput x : f32[M, H] shard(0)\n"
                          "weight wqkv : f32[H, QKV] shard(1)\nweight wo : f32[QKV, H] shard(0)\n"
                          "qkv = matmul(all_gather(x), wqkv)\noutput out = all_reduce(matmul(qkv, wo))\n";

/* Compares the explain text of `c` with golden file `name` (TD_UPDATE_GOLDEN=1 rewrites it). */
static void check_golden(td_compiled *c, const char *name) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  assert_int_equal(td_compiled_explain(c, m), TD_OK);
  fclose(m);
  char path[1024];
  const char *src = getenv("TD_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/tests/compiler/golden/%s", src ? src : ".", name);
  if (getenv("TD_UPDATE_GOLDEN")) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
  }
  FILE *f = fopen(path, "rb");
  if (!f)
    print_error("missing golden file %s\n", path);
  assert_non_null(f);
  static char want[1 << 17];
  size_t n = fread(want, 1, sizeof want - 1, f);
  fclose(f);
  want[n] = 0;
  if (strcmp(text, want) != 0)
    print_error("explain output differs from %s; got:\n%s\n", path, text);
  assert_string_equal(text, want);
  free(text);
}

static void test_golden(void **state) {
  (void)state;
  td_compiled *c = compile(mlp, NULL, 2, 1, 1, 2, -1);
  check_golden(c, "explain_mlp_2.txt");
  td_compiled_destroy(c);
  /* GEMM -> all_reduce as reduce-scatter + all-gather through the hidden intermediate */
  c = compile(attn, NULL, 3, 1, 1, 2, 0);
  check_golden(c, "explain_attn_ar_3.txt");
  td_compiled_destroy(c);
}

/* Every wait can be met: the per-launch total raised on that rank covers it. */
static void check_waits_reachable(const td_compiled *c) {
  const td_plan *plan = td_compiled_plan(c);
  for (int r = 0; r < td_plan_nranks(plan); r++) {
    const td_schedule *s = td_plan_schedule(plan, r);
    for (uint32_t i = 0; i < s->ntasks; i++)
      for (uint32_t w = 0; w < s->tasks[i].wait_count; w++) {
        const td_wait *wt = &s->waits[s->tasks[i].wait_first + w];
        assert_true(td_plan_signal_total(plan, wt->signal, r) >= wt->value);
      }
  }
}

/* Signal waits of task i and of the local tasks it depends on, transitively
 * (on cpu a GEMM reads a gathered 16-bit operand through f32 staging tasks,
 * which hold the waits for the chunks). Counts each wait once per task. */
static uint32_t waits_through_deps(const td_schedule *s, uint32_t i, int depth) {
  uint32_t w = s->tasks[i].wait_count;
  for (uint32_t d = 0; depth < 8 && d < s->tasks[i].dep_count; d++)
    w += waits_through_deps(s, s->deps[s->tasks[i].dep_first + d], depth + 1);
  return w;
}

static void test_properties(void **state) {
  (void)state;
  const char *dims[] = {"M=8,H=4,F=8", "M=13,H=5,F=11", "M=3,H=4,F=8"};
  for (int n = 1; n <= 8; n++)
    for (int d = 0; d < 3; d++) {
      td_compiled *c = compile(mlp, dims[d], n, 1, 2, 2, -1);
      check_waits_reachable(c);
      const td_plan *plan = td_compiled_plan(c);
      int64_t M = d == 0 ? 8 : d == 1 ? 13 : 3;
      for (int r = 0; r < n; r++) {
        const td_schedule *s = td_plan_schedule(plan, r);
        size_t off, len;
        td_chunk_range((size_t)M, n, r, &off, &len);
        /* first GEMM tile of AG -> GEMM: own rows (read from the rank's own shard
         * x, or from its rows of the gather buffer), no remote wait */
        uint32_t i = 0;
        while (i < s->ntasks && s->tasks[i].kind != TD_TASK_GEMM)
          i++;
        assert_true(i < s->ntasks);
        if (len > 0) {
          assert_int_equal(waits_through_deps(s, i, 0), 0);
          int from_x = s->tasks[i].a.buf == td_compiled_buffer(c, 0);
          assert_true(from_x || (s->tasks[i].a.row0 >= (int64_t)off && s->tasks[i].a.row0 < (int64_t)(off + len)));
        }
        /* first GEMM tile of the second matmul (GEMM -> RS): rows of rank r+1 */
        uint32_t j = i;
        while (j < s->ntasks && !(s->tasks[j].kind == TD_TASK_GEMM && s->tasks[j].c.buf != s->tasks[i].c.buf))
          j++;
        assert_true(j < s->ntasks);
        size_t qo, ql;
        int q = (r + 1) % n;
        td_chunk_range((size_t)M, n, q, &qo, &ql);
        if (ql > 0)
          assert_true(s->tasks[j].c.row0 >= (int64_t)qo && s->tasks[j].c.row0 < (int64_t)(qo + ql));
      }
      td_compiled_destroy(c);
      td_compiled *seq = compile(mlp, dims[d], n, 0, 2, 2, -1);
      check_waits_reachable(seq);
      /* sequential baseline: the first GEMM tile waits for every chunk of every
       * peer that owns rows (the whole all_gather), not just its own rows */
      for (int r = 0; r < n; r++) {
        const td_schedule *s = td_plan_schedule(td_compiled_plan(seq), r);
        uint32_t i = 0;
        while (i < s->ntasks && s->tasks[i].kind != TD_TASK_GEMM)
          i++;
        if (i == s->ntasks)
          continue; /* a rank with no rows of a shard(1) result never happens here */
        uint32_t want = 0;
        for (int q = 0; q < n; q++) {
          size_t qo, ql;
          td_chunk_range((size_t)M, n, q, &qo, &ql);
          if (q != r && ql > 0)
            want += ql >= 2 ? 2 : 1; /* two chunks per part, none empty unless the part has 1 row */
        }
        assert_int_equal(waits_through_deps(s, i, 0), want);
      }
      td_compiled_destroy(seq);
    }
}

static void test_prediction(void **state) {
  (void)state;
  const char *dims = "M=512,H=256,F=512";
  td_compiled *ov = compile(mlp, dims, 4, 1, 2, 32, -1), *sq = compile(mlp, dims, 4, 0, 2, 32, -1);
  td_prediction po, ps;
  assert_int_equal(td_compiled_predict(ov, &po), TD_OK);
  assert_int_equal(td_compiled_predict(sq, &ps), TD_OK);
  assert_true(po.makespan_s > 0);
  assert_true(po.makespan_s <= ps.makespan_s);
  assert_true(po.hidden_share > ps.hidden_share);
  assert_true(po.hidden_share > 0.0 && po.hidden_share <= 1.0);
  td_compiled_destroy(ov);
  td_compiled_destroy(sq);
}

/* A model given in C with constants that make times infinite (flops_s
 * 1e-300) is an error of explain and predict, not a crash in the timeline. */
static void test_nonfinite_model(void **state) {
  (void)state;
  static const double flops[] = {1e-300, 1e-310, 0.0};
  for (size_t i = 0; i < sizeof flops / sizeof flops[0]; i++) {
    td_program *p = NULL;
    assert_int_equal(td_program_parse(mlp, strlen(mlp), "e.td", &p), TD_OK);
    td_perf_model m = model;
    m.flops_s = flops[i];
    td_compile_opts co;
    td_compile_opts_init(&co);
    co.nranks = 2;
    co.model = &m;
    td_compiled *c = NULL;
    assert_int_equal(td_program_compile(p, &co, &c), TD_OK);
    FILE *out = tmpfile();
    assert_non_null(out);
    assert_int_equal(td_compiled_explain(c, out), TD_ERR_INVALID_ARG);
    assert_non_null(strstr(td_last_error(), "is not a finite time; the perf model's constants must be positive "
                                            "finite numbers"));
    assert_non_null(strstr(td_last_error(), "explain: rank "));
    td_prediction pr;
    assert_int_equal(td_compiled_predict(c, &pr), TD_ERR_INVALID_ARG);
    fclose(out);
    td_compiled_destroy(c);
    td_program_destroy(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nonfinite_model),
      cmocka_unit_test(test_golden),
      cmocka_unit_test(test_properties),
      cmocka_unit_test(test_prediction),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
