/* SPDX-License-Identifier: Apache-2.0
 * The tdist run / explain / calibrate commands as a user calls them: every
 * bad-input path prints its message and exits 2 (usage or input: options,
 * files, a program that does not parse or compile) or 1 (a failed check or a
 * failure of the machine); a
 * small run passes its check and writes valid JSON; explain prints each
 * rank's schedule; calibrate --quick writes a calibration file the compiler
 * then loads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tdist/tdist.h"
#include "cli_test_util.h"

static char tmpdir[256];

/* Runs `tdist ARGS` in tmpdir; returns the exit status, output (stdout+stderr) in out. */
static int tdist(char *out, size_t size, const char *args) { return run_in(tmpdir, NULL, args, out, size); }

static void write_file(const char *name, const char *text) { write_in(tmpdir, name, text, strlen(text)); }

static const char *small = "dim M = 12, H = 8, F = 16\ninput x : bf16[M, H] shard(0)\n"
                           "weight w1 : bf16[H, F] shard(1)\nweight w2 : bf16[F, H] shard(0)\n"
                           "y = reduce_scatter(matmul(gelu(matmul(all_gather(x), w1)), w2))\noutput y\n";

static void expect(const char *args, int code, const char *message) {
  static char out[1 << 16];
  int rc = tdist(out, sizeof out, args);
  if (rc != code || !strstr(out, message))
    print_error("tdist %s: exit %d, output:\n%s\nwant exit %d and '%s'\n", args, rc, out, code, message);
  assert_int_equal(rc, code);
  assert_non_null(strstr(out, message));
}

static void test_run_errors(void **state) {
  (void)state;
  expect("run", 2, "tdist run: no PROGRAM given");
  expect("run small.td", 2, "tdist run: --ranks N is required");
  expect("run small.td --ranks 0", 2, "tdist run: --ranks expects an integer in 1..64, got '0'");
  expect("run small.td --ranks 2x", 2, "tdist run: --ranks expects an integer in 1..64, got '2x'");
  expect("run small.td --ranks", 2, "tdist run: option --ranks needs a value");
  expect("run small.td --ranks 2 --iters 0", 2, "tdist run: --iters expects an integer in 1..100000, got '0'");
  expect("run small.td --ranks 2 --frobnicate 1", 2, "tdist run: unknown option '--frobnicate' (see tdist run --help)");
  expect("run small.td other.td --ranks 2", 2, "tdist run: unexpected argument 'other.td' (one PROGRAM only)");
  expect("run small.td --ranks 2 --backend tpu", 2, "tdist run: unknown backend 'tpu' (cpu or cuda)");
  /* no GPU here: refused by this build (no CUDA executor) or by the executor (no device) */
  expect("run small.td --ranks 2 --backend cuda", 1, "cuda");
  expect("run small.td --ranks 2 --rounds 0", 2, "tdist run: --rounds expects an integer in 1..15, got '0'");
  expect("run small.td --ranks 2 --input x", 2, "tdist run: --input expects NAME=FILE.npy, got 'x'");
  /* a bad --input is a usage error (exit 2), at parse time or when the run reads it */
  expect("run small.td --ranks 2 --input x=nothing.npy", 2, "--input x: cannot open 'nothing.npy'");
  expect("run small.td --ranks 2 --input nope=nothing.npy", 2,
         "--input nope: the program has no input or weight of that name");
  expect("run small.td --ranks 2 --input x=a.npy --input x=b.npy", 2, "tdist run: --input x given twice");
  write_file("notnpy.npy", "not numpy at all");
  expect("run small.td --ranks 2 --input x=notnpy.npy", 2, "is not a .npy file (bad magic)");
  /* --dims: once, each dim once, not empty; a single-dash word is an option */
  expect("run small.td --ranks 2 --dims M=64,M=32", 2, "tdist run: --dims names M twice, got 'M=64,M=32'");
  expect("run small.td --ranks 2 --dims M=64 --dims H=8", 2, "tdist run: --dims given twice");
  expect("run small.td --ranks 2 --dims=", 2, "tdist run: --dims expects NAME=VALUE[,NAME=VALUE...], got ''");
  expect("run small.td --ranks 2 -x", 2, "tdist run: unknown option '-x'");
  expect("run small.td --ranks 2 --json same.out --trace same.out", 2,
         "tdist run: --json and --trace name the same file 'same.out'");
  expect("run missing.td --ranks 2", 2, "tdist run: cannot open program 'missing.td': No such file or directory");
  expect("run small.td --ranks 2 --dims Q=3", 2,
         "tdist run: dim 'Q' is not declared by the program (declared: M, H, F)");
  expect("run small.td --ranks 2 --dims M", 2, "tdist run: --dims item 'M' has no '=' (expected NAME=VALUE)");
  expect("run small.td --ranks 2 --dims M=abc", 2, "tdist run: --dims M=abc: value is not an integer");
  expect("run small.td --ranks 4 --dims F=3", 2, "the contraction dim (3) is split over 4 ranks");
  expect("run bad.td --ranks 2", 2, "tdist run: bad.td:2:19: expected ']' after the shape (2-D at most), found ','");
  /* An output that cannot be written is refused before the run (usage error). */
  expect("run small.td --ranks 1 --iters 1 --rounds 1 --json /nonexistent/dir/r.json", 2,
         "tdist run: --json /nonexistent/dir/r.json cannot be written");
  expect("run --help", 0, "usage: tdist run PROGRAM.td --ranks N [options]");
  /* The option name is checked before its value; --opt=value is --opt value. */
  expect("run small.td --ranks 2 --bogus", 2, "tdist run: unknown option '--bogus' (see tdist run --help)");
  expect("run small.td --ranks 2 --bogus=1", 2, "tdist run: unknown option '--bogus' (see tdist run --help)");
  expect("run small.td --ranks=0", 2, "tdist run: --ranks expects an integer in 1..64, got '0'");
  expect("run small.td --ranks 2 --check=1", 2, "tdist run: option --check takes no value");
  expect("run small.td --ranks=2 --iters=1 --rounds=1 --check", 0, "result: PASS");
  /* A JSON write that fails after the run (full device) is an error, not a silent exit 0. */
  if (!access("/dev/full", W_OK))
    expect("run small.td --ranks 1 --iters 1 --rounds 1 --json /dev/full", 1,
           "tdist run: cannot write /dev/full: No space left on device");
  if (!access("/dev/full", W_OK))
    expect("explain small.td --ranks 2 --dump /dev/full", 1,
           "tdist explain: cannot write the plan to '/dev/full': No space left on device");
}

/* Exit status by kind: a usage or input error (bad option, unreadable file,
 * a program that does not parse or compile) is 2, before anything runs; a
 * numerical check that fails is 1; `run --help` and `explain --help` say so. */
static void test_exit_status_by_kind(void **state) {
  (void)state;
  /* compile errors of the program: 2, like a bad flag */
  write_file("kmis.td", "dim M = 16, K = 4096, N = 8\ninput x : bf16[M, K] shard(0)\nweight w : bf16[4095, N]\n"
                        "y = matmul(all_gather(x), w)\noutput y\n");
  expect("run kmis.td --ranks 2", 2, "tdist run: kmis.td:4:5: matmul (value y): contraction dims differ");
  expect("explain kmis.td --ranks 2", 2, "tdist explain: kmis.td:4:5: matmul (value y)");
  expect("run bad.td --ranks 2 --check", 2, "bad.td:2:19:");
  expect("run small.td --ranks 2 --bogus", 2, "unknown option");
  /* a failed check: 1 (an inf input makes the error inf; see test_run_inputs) */
  float v[16];
  unsigned char npy[128 + sizeof v];
  const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }";
  size_t hl = 128 - 10;
  memcpy(npy, "\x93NUMPY\x01\x00", 8);
  npy[8] = (unsigned char)(hl & 0xff), npy[9] = (unsigned char)(hl >> 8);
  memset(npy + 10, ' ', hl);
  memcpy(npy + 10, hdr, strlen(hdr));
  npy[127] = '\n';
  for (int i = 0; i < 16; i++)
    v[i] = i % 3 ? (float)i : 1.0f / 0.0f;
  memcpy(npy + 128, v, sizeof v);
  write_in(tmpdir, "inf.npy", npy, sizeof npy);
  write_file("lit.td", "input x : f32[4, 4] shard(0)\ny = all_gather(x)\noutput y\n");
  expect("run lit.td --ranks 2 --iters 1 --rounds 1 --check --input x=inf.npy", 1, "result: FAIL");
  /* the help text states the same statuses */
  expect("run --help", 0, "2 a usage or input error");
  expect("run --help", 0, "or a run larger\n  than host memory");
  expect("run --help", 0, "1 the check FAILed");
  expect("explain --help", 0, "exit status: 0 explained;");
}

/* A shape error names the dims that differ ("K: 4096 vs 4095"), with
 * file:line:col, not both operands' whole shapes; an undeclared dim names
 * the declaration it is in (input or weight) and points at that dim. */
static void test_shape_messages(void **state) {
  (void)state;
  write_file("kmis.td", "dim M = 16, K = 4096, N = 8\ninput x : bf16[M, K] shard(0)\nweight w : bf16[4095, N]\n"
                        "y = matmul(all_gather(x), w)\noutput y\n");
  expect("run kmis.td --ranks 2", 2, "kmis.td:4:5: matmul (value y): contraction dims differ (a's columns vs b's "
         "rows, after transposes): K: 4096 vs 4095\n");
  write_file("twodims.td", "dim M = 8, H = 4\ninput x : f32[M, H]\nweight u : f32[M, H]\noutput y = matmul(x, u)\n");
  expect("run twodims.td --ranks 1", 2, "twodims.td:4:12: matmul (value y): contraction dims differ (a's columns vs "
         "b's rows, after transposes): H vs M: 4 vs 8\n");
  write_file("addmis.td", "dim M = 16, H = 32\ninput x : f32[M, H]\ninput z : f32[M, 31]\noutput y = add(x, z)\n");
  expect("run addmis.td --ranks 1", 2, "addmis.td:4:12: add (value y): operand shapes differ in columns (H: 32 vs "
         "31)\n");
  write_file("addrows.td", "dim M = 16, H = 32\ninput x : f32[M, H]\ninput z : f32[8, 3]\noutput y = mul(x, z)\n");
  expect("run addrows.td --ranks 1", 2, "addrows.td:4:12: mul (value y): operand shapes differ in rows (M: 16 vs 8) "
         "and columns (H: 32 vs 3)\n");
  write_file("rms.td", "dim M = 16, H = 32, R = 4\ninput x : f32[M, H]\nweight w : f32[R, 30]\n"
                       "output y = rmsnorm(x, w)\n");
  expect("run rms.td --ranks 1", 2, "rms.td:4:12: rmsnorm (value y): weight must be [1, cols of x]: it has R = 4 "
         "rows; columns of x vs the weight's: H: 32 vs 30\n");
  write_file("wdim.td", "dim M = 16, K = 32\ninput x : bf16[M, K] shard(0)\nweight w : bf16[K, Q]\n"
                        "y = matmul(all_gather(x), w)\noutput y\n");
  expect("run wdim.td --ranks 2", 2, "tdist run: wdim.td:3:20: weight w: dim 'Q' is not declared (declare it with "
         "`dim Q = VALUE`)");
  expect("explain wdim.td --ranks 2", 2, "tdist explain: wdim.td:3:20: weight w: dim 'Q' is not declared");
  write_file("idim.td", "dim K = 32\ninput x : f32[Z, K]\noutput y = gelu(x)\n");
  expect("run idim.td --ranks 1", 2, "tdist run: idim.td:2:15: input x: dim 'Z' is not declared");
}

static void test_run_ok(void **state) {
  (void)state;
  static char out[1 << 16];
  int rc = tdist(out, sizeof out, "run small.td --ranks 3 --check --iters 2 --json r.json --trace t.json");
  if (rc != 0)
    print_error("%s\n", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "overlapped"));
  assert_non_null(strstr(out, "sequential"));
  assert_non_null(strstr(out, "result: PASS"));
  char path[512];
  snprintf(path, sizeof path, "%s/r.json", tmpdir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char text[1 << 16];
  text[fread(text, 1, sizeof text - 1, f)] = 0;
  fclose(f);
  cJSON *j = cJSON_Parse(text);
  assert_non_null(j);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "pass")));
  assert_int_equal((int)cJSON_GetObjectItem(j, "ranks")->valuedouble, 3);
  assert_int_equal((int)cJSON_GetObjectItem(cJSON_GetObjectItem(j, "dims"), "M")->valuedouble, 12);
  cJSON *ov = cJSON_GetObjectItem(j, "overlapped");
  assert_true(cJSON_GetObjectItem(ov, "seconds")->valuedouble > 0);
  assert_true(cJSON_GetObjectItem(ov, "max_rel_error")->valuedouble <= cJSON_GetObjectItem(ov, "tolerance")->valuedouble);
  assert_non_null(cJSON_GetObjectItem(j, "speedup"));
  cJSON_Delete(j);
  snprintf(path, sizeof path, "%s/t.json", tmpdir);
  assert_int_equal(access(path, R_OK), 0);
}

static void test_explain(void **state) {
  (void)state;
  expect("explain", 2, "tdist explain: no PROGRAM given");
  expect("explain small.td", 2, "tdist explain: --ranks N is required");
  expect("explain small.td --ranks 99", 2, "tdist explain: --ranks expects an integer in 1..64, got '99'");
  expect("explain small.td --ranks 2 --what 1", 2, "tdist explain: unknown option '--what'");
  expect("explain small.td --ranks 2 --backend x", 2, "tdist explain: unknown backend 'x' (cpu or cuda)");
  expect("explain missing.td --ranks 2", 2, "tdist explain: cannot open program 'missing.td'");
  expect("explain small.td --ranks 2 --dims Z=1", 2, "tdist explain: dim 'Z' is not declared");
  /* B8, C2: explain checks --dims with run's one parser: each dim once, --dims once, no empty item or value,
   * no spaces */
  expect("explain small.td --ranks 2 --dims M=8,M=64", 2, "tdist explain: --dims names M twice, got 'M=8,M=64'");
  expect("explain small.td --ranks 2 --dims M=8 --dims M=64", 2, "tdist explain: --dims given twice");
  expect("explain small.td --ranks 2 --dims=", 2, "tdist explain: --dims expects NAME=VALUE[,NAME=VALUE...], got ''");
  expect("explain small.td --ranks 2 --dims M=8,", 2, "tdist explain: --dims has an empty item (a leading, "
         "trailing or doubled comma), got 'M=8,'");
  expect("run small.td --ranks 2 --dims ,M=8", 2, "tdist run: --dims has an empty item (a leading, trailing or "
         "doubled comma), got ',M=8'");
  expect("run small.td --ranks 2 --dims M=", 2, "tdist run: --dims gives M an empty value, got 'M='");
  expect("explain small.td --ranks 2 '--dims=M= 8'", 2, "tdist explain: --dims items take no spaces "
         "(NAME=VALUE,NAME=VALUE), got 'M= 8'");
  expect("explain small.td --ranks 2 --chunks 0", 2, "tdist explain: --chunks expects an integer in 1..64, got '0'");
  /* an output that cannot be written is refused before compiling, as run's --json (usage error) */
  expect("explain small.td --ranks 2 --dump /nonexistent/dir/p.txt", 2,
         "tdist explain: --dump /nonexistent/dir/p.txt cannot be written");
  expect("explain small.td", 2, "tdist explain: --ranks N is required");
  expect("explain --help", 0, "usage: tdist explain PROGRAM.td --ranks N [options]");
  expect("calibrate --help", 0, "usage: tdist calibrate [--quick]");
  expect("explain small.td --ranks 3", 0, "rank 2:");
  expect("explain small.td --ranks 3 --sequential --dump plan.txt", 0, "sequential (baseline) plan");
  expect("explain small.td --ranks 2", 0, "hidden under compute");
  expect("explain small.td --ranks 2 --bogus", 2, "tdist explain: unknown option '--bogus' (see tdist explain --help)");
  expect("explain small.td --ranks 2 --bogus=3", 2, "tdist explain: unknown option '--bogus'");
  expect("explain small.td --ranks 2 --sequential=1", 2, "tdist explain: option --sequential takes no value");
  expect("explain small.td --ranks", 2, "tdist explain: option --ranks needs a value");
  expect("explain small.td --ranks=3 --chunks=2", 0, "rank 2:");
  /* Whole-file problems keep file:line:col. */
  expect("explain empty.td --ranks 2", 2, "tdist explain: empty.td:1:1: empty program");
  expect("explain comment.td --ranks 2", 2, "tdist explain: comment.td:3:1: empty program");
  expect("explain nul.td --ranks 2", 2, "tdist explain: nul.td:3:1: unexpected byte 0x00");
}

/* A calibration file with a value out of range (flops_s 1e-300 made every
 * predicted time infinite and explain crash) is refused by run and explain
 * as an input error (exit 2, as tdist bench does), naming file, key, value
 * and range; td_perf_model_load skips the value. */
static void test_bad_calibration(void **state) {
  (void)state;
  static const struct {
    const char *json, *message;
  } bad[] = {
      {"{\"flops_s\": 1e-300}", "flops_s is 1e-300; allowed: a number in [1000, 1e+17]"},
      {"{\"flops_s\": 1e-310}", "flops_s is 1e-310; allowed: a number in [1000, 1e+17]"},
      {"{\"alpha_s\": -1}", "alpha_s is -1; allowed: a number in [1e-09, 1]"},
      {"{\"beta_bytes_s\": 0}", "beta_bytes_s is 0; allowed: a number in [1000, 1e+14]"},
      {"{\"mem_bytes_s\": \"fast\"}", "mem_bytes_s is not a number; allowed: a number in [1000, 1e+14]"},
      {"{\"task_overhead_s\": 1e300}", "task_overhead_s is 1e+300; allowed: a number in [1e-10, 1]"},
      {"{\"transcendental_s\": 5}", "transcendental_s is 5; allowed: a number in [0, 0.001]"},
      {"{\"cores\": 2.5}", "cores is 2.5; allowed: an integer in [0, 100000] (0 = detect)"},
      {"{\"cores\": -4}", "cores is -4; allowed: an integer in [0, 100000] (0 = detect)"},
      {"not json", "calibration.json': not a JSON object"},
  };
  char dir[300], path[400], want[800];
  snprintf(dir, sizeof dir, "%s/badcal", tmpdir);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/calibration.json", dir);
  setenv("TD_CACHE_DIR", dir, 1);
  td_perf_model def;
  unlink(path);
  td_perf_model_load(&def);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(bad[i].json, f);
    fclose(f);
    snprintf(want, sizeof want, "tdist explain: calibration file '%s': %s", path, bad[i].message);
    if (strstr(bad[i].message, "JSON"))
      snprintf(want, sizeof want, "tdist explain: calibration file '%s': not a JSON object", path);
    expect("explain small.td --ranks 2", 2, want);
    expect("run small.td --ranks 2 --iters 1 --rounds 1", 2, bad[i].message);
    td_perf_model m;
    memset(&m, 0x5a, sizeof m);
    double mark = m.flops_s;
    assert_int_equal(td_perf_model_load_checked(&m), TD_ERR_INVALID_ARG);
    assert_non_null(strstr(td_last_error(), bad[i].message));
    assert_true(m.flops_s == mark && m.alpha_s == mark); /* written only on success */
    td_perf_model_load(&m); /* skips the bad value: every field as without a file */
    assert_true(m.alpha_s == def.alpha_s && m.beta_bytes_s == def.beta_bytes_s && m.flops_s == def.flops_s &&
                m.mem_bytes_s == def.mem_bytes_s && m.task_overhead_s == def.task_overhead_s &&
                m.cores == def.cores && m.transcendental_s == def.transcendental_s);
  }
  /* more cores than the executor takes workers: the plan uses at most 1024 per rank */
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"cores\": 5000}", f);
  fclose(f);
  expect("run small.td --ranks 1 --iters 1 --rounds 1 --check", 0, "result: PASS");
  f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"flops_s\": 3e9, \"cores\": 0}", f);
  fclose(f);
  td_perf_model m;
  assert_int_equal(td_perf_model_load_checked(&m), TD_OK);
  assert_true(m.flops_s == 3e9 && m.cores == 0 && m.alpha_s == def.alpha_s);
  expect("explain small.td --ranks 2", 0, "3.0 GFLOP/s per worker");
  unsetenv("TD_CACHE_DIR");
}

/* A wait that passes TD_TIMEOUT_MS on one rank is reported as that rank's
 * timeout, not as the call-order mistake its peers then see. With 1 ms on 4
 * ranks a timeout is all but certain; when none happens the run must pass. */
static void test_timeout_reported(void **state) {
  (void)state;
  static char out[1 << 16];
  int rc = tdist(out, sizeof out, "run small.td --ranks 4 --iters 20 --rounds 1 --no-baseline --check --dims M=4096");
  assert_int_equal(rc, 0);
  setenv("TD_TIMEOUT_MS", "1", 1);
  rc = tdist(out, sizeof out, "run small.td --ranks 4 --iters 20 --rounds 1 --no-baseline --check --dims M=4096");
  unsetenv("TD_TIMEOUT_MS");
  if (rc == 0) {
    assert_non_null(strstr(out, "result: PASS"));
  } else {
    if (!strstr(out, "failed first, with TD_ERR_TIMEOUT"))
      print_error("%s\n", out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "failed first, with TD_ERR_TIMEOUT"));
    assert_null(strstr(out, "at the same time"));
  }
}

static void test_calibrate(void **state) {
  (void)state;
  expect("calibrate --bogus", 2, "tdist calibrate: unknown argument '--bogus'");
  char env[600];
  snprintf(env, sizeof env, "%s/cache", tmpdir);
  setenv("TD_CACHE_DIR", env, 1);
  expect("calibrate --quick", 0, "written to");
  td_perf_model m;
  td_perf_model_load(&m);
  assert_true(m.alpha_s > 0 && m.beta_bytes_s > 0 && m.flops_s > 0 && m.cores >= 1);
  td_perf_model def;
  snprintf(env, sizeof env, "%s/nothing-here", tmpdir);
  setenv("TD_CACHE_DIR", env, 1);
  td_perf_model_load(&def);
  assert_int_equal(def.cores, 0); /* defaults when no calibration exists */
  unsetenv("TD_CACHE_DIR");
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/td_cli_XXXXXX");
  if (!mkdtemp(tmpdir))
    return 1;
  write_file("small.td", small);
  write_file("bad.td", "dim M = 4\ninput x : f32[M, 4, 4]\n");
  write_file("empty.td", "");
  write_file("comment.td", "# nothing\n\n");
  write_file("nul.td", "input x : f32[2, 2]\noutput y = gelu(x)\n"); /* the NUL is appended below */
  {
    char p[512];
    snprintf(p, sizeof p, "%s/nul.td", tmpdir);
    FILE *f = fopen(p, "ab");
    fwrite("\0z = bogus(q)\n", 1, 14, f);
    fclose(f);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_errors),
      cmocka_unit_test(test_exit_status_by_kind),
      cmocka_unit_test(test_shape_messages),
      cmocka_unit_test(test_run_ok),
      cmocka_unit_test(test_explain),
      cmocka_unit_test(test_calibrate),
      cmocka_unit_test(test_bad_calibration),
      cmocka_unit_test(test_timeout_reported),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0)
    rc = rc ? rc : 1;
  return rc;
}
