/* SPDX-License-Identifier: Apache-2.0
 * The main job's program (examples/tp_mlp.td) and the attention projections
 * (examples/tp_attn_proj.td) at world sizes 1-8, with dims that do not divide
 * by the rank count or the tile, M smaller than the rank count (ranks that own
 * no rows), f32 and bf16; and the split the lowering refuses (a contraction
 * dim smaller than the rank count) with its message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "compiler/run_helper.h"

static char *read_example(const char *name) {
  const char *src = getenv("TD_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s", src ? src : ".", name);
  FILE *f = fopen(path, "rb");
  if (!f)
    print_error("cannot open %s\n", path);
  assert_non_null(f);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

static void test_mlp_world_sizes(void **state) {
  (void)state;
  const char *mlp = read_example("tp_mlp.td");
  td_test_run cfg = {2, 5, 0, -1, 0}, ring = {3, 4, 1, -1, 0};
  for (int n = 1; n <= 8; n++) {
    td_test_run_program(mlp, "M=37,H=16,F=24", n, &cfg); /* 37 rows: no n > 1 divides it */
    td_test_run_program(mlp, "M=5,H=8,F=16", n, &cfg);   /* M < ranks for n > 5 */
    td_test_run_program(mlp, "M=11,H=8,F=16", n, &ring); /* ring all-gather, 3 chunks per part */
  }
}

static void test_mlp_f32(void **state) {
  (void)state;
  static char f32[8192];
  const char *mlp = read_example("tp_mlp.td");
  /* same program in f32: replace every bf16 */
  size_t j = 0;
  for (size_t i = 0; mlp[i] && j < sizeof f32 - 1; i++) {
    if (!strncmp(mlp + i, "bf16", 4)) {
      memcpy(f32 + j, "f32", 3);
      j += 3;
      i += 3;
    } else {
      f32[j++] = mlp[i];
    }
  }
  f32[j] = 0;
  td_test_run cfg = {0, 0, 0, -1, 0}; /* perf-model choices */
  for (int n = 1; n <= 4; n++)
    td_test_run_program(f32, "M=30,H=20,F=44", n, &cfg);
}

static void test_attn_proj(void **state) {
  (void)state;
  const char *attn = read_example("tp_attn_proj.td");
  td_test_run one = {2, 3, 0, -1, 0}, two = {2, 3, 0, 0, 0};
  for (int n = 1; n <= 6; n++) {
    td_test_run_program(attn, "M=14,H=12,QKV=18", n, &one);
    td_test_run_program(attn, "M=3,H=12,QKV=18", n, &two);
  }
}

static void test_contraction_too_small(void **state) {
  (void)state;
  const char *mlp = read_example("tp_mlp.td");
  td_program *p = NULL;
  assert_int_equal(td_program_parse(mlp, strlen(mlp), "tp_mlp.td", &p), TD_OK);
  assert_int_equal(td_program_set_dims(p, "M=8,H=8,F=3"), TD_OK);
  td_compile_opts co;
  td_compile_opts_init(&co);
  co.nranks = 4;
  td_compiled *c = (td_compiled *)0x1;
  assert_int_equal(td_program_compile(p, &co, &c), TD_ERR_SHAPE);
  assert_string_equal(td_last_error(), "tp_mlp.td:14:20: matmul: the contraction dim (3) is split over 4 "
                                       "ranks; each rank needs at least one element of it (use fewer ranks "
                                       "or a larger dim)");
  assert_ptr_equal(c, (td_compiled *)0x1);
  td_program_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_world_sizes),
      cmocka_unit_test(test_mlp_f32),
      cmocka_unit_test(test_attn_proj),
      cmocka_unit_test(test_contraction_too_small),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
