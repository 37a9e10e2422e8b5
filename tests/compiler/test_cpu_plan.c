/* SPDX-License-Identifier: Apache-2.0
 * The cpu plan choices that make the main job fast: matmul -> gelu fused into
 * the GEMM tiles' epilogue (TD_GEMM_GELU; the matmul keeps no buffer), and,
 * when communication is negligible next to the GEMMs, one chunk per rank and
 * GEMM tiles merged across the peers' contiguous rows while the rank's own
 * rows stay a tile of their own (first for AG -> GEMM, last for
 * GEMM -> RS, where that tile accumulates straight onto the peers' partial
 * sums in the reduce-scatter's accumulator). Plans are inspected, and
 * every variant is run against the f64 reference on 1-5 ranks with dims
 * that do not divide, f32 and bf16. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "compiler/run_helper.h"

static const char *mlp =
    "dim M = 37, H = 12, F = 23\ninput x : %s[M, H] shard(0)\nweight w1 : %s[H, F] shard(1)\n"
    "weight w2 : %s[F, H] shard(0)\ny = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\n"
    "output y\n";

static td_program *parse(const char *text) {
  td_program *p = NULL;
  if (td_program_parse(text, strlen(text), "t.td", &p) != TD_OK)
    print_error("parse: %s\n", td_last_error());
  assert_non_null(p);
  return p;
}

static td_compiled *compile(const td_program *p, int n, int overlap, const td_perf_model *model) {
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.nranks = n;
  co.overlap = overlap;
  co.compute_workers = 1;
  co.comm_workers = 1;
  co.model = model;
  td_compiled *c = NULL;
  if (td_program_compile(p, &co, &c) != TD_OK)
    print_error("compile: %s\n", td_last_error());
  assert_non_null(c);
  return c;
}

/* GEMM tasks with and without the GELU epilogue, and element-wise gelu tasks, on a rank. */
static void count(const td_compiled *c, int rank, int *gemm_gelu, int *gemm, int *ew_gelu) {
  const td_schedule *s = td_plan_schedule(td_compiled_plan(c), rank);
  *gemm_gelu = *gemm = *ew_gelu = 0;
  for (uint32_t i = 0; i < s->ntasks; i++) {
    const td_task *t = &s->tasks[i];
    if (t->kind == TD_TASK_GEMM && (t->op & TD_GEMM_GELU))
      (*gemm_gelu)++;
    else if (t->kind == TD_TASK_GEMM)
      (*gemm)++;
    else if (t->kind == TD_TASK_EWISE && t->op == TD_EW_GELU)
      (*ew_gelu)++;
  }
}

static void test_gelu_fused_into_gemm(void **state) {
  (void)state;
  char text[512];
  snprintf(text, sizeof text, mlp, "bf16", "bf16", "bf16");
  td_program *p = parse(text);
  for (int n = 1; n <= 4; n++)
    for (int overlap = 0; overlap < 2; overlap++) {
      td_compiled *c = compile(p, n, overlap, NULL);
      assert_int_equal(td_compiled_buffer(c, 4), -1); /* the matmul %4 is never stored */
      assert_true(td_compiled_buffer(c, 5) >= 0);     /* its gelu %5 is */
      for (int r = 0; r < n; r++) {
        int gg, g, eg;
        count(c, r, &gg, &g, &eg);
        assert_true(gg >= 1);
        assert_int_equal(eg, 0);
        assert_true(g >= 1); /* the second matmul has no epilogue */
      }
      td_compiled_destroy(c);
    }
  td_program_destroy(p);
  const char *const dts[2] = {"f32", "bf16"};
  for (int d = 0; d < 2; d++) {
    snprintf(text, sizeof text, mlp, dts[d], dts[d], dts[d]);
    for (int n = 1; n <= 5; n++)
      td_test_run_program(text, NULL, n, NULL);
    td_test_run_program(text, "M=3,H=5,F=7", 4, NULL); /* M smaller than the ranks' chunks */
  }
}

/* A matmul read by more than the gelu, or a gelu that is an output, keeps the separate gelu tiles. */
static void test_gelu_not_fused(void **state) {
  (void)state;
  const char *texts[2] = {
      "input x : f32[9, 6] shard(0)\nweight w : f32[6, 10] shard(1)\nh = matmul(all_gather(x), w)\n"
      "output y = add(gelu(h), h)\n",
      "input x : bf16[9, 6] shard(0)\nweight w : bf16[6, 10] shard(1)\n"
      "output y = gelu(matmul(all_gather(x), w))\n"};
  for (int k = 0; k < 2; k++) {
    td_program *p = parse(texts[k]);
    td_compiled *c = compile(p, 2, 1, NULL);
    int gg, g, eg;
    count(c, 0, &gg, &g, &eg);
    assert_int_equal(gg, 0);
    assert_true(g >= 1);
    assert_true(eg >= 1);
    td_compiled_destroy(c);
    td_program_destroy(p);
    for (int n = 1; n <= 3; n++)
      td_test_run_program(texts[k], NULL, n, NULL);
  }
}

/* Communication negligible next to the GEMMs but cutting a GEMM cheap (a
 * model with a huge memory bandwidth): one chunk per rank; the GEMM after
 * the all-gather starts with exactly the rank's own rows, the GEMM before
 * the reduce-scatter ends with them, and the peers' rows are merged into at
 * most two tiles in between. */
static void test_merged_tiles_keep_own_rows(void **state) {
  (void)state;
  const char *text = "dim M = 515, H = 256, F = 690\ninput x : bf16[M, H] shard(0)\n"
                     "weight w1 : bf16[H, F] shard(1)\nweight w2 : bf16[F, H] shard(0)\n"
                     "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\noutput y\n";
  td_program *p = parse(text);
  td_perf_model m;
  td_perf_model_load(&m);
  /* comm negligible next to the GEMMs, and repacking B free (a huge memory bandwidth): the split pays */
  m.alpha_s = 5e-6, m.beta_bytes_s = 4e9, m.flops_s = 2e10, m.mem_bytes_s = 1e13, m.cores = 64;
  for (int n = 2; n <= 4; n++) {
    td_compiled *c = compile(p, n, 1, &m);
    int chunks;
    int64_t tile_rows;
    td_compiled_choices(c, NULL, NULL, &chunks, &tile_rows, NULL);
    assert_int_equal(chunks, 1);
    assert_true(tile_rows >= 515);
    for (int r = 0; r < n; r++) {
      size_t off, len;
      td_chunk_range(515, n, r, &off, &len);
      const td_schedule *s = td_plan_schedule(td_compiled_plan(c), r);
      const td_task *first_ag = NULL, *last_rs = NULL;
      int ag_tiles = 0, rs_tiles = 0;
      int64_t ag_rows = 0, rs_rows = 0;
      for (uint32_t i = 0; i < s->ntasks; i++) {
        const td_task *t = &s->tasks[i];
        if (t->kind != TD_TASK_GEMM)
          continue;
        if (t->op & TD_GEMM_GELU) {
          first_ag = first_ag ? first_ag : t;
          ag_tiles++, ag_rows += t->c.rows;
        } else {
          last_rs = t;
          rs_tiles++, rs_rows += t->c.rows;
        }
      }
      assert_non_null(first_ag);
      assert_non_null(last_rs);
      assert_int_equal(first_ag->c.row0, (int64_t)off);
      assert_int_equal(first_ag->c.rows, (int64_t)len);
      assert_int_equal(first_ag->wait_count, 0); /* own rows: no signal to wait for */
      assert_int_equal(last_rs->a.row0, (int64_t)off); /* reads the rank's own rows of the gelu value */
      assert_int_equal(last_rs->c.rows, (int64_t)len);
      /* ... and accumulates onto the peers' partial sums in the reduce-scatter's accumulator */
      assert_true(last_rs->op & TD_GEMM_ACCUMULATE);
      assert_true(last_rs->c.buf != td_compiled_buffer(c, 6));
      assert_int_equal(last_rs->c.row0, 0);
      assert_int_equal(ag_rows, 515);
      assert_int_equal(rs_rows, 515);
      assert_in_range(ag_tiles, 2, 3);
      assert_in_range(rs_tiles, 2, 3);
    }
    td_compiled_destroy(c);
  }
  td_program_destroy(p);
  for (int n = 2; n <= 5; n++)
    td_test_run_program(text, "M=67,H=16,F=45", n, NULL);
}

/* The main job with this box's calibration (alpha 2.65 us, 14.3 GB/s, 139
 * GFLOP/s, 11.7 GB/s memory): a part moves in ~40 us while one more GEMM call
 * repacks 5.6 MB of weights (~1 ms), so each GEMM stays one tile, as in the
 * sequential plan; the local chunk still overlaps the gather through the f32
 * conversion of the gathered rows (own rows first, with no wait, and no
 * copy of them into the gather buffer); every push
 * of the reduce-scatter precedes its reductions, and the last step adds and
 * rounds in one pass. */
static void test_minimal_plan(void **state) {
  (void)state;
  const char *text = "dim M = 512, H = 1024, F = 2752\ninput x : bf16[M, H] shard(0)\n"
                     "weight w1 : bf16[H, F] shard(1)\nweight w2 : bf16[F, H] shard(0)\n"
                     "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\noutput y\n";
  td_program *p = parse(text);
  td_perf_model m;
  td_perf_model_load(&m);
  m.alpha_s = 2.65e-6, m.beta_bytes_s = 14.3e9, m.flops_s = 1.39e11, m.mem_bytes_s = 11.7e9, m.cores = 2;
  for (int n = 2; n <= 4; n += 2) {
    td_compiled *c = compile(p, n, 1, &m);
    for (int r = 0; r < n; r++) {
      const td_schedule *s = td_plan_schedule(td_compiled_plan(c), r);
      int gg, g, eg, first_conv = -1, pushes = 0, reductions_before_last_push = 0, add_round = 0;
      count(c, r, &gg, &g, &eg);
      assert_int_equal(gg, 1);
      assert_int_equal(g, 1);
      size_t off, len;
      td_chunk_range(512, n, r, &off, &len);
      for (uint32_t i = 0; i < s->ntasks; i++) {
        const td_task *t = &s->tasks[i];
        if (first_conv < 0 && t->kind == TD_TASK_EWISE && t->op == TD_EW_COPY && t->worker == TD_WORKER_COMPUTE) {
          first_conv = (int)i;
          assert_int_equal(t->c.row0, (int64_t)off); /* own rows first ... */
          assert_int_equal(t->wait_count, 0);        /* ... straight from the shard */
          assert_int_equal(t->dep_count, 0);
        }
        if (t->kind == TD_TASK_COPY && t->raise_count && t->c.buf != td_compiled_buffer(c, 3))
          pushes++;
        if ((t->kind == TD_TASK_REDUCE || (t->kind == TD_TASK_COPY && t->wait_count)) && pushes < n - 1)
          reductions_before_last_push++;
        if (t->kind == TD_TASK_EWISE && t->op == TD_EW_ADD)
          add_round++;
      }
      assert_true(first_conv >= 0);
      assert_int_equal(pushes, n - 1);
      assert_int_equal(reductions_before_last_push, 0);
      assert_int_equal(add_round, 1);
    }
    td_compiled_destroy(c);
    /* The own rows reach the GEMM from the shard, so the overlapped plan makes
     * no local copy into the gather buffer; the sequential plan, which reads
     * the whole gathered value after the collective, does. */
    for (int overlap = 0; overlap < 2; overlap++) {
      c = compile(p, n, overlap, &m);
      const td_schedule *s = td_plan_schedule(td_compiled_plan(c), 0);
      int own_copies = 0;
      for (uint32_t i = 0; i < s->ntasks; i++)
        own_copies += s->tasks[i].kind == TD_TASK_COPY && !s->tasks[i].raise_count &&
                      s->tasks[i].c.buf == td_compiled_buffer(c, 3) && s->tasks[i].c.peer == TD_PEER_SELF;
      assert_int_equal(own_copies, overlap ? 0 : 1);
      td_compiled_destroy(c);
    }
  }
  td_program_destroy(p);
}

/* Expensive communication (a slow link): several chunks per rank, tiles no larger than a chunk. */
static void test_costly_comm_keeps_chunks(void **state) {
  (void)state;
  const char *text = "dim M = 512, H = 1024, F = 2752\ninput x : bf16[M, H] shard(0)\n"
                     "weight w1 : bf16[H, F] shard(1)\nweight w2 : bf16[F, H] shard(0)\n"
                     "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\noutput y\n";
  td_program *p = parse(text);
  td_perf_model m;
  td_perf_model_load(&m);
  m.alpha_s = 5e-6, m.beta_bytes_s = 1e7, m.flops_s = 2e10; /* 10 MB/s */
  td_compiled *c = compile(p, 2, 1, &m);
  int chunks;
  int64_t tile_rows;
  td_compiled_choices(c, NULL, NULL, &chunks, &tile_rows, NULL);
  assert_true(chunks > 1);
  assert_true(tile_rows <= 256 / chunks + 8);
  td_compiled_destroy(c);
  td_program_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_fused_into_gemm),
      cmocka_unit_test(test_gelu_not_fused),
      cmocka_unit_test(test_merged_tiles_keep_own_rows),
      cmocka_unit_test(test_costly_comm_keeps_chunks),
      cmocka_unit_test(test_minimal_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
