/* SPDX-License-Identifier: Apache-2.0
 * tdist/device.h under NVRTC (CI, no GPU needed): a kernel that calls every
 * device function compiles for sm_80 and sm_90a with nothing but the tdist
 * include folder, and the context and diagnostic layouts NVRTC sees equal the
 * host compiler's (the host builds contexts that JIT kernels read). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef TD_INCLUDE_DIR
#define TD_INCLUDE_DIR "include"
#endif

#include "tdist/device.h"

static const char *kernel_src =
    "#include \"tdist/device.h\"\n"
    "static_assert(sizeof(td_dev_ctx) == CTX_SIZE, \"td_dev_ctx size differs from the host's\");\n"
    "static_assert(sizeof(td_dev_diagnostic) == DIAG_SIZE, \"td_dev_diagnostic size\");\n"
    /* NVRTC has no constant offsetof; equal member type sizes and alignments
     * under the same LP64 layout rules give equal offsets. */
    "static_assert(sizeof(uint64_t) == 8 && alignof(uint64_t) == 8 && sizeof(uintptr_t) == 8, \"u64\");\n"
    "static_assert(sizeof(uint32_t) == 4 && sizeof(int32_t) == 4 && sizeof(void *) == 8, \"u32\");\n"
    "static_assert(alignof(td_dev_ctx) == ALIGN, \"td_dev_ctx alignment\");\n"
    "static_assert(sizeof(td_sigop) == 4 && sizeof(td_cmp) == 4 && sizeof(td_dev_scope) == 4, \"enums\");\n"
    "static_assert(TD_CMP_LE == 5 && TD_SIGNAL_ADD == 1 && TD_ERR_TIMEOUT == 30 && TD_ERR_PEER_FAILED == 31, \"values\");\n"
    "extern \"C\" __global__ void every_call(td_dev_ctx c, uint64_t *sig, char *buf, char *src) {\n"
    "  const td_dev_ctx *x = &c;\n"
    "  int pe = (td_dev_my_pe(x) + 1) % td_dev_n_pes(x);\n"
    "  char *peer = (char *)td_dev_symm_at(x, buf, pe);\n"
    "  td_dev_putmem(x, buf, src, 64, pe); td_dev_putmem_warp(x, buf, src, 64, pe);\n"
    "  td_dev_putmem_block(x, buf, src, 64, pe); td_dev_putmem_nbi(x, buf, src, 64, pe);\n"
    "  td_dev_putmem_nbi_warp(x, buf, src, 64, pe); td_dev_putmem_nbi_block(x, buf, src, 64, pe);\n"
    "  td_dev_getmem(x, buf, src, 64, pe); td_dev_getmem_warp(x, buf, src, 64, pe);\n"
    "  td_dev_getmem_block(x, buf, src, 64, pe); td_dev_getmem_nbi(x, buf, src, 64, pe);\n"
    "  td_dev_getmem_nbi_warp(x, buf, src, 64, pe); td_dev_getmem_nbi_block(x, buf, src, 64, pe);\n"
    "  td_dev_putmem_signal(x, buf, src, 8, sig, 1, TD_SIGNAL_ADD, pe);\n"
    "  td_dev_putmem_signal_warp(x, buf, src, 8, sig, 1, TD_SIGNAL_ADD, pe);\n"
    "  td_dev_putmem_signal_block(x, buf, src, 8, sig, 1, TD_SIGNAL_SET, pe);\n"
    "  td_dev_putmem_signal_nbi(x, buf, src, 8, sig, 1, TD_SIGNAL_ADD, pe);\n"
    "  td_dev_putmem_signal_nbi_warp(x, buf, src, 8, sig, 1, TD_SIGNAL_ADD, pe);\n"
    "  td_dev_putmem_signal_nbi_block(x, buf, src, 8, sig, 1, TD_SIGNAL_SET, pe);\n"
    "  td_dev_signal_op(x, sig, 2, TD_SIGNAL_SET, pe); td_dev_notify(x, sig, 1, TD_SIGNAL_ADD, pe);\n"
    "  td_dev_notify_block(x, sig, 1, TD_SIGNAL_ADD, pe);\n"
    "  td_status st = td_dev_signal_wait_until(x, sig, TD_CMP_GE, 1);\n"
    "  st = td_dev_signal_wait_until_block(x, sig, TD_CMP_NE, 0);\n"
    "  st = td_dev_wait_until_all(x, sig, 2, TD_CMP_EQ, 1, TD_SCOPE_GPU);\n"
    "  st = td_dev_wait_until_all_warp(x, sig, 2, TD_CMP_LE, 1, TD_SCOPE_BLOCK);\n"
    "  st = td_dev_wait_until_all_block(x, sig, 2, TD_CMP_LT, 1, TD_SCOPE_SYS);\n"
    "  td_dev_fence(x); td_dev_quiet(x);\n"
    "  st = td_dev_barrier_all_block(x);\n"
    "  td_dev_st_release(sig, td_dev_ld_acquire(sig, TD_SCOPE_GPU) + td_dev_signal_fetch(x, sig), TD_SCOPE_SYS);\n"
    "  if (st == TD_ERR_TIMEOUT || st == TD_ERR_PEER_FAILED) peer[0] = 1;\n"
    "}\n";

static void compile_for(const char *arch) {
  char inc[4096], defs[3][64], archopt[64];
  snprintf(inc, sizeof inc, "-I%s", TD_INCLUDE_DIR);
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  snprintf(defs[0], sizeof defs[0], "-DCTX_SIZE=%zu", sizeof(td_dev_ctx));
  snprintf(defs[1], sizeof defs[1], "-DALIGN=%zu", _Alignof(td_dev_ctx));
  snprintf(defs[2], sizeof defs[2], "-DDIAG_SIZE=%zu", sizeof(td_dev_diagnostic));
  const char *opts[] = {archopt, "-std=c++17", inc, defs[0], defs[1], defs[2]};
  nvrtcProgram prog;
  assert_int_equal(nvrtcCreateProgram(&prog, kernel_src, "every_call.cu", 0, NULL, NULL), NVRTC_SUCCESS);
  nvrtcResult r = nvrtcCompileProgram(prog, 6, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    char *log = malloc(n + 1);
    nvrtcGetProgramLog(prog, log);
    fail_msg("NVRTC for %s: %s\n%s", arch, nvrtcGetErrorString(r), log);
  }
  size_t cubin = 0;
  assert_int_equal(nvrtcGetCUBINSize(prog, &cubin), NVRTC_SUCCESS);
  assert_true(cubin > 0);
  nvrtcDestroyProgram(&prog);
}

static void test_sm80(void **state) { compile_for("sm_80"); }
static void test_sm90a(void **state) { compile_for("sm_90a"); }

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_sm80), cmocka_unit_test(test_sm90a)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
