/* SPDX-License-Identifier: Apache-2.0
 * Property test: random valid programs, built with the C builder from every
 * op and layout the builder accepts (weights with fitting shapes are made up
 * as needed), compiled for 1-6 ranks with random chunking and tiles, run
 * overlapped and sequential, and checked against the reference. A failing
 * seed is printed; replay it with TD_TEST_SEED=S. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "tdist/tdist.h"

static uint64_t rng;
static uint32_t rnd(uint32_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng % n);
}

static td_layout random_layout(void) {
  switch (rnd(4)) {
  case 0: return (td_layout){TD_LAYOUT_REPLICATED, 0};
  case 1: return (td_layout){TD_LAYOUT_SHARD, 0};
  case 2: return (td_layout){TD_LAYOUT_SHARD, 1};
  default: return (td_layout){TD_LAYOUT_PARTIAL, 0};
  }
}

/* Builds a random program; returns NULL if nothing useful came out. */
static td_program *random_program(td_dtype dt) {
  td_program *p;
  assert_int_equal(td_program_create(&p), TD_OK);
  char name[32], rows[16], cols[16];
  int nin = 0;
  td_value cur;
  snprintf(rows, sizeof rows, "%u", 1 + rnd(13));
  snprintf(cols, sizeof cols, "%u", 1 + rnd(11));
  snprintf(name, sizeof name, "in%d", nin++);
  assert_int_equal(td_program_input(p, name, 0, dt, rows, cols, random_layout(), &cur), TD_OK);
  /* bf16 chains stay short: every op rounds (partial sums on each rank too), and
   * five rounded GEMMs in a row can exceed the bf16 tolerance without any bug. */
  int steps = 1 + (int)rnd(dt == TD_BF16 ? 3 : 6), done = 0;
  for (int tries = 0; done < steps && tries < 60; tries++) {
    int64_t R, C;
    td_program_value_shape(p, cur, &R, &C);
    td_layout l = td_program_value_layout(p, cur);
    td_value next = -1, other;
    td_status st = TD_ERR_SHAPE;
    switch (rnd(10)) {
    case 0: st = td_program_all_gather(p, cur, &next); break;
    case 1: st = td_program_reduce_scatter(p, cur, (int)rnd(2), &next); break;
    case 2: st = td_program_all_reduce(p, cur, &next); break;
    case 3: st = td_program_all_to_all(p, cur, l.kind == TD_LAYOUT_SHARD ? 1 - l.dim : 0, &next); break;
    case 4:
    case 5: { /* matmul with a made-up weight (maybe transposed) */
      unsigned flags = rnd(3) == 0 ? TD_MATMUL_TRANSPOSE_B : 0;
      snprintf(name, sizeof name, "w%d", nin++);
      char n[16], k[16];
      snprintf(n, sizeof n, "%u", 1 + rnd(9));
      snprintf(k, sizeof k, "%lld", (long long)C);
      if (td_program_input(p, name, 1, dt, flags ? n : k, flags ? k : n, random_layout(), &other) == TD_OK)
        st = td_program_matmul(p, cur, other, flags, &next);
      break;
    }
    case 6:
    case 7: { /* binary with a made-up operand of the same shape */
      snprintf(name, sizeof name, "in%d", nin++);
      snprintf(rows, sizeof rows, "%lld", (long long)R);
      snprintf(cols, sizeof cols, "%lld", (long long)C);
      if (td_program_input(p, name, 0, dt, rows, cols, random_layout(), &other) == TD_OK)
        st = td_program_ewise(p, rnd(2) ? TD_OP_ADD : TD_OP_MUL, cur, other, &next);
      break;
    }
    case 8:
      st = rnd(2) ? td_program_ewise(p, rnd(2) ? TD_OP_GELU : TD_OP_SILU, cur, -1, &next)
                  : td_program_scale(p, cur, 0.5f, &next);
      break;
    default: {
      snprintf(name, sizeof name, "g%d", nin++);
      snprintf(cols, sizeof cols, "%lld", (long long)C);
      if (td_program_input(p, name, 1, dt, "1", cols, (td_layout){TD_LAYOUT_REPLICATED, 0}, &other) == TD_OK)
        st = td_program_rmsnorm(p, cur, other, 1e-5f, &next);
      break;
    }
    }
    if (st == TD_OK) {
      cur = next;
      done++;
    }
  }
  if (!done || td_program_output(p, cur) != TD_OK) {
    td_program_destroy(p);
    return NULL;
  }
  return p;
}

static void test_random_programs(void **state) {
  (void)state;
  const char *fixed = getenv("TD_TEST_SEED");
  const char *many = getenv("TD_TEST_COUNT"); /* more seeds for a longer hunt */
  int count = fixed ? 1 : many ? atoi(many) : 400, ran = 0;
  for (int i = 0; i < count; i++) {
    uint64_t seed = fixed ? strtoull(fixed, NULL, 10) : 1000 + (uint64_t)i;
    rng = seed * 0x9e3779b97f4a7c15ull | 1;
    td_program *p = random_program(rnd(2) ? TD_F32 : TD_BF16);
    if (!p)
      continue;
    int n = 1 + (int)rnd(6);
    td_compile_opts co;
    td_compile_opts_init(&co);
    co.chunks_per_rank = 1 + (int)rnd(3);
    co.tile_rows = 1 + rnd(5);
    co.ring = (int)rnd(2);
    co.one_shot_bytes = rnd(2) ? 0 : 1 << 20;
    co.compute_workers = 1 + (int)rnd(2);
    co.comm_workers = 1;
    for (int overlap = 1; overlap >= 0; overlap--) {
      td_program_run_opts ro = {n, "cpu", 1, seed, overlap, 1, NULL, &co, 0, NULL, NULL};
      td_program_run_result res;
      td_status st = td_program_run(p, &ro, &res);
      if (st == TD_ERR_SHAPE) /* a split the lowering refuses (contraction < ranks) */
        break;
      if (st != TD_OK || !res.pass)
        print_error("seed %llu (TD_TEST_SEED=%llu), %d ranks, overlap %d: %s; error %.3e tolerance %.1e\n",
                    (unsigned long long)seed, (unsigned long long)seed, n, overlap,
                    st ? td_last_error() : "ran", res.max_rel_error, res.tolerance);
      assert_int_equal(st, TD_OK);
      assert_true(res.pass);
      ran++;
    }
    td_program_destroy(p);
  }
  print_message("%d runs of random programs passed\n", ran);
  assert_true(ran > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_programs)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
