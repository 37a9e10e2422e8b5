/* SPDX-License-Identifier: Apache-2.0
 * The C builder API: layout inference rules for matmul and element-wise ops,
 * every builder and dims error with its message, and the reference evaluator
 * against a product computed here from the inputs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/tdist.h"

static td_layout R(void) { return (td_layout){TD_LAYOUT_REPLICATED, 0}; }
static td_layout S(int d) { return (td_layout){TD_LAYOUT_SHARD, d}; }

static void test_matmul_layouts(void **state) {
  (void)state;
  struct {
    td_layout a, b;
    unsigned flags;
    int ok;
    td_layout out;
  } cases[] = {
      {{0}, {0}, 0, 1, {TD_LAYOUT_REPLICATED, 0}},
      {{TD_LAYOUT_SHARD, 0}, {0}, 0, 1, {TD_LAYOUT_SHARD, 0}},
      {{0}, {TD_LAYOUT_SHARD, 1}, 0, 1, {TD_LAYOUT_SHARD, 1}},
      {{TD_LAYOUT_SHARD, 1}, {TD_LAYOUT_SHARD, 0}, 0, 1, {TD_LAYOUT_PARTIAL, 0}},
      {{0}, {TD_LAYOUT_SHARD, 0}, 0, 1, {TD_LAYOUT_PARTIAL, 0}},
      {{TD_LAYOUT_SHARD, 1}, {0}, 0, 1, {TD_LAYOUT_PARTIAL, 0}},
      {{TD_LAYOUT_PARTIAL, 0}, {0}, 0, 1, {TD_LAYOUT_PARTIAL, 0}},
      {{TD_LAYOUT_SHARD, 0}, {TD_LAYOUT_SHARD, 1}, 0, 0, {0}},
      {{TD_LAYOUT_PARTIAL, 0}, {TD_LAYOUT_PARTIAL, 0}, 0, 0, {0}},
      /* transposes swap the stored shard dim */
      {{TD_LAYOUT_SHARD, 1}, {0}, TD_MATMUL_TRANSPOSE_A, 1, {TD_LAYOUT_SHARD, 0}},
      {{0}, {TD_LAYOUT_SHARD, 0}, TD_MATMUL_TRANSPOSE_B, 1, {TD_LAYOUT_SHARD, 1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    td_program *p;
    assert_int_equal(td_program_create(&p), TD_OK);
    td_value a, b, y = -7;
    assert_int_equal(td_program_input(p, "a", 0, TD_F32, "4", "4", cases[i].a, &a), TD_OK);
    assert_int_equal(td_program_input(p, "b", 1, TD_F32, "4", "4", cases[i].b, &b), TD_OK);
    td_status st = td_program_matmul(p, a, b, cases[i].flags, &y);
    if (cases[i].ok) {
      assert_int_equal(st, TD_OK);
      assert_int_equal(td_program_value_layout(p, y).kind, cases[i].out.kind);
      assert_int_equal(td_program_value_layout(p, y).dim, cases[i].out.dim);
    } else {
      assert_int_equal(st, TD_ERR_SHAPE);
      assert_non_null(strstr(td_last_error(), "matmul: cannot multiply a "));
      assert_int_equal(y, -7);
    }
    td_program_destroy(p);
  }
}

static void test_builder_errors(void **state) {
  (void)state;
  td_program *p;
  td_value x, w, y;
  assert_int_equal(td_program_create(NULL), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "td_program_create: out is NULL");
  assert_int_equal(td_program_create(&p), TD_OK);
  assert_int_equal(td_program_dim(p, "9x", 4), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "dim: invalid name '9x' (a letter or '_', then letters, digits or '_', at most 31 chars)");
  assert_int_equal(td_program_dim(p, "M", 0), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "dim M: value 0 must be >= 1");
  assert_int_equal(td_program_dim(p, "M", 8), TD_OK);
  assert_int_equal(td_program_dim(p, "H", 4), TD_OK);
  assert_int_equal(td_program_set_dim(p, "Q", 3), TD_ERR_NOT_FOUND);
  assert_string_equal(td_last_error(), "dim 'Q' is not declared by the program (declared: M, H)");
  assert_int_equal(td_program_set_dim(p, "M", -1), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "dim M=-1: must be >= 1");
  assert_int_equal(td_program_set_dims(p, "M"), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "--dims item 'M' has no '=' (expected NAME=VALUE)");
  assert_int_equal(td_program_set_dims(p, "M=x"), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "--dims M=x: value is not an integer");
  assert_int_equal(td_program_set_dims(p, "M=4,,H=2"), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "--dims 'M=4,,H=2': empty or overlong item (expected NAME=VALUE,...)");
  assert_int_equal(td_program_input(p, "x", 0, TD_I32, "M", "H", R(), &x), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "input x: dtype i32 is not allowed (f32, f16, bf16)");
  assert_int_equal(td_program_input(p, "x", 0, TD_F32, "M", "Z", R(), &x), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "input x: dim 'Z' is not declared (declare it with `dim Z = VALUE`)");
  assert_int_equal(td_program_input(p, "x", 0, TD_F32, "M", "0", R(), &x), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "input x: dim '0' must be a number >= 1 or a dim name");
  assert_int_equal(td_program_input(p, "x", 0, TD_F32, "M", "H", S(2), &x), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "input x: shard(2): a 2-D tensor shards along dim 0 or 1");
  assert_int_equal(td_program_input(p, "x", 0, TD_F32, "M", "H", S(0), &x), TD_OK);
  assert_int_equal(td_program_input(p, "x", 1, TD_F32, "H", "H", R(), &w), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "weight x: the name is already used");
  /* a weight's errors name a weight, not an input */
  assert_int_equal(td_program_input(p, "w", 1, TD_F32, "Q", "H", R(), &w), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "weight w: dim 'Q' is not declared (declare it with `dim Q = VALUE`)");
  assert_int_equal(td_program_input(p, "w", 1, TD_I32, "H", "H", R(), &w), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "weight w: dtype i32 is not allowed (f32, f16, bf16)");
  assert_int_equal(td_program_input(p, "w", 1, TD_F32, "H", "", R(), &w), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "weight w: empty dim");
  assert_int_equal(td_program_input(p, "w", 1, TD_F32, "H", "H", R(), &w), TD_OK);
  assert_int_equal(td_program_matmul(p, x, 99, 0, &y), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "matmul: value 99 does not exist (program has 2 values)");
  assert_int_equal(td_program_ewise(p, TD_OP_MATMUL, x, w, &y), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "ewise: op matmul is not add, mul, gelu or silu");
  assert_int_equal(td_program_reduce_scatter(p, x, 3, &y), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "reduce_scatter: dim 3 must be 0 or 1");
  assert_int_equal(td_program_all_to_all(p, x, 0, &y), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "all_to_all: input is shard(0) but must be shard(1)");
  assert_int_equal(td_program_output(p, x), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "output x: an input or weight cannot be an output");
  assert_int_equal(td_program_check(p), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "program has no output (mark one with `output NAME`)");
  assert_int_equal(td_program_matmul(p, x, w, 0, &y), TD_OK);
  assert_int_equal(td_program_set_name(p, y, "w"), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "name 'w' is already used");
  assert_int_equal(td_program_set_name(p, y, "y"), TD_OK);
  assert_int_equal(td_program_output(p, y), TD_OK);
  assert_int_equal(td_program_check(p), TD_OK);
  /* binding H so the contraction no longer matches is caught by check, naming the op */
  td_value v;
  assert_int_equal(td_program_input(p, "u", 1, TD_F32, "M", "H", R(), &v), TD_OK);
  td_value z;
  assert_int_equal(td_program_matmul(p, x, v, 0, &z), TD_OK);
  assert_int_equal(td_program_check(p), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "matmul (value %4): contraction dims differ (a's columns vs b's rows, after "
                                       "transposes): H vs M: 4 vs 8");
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.nranks = 0;
  td_compiled *c = NULL;
  assert_int_equal(td_program_compile(p, &co, &c), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "compile: nranks 0 must be in 1..4096");
  co.nranks = 2;
  co.chunks_per_rank = 65;
  assert_int_equal(td_program_compile(p, &co, &c), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "compile: chunks_per_rank must be in 0..64 and tile sizes and worker "
                                       "counts >= 0 (0 = chosen by the perf model)");
  assert_null(c);
  td_program_destroy(p);
}

static void test_reference_matmul(void **state) {
  (void)state;
  td_program *p;
  td_value a, b, y, g;
  assert_int_equal(td_program_create(&p), TD_OK);
  assert_int_equal(td_program_input(p, "a", 0, TD_F32, "3", "5", S(0), &a), TD_OK);
  assert_int_equal(td_program_input(p, "b", 1, TD_F32, "5", "2", R(), &b), TD_OK);
  assert_int_equal(td_program_matmul(p, a, b, 0, &y), TD_OK);
  assert_int_equal(td_program_ewise(p, TD_OP_GELU, y, -1, &g), TD_OK);
  assert_int_equal(td_program_output(p, g), TD_OK);
  double A[15], B[10];
  for (int i = 0; i < 15; i++)
    A[i] = 0.25 * (i % 7) - 0.5;
  for (int i = 0; i < 10; i++)
    B[i] = 0.125 * (i % 5) - 0.25;
  const double *inputs[4] = {A, B, NULL, NULL};
  double *vals[4];
  assert_int_equal(td_program_reference(p, inputs, vals), TD_OK);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      double s = 0;
      for (int k = 0; k < 5; k++)
        s += A[i * 5 + k] * B[k * 2 + j];
      assert_true(fabs(vals[2][i * 2 + j] - (float)s) < 1e-6);
      double gl = 0.5 * s * (1 + tanh(0.7978845608028654 * (s + 0.044715 * s * s * s)));
      assert_true(fabs(vals[3][i * 2 + j] - gl) < 1e-6);
    }
  for (int v = 0; v < 4; v++)
    free(vals[v]);
  const double *missing[4] = {A, NULL, NULL, NULL};
  assert_int_equal(td_program_reference(p, missing, vals), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "reference: no data for input 'b'");
  td_program_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_layouts),
      cmocka_unit_test(test_builder_errors),
      cmocka_unit_test(test_reference_matmul),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
