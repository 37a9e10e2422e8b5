/* SPDX-License-Identifier: Apache-2.0
 * CUDA executor code generation: the specialisation read from a schedule,
 * deterministic text, refused specs, and NVRTC compilation of generated
 * sources for sm_80 and sm_90a (every tile alone, all together, each block
 * size) -- the CI check that every kernel the executor can generate builds,
 * run without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "exec/cuda/codegen.h"
#include "jit/jit.h"

/* Whether the cubin's symbol table names `sym`. */
static int image_has(const td__jit_image *img, const char *sym) {
  const size_t n = strlen(sym);
  const char *p = img->data;
  for (size_t i = 0; i + n <= img->size; i++)
    if (memcmp(p + i, sym, n) == 0)
      return 1;
  return 0;
}

static void compile_spec(const td__cuda_spec *spec, const char *arch) {
  char *src = NULL;
  assert_int_equal(td__cuda_codegen(spec, &src), TD_OK);
  td__jit_image img = {0};
  td_status st = td__jit_compile(src, "td_exec.cu", arch, NULL, 0, &img);
  if (st != TD_OK)
    fail_msg("kinds 0x%x threads %d mma %d on %s: %s", spec->kinds, spec->threads, spec->gemm_mma, arch,
             td_last_error());
  assert_true(image_has(&img, "td_exec_kernel"));
  assert_true(image_has(&img, "td_tile_grid_kernel"));
  td__jit_image_free(&img);
  free(src);
}

static void test_all_kinds_both_archs(void **state) {
  td__cuda_spec spec = {256, (1u << TD_TASK_KIND_COUNT) - 1, 1, 0};
  compile_spec(&spec, "sm_80");
  compile_spec(&spec, "sm_90a");
}

static void test_each_kind_alone(void **state) {
  for (int k = 0; k < TD_TASK_KIND_COUNT; k++) {
    td__cuda_spec spec = {256, 1u << k, 1, 0};
    compile_spec(&spec, "sm_90a");
  }
}

static void test_block_sizes_and_simt_gemm(void **state) {
  const int threads[] = {128, 512};
  for (int i = 0; i < 2; i++) {
    td__cuda_spec spec = {threads[i], (1u << TD_TASK_KIND_COUNT) - 1, 1, 0};
    compile_spec(&spec, "sm_80");
  }
  td__cuda_spec simt = {256, 1u << TD_TASK_GEMM, 0, 0};
  compile_spec(&simt, "sm_90a");
}

static void test_text_is_deterministic_and_specialised(void **state) {
  td__cuda_spec s1 = {256, 1u << TD_TASK_COPY, 1, 0}, s2 = s1, s3 = {256, 1u << TD_TASK_GEMM, 1, 0};
  char *a = NULL, *b = NULL, *c = NULL;
  assert_int_equal(td__cuda_codegen(&s1, &a), TD_OK);
  assert_int_equal(td__cuda_codegen(&s2, &b), TD_OK);
  assert_int_equal(td__cuda_codegen(&s3, &c), TD_OK);
  assert_string_equal(a, b); /* same spec, same text, same cache key */
  assert_non_null(strstr(a, "#define TD_HAS_COPY 1"));
  assert_null(strstr(a, "td_gemm_simt(")); /* unused tiles are not compiled */
  assert_non_null(strstr(c, "#define TD_GEMM_MMA 1"));
  assert_null(strstr(c, "td_tile_copy(const"));
  free(a);
  free(b);
  free(c);
}

static void test_spec_from_schedule(void **state) {
  td_plan *plan = NULL;
  assert_int_equal(td_plan_create(1, &plan), TD_OK);
  td_buffer_desc d = {"x", TD_BUF_LOCAL, TD_F32, 4, 4};
  int32_t buf;
  assert_int_equal(td_plan_add_buffer(plan, &d, &buf), TD_OK);
  td_task t;
  memset(&t, 0, sizeof t);
  t.kind = TD_TASK_EWISE;
  t.op = TD_EW_SCALE;
  t.alpha = 2.0f;
  t.a = (td_view){buf, TD_PEER_SELF, 0, 0, 4, 4};
  t.b = (td_view){-1, TD_PEER_SELF, 0, 0, 0, 0};
  t.c = t.a;
  uint32_t idx;
  assert_int_equal(td_plan_add_task(plan, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  t.kind = TD_TASK_NOP;
  assert_int_equal(td_plan_add_task(plan, 0, &t, &idx, 1, NULL, 0, NULL, 0, &idx), TD_OK);
  td__cuda_spec spec;
  td__cuda_spec_for_schedule(td_plan_schedule(plan, 0), 90, &spec);
  assert_int_equal(spec.kinds, (1u << TD_TASK_EWISE) | (1u << TD_TASK_NOP));
  assert_int_equal(spec.threads, TD__CUDA_THREADS_DEFAULT);
  assert_true(spec.gemm_mma);
  td__cuda_spec_for_schedule(td_plan_schedule(plan, 0), 75, &spec);
  assert_false(spec.gemm_mma);
  td_plan_destroy(plan);
}

static void test_refused_specs(void **state) {
  char *src = NULL;
  td__cuda_spec bad_threads = {100, 1, 0, 0}, bad_kinds = {256, 1u << 20, 0, 0};
  assert_int_equal(td__cuda_codegen(&bad_threads, &src), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "128, 256, 512"));
  assert_int_equal(td__cuda_codegen(&bad_kinds, &src), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "kind mask"));
  assert_null(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_text_is_deterministic_and_specialised),
      cmocka_unit_test(test_refused_specs),
      cmocka_unit_test(test_spec_from_schedule),
      cmocka_unit_test(test_all_kinds_both_archs),
      cmocka_unit_test(test_each_kind_alone),
      cmocka_unit_test(test_block_sizes_and_simt_gemm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
