/* SPDX-License-Identifier: Apache-2.0
 * `tdist run` / `tdist explain` on inputs a tester found handled badly: a
 * plan whose symmetric buffers exceed TD_SYMM_HEAP_SIZE is refused before
 * any operand is made, with the total explain also prints, and so is a run
 * larger than the host memory; inf/NaN data give
 * an infinite max_rel_err and a note, never 0; a directory is named as one;
 * --input on an output or a computed value says so and lists the inputs;
 * --dims without a name or with a huge value; .npy version and malformed
 * shape; errors found before anything ran carry no "run failed"; `scale`'s
 * factor must be a finite number in range; the run JSON records the git
 * revision as tdist bench does. Every case runs on 1-2 ranks, tiny dims. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/format.h"
#include "tdist/tdist.h"
#include "cli_test_util.h"

static char tmpdir[256];

static int tdist_env(char *out, size_t size, const char *env, const char *args) {
  return run_in(tmpdir, env, args, out, size);
}

static void expect_env(const char *env, const char *args, int code, const char *message) {
  static char out[1 << 16];
  int rc = tdist_env(out, sizeof out, env, args);
  if (rc != code || !strstr(out, message))
    print_error("tdist %s: exit %d, output:\n%s\nwant exit %d and '%s'\n", args, rc, out, code, message);
  assert_int_equal(rc, code);
  assert_non_null(strstr(out, message));
}

static void expect(const char *args, int code, const char *message) { expect_env(NULL, args, code, message); }

static void write_bytes(const char *name, const void *data, size_t len) { write_in(tmpdir, name, data, len); }

/* The JSON file tmpdir/NAME a run wrote, parsed (fails the test when it cannot). */
static cJSON *read_json(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 16];
  buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
  fclose(f);
  cJSON *j = cJSON_Parse(buf);
  assert_non_null(j);
  return j;
}

static void write_file(const char *name, const char *text) { write_bytes(name, text, strlen(text)); }

/* A .npy file: magic, version major.0 (a 2-byte header length), the header dict padded to 128 bytes, then the data. */
static void write_npy(const char *name, int version, const char *dict, const void *data, size_t len) {
  unsigned char buf[4096];
  size_t hl = 128 - 10;
  assert_true(strlen(dict) < hl);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)version;
  buf[7] = 0;
  buf[8] = (unsigned char)hl;
  buf[9] = 0;
  memset(buf + 10, ' ', hl);
  memcpy(buf + 10, dict, strlen(dict));
  buf[10 + hl - 1] = '\n';
  memcpy(buf + 128, data, len);
  write_bytes(name, buf, 128 + len);
}

static const char *small = "dim M = 12, H = 8, F = 16\ninput x : f32[M, H] shard(0)\n"
                           "weight w1 : f32[H, F] shard(1)\nweight w2 : f32[F, H] shard(0)\n"
                           "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\noutput y\n";

/* The plan's symmetric total as explain prints it ("symmetric: N bytes per rank"). */
static long long explain_symm_bytes(const char *args) {
  static char out[1 << 18];
  char cmd[512];
  snprintf(cmd, sizeof cmd, "explain %s", args);
  int rc = tdist_env(out, sizeof out, NULL, cmd);
  if (rc != 0)
    print_error("%s\n", out);
  assert_int_equal(rc, 0);
  const char *s = strstr(out, "symmetric: ");
  assert_non_null(s);
  long long n = atoll(s + strlen("symmetric: "));
  assert_true(n > 0);
  return n;
}

/* D2: a plan larger than the heap is refused up front with the total explain prints and the remedy. */
static void test_heap_too_small(void **state) {
  (void)state;
  long long need = explain_symm_bytes("small.td --ranks 2 --dims M=256,H=64,F=256");
  char env[128], want[256];
  snprintf(env, sizeof env, "TD_SYMM_HEAP_SIZE=%lld", need - 64);
  snprintf(want, sizeof want, "the overlapped plan needs %lld bytes of symmetric memory per rank", need);
  expect_env(env, "run small.td --ranks 2 --iters 1 --rounds 1 --dims M=256,H=64,F=256", 1, want);
  snprintf(want, sizeof want, "the symmetric heap holds %lld bytes per rank; set TD_SYMM_HEAP_SIZE=", need - 64);
  expect_env(env, "run small.td --ranks 2 --iters 1 --rounds 1 --dims M=256,H=64,F=256", 1, want);
  static char out[1 << 16];
  tdist_env(out, sizeof out, env, "run small.td --ranks 2 --iters 1 --rounds 1 --dims M=256,H=64,F=256");
  assert_null(strstr(out, "run failed")); /* nothing ran */
  /* Past the largest heap the config accepts: said so, with no TD_SYMM_HEAP_SIZE value it would refuse. */
  /* (the host-memory check comes first: given a budget that passes it, the heap's refusal shows) */
  expect_env("TD_SYMM_HEAP_SIZE=1024G TD_RUN_HOST_MEMORY=1048576G", "run small.td --ranks 2 --iters 1 --rounds 1 "
             "--dims M=1048576,H=1048576,F=1048576", 1, "more than the largest symmetric heap TD_SYMM_HEAP_SIZE "
             "allows (1024G); use smaller dims or more ranks");
  /* without it, a run too large for the machine is told so, not given a heap size to set */
  expect_env("TD_SYMM_HEAP_SIZE=1024G", "run small.td --ranks 2 --iters 1 --rounds 1 --dims M=1048576,H=1048576,"
             "F=1048576", 2, "of host memory (");
  tdist_env(out, sizeof out, "TD_SYMM_HEAP_SIZE=1024G", "run small.td --ranks 2 --iters 1 --rounds 1 --dims "
            "M=1048576,H=1048576,F=1048576");
  assert_null(strstr(out, "run failed")); /* refused before anything ran, as the smaller heap above */
  /* A heap of exactly the total explain prints runs: it counts the executor's control block too. */
  snprintf(env, sizeof env, "TD_SYMM_HEAP_SIZE=%lld", need);
  expect_env(env, "run small.td --ranks 2 --iters 1 --rounds 1 --check --dims M=256,H=64,F=256", 0, "result: PASS");
}

/* A run larger than the host memory is refused before anything is allocated
 * (it used to page or be killed with no word), as an input error (exit 2,
 * as tdist bench's fit checks: it can never fit), with its parts: small.td's
 * reference inputs are x 12x8 + w1 8x16 + w2 16x8 = 352 doubles (2816
 * bytes); --check adds every value's f64 copy, 1024 doubles (8192 bytes). */
static void test_host_memory(void **state) {
  (void)state;
  const char *run = "run small.td --ranks 2 --iters 1 --rounds 1";
  char args[256];
  expect_env("TD_RUN_HOST_MEMORY=4K", run, 2, "of host memory (the 2 ranks' operands ");
  expect_env("TD_RUN_HOST_MEMORY=4K", run, 2, "the reference's f64 inputs 2816, the symmetric buffers ");
  expect_env("TD_RUN_HOST_MEMORY=4K", run, 2, "but TD_RUN_HOST_MEMORY allows 4096 bytes (4.0 KiB); use smaller "
             "dims (every rank of a run lives on this machine, so more ranks do not help)");
  snprintf(args, sizeof args, "%s --check", run);
  expect_env("TD_RUN_HOST_MEMORY=4K", args, 2, "its f64 values for --check 8192");
  /* Without --check the run needs 14464 bytes, with it 22656: dropping --check is offered only where it then fits. */
  expect_env("TD_RUN_HOST_MEMORY=16K", args, 2, "use smaller dims, or run without --check");
  expect_env("TD_RUN_HOST_MEMORY=4K", args, 2, "use smaller dims (every rank of a run lives on this machine");
  static char out[1 << 16];
  tdist_env(out, sizeof out, "TD_RUN_HOST_MEMORY=4K", args);
  assert_null(strstr(out, "run failed")); /* nothing ran */
  assert_null(strstr(out, "without --check")); /* 4 KiB is too little either way */
  expect_env("TD_RUN_HOST_MEMORY=64M", args, 0, "result: PASS"); /* enough */
  expect_env("TD_RUN_HOST_MEMORY=plenty", run, 2, "TD_RUN_HOST_MEMORY='plenty' is not a byte count");
}

/* The byte counts these messages print: the unit follows the printed value
 * (no "1024.0 KiB"), and one byte is singular. */
static void test_format_bytes(void **state) {
  (void)state;
  char b[32];
  const struct { double v; const char *want; } cases[] = {
      {0, "0 bytes"},          {1, "1 byte"},           {1023, "1023 bytes"},   {1024, "1.0 KiB"},
      {1048575, "1.0 MiB"},    {1048576, "1.0 MiB"},    {4096, "4.0 KiB"},      {1073741823, "1.0 GiB"},
      {25276059648.0, "23.5 GiB"}, {1099511627776.0 * 3, "3.0 TiB"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    td__format_bytes(cases[i].v, b, sizeof b);
    assert_string_equal(b, cases[i].want);
  }
}

/* D2: --backend cuda checks the GPU before making inputs (or the build refuses cuda). */
static void test_cuda_checked_first(void **state) {
  (void)state;
  static char out[1 << 16];
  int rc = tdist_env(out, sizeof out, NULL, "run small.td --ranks 2 --iters 1 --rounds 1 --backend cuda --check");
  if (rc == 0) { /* a machine with a GPU: the run must then pass */
    assert_non_null(strstr(out, "result: PASS"));
    return;
  }
  if (rc != 1 || (!strstr(out, "tdist run: --backend cuda: no usable CUDA device") &&
                  !strstr(out, "needs a build with the CUDA executor")))
    print_error("exit %d:\n%s\n", rc, out);
  assert_int_equal(rc, 1);
  assert_true(strstr(out, "tdist run: --backend cuda: no usable CUDA device") ||
              strstr(out, "needs a build with the CUDA executor"));
}

/* D3 + C3: inf data make inf - inf errors: max_rel_err is inf (not 0), with a note; JSON null + flag. */
static void test_nonfinite_inputs(void **state) {
  (void)state;
  write_file("lit.td", "input x : f32[4, 4] shard(0)\ny = all_gather(x)\noutput y\n");
  float v[16];
  for (int i = 0; i < 16; i++)
    v[i] = i % 3 ? (float)i : INFINITY;
  write_npy("inf.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", v, sizeof v);
  static char out[1 << 16];
  int rc = tdist_env(out, sizeof out, NULL,
                     "run lit.td --ranks 2 --iters 1 --rounds 1 --check --input x=inf.npy --json nf.json");
  if (rc != 1)
    print_error("%s\n", out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "result: FAIL"));
  assert_null(strstr(out, "0.00e+00"));
  assert_non_null(strstr(out, "inf   FAIL"));
  assert_non_null(strstr(out, "the inputs or the reference hold values that are not finite"));
  assert_null(strstr(out, "dims")); /* C3: literal shapes, no "dims," with nothing after it */
  cJSON *j = read_json("nf.json");
  cJSON *ov = cJSON_GetObjectItem(j, "overlapped");
  assert_non_null(ov);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(ov, "max_rel_error"))); /* inf: JSON has no number for it */
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ov, "nonfinite_values")));
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "pass")));
  cJSON_Delete(j);
}

/* D6: a directory is named as one (run and explain): an input error, exit 2. */
static void test_directory_program(void **state) {
  (void)state;
  char args[512], want[512];
  snprintf(args, sizeof args, "run %s --ranks 2", tmpdir);
  snprintf(want, sizeof want, "tdist run: %s is a directory", tmpdir);
  expect(args, 2, want);
  snprintf(args, sizeof args, "explain %s --ranks 2", tmpdir);
  snprintf(want, sizeof want, "tdist explain: %s is a directory", tmpdir);
  expect(args, 2, want);
}

/* --input on a name the program has but does not read (its output, or a
 * value it computes) says what the name is and lists the inputs; an unknown
 * name lists them too. Input errors: exit 2, no "run failed". */
static void test_input_not_an_input(void **state) {
  (void)state;
  write_file("mid.td", "dim M = 12, H = 8\ninput x : f32[M, H] shard(0)\nweight w : f32[H, H]\n"
                       "h = matmul(all_gather(x), w)\noutput y = scale(h, 0.5)\n");
  expect("run small.td --ranks 2 --iters 1 --rounds 1 --input y=y.npy", 2, "tdist run: --input y: y is an output of "
         "the program, not an input: only inputs and weights come from files (this program's: input x, weight w1, "
         "weight w2)");
  expect("run mid.td --ranks 2 --iters 1 --rounds 1 --input h=h.npy", 2, "tdist run: --input h: h is a value the "
         "program computes, not an input: only inputs and weights come from files (this program's: input x, "
         "weight w)");
  expect("run small.td --ranks 2 --iters 1 --rounds 1 --input q=q.npy", 2, "tdist run: --input q: the program has "
         "no input or weight of that name (its inputs and weights: input x, weight w1, weight w2)");
}

/* C2: --dims with no name, and a value beyond the .td parser's limit, in its words. */
static void test_dims_messages(void **state) {
  (void)state;
  expect("run small.td --ranks 2 --dims =8", 2, "tdist run: --dims item '=8' has no dim name before '='");
  expect("run small.td --ranks 2 --dims M=99999999999999999999", 2,
         "tdist run: --dims M=99999999999999999999: too large: at most 1000000000000000 (1e15)");
  expect("run small.td --ranks 2 --dims M=1000000000000001", 2, "too large: at most 1000000000000000 (1e15)");
}

/* C4 + C5: .npy problems and compile errors are said without "run failed"; version and shape checks. */
static void test_npy_and_before_run(void **state) {
  (void)state;
  float v[40] = {0};
  write_npy("v9.npy", 9, "{'descr': '<f4', 'fortran_order': False, 'shape': (12, 8), }", v, 0);
  expect("run small.td --ranks 2 --input x=v9.npy", 2, "'v9.npy': .npy format version 9.0 is not supported");
  write_npy("badshape.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (7, 5 }", v, sizeof v);
  expect("run small.td --ranks 2 --input x=badshape.npy", 2,
         "'badshape.npy': malformed header: shape '(7, 5' has no closing ')'");
  static char out[1 << 16];
  const char *cases[] = {"run small.td --ranks 2 --input x=v9.npy", "run small.td --ranks 2 --input x=badshape.npy",
                         "run small.td --ranks 2 --input x=missing.npy", "run small.td --ranks 4 --dims F=3"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tdist_env(out, sizeof out, NULL, cases[i]);
    if (strstr(out, "run failed") || strstr(out, "      "))
      print_error("tdist %s:\n%s\n", cases[i], out);
    assert_null(strstr(out, "run failed"));
    assert_null(strstr(out, "      ")); /* no header padding quoted */
  }
  /* a plan that does not compile for these dims and ranks is an input error (exit 2) */
  expect("run small.td --ranks 4 --dims F=3", 2, "tdist run: compiling the overlapped plan: ");
}

/* C7: scale's factor (and rmsnorm's eps) must be a finite number in range. */
static void test_scale_factor(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"input x : f32[4, 4]\ny = scale(x, abc)\noutput y\n", "scale expects a number as its factor, found 'abc'"},
      {"input x : f32[4, 4]\ny = scale(x, nan)\noutput y\n", "scale expects a finite number as its factor, found 'nan'"},
      {"input x : f32[4, 4]\ny = scale(x, inf)\noutput y\n", "scale expects a finite number as its factor, found 'inf'"},
      {"input x : f32[4, 4]\ny = scale(x, 1e400)\noutput y\n", "number '1e400' is out of range"},
      {"input x : f32[4, 4]\nweight w : f32[1, 4]\ny = rmsnorm(x, w, eps)\noutput y\n",
       "rmsnorm expects a number as its eps, found 'eps'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    td_program *p = NULL;
    td_status st = td_program_parse(cases[i].text, strlen(cases[i].text), "t.td", &p);
    if (st == TD_OK || !strstr(td_last_error(), cases[i].want))
      print_error("case %zu: %s\n", i, td_last_error());
    assert_int_equal(st, TD_ERR_PARSE);
    assert_non_null(strstr(td_last_error(), cases[i].want));
    assert_null(p);
  }
  /* a value named like a word still works as a value elsewhere; a number still works as the factor */
  const char *ok = "input x : f32[4, 4]\ny = scale(x, 0.5)\noutput y\n";
  td_program *p = NULL;
  assert_int_equal(td_program_parse(ok, strlen(ok), "ok.td", &p), TD_OK);
  td_program_destroy(p);
}

/* C10, B5: the run JSON records the revision: TD_GIT_REV as given, else that of the tree tdist was built
 * from (+dirty for an uncommitted edit), never the working directory's repository. */
static void test_json_revision(void **state) {
  (void)state;
  expect_env("TD_GIT_REV=rev-from-env", "run small.td --ranks 1 --iters 1 --rounds 1 --json rev.json", 0, "plan");
  cJSON *j = read_json("rev.json");
  cJSON *rev = cJSON_GetObjectItem(j, "git_revision");
  assert_true(cJSON_IsString(rev));
  assert_string_equal(rev->valuestring, "rev-from-env");
  cJSON_Delete(j);
  /* Without TD_GIT_REV, run from tmpdir (outside the tree): the tree's revision, where git can tell it. */
  const char *src = getenv("TD_SOURCE_DIR");
  char cmd[600], want[64] = "";
  snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", src ? src : ".");
  FILE *g = popen(cmd, "r");
  if (g) {
    if (!fgets(want, sizeof want, g))
      want[0] = 0;
    pclose(g);
  }
  want[strcspn(want, "\n")] = 0;
  /* B5: an uncommitted edit in the tree is marked, as scripts/gpu-multi-prep.sh does. */
  snprintf(cmd, sizeof cmd, "git -C '%s' diff --quiet HEAD -- src include tools bench 2>/dev/null",
           src ? src : ".");
  int dirty = system(cmd);
  if (want[0] && dirty != -1 && WIFEXITED(dirty) && WEXITSTATUS(dirty) == 1)
    strcat(want, "+dirty");
  /* B5: tmpdir made a repository of its own: the working directory's HEAD must not be taken. */
  snprintf(cmd, sizeof cmd, "cd %s && git init -q . && git -c user.email=t@t -c user.name=t commit -q "
           "--allow-empty -m other >/dev/null 2>&1", tmpdir);
  int other = system(cmd) == 0;
  expect_env("env -u TD_GIT_REV", "run small.td --ranks 1 --iters 1 --rounds 1 --json rev2.json", 0, "plan");
  j = read_json("rev2.json");
  rev = cJSON_GetObjectItem(j, "git_revision");
  assert_true(cJSON_IsString(rev));
  assert_string_equal(rev->valuestring, want[0] ? want : "unknown");
  if (other) {
    char theirs[64] = "";
    snprintf(cmd, sizeof cmd, "git -C %s rev-parse --short HEAD", tmpdir);
    g = popen(cmd, "r");
    assert_non_null(g);
    if (!fgets(theirs, sizeof theirs, g))
      theirs[0] = 0;
    pclose(g);
    theirs[strcspn(theirs, "\n")] = 0;
    assert_true(theirs[0]);
    assert_null(strstr(rev->valuestring, theirs));
  }
  cJSON_Delete(j);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_runin_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  write_file("small.td", small);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_heap_too_small),     cmocka_unit_test(test_host_memory),
      cmocka_unit_test(test_format_bytes),
      cmocka_unit_test(test_cuda_checked_first),
      cmocka_unit_test(test_nonfinite_inputs),   cmocka_unit_test(test_directory_program),
      cmocka_unit_test(test_dims_messages),      cmocka_unit_test(test_npy_and_before_run),
      cmocka_unit_test(test_scale_factor),       cmocka_unit_test(test_json_revision),
      cmocka_unit_test(test_input_not_an_input),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0)
    rc = rc ? rc : 1;
  return rc;
}
