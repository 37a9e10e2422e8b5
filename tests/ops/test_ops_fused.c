/* SPDX-License-Identifier: Apache-2.0
 * The fused cuda variant (TD_TP_FUSED, src/ops/cuda/) where no GPU is
 * needed: its name, its rules (backend, kind, dtype, rank count, the shapes
 * the Hopper GEMM takes) with the messages, every rank refusing it together
 * on the cpu backend and when the GEMM library or the GPU is missing; AUTO's
 * rule from the ranks' probes (one process, one GPU or GPUs with peer access
 * between every pair, every rank able), its
 * collective decision (same answer on every rank, TD_OPS_FUSED checked), and
 * AUTO never picking it on the cpu backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops_harness.h"
#include "ops/ops_internal.h"

enum { NR = 3 };

#define EXPECT_MSG(call, status, text)                                     \
  do {                                                                     \
    td_status st_ = (call);                                                \
    assert_int_equal(st_, (status));                                       \
    if (!strstr(td_last_error(), (text)))                                  \
      fail_msg("message '%s' lacks '%s'", td_last_error(), (text));        \
  } while (0)

static void test_names(void **state) {
  (void)state;
  assert_string_equal(td_tp_variant_name(TD_TP_FUSED), "fused");
  td_tp_variant v = TD_TP_AUTO;
  assert_int_equal(td_tp_variant_parse("fused", &v), TD_OK);
  assert_int_equal(v, TD_TP_FUSED);
  EXPECT_MSG(td_tp_variant_parse("fusd", &v), TD_ERR_INVALID_ARG, "two_shot or fused");
}

static td_tp_opts cuda_opts(void) {
  td_tp_opts o;
  td_tp_opts_init(&o);
  o.backend = TD_EXEC_CUDA;
  o.variant = TD_TP_FUSED;
  return o;
}

/* Rules with the messages; a build without CUDA refuses every cuda case the same way. */
static void test_rules(void **state) {
  (void)state;
  td__tp_desc d;
  td_tp_opts o = cuda_opts();
  td_tp_opts cpu = o;
  cpu.backend = TD_EXEC_CPU;
  td__ag_gemm_desc(333, 512, 136, TD_BF16, TD_EXEC_CUDA, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 8, &cpu), TD_ERR_UNSUPPORTED, "runs on the cuda backend only");
  d.kind = TD_TP_KIND_COUNT;
  EXPECT_MSG(td__tp_fused_check(&d, 2, &o), TD_ERR_UNSUPPORTED, "ag_gemm, gemm_rs, gemm_ar and all_reduce only");

  td__ag_gemm_desc(333, 512, 136, TD_BF16, TD_EXEC_CUDA, &d);
  td_status ok = td__tp_fused_check(&d, 8, &o);
  if (ok != TD_OK) { /* no CUDA in this build: the one rule left */
    assert_int_equal(ok, TD_ERR_UNSUPPORTED);
    assert_non_null(strstr(td_last_error(), "needs a build with CUDA"));
    return;
  }
  td__gemm_rs_desc(301, 264, 512, TD_BF16, &d);
  assert_int_equal(td__tp_fused_check(&d, 8, &o), TD_OK);
  td__gemm_ar_desc(77, 136, 512, TD_F16, &d);
  assert_int_equal(td__tp_fused_check(&d, 4, &o), TD_OK);

  td__ag_gemm_desc(333, 512, 136, TD_F16, TD_EXEC_CUDA, &d); /* the gather GEMM runs in the operand dtype */
  assert_int_equal(td__tp_fused_check(&d, 2, &o), TD_OK);
  td__all_reduce_desc(1009, TD_F32, &d); /* a reduction kernel for every dtype and count */
  assert_int_equal(td__tp_fused_check(&d, 8, &o), TD_OK);
  EXPECT_MSG(td__tp_fused_check(&d, 9, &o), TD_ERR_UNSUPPORTED, "all_reduce: the fused variant runs on up to 8");
  td__ag_gemm_desc(333, 512, 136, TD_F32, TD_EXEC_CUDA, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 2, &o), TD_ERR_UNSUPPORTED, "needs bf16 or f16 (its Hopper GEMM kernels); got f32");
  td__ag_gemm_desc(333, 264, 136, TD_BF16, TD_EXEC_CUDA, &d); /* 264 / 8 = 33 columns */
  EXPECT_MSG(td__tp_fused_check(&d, 8, &o), TD_ERR_UNSUPPORTED, "N=264 on 8 ranks (33)");
  td__ag_gemm_desc(333, 512, 100, TD_BF16, TD_EXEC_CUDA, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 2, &o), TD_ERR_UNSUPPORTED, "K % 8 == 0");
  td__ag_gemm_desc(333, 512, 136, TD_BF16, TD_EXEC_CUDA, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 9, &o), TD_ERR_UNSUPPORTED, "up to 8 ranks (one node); got 9");
  td__gemm_rs_desc(301, 264, 100, TD_BF16, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 4, &o), TD_ERR_UNSUPPORTED, "K=100, N=264 on 4 ranks");
  td__gemm_rs_desc(301, 260, 512, TD_BF16, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 4, &o), TD_ERR_UNSUPPORTED, "N % 8 == 0");
  td__gemm_ar_desc(301, 264, 512, TD_F32, &d);
  EXPECT_MSG(td__tp_fused_check(&d, 4, &o), TD_ERR_UNSUPPORTED, "needs bf16 or f16 (its Hopper GEMM kernels); got f32");
}

/* Collective refusals: every rank gets the same status and a message naming the rule. */
typedef struct fz_case {
  int what; /* 0: cpu backend; 1: cuda backend (no GPU / no GEMM library here); 2: all_reduce */
  td_status got[NR];
  char msg[NR][512];
} fz_case;

static td_status fz_rank(td_world *w, int rank, void *arg) {
  fz_case *c = arg;
  td_tp_opts o = cuda_opts();
  td_tp_op *op = NULL;
  td_team *t = td_world_team(w);
  td_status st;
  if (c->what == 0) {
    o.backend = TD_EXEC_CPU;
    st = td_gemm_rs_create(t, 301, 264, 512, TD_BF16, &o, &op);
  } else if (c->what == 1) {
    st = td_ag_gemm_create(t, 333, 512, 136, TD_BF16, &o, &op);
  } else {
    st = td_ll_all_reduce_create(t, 1000, TD_BF16, &o, &op);
  }
  c->got[rank] = st;
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  td_tp_destroy(op);
  return TD_OK;
}

static void run_fz(fz_case *c) {
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  assert_int_equal(td_local_world_run(NR, &wo, fz_rank, c), TD_OK);
}

static void test_refused_everywhere(void **state) {
  (void)state;
  fz_case c = {.what = 0};
  run_fz(&c);
  for (int r = 0; r < NR; r++) {
    assert_int_equal(c.got[r], TD_ERR_UNSUPPORTED);
    assert_non_null(strstr(c.msg[r], "gemm_rs: the fused variant runs on the cuda backend only"));
  }
  /* cuda: refused for the missing GEMM library (this test does not link it),
   * the missing GPU, or a build without CUDA; never a hang, every rank alike */
  fz_case g = {.what = 1};
  run_fz(&g);
  for (int r = 0; r < NR; r++) {
    assert_int_equal(g.got[r], TD_ERR_UNSUPPORTED);
    assert_non_null(strstr(g.msg[r], "fused"));
    assert_string_equal(g.msg[r], g.msg[0]);
  }
  /* the all-reduce: refused for the missing GPU or CUDA, every rank alike */
  fz_case a = {.what = 2};
  run_fz(&a);
  for (int r = 0; r < NR; r++) {
    assert_int_equal(a.got[r], TD_ERR_UNSUPPORTED);
    assert_non_null(strstr(a.msg[r], "fused"));
    assert_string_equal(a.msg[r], a.msg[0]);
  }
}

/* AUTO's rule from the exchanged probes, with the reason it says no. */
static void test_agree(void **state) {
  (void)state;
  td__tp_fused_probe p[4] = {{1, 77, 0, 0}, {1, 77, 0, 0}, {1, 77, 0, 0}, {1, 77, 0, 0}};
  char why[200];
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 1);
  assert_string_equal(why, "");
  assert_int_equal(td__tp_fused_agree(p, 1, NULL, 0), 1);
  p[2].ok = 0;
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 0);
  assert_non_null(strstr(why, "rank 2 cannot run it"));
  p[2].ok = 1, p[3].pid = 78;
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 0);
  assert_non_null(strstr(why, "ranks 0 and 3 are different processes"));
  /* several GPUs: each pair of distinct devices needs peer access both ways */
  p[3].pid = 77, p[1].dev = 1;
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 0);
  assert_non_null(strstr(why, "ranks 0 (GPU 0) and 1 (GPU 1) cannot access each other's memory"));
  assert_int_equal(td__tp_fused_agree(p, 1, why, sizeof why), 1); /* rank 1 alone is not compared */
  for (int r = 0; r < 4; r++)
    p[r].dev = r, p[r].peers = 0xf;
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 1);
  assert_string_equal(why, "");
  p[3].peers = 0xb; /* GPU 3 cannot reach GPU 2 */
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 0);
  assert_non_null(strstr(why, "ranks 2 (GPU 2) and 3 (GPU 3) cannot access each other's memory"));
  p[3].peers = 0xf, p[1].dev = 0, p[1].peers = 0x1; /* ranks 0 and 1 share GPU 0, which reaches no other */
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 0);
  assert_non_null(strstr(why, "ranks 1 (GPU 0) and 2 (GPU 2)"));
  p[1].peers = 0xf;
  assert_int_equal(td__tp_fused_agree(p, 4, why, sizeof why), 1);
}

/* The collective decision: every rank gets the same answer; no here (no GEMM
 * library linked into this test, or no CUDA); a malformed TD_OPS_FUSED fails
 * every rank alike where the fused rules would otherwise be consulted. */
typedef struct au_case {
  td_tp_kind kind;
  int out[NR];
  td_status got[NR];
  char msg[NR][256];
} au_case;

static td_status au_rank(td_world *w, int rank, void *arg) {
  au_case *c = arg;
  td__tp_desc d;
  if (c->kind == TD_TP_AG_GEMM)
    td__ag_gemm_desc(333, 512, 136, TD_BF16, TD_EXEC_CUDA, &d);
  else
    td__gemm_rs_desc(301, 264, 512, TD_BF16, &d);
  td_tp_opts o = cuda_opts();
  o.variant = TD_TP_AUTO;
  c->out[rank] = -1;
  c->got[rank] = td__tp_fused_auto(td_world_team(w), &d, &o, &c->out[rank]);
  snprintf(c->msg[rank], sizeof c->msg[rank], "%s", td_last_error());
  return TD_OK;
}

static void test_auto_decision(void **state) {
  (void)state;
  td_world_opts wo;
  td_world_opts_init(&wo);
  wo.timeout_ms = 20000;
  au_case c = {.kind = TD_TP_AG_GEMM};
  assert_int_equal(td_local_world_run(NR, &wo, au_rank, &c), TD_OK);
  for (int r = 0; r < NR; r++) {
    assert_int_equal(c.got[r], TD_OK);
    assert_int_equal(c.out[r], 0); /* this test does not link the GEMM library */
  }
  td__tp_desc d;
  td_tp_opts o = cuda_opts();
  td__gemm_rs_desc(301, 264, 512, TD_BF16, &d);
  int rules = td__tp_fused_check(&d, NR, &o) == TD_OK;
  setenv("TD_OPS_FUSED", "yes", 1);
  au_case m = {.kind = TD_TP_GEMM_RS};
  assert_int_equal(td_local_world_run(NR, &wo, au_rank, &m), TD_OK);
  unsetenv("TD_OPS_FUSED");
  for (int r = 0; r < NR; r++) {
    if (!rules) { /* no CUDA in this build: the variable is never read */
      assert_int_equal(m.got[r], TD_OK);
      continue;
    }
    assert_int_equal(m.got[r], TD_ERR_INVALID_ARG);
    assert_non_null(strstr(m.msg[r], "gemm_rs: rank 0: TD_OPS_FUSED is malformed; use 0"));
  }
}

/* AUTO picks fused only on cuda: a cpu operator still runs its plan. */
static void test_auto_cpu(void **state) {
  (void)state;
  setenv("TD_OPS_FUSED", "1", 1);
  oh_case c = {.kind = TD_TP_AG_GEMM, .variant = TD_TP_AUTO, .dtype = TD_BF16, .m = 37, .n = 16, .k = 16,
               .calls = 2};
  OH_EXPECT_OK(2, &c);
  assert_true(c.chosen != TD_TP_FUSED && c.chosen != TD_TP_AUTO);
  unsetenv("TD_OPS_FUSED");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_rules),
      cmocka_unit_test(test_refused_everywhere),
      cmocka_unit_test(test_agree),
      cmocka_unit_test(test_auto_decision),
      cmocka_unit_test(test_auto_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
