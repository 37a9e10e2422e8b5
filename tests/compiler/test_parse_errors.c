/* SPDX-License-Identifier: Apache-2.0
 * Parser error paths: every error the `.td` parser can report, each with its
 * exact "file:line:col: message" and status. A valid program parses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tdist/tdist.h"

typedef struct td__case {
  const char *text;
  td_status status;
  const char *message;
} td__case;

static const td__case cases[] = {
    {"x = $",
     TD_ERR_PARSE, "t.td:1:5: unexpected character '$'"},
    {"@",
     TD_ERR_PARSE, "t.td:1:1: unexpected character '@'"},
    {"dim",
     TD_ERR_PARSE, "t.td:1:4: expected a dim name, found end of file"},
    {"dim 5",
     TD_ERR_PARSE, "t.td:1:5: expected a dim name, found '5'"},
    {"dim M 5",
     TD_ERR_PARSE, "t.td:1:7: expected '=' after the dim name, found '5'"},
    {"dim M = x",
     TD_ERR_PARSE, "t.td:1:9: expected a positive integer for dim M, found 'x'"},
    {"dim M = 0",
     TD_ERR_PARSE, "t.td:1:9: expected a positive integer for dim M, found '0'"},
    {"dim M = 1.5",
     TD_ERR_PARSE, "t.td:1:9: expected a positive integer for dim M, found '1.5'"},
    {"dim M = 4, M = 5",
     TD_ERR_PARSE, "t.td:1:12: dim M is declared twice"},
    {"dim M = 4 5",
     TD_ERR_PARSE, "t.td:1:11: expected end of line after the statement, found '5'"},
    {"dim M = 99999999999999999999",
     TD_ERR_PARSE, "t.td:1:9: dim M = '99999999999999999999' is too large: at most 1000000000000000 (1e15)"},
    {"dim M = 9223372036854775807",
     TD_ERR_PARSE, "t.td:1:9: dim M = '9223372036854775807' is too large: at most 1000000000000000 (1e15)"},
    {"dim M = 1000000000000001",
     TD_ERR_PARSE, "t.td:1:9: dim M = '1000000000000001' is too large: at most 1000000000000000 (1e15)"},
    {"input x : f32[4, 2000000000000000]",
     TD_ERR_PARSE, "t.td:1:18: dim '2000000000000000' is too large: at most 1000000000000000 (1e15)"},
    {"dim M = 4, K = 3037000500, N = 3037000500\ninput x : f32[M, K] shard(0)\n"
     "weight w : f32[K, N] replicated\noutput y = matmul(x, w)",
     TD_ERR_SHAPE, "t.td:3:8: value w is [3037000500, 3037000500] = 9.22e+18 elements: too large, at most 2^48 (2.81e+14) per value"},
    {"input x : f32[1000000000000000, 1000]\noutput y = gelu(x)",
     TD_ERR_SHAPE, "t.td:1:7: value x is [1000000000000000, 1000] = 1e+18 elements: too large, at most 2^48 (2.81e+14) per value"},
    {"",
     TD_ERR_SHAPE, "t.td:1:1: empty program (only blank lines and comments): a program needs an input, e.g. `input x : f32[M, K] shard(0)`, and `output NAME`"},
    {"# only a comment\n\n   # another\n",
     TD_ERR_SHAPE, "t.td:4:1: empty program (only blank lines and comments): a program needs an input, e.g. `input x : f32[M, K] shard(0)`, and `output NAME`"},
    {"dim M = 4",
     TD_ERR_SHAPE, "t.td:1:10: empty program (only blank lines and comments): a program needs an input, e.g. `input x : f32[M, K] shard(0)`, and `output NAME`"},
    {"input",
     TD_ERR_PARSE, "t.td:1:6: expected a name after 'input', found end of file"},
    {"input 3",
     TD_ERR_PARSE, "t.td:1:7: expected a name after 'input', found '3'"},
    {"input x f32[4, 4]",
     TD_ERR_PARSE, "t.td:1:9: expected ':' after the name, found 'f32'"},
    {"input x : f99[4, 4]",
     TD_ERR_PARSE, "t.td:1:11: expected a dtype (f32, f16 or bf16), found 'f99'"},
    {"input x : f32 4",
     TD_ERR_PARSE, "t.td:1:15: expected '[' before the shape, found '4'"},
    {"input x : f32[]",
     TD_ERR_PARSE, "t.td:1:15: expected a dim name or a positive integer, found ']'"},
    {"input x : f32[4 4]",
     TD_ERR_PARSE, "t.td:1:17: expected ']' after the shape (2-D at most), found '4'"},
    {"input x : f32[4, 4, 4]",
     TD_ERR_PARSE, "t.td:1:19: expected ']' after the shape (2-D at most), found ','"},
    {"input x : f32[4, 4] sharded",
     TD_ERR_PARSE, "t.td:1:21: expected a layout (replicated, shard(0), shard(1) or partial), found 'sharded'"},
    {"input x : f32[4, 4] shard 0",
     TD_ERR_PARSE, "t.td:1:27: expected '(' after 'shard', found '0'"},
    {"input x : f32[4, 4] shard(2)",
     TD_ERR_PARSE, "t.td:1:27: expected the shard dim 0 or 1, found '2'"},
    {"input x : f32[4, 4] shard(0",
     TD_ERR_PARSE, "t.td:1:28: expected ')' after the shard dim, found end of file"},
    {"input x : f32[4, 4] partial(max)",
     TD_ERR_PARSE, "t.td:1:29: expected 'sum' (the only partial reduction), found 'max'"},
    {"input x : f32[4, 4] partial(sum",
     TD_ERR_PARSE, "t.td:1:32: expected ')' after 'sum', found end of file"},
    {"input x : f32[4, N]",
     TD_ERR_PARSE, "t.td:1:18: input x: dim 'N' is not declared (declare it with `dim N = VALUE`)"},
    {"weight w : f32[N, 4]",
     TD_ERR_PARSE, "t.td:1:16: weight w: dim 'N' is not declared (declare it with `dim N = VALUE`)"},
    {"weight w : f32[N]",
     TD_ERR_PARSE, "t.td:1:16: weight w: dim 'N' is not declared (declare it with `dim N = VALUE`)"},
    {"dim K = 4\nweight w : f32[K, 4]\nweight w : f32[4, 4]",
     TD_ERR_PARSE, "t.td:3:8: weight w: the name is already used"},
    {"input x : f32[4, 4]\ninput x : f32[4, 4]",
     TD_ERR_PARSE, "t.td:2:7: input x: the name is already used"},
    {"input x : f32[4, 4] replicated extra",
     TD_ERR_PARSE, "t.td:1:32: expected end of line after the statement, found 'extra'"},
    {"input abcdefghijabcdefghijabcdefghijabcdefghij : f32[4, 4]",
     TD_ERR_PARSE, "t.td:1:7: name 'abcdefghijabcdefghij...' is longer than 31 characters"},
    {"output",
     TD_ERR_PARSE, "t.td:1:7: expected a value name after 'output', found end of file"},
    {"output 5",
     TD_ERR_PARSE, "t.td:1:8: expected a value name after 'output', found '5'"},
    {"output y",
     TD_ERR_PARSE, "t.td:1:8: unknown value 'y' (declare it with input/weight or assign it first)"},
    {"output y extra",
     TD_ERR_PARSE, "t.td:1:10: expected end of line after the statement, found 'extra'"},
    {"y",
     TD_ERR_PARSE, "t.td:1:2: expected '=' after 'y' (statements are dim, input, weight, output or NAME = expression), found end of file"},
    {"y 5",
     TD_ERR_PARSE, "t.td:1:3: expected '=' after 'y' (statements are dim, input, weight, output or NAME = expression), found '5'"},
    {"y = ",
     TD_ERR_PARSE, "t.td:1:5: expected a value name or an op, found end of file"},
    {"y = 5",
     TD_ERR_PARSE, "t.td:1:5: expected a value name or an op, found '5'"},
    {"y = z",
     TD_ERR_PARSE, "t.td:1:5: unknown value 'z' (declare it with input/weight or assign it first)"},
    {"y = foo(x)",
     TD_ERR_PARSE, "t.td:1:5: unknown op 'foo' (ops: matmul, all_gather, reduce_scatter, all_reduce, all_to_all, add, mul, gelu, silu, scale, rmsnorm)"},
    /* near misses name what was meant; far ones (above) do not guess */
    {"input x : f32[4, 4]\ny = matmull(x, x)",
     TD_ERR_PARSE, "t.td:2:5: unknown op 'matmull' (did you mean 'matmul'? ops: matmul, all_gather, reduce_scatter, all_reduce, all_to_all, add, mul, gelu, silu, scale, rmsnorm)"},
    {"input act : f32[4, 4]\ny = gelu(acts)",
     TD_ERR_PARSE, "t.td:2:10: unknown value 'acts' (did you mean 'act'? declare it with input/weight or assign it first)"},
    {"input x : f32[4, 4]\ny = gelu(x)\noutput Y",
     TD_ERR_PARSE, "t.td:3:8: unknown value 'Y' (did you mean 'y'? declare it with input/weight or assign it first)"},
    {"wieght w : f32[4, 4]",
     TD_ERR_PARSE, "t.td:1:8: expected '=' after 'wieght' (did you mean 'weight'? statements are dim, input, weight, output or NAME = expression), found 'w'"},
    {"input x : f32[4, 4]\ny = gelu(",
     TD_ERR_PARSE, "t.td:2:10: expected an argument of gelu, found end of file"},
    {"input x : f32[4, 4]\ny = gelu(x",
     TD_ERR_PARSE, "t.td:2:11: expected ',' or ')' between arguments, found end of file"},
    {"input x : f32[4, 4]\ny = gelu(x x)",
     TD_ERR_PARSE, "t.td:2:12: expected ',' or ')' between arguments, found 'x'"},
    {"input x : f32[4, 4]\ny = gelu(x, x)",
     TD_ERR_PARSE, "t.td:2:5: gelu takes 1 tensor operand, got 2"},
    {"input x : f32[4, 4]\ny = gelu()",
     TD_ERR_PARSE, "t.td:2:10: expected an argument of gelu, found ')'"},
    {"input x : f32[4, 4]\ny = matmul(x)",
     TD_ERR_PARSE, "t.td:2:5: matmul takes 2 tensor operands, got 1"},
    {"input x : f32[4, 4]\ny = matmul(x, x, 3)",
     TD_ERR_PARSE, "t.td:2:18: unexpected argument '3' to matmul"},
    {"input x : f32[4, 4]\ny = gelu(x, transpose_a)",
     TD_ERR_PARSE, "t.td:2:13: unexpected argument 'transpose_a' to gelu"},
    {"input x : f32[4, 4]\ny = scale(x)",
     TD_ERR_PARSE, "t.td:2:5: scale needs a number argument (the factor)"},
    {"input x : f32[4, 4]\ny = scale(x, 1, 2)",
     TD_ERR_PARSE, "t.td:2:17: unexpected argument '2' to scale"},
    {"input x : f32[4, 4]\ny = all_to_all(x)",
     TD_ERR_PARSE, "t.td:2:5: all_to_all needs a number argument (the target dim)"},
    {"input x : f32[4, 4] shard(0)\ny = reduce_scatter(x, 2)",
     TD_ERR_PARSE, "t.td:2:23: reduce_scatter's dim must be 0 or 1, found '2'"},
    {"input x : f32[4, 4]\ny = gelu(x, x, x, x, x)",
     TD_ERR_PARSE, "t.td:2:22: too many arguments to gelu"},
    {"input x : f32[4, 4]\nx = gelu(x)",
     TD_ERR_PARSE, "t.td:2:1: 'x' is already defined"},
    {"input x : f32[4, 4]\noutput y = gelu(x) z",
     TD_ERR_PARSE, "t.td:2:20: expected end of line after the statement, found 'z'"},
    {"input x : f32[4, 4]\ny = 1e999",
     TD_ERR_PARSE, "t.td:2:5: number '1e999' is out of range (a double's magnitude lies between about 2.2e-308 and "
     "1.8e308)"},
    {"input x : f32[4, 4]\ny = scale(x, -)",
     TD_ERR_PARSE, "t.td:2:14: unexpected character '-'"},
    {"input x : f32[4, 4]\ny = scale(x, .)",
     TD_ERR_PARSE, "t.td:2:14: malformed number '.'"},
    {"input x : f32[4, 4]\ny = gelu(x)",
     TD_ERR_SHAPE, "t.td:2:12: program has no output: mark one with `output NAME` (or `output NAME = expression`)"},
    {"input x : f32[4, 4]\ny = gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(gelu(x",
     TD_ERR_PARSE, "t.td:2:330: expression is nested deeper than 64 levels"},
    {"input x : f32[4, 4]\noutput y = scale(x, 1.00000000000000000000000000000000000000000000000000000000000000000001)",
     TD_ERR_PARSE, "t.td:2:21: number '1.000000000000000000...' is too long"},
    {"input x : f32[4, 4]\x01" "",
     TD_ERR_PARSE, "t.td:1:20: unexpected byte 0x01"},
    {"input x : f32[4, 4] shard(0)\ninput w : f32[4, 4] shard(1)\noutput y = matmul(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: matmul: cannot multiply a shard(0) by a shard(1) operand (after transposes); allowed: replicated or shard(0) times replicated, replicated times shard(1), a contraction split as shard(1) times shard(0), or partial times replicated (all_gather or reduce an operand first)"},
    {"input x : f32[4, 4] partial\noutput y = gelu(x)",
     TD_ERR_SHAPE, "t.td:2:12: gelu: input is partial(sum); a non-linear op needs the summed value (all_reduce or reduce_scatter it first)"},
    {"input x : f32[4, 4]\noutput y = all_gather(x)",
     TD_ERR_SHAPE, "t.td:2:12: all_gather: input is replicated but must be shard(0) or shard(1)"},
    {"input x : f32[4, 4] shard(0)\noutput y = all_reduce(x)",
     TD_ERR_SHAPE, "t.td:2:12: all_reduce: input is shard(0) but must be partial(sum)"},
    {"input x : f32[4, 4]\noutput y = reduce_scatter(x)",
     TD_ERR_SHAPE, "t.td:2:12: reduce_scatter: input is replicated but must be partial(sum)"},
    {"input x : f32[4, 4] shard(0)\noutput y = all_to_all(x, 0)",
     TD_ERR_SHAPE, "t.td:2:12: all_to_all: input is shard(0) but must be shard(1)"},
    {"input x : f32[4, 4]\ninput w : f32[5, 4]\noutput y = matmul(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: matmul (value y): contraction dims differ (a's columns vs b's rows, after transposes): 4 vs 5"},
    {"dim M = 4, K = 6\ninput x : f32[M, K]\ninput w : f32[5, M]\noutput y = matmul(x, w)",
     TD_ERR_SHAPE, "t.td:4:12: matmul (value y): contraction dims differ (a's columns vs b's rows, after transposes): K: 6 vs 5"},
    {"dim M = 4, K = 6\ninput x : f32[K, M]\ninput w : f32[M, 5]\noutput y = matmul(x, w, transpose_a, transpose_b)",
     TD_ERR_SHAPE, "t.td:4:12: matmul (value y): contraction dims differ (a's columns vs b's rows, after transposes): K: 6 vs 5"},
    {"input x : f32[4, 4]\ninput w : bf16[4, 4]\noutput y = matmul(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: matmul: operands have different dtypes (f32 and bf16)"},
    {"input x : f32[4, 4]\ninput w : f32[5, 4]\noutput y = add(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: add (value y): operand shapes differ in rows (4 vs 5)"},
    {"input x : f32[4, 4] partial\ninput w : f32[4, 4] shard(0)\noutput y = add(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: add: operand layouts partial(sum) and shard(0) do not combine (allowed: equal layouts, replicated with a shard, partial times replicated for mul)"},
    {"input x : f32[4, 4]\ninput w : f32[4]\noutput y = rmsnorm(x, w, 0)",
     TD_ERR_SHAPE, "t.td:3:12: rmsnorm: eps must be > 0"},
    {"input x : f32[4, 4]\ninput w : f32[5]\noutput y = rmsnorm(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: rmsnorm (value y): weight must be [1, cols of x]: columns of x vs the weight's: 4 vs 5"},
    {"input x : f32[4, 4] shard(1)\ninput w : f32[4]\noutput y = rmsnorm(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: rmsnorm: x is shard(1); each rank needs whole rows (replicated or shard(0))"},
    {"input x : f32[4, 4]\ninput w : f32[4] shard(1)\noutput y = rmsnorm(x, w)",
     TD_ERR_SHAPE, "t.td:3:12: rmsnorm: weight is shard(1); it must be replicated"},
    {"input x : f32[4, 4]",
     TD_ERR_SHAPE, "t.td:1:20: program has no output: mark one with `output NAME` (or `output NAME = expression`)"},
    {"input x : f32[4, 4]\ny = gelu(x)\n# the end\n",
     TD_ERR_SHAPE, "t.td:4:1: program has no output: mark one with `output NAME` (or `output NAME = expression`)"},
    {"input x : f32[4, 4]\noutput x",
     TD_ERR_PARSE, "t.td:2:8: output x: an input or weight cannot be an output"},
    {"input x : f32[4, 4]\noutput y = gelu(x)\noutput y",
     TD_ERR_PARSE, "t.td:3:8: output y: it is already an output"},
    {"input x : f32[4, 4]\ninput w : f32[4, 4]\noutput y = matmul(x, w, transpose_a, transpose_a)",
     TD_ERR_PARSE, "t.td:3:38: 'transpose_a' given twice to matmul"},
};

static void test_parse_errors(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    td_program *p = (td_program *)0x1;
    td_status st = td_program_parse(cases[i].text, strlen(cases[i].text), "t.td", &p);
    if (st != cases[i].status || strcmp(td_last_error(), cases[i].message) != 0)
      print_error("case %zu: input <%s>\n  got %s '%s'\n  want %s '%s'\n", i, cases[i].text,
                  td_status_name(st), td_last_error(), td_status_name(cases[i].status), cases[i].message);
    assert_int_equal(st, cases[i].status);
    assert_string_equal(td_last_error(), cases[i].message);
    assert_ptr_equal(p, (td_program *)0x1); /* output untouched on error */
  }
}

static void test_parse_valid(void **state) {
  (void)state;
  const char *text = "# comment line\n\ndim M = 8, H = 4  # trailing comment\r\n"
                     "input x : bf16[M, H] shard(0)\nweight w : bf16[H] replicated\n"
                     "weight u : bf16[H, 6] shard(1)\n"
                     "h = rmsnorm(all_gather(x), w, 1e-5)\n"
                     "output y = scale(matmul(h, u), -0.5)\noutput h";
  td_program *p = NULL;
  assert_int_equal(td_program_parse(text, strlen(text), "v.td", &p), TD_OK);
  assert_non_null(p);
  assert_int_equal(td_program_ndims(p), 2);
  int outputs = 0;
  for (td_value v = 0; v < td_program_nvalues(p); v++)
    outputs += td_program_value_is_output(p, v);
  assert_int_equal(outputs, 2);
  td_value last = td_program_nvalues(p) - 1;
  assert_string_equal(td_program_value_name(p, last), "y");
  assert_int_equal(td_program_value_layout(p, last).kind, TD_LAYOUT_SHARD);
  int64_t r, c;
  td_program_value_shape(p, last, &r, &c);
  assert_int_equal(r, 8);
  assert_int_equal(c, 6);
  td_program_destroy(p);
}

/* A NUL byte is a binary byte like any other, wherever it is: it must not
 * end the program silently (what follows it would be ignored). */
static void test_parse_nul(void **state) {
  (void)state;
  static const struct {
    const char *text;
    size_t len;
    const char *message;
  } nul[] = { /* lengths count the NUL and what follows it */
      {"input x : f32[2, 2]\noutput y = gelu(x)\n\0junk\nz = bogus(q)\n", 58, "n.td:3:1: unexpected byte 0x00"},
      {"input x : f32[2, 2]\noutput y = gelu(x)\0junk", 43, "n.td:2:19: unexpected byte 0x00"},
      {"\0", 1, "n.td:1:1: unexpected byte 0x00"},
      {"input x : f32[2,\0 2]", 20, "n.td:1:17: unexpected byte 0x00"},
  };
  for (size_t i = 0; i < sizeof nul / sizeof nul[0]; i++) {
    td_program *p = (td_program *)0x1;
    assert_int_equal(td_program_parse(nul[i].text, nul[i].len, "n.td", &p), TD_ERR_PARSE);
    assert_string_equal(td_last_error(), nul[i].message);
    assert_ptr_equal(p, (td_program *)0x1);
  }
  /* In a comment it is skipped like any byte there. */
  td_program *p = NULL;
  assert_int_equal(td_program_parse("# a\0b\ninput x : f32[2, 2]\noutput y = gelu(x)\n", 45, "n.td", &p), TD_OK);
  assert_non_null(p);
  td_program_destroy(p);
}

static void test_load_missing_file(void **state) {
  (void)state;
  td_program *p = NULL;
  assert_int_equal(td_program_load("/nonexistent/prog.td", &p), TD_ERR_NOT_FOUND);
  assert_string_equal(td_last_error(), "cannot open program '/nonexistent/prog.td': No such file or directory");
  assert_null(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_parse_valid),
      cmocka_unit_test(test_parse_nul),
      cmocka_unit_test(test_load_missing_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
