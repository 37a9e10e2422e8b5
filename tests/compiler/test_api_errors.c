/* SPDX-License-Identifier: Apache-2.0
 * The remaining error paths of the compiler's public entry points, each with
 * its message: NULL arguments, bad names and values, dtype mismatches, run
 * options, the calibration file without a place to live. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/program.h"

static td_program *small(void) {
  const char *text = "input x : f32[4, 4] shard(0)\nweight w : bf16[4]\noutput y = gelu(x)\n";
  td_program *p = NULL;
  assert_int_equal(td_program_parse(text, strlen(text), "s.td", &p), TD_OK);
  return p;
}

static void test_null_arguments(void **state) {
  (void)state;
  td_program *p = small();
  td_compiled *c = NULL;
  assert_int_equal(td_program_parse(NULL, 0, "x", &p), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "td_program_parse: text or out is NULL");
  assert_int_equal(td_program_load(NULL, &p), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "td_program_load: path or out is NULL");
  assert_int_equal(td_program_compile(NULL, NULL, &c), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "compile: program or out is NULL");
  assert_int_equal(td_compiled_predict(NULL, NULL), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "predict: compiled or out is NULL");
  assert_int_equal(td_compiled_explain(NULL, stdout), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "explain: compiled or out is NULL");
  assert_int_equal(td_program_reference(p, NULL, NULL), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "reference: program, inputs or values is NULL");
  assert_int_equal(td_program_check(NULL), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "check: program is NULL");
  assert_int_equal(td_program_set_dim(p, NULL, 3), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "set_dim: program or name is NULL");
  assert_int_equal(td_program_set_dims(p, NULL), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "set_dims: program or text is NULL");
  assert_int_equal(td_perf_model_save(NULL, NULL, 0), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "perf model save: model is NULL");
  td_program_destroy(p);
  td_program_destroy(NULL);
  td_compiled_destroy(NULL);
}

static void test_builder_values(void **state) {
  (void)state;
  td_program *p = small();
  td_value y;
  assert_int_equal(td_program_scale(p, 42, 2.0f, &y), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "scale: value 42 does not exist (program has 3 values)");
  assert_int_equal(td_program_set_name(p, 0, "1abc"), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "set_name: invalid name '1abc'");
  assert_int_equal(td_program_output(p, -1), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "output: value -1 does not exist (program has 3 values)");
  assert_int_equal(td_program_dim(p, "M", 4), TD_OK);
  assert_int_equal(td_program_dim(p, "M", 5), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "dim M is declared twice");
  assert_int_equal(td_program_input(p, "bad name", 0, TD_F32, "4", "4", (td_layout){0, 0}, &y), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "input: invalid name 'bad name'");
  assert_int_equal(td_program_input(p, "q", 0, TD_F32, "4", "4", (td_layout){(td_layout_kind)7, 0}, &y),
                   TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "input q: invalid layout kind 7");
  /* dtype mismatches: ewise and rmsnorm */
  assert_int_equal(td_program_ewise(p, TD_OP_ADD, 0, 1, &y), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "add: operands have different dtypes (f32 and bf16)");
  assert_int_equal(td_program_rmsnorm(p, 0, 1, 1e-5f, &y), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "rmsnorm: x and w have different dtypes (f32 and bf16)");
  td_program_destroy(p);
}

static void test_run_options(void **state) {
  (void)state;
  td_program *p = small();
  td_program_run_result res;
  td_program_run_opts ro = {0, "cpu", 1, 1, 1, 1, NULL, NULL, 0, NULL, NULL};
  assert_int_equal(td_program_run(p, &ro, &res), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "run: nranks (0) and iters (1) must be >= 1");
  ro.nranks = 2;
  ro.iters = 0;
  assert_int_equal(td_program_run(p, &ro, &res), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "run: nranks (2) and iters (0) must be >= 1");
  assert_int_equal(td_program_run(p, NULL, &res), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "run: program, opts or result is NULL");
  ro.iters = 1;
  ro.backend = "tpu";
  assert_int_equal(td_program_run(p, &ro, &res), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "run: unknown backend 'tpu' (cpu or cuda)");
  td_program_destroy(p);
}

static void test_too_many_tiles(void **state) {
  (void)state;
  const char *text = "dim M = 1000000000\ninput x : f32[M, 4]\noutput y = gelu(x)\n";
  td_program *p = NULL;
  assert_int_equal(td_program_parse(text, strlen(text), "big.td", &p), TD_OK);
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.tile_rows = 8;
  td_compiled *c = NULL;
  assert_int_equal(td_program_compile(p, &co, &c), TD_ERR_INVALID_ARG);
  assert_string_equal(td_last_error(), "compile: about 250000002 tiles per rank with tiles of 8 rows (at most "
                                       "262144): raise the tile rows or lower the dims");
  assert_null(c);
  td_program_destroy(p);
}

static void test_calibration_without_home(void **state) {
  (void)state;
  char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  unsetenv("HOME");
  unsetenv("TD_CACHE_DIR");
  td_perf_model m;
  td_perf_model_load(&m); /* defaults, never fails */
  assert_true(m.alpha_s > 0 && m.flops_s > 0);
  assert_int_equal(td_perf_model_save(&m, NULL, 0), TD_ERR_SYSTEM);
  assert_string_equal(td_last_error(), "perf model save: neither TD_CACHE_DIR nor HOME is set");
  setenv("TD_CACHE_DIR", "/proc/no-such-dir/x", 1);
  assert_int_equal(td_perf_model_save(&m, NULL, 0), TD_ERR_SYSTEM);
  assert_non_null(strstr(td_last_error(), "perf model save: cannot write '/proc/no-such-dir/x/calibration.json'"));
  unsetenv("TD_CACHE_DIR");
  if (home) {
    setenv("HOME", home, 1);
    free(home);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_builder_values),
      cmocka_unit_test(test_run_options),
      cmocka_unit_test(test_too_many_tiles),
      cmocka_unit_test(test_calibration_without_home),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
