/* SPDX-License-Identifier: Apache-2.0
 * `.npy` inputs for td_program_run (tdist run --input NAME=FILE): files of
 * each supported dtype feed the run (a NaN in the file makes the check fail,
 * which proves the data was used), and every refusal has its message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdist/program.h"

static char dir[64];

/* Writes a version-1 .npy file with the given header fields and raw data. */
static const char *write_npy(const char *name, const char *descr, const char *fortran, const char *shape,
                             const void *data, size_t bytes) {
  static char path[8][128];
  static int k;
  char *p = path[k++ % 8];
  snprintf(p, 128, "%s/%s", dir, name);
  char hdr[256];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape);
  while ((10 + n + 1) % 64)
    hdr[n++] = ' ';
  hdr[n++] = '\n';
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 255), (unsigned char)(n >> 8)};
  fwrite(pre, 1, 10, f);
  fwrite(hdr, 1, (size_t)n, f);
  fwrite(data, 1, bytes, f);
  fclose(f);
  return p;
}

static const char *text = "input x : f32[3, 4] shard(0)\nweight g : f32[4]\noutput y = rmsnorm(all_gather(x), g)\n"
                          "input p : f32[2, 2] partial\noutput q = all_reduce(p)\n"
                          "weight pw : f32[2, 2] partial\noutput r = all_reduce(pw)\n";

static td_status run(const char *const *names, const char *const *paths, int n, td_program_run_result *res) {
  td_program *p = NULL;
  assert_int_equal(td_program_parse(text, strlen(text), "npy.td", &p), TD_OK);
  td_program_run_opts ro = {2, "cpu", 1, 3, 1, 1, NULL, NULL, n, names, paths};
  td_status st = td_program_run(p, &ro, res);
  td_program_destroy(p);
  return st;
}

static void test_npy_inputs(void **state) {
  (void)state;
  float x[12];
  double g[4];
  int32_t gi[4] = {1, 2, -1, 3};
  for (int i = 0; i < 12; i++)
    x[i] = 0.1f * (float)i - 0.5f;
  for (int i = 0; i < 4; i++)
    g[i] = 1.0 + 0.25 * i;
  const char *names[2] = {"x", "g"};
  const char *paths[2] = {write_npy("x.npy", "<f4", "False", "(3, 4)", x, sizeof x),
                          write_npy("g.npy", "<f8", "False", "(4,)", g, sizeof g)};
  td_program_run_result res;
  assert_int_equal(run(names, paths, 2, &res), TD_OK);
  assert_true(res.pass);
  paths[1] = write_npy("gi.npy", "<i4", "False", "(1, 4)", gi, sizeof gi);
  assert_int_equal(run(names, paths, 2, &res), TD_OK);
  assert_true(res.pass);
  x[5] = NAN; /* the data is really used: a NaN fails the check */
  paths[0] = write_npy("xnan.npy", "<f4", "False", "(3, 4)", x, sizeof x);
  assert_int_equal(run(names, paths, 2, &res), TD_OK);
  assert_false(res.pass);
}

static void expect_error(const char *name, const char *path, td_status status, const char *message) {
  td_program_run_result res;
  const char *names[1] = {name}, *paths[1] = {path};
  assert_int_equal(run(names, paths, 1, &res), status);
  if (!strstr(td_last_error(), message))
    print_error("got '%s'\nwant '%s'\n", td_last_error(), message);
  assert_non_null(strstr(td_last_error(), message));
}

static void test_npy_errors(void **state) {
  (void)state;
  float x[12] = {0};
  char path[128];
  snprintf(path, sizeof path, "%s/none.npy", dir);
  expect_error("x", path, TD_ERR_NOT_FOUND, "--input x: cannot open '");
  expect_error("z", path, TD_ERR_INVALID_ARG, "--input z: the program has no input or weight of that name");
  expect_error("p", path, TD_ERR_INVALID_ARG,
               "--input p: a partial(sum) input takes random addends per rank; it cannot come from a file");
  expect_error("pw", path, TD_ERR_INVALID_ARG,
               "--input pw: a partial(sum) weight takes random addends per rank; it cannot come from a file");
  snprintf(path, sizeof path, "%s/junk.npy", dir);
  FILE *f = fopen(path, "wb");
  fputs("not numpy at all", f);
  fclose(f);
  expect_error("x", path, TD_ERR_INVALID_ARG, "is not a .npy file (bad magic)");
  expect_error("x", write_npy("f.npy", "<f4", "True", "(3, 4)", x, sizeof x), TD_ERR_INVALID_ARG,
               "Fortran-order arrays are not supported (save with C order)");
  /* NumPy writes True or False only; 1, 0 or a string is not a header it wrote */
  expect_error("x", write_npy("f1.npy", "<f4", "1", "(3, 4)", x, sizeof x), TD_ERR_INVALID_ARG,
               "f1.npy': fortran_order is 1; it must be True or False");
  expect_error("x", write_npy("f0.npy", "<f4", "Falsey", "(3, 4)", x, sizeof x), TD_ERR_INVALID_ARG,
               "f0.npy': fortran_order is Falsey; it must be True or False");
  expect_error("x", write_npy("b.npy", ">f4", "False", "(3, 4)", x, sizeof x), TD_ERR_INVALID_ARG,
               "b.npy': dtype '>f4' is not little-endian (save with '<' byte order, e.g. '<f4')");
  expect_error("x", write_npy("b8.npy", ">f8", "False", "(3, 2)", x, sizeof x), TD_ERR_INVALID_ARG,
               "b8.npy': dtype '>f8' is not little-endian (save with '<' byte order, e.g. '<f4')");
  expect_error("x", write_npy("c.npy", "<c8", "False", "(3, 2)", x, sizeof x), TD_ERR_INVALID_ARG,
               "dtype '<c8' is not supported (f2, f4, f8, i4, i8)");
  expect_error("x", write_npy("d.npy", "<f4", "False", "(1, 3, 4)", x, sizeof x), TD_ERR_INVALID_ARG,
               "shape (1, 3, 4) is not 1-D or 2-D");
  expect_error("x", write_npy("t.npy", "<f4", "False", "(3, 4)", x, 20), TD_ERR_INVALID_ARG,
               "t.npy': size mismatch: the header declares shape (3, 4) of '<f4', 48 bytes of data, but the "
               "file holds 20 bytes after the header");
  /* More data than declared: the header does not describe the file. */
  float big[24] = {0};
  expect_error("x", write_npy("e.npy", "<f4", "False", "(3, 4)", big, sizeof big), TD_ERR_INVALID_ARG,
               "e.npy': size mismatch: the header declares shape (3, 4) of '<f4', 48 bytes of data, but the "
               "file holds 96 bytes after the header");
  expect_error("x", write_npy("e1.npy", "<f4", "False", "(3, 4)", big, sizeof x + 1), TD_ERR_INVALID_ARG,
               "e1.npy': size mismatch: the header declares shape (3, 4) of '<f4', 48 bytes of data, but the "
               "file holds 49 bytes after the header");
  const char *wrong = write_npy("w.npy", "<f4", "False", "(4, 3)", x, sizeof x);
  char msg[256];
  snprintf(msg, sizeof msg, "--input x: '%s' holds [4, 3] but x is [3, 4]: the file's rows (4 vs 3) and columns "
           "(3 vs 4) differ", wrong);
  expect_error("x", wrong, TD_ERR_SHAPE, msg);
  /* only the dim that differs is named */
  float g3[3] = {1, 2, 3};
  const char *short_g = write_npy("g3.npy", "<f4", "False", "(1, 3)", g3, sizeof g3);
  snprintf(msg, sizeof msg, "--input g: '%s' holds [1, 3] but g is [1, 4]: the file's columns (3 vs 4) differ",
           short_g);
  expect_error("g", short_g, TD_ERR_SHAPE, msg);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/td_npy_XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_npy_inputs), cmocka_unit_test(test_npy_errors)};
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0 && rc == 0)
    rc = 1;
  return rc;
}
