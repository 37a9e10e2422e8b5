/* SPDX-License-Identifier: Apache-2.0
 * The GEMM tile sources compile under NVRTC as the JIT will use them (label
 * cpu: NVRTC needs no GPU): the pieces pasted into one source after
 * `#define TD_JIT_CONCAT`, one configuration per program chosen with -D
 * values, for sm_90a (wgmma kernel; plain, clustered with every hook, [K,N]
 * fp16, GATHER, KGATHER alone and routed by PUSH or BCAST) and for sm_80 and
 * sm_90a (mma.sync kernel). Each must produce a cubin
 * holding the unmangled entry point. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *name) {
  const char *root = getenv("TD_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/src/tile/cuda/%s", root ? root : ".", name);
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)len + 1);
  if (text && fread(text, 1, (size_t)len, f) != (size_t)len) {
    free(text);
    text = NULL;
  }
  if (text)
    text[len] = 0;
  fclose(f);
  return text;
}

/* Pastes defines + the pieces, compiles for `arch`, checks the cubin names `entry`. */
static void compile(const char *defines, const char *kernel_file, const char *arch,
                    const char *entry) {
  const char *pieces[] = {"gemm.h", "gemm_sm80_hooks.cuh", "gemm_sm90_wgmma.cuh", kernel_file};
  size_t cap = strlen(defines) + 64;
  char *parts[4];
  for (int i = 0; i < 4; i++) {
    parts[i] = slurp(pieces[i]);
    assert_non_null(parts[i]);
    cap += strlen(parts[i]) + 1;
  }
  char *src = malloc(cap);
  snprintf(src, cap, "#define TD_JIT_CONCAT 1\n%s\n", defines);
  for (int i = 0; i < 4; i++) {
    strcat(src, parts[i]);
    strcat(src, "\n");
    free(parts[i]);
  }
  nvrtcProgram prog;
  assert_int_equal(nvrtcCreateProgram(&prog, src, "gemm_jit.cu", 0, NULL, NULL), NVRTC_SUCCESS);
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  const char *opts[] = {archopt, "-std=c++17"};
  nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    char *log = malloc(n + 1);
    nvrtcGetProgramLog(prog, log);
    fprintf(stderr, "NVRTC (%s, %s, %s):\n%s\n", kernel_file, arch, defines, log);
    free(log);
  }
  assert_int_equal(r, NVRTC_SUCCESS);
  size_t size = 0;
  assert_int_equal(nvrtcGetCUBINSize(prog, &size), NVRTC_SUCCESS);
  assert_true(size > 0);
  char *cubin = malloc(size);
  assert_int_equal(nvrtcGetCUBIN(prog, cubin), NVRTC_SUCCESS);
  int found = 0;
  size_t elen = strlen(entry);
  for (size_t i = 0; i + elen <= size && !found; i++)
    found = !memcmp(cubin + i, entry, elen) && (i + elen == size || cubin[i + elen] == 0);
  assert_true(found);
  free(cubin);
  nvrtcDestroyProgram(&prog);
  free(src);
}

static void test_sm90_plain(void **state) {
  (void)state;
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 256\n", "gemm_sm90.cuh", "sm_90a",
          "td_gemm_sm90");
}

static void test_sm90_cluster_hooks_kn_f16(void **state) {
  (void)state;
  compile("#define TD_GEMM_BM 256\n#define TD_GEMM_BN 128\n#define TD_GEMM_STAGES 4\n"
          "#define TD_GEMM_CLUSTER 2\n#define TD_GEMM_HOOKS 15u\n#define TD_GEMM_B_KN 1\n"
          "#define TD_GEMM_DTYPE 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
}

static void test_sm90_gather(void **state) { /* A from several sources (GATHER) */
  (void)state;
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 256\n#define TD_GEMM_HOOKS 16u\n#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
}

static void test_sm90_kgather(void **state) { /* K from several sources (KGATHER) */
  (void)state;
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 128\n#define TD_GEMM_STAGES 6\n#define TD_GEMM_HOOKS 32u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
}

/* KGATHER routing its rows: PUSH (each row to its owner's buffer, td_chunk_range's
 * split) and BCAST (every row to every destination), as compiled into the build:
 * 128x256 s4 and 128x128 s6, bf16, B [K,N]; TD_GEMM_HOOKS is 32|4 and 32|64. */
static void test_sm90_kgather_push(void **state) {
  (void)state;
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 256\n#define TD_GEMM_STAGES 4\n#define TD_GEMM_HOOKS 36u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 128\n#define TD_GEMM_STAGES 6\n#define TD_GEMM_HOOKS 36u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
}

static void test_sm90_kgather_bcast(void **state) {
  (void)state;
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 256\n#define TD_GEMM_STAGES 4\n#define TD_GEMM_HOOKS 96u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 128\n#define TD_GEMM_STAGES 6\n#define TD_GEMM_HOOKS 96u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
}

/* GATHER with its column sources (NSPLIT, 16|128): ag_gemm's one launch for
 * every rank, as compiled into the build (128x256 s4, 128x128 s6). */
static void test_sm90_gather_nsplit(void **state) {
  (void)state;
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 256\n#define TD_GEMM_STAGES 4\n#define TD_GEMM_HOOKS 144u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
  compile("#define TD_GEMM_BM 128\n#define TD_GEMM_BN 128\n#define TD_GEMM_STAGES 6\n#define TD_GEMM_HOOKS 144u\n"
          "#define TD_GEMM_B_KN 1\n",
          "gemm_sm90.cuh", "sm_90a", "td_gemm_sm90");
}

static void test_sm80(void **state) {
  (void)state;
  const char *d = "#define TD_GEMM_BM 128\n#define TD_GEMM_BN 128\n#define TD_GEMM_HOOKS 15u\n";
  compile(d, "gemm_sm80.cuh", "sm_80", "td_gemm_sm80");
  compile(d, "gemm_sm80.cuh", "sm_90a", "td_gemm_sm80");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sm90_plain),
      cmocka_unit_test(test_sm90_cluster_hooks_kn_f16),
      cmocka_unit_test(test_sm90_gather),
      cmocka_unit_test(test_sm90_kgather),
      cmocka_unit_test(test_sm90_kgather_push),
      cmocka_unit_test(test_sm90_kgather_bcast),
      cmocka_unit_test(test_sm90_gather_nsplit),
      cmocka_unit_test(test_sm80),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
