/* SPDX-License-Identifier: Apache-2.0
 * Compiler front end: the `.td` lexer and parser. One statement per line:
 *
 *   stmt   := 'dim' NAME '=' INT {',' NAME '=' INT}
 *           | ('input' | 'weight') NAME ':' DTYPE '[' DIM [',' DIM] ']' [layout]
 *           | NAME '=' expr
 *           | 'output' NAME ['=' expr]
 *   expr   := NAME | OP '(' arg {',' arg} ')'
 *   arg    := expr | NUMBER | 'transpose_a' | 'transpose_b'
 *   layout := 'replicated' | 'shard' '(' INT ')' | 'partial' ['(' 'sum' ')']
 *
 * Values are built as they are parsed, so layout errors come from the builder
 * with the op's location; shape checks run at the end. Every error is
 * "file:line:col: message". The parser must never crash: input is bounded
 * (names, numbers, nesting depth) and every path is fuzzed (fuzz/parse_fuzz.c). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compiler/compiler.h"
#include "core/error.h"
#include "core/file.h"
#include "core/suggest.h"

enum { T_EOF, T_NL, T_NAME, T_NUM, T_PUNCT };
enum { TD__MAX_DEPTH = 64 };
#define TD__DIM_MAX 1e15
/* Elements of one value: 2^48 (1 PiB of f32) keeps every byte count and
 * index product far from int64 overflow. */
#define TD__VALUE_MAX_ELEMS 281474976710656.0

typedef struct td__tok {
  int kind;
  const char *s;
  size_t len;
  int line, col;
  double num;
  int is_int;
} td__tok;

typedef struct td__parser {
  const char *text, *end, *pos;
  int line, col;
  td__tok tok;
  td_program *p;
  const char *file;
  td_status st;
} td__parser;

/* Sets the parser's error: `status` with "file:line:col: message". */
static td_status td__perr_v(td__parser *ps, td_status status, const td__tok *at, const char *fmt, va_list ap) {
  char msg[400];
  vsnprintf(msg, sizeof msg, fmt, ap);
  ps->st = td__error(status, "%s:%d:%d: %s", ps->file, at->line, at->col, msg);
  return ps->st;
}

static td_status td__perr(td__parser *ps, const td__tok *at, const char *fmt, ...) TD__PRINTF(3, 4);

static td_status td__perr(td__parser *ps, const td__tok *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  td_status st = td__perr_v(ps, TD_ERR_PARSE, at, fmt, ap);
  va_end(ap);
  return st;
}

/* The same with TD_ERR_SHAPE: what the whole program lacks or sizes it cannot have. */
static td_status td__perr_shape(td__parser *ps, const td__tok *at, const char *fmt, ...) TD__PRINTF(3, 4);

static td_status td__perr_shape(td__parser *ps, const td__tok *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  td_status st = td__perr_v(ps, TD_ERR_SHAPE, at, fmt, ap);
  va_end(ap);
  return st;
}

/* How a token is shown in messages: 'text', end of line, end of file. */
static const char *td__tokstr(const td__tok *t, char *buf, size_t size) {
  if (t->kind == T_EOF)
    return "end of file";
  if (t->kind == T_NL)
    return "end of line";
  size_t n = t->len < 40 ? t->len : 40;
  snprintf(buf, size, "'%.*s%s'", (int)n, t->s, t->len > 40 ? "..." : "");
  return buf;
}

static int td__lex(td__parser *ps) {
  const char *c = ps->pos;
  for (;;) {
    while (c < ps->end && (*c == ' ' || *c == '\t' || *c == '\r')) {
      c++;
      ps->col++;
    }
    if (c < ps->end && *c == '#') {
      while (c < ps->end && *c != '\n')
        c++;
      continue;
    }
    break;
  }
  td__tok t = {0};
  t.s = c;
  t.line = ps->line;
  t.col = ps->col;
  if (c >= ps->end) { /* a NUL byte is not an end: it falls to "unexpected byte 0x00" below */
    t.kind = T_EOF;
  } else if (*c == '\n') {
    t.kind = T_NL;
    t.len = 1;
    c++;
    ps->line++;
    ps->col = 0; /* incremented below to 1 */
  } else if (isalpha((unsigned char)*c) || *c == '_') {
    t.kind = T_NAME;
    while (c < ps->end && (isalnum((unsigned char)*c) || *c == '_'))
      c++;
    t.len = (size_t)(c - t.s);
  } else if (isdigit((unsigned char)*c) || *c == '.' ||
             (*c == '-' && c + 1 < ps->end && (isdigit((unsigned char)c[1]) || c[1] == '.'))) {
    t.kind = T_NUM;
    const char *d = c + (*c == '-');
    int is_int = 1;
    while (d < ps->end && isdigit((unsigned char)*d))
      d++;
    if (d < ps->end && *d == '.') {
      is_int = 0;
      d++;
      while (d < ps->end && isdigit((unsigned char)*d))
        d++;
    }
    if (d < ps->end && (*d == 'e' || *d == 'E')) {
      const char *e = d + 1;
      if (e < ps->end && (*e == '+' || *e == '-'))
        e++;
      if (e < ps->end && isdigit((unsigned char)*e)) {
        is_int = 0;
        while (e < ps->end && isdigit((unsigned char)*e))
          e++;
        d = e;
      }
    }
    t.len = (size_t)(d - c);
    t.is_int = is_int;
    char buf[64];
    if (t.len >= sizeof buf) {
      ps->tok = t;
      td__perr(ps, &t, "number '%.20s...' is too long", t.s);
      return 0;
    }
    memcpy(buf, c, t.len);
    buf[t.len] = 0;
    char *stop;
    errno = 0;
    t.num = strtod(buf, &stop);
    if (!*stop && errno == ERANGE) { /* well formed, but no double holds it (1e400, 1e-400) */
      ps->tok = t;
      td__perr(ps, &t, "number '%s' is out of range (a double's magnitude lies between about 2.2e-308 and "
               "1.8e308)", buf);
      return 0;
    }
    if (*stop || errno || !isfinite(t.num) || (t.len == 1 && (*c == '.' || *c == '-'))) {
      ps->tok = t;
      td__perr(ps, &t, "malformed number '%s'", buf);
      return 0;
    }
    c = d;
  } else if (*c && strchr("()[],:=", *c)) { /* strchr finds the terminator for NUL */
    t.kind = T_PUNCT;
    t.len = 1;
    c++;
  } else {
    ps->tok = t;
    if (isprint((unsigned char)*c))
      td__perr(ps, &t, "unexpected character '%c'", *c);
    else
      td__perr(ps, &t, "unexpected byte 0x%02x", (unsigned)(unsigned char)*c);
    return 0;
  }
  if (t.kind == T_NAME && t.len >= TD__NAME_MAX) {
    ps->tok = t;
    td__perr(ps, &t, "name '%.20s...' is longer than %d characters", t.s, TD__NAME_MAX - 1);
    return 0;
  }
  if (t.kind == T_NL)
    ps->col = 1;
  else
    ps->col = t.col + (int)t.len;
  ps->pos = c;
  ps->tok = t;
  return 1;
}

static int td__is(const td__tok *t, const char *s) {
  size_t n = strlen(s);
  return (t->kind == T_NAME || t->kind == T_PUNCT) && t->len == n && !memcmp(t->s, s, n);
}

static void td__name(const td__tok *t, char out[TD__NAME_MAX]) {
  size_t n = t->len < TD__NAME_MAX - 1 ? t->len : TD__NAME_MAX - 1;
  memcpy(out, t->s, n);
  out[n] = 0;
}

/* Consumes punctuation `s` or fails with "expected S CONTEXT, found X". */
static int td__expect(td__parser *ps, const char *s, const char *context) {
  char b[64];
  if (!td__is(&ps->tok, s)) {
    td__perr(ps, &ps->tok, "expected '%s' %s, found %s", s, context, td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  return td__lex(ps);
}

static int td__rewrap(td__parser *ps, const td__tok *at) {
  char msg[400];
  snprintf(msg, sizeof msg, "%s", td_last_error());
  td__perr(ps, at, "%s", msg);
  return 0;
}

static const struct {
  const char *name;
  td_op_kind op;
} td__ops[] = {{"matmul", TD_OP_MATMUL},        {"all_gather", TD_OP_ALL_GATHER},
               {"reduce_scatter", TD_OP_REDUCE_SCATTER}, {"all_reduce", TD_OP_ALL_REDUCE},
               {"all_to_all", TD_OP_ALL_TO_ALL}, {"add", TD_OP_ADD},
               {"mul", TD_OP_MUL},              {"gelu", TD_OP_GELU},
               {"silu", TD_OP_SILU},            {"scale", TD_OP_SCALE},
               {"rmsnorm", TD_OP_RMSNORM}};

typedef struct td__arg {
  int is_value, is_flag;
  td_value v;
  double num;
  int is_int;
  unsigned flag;
  td__tok tok;
} td__arg;

static int td__expr(td__parser *ps, int depth, td_value *out);

/* Argument `pos` of op is a number there (scale's factor, rmsnorm's eps), but
 * the token is a name that is neither a value nor an op: say a number is
 * expected (not "unknown value"), naming nan/inf as not finite. Returns 1
 * after reporting, 0 when the name may be read as a value. */
static int td__number_expected(td__parser *ps, td_op_kind op, int pos) {
  if (!((op == TD_OP_SCALE && pos == 1) || (op == TD_OP_RMSNORM && pos == 2)))
    return 0;
  char name[TD__NAME_MAX];
  td__name(&ps->tok, name);
  for (td_value v = 0; v < ps->p->nvals; v++)
    if (!strcmp(ps->p->vals[v].name, name))
      return 0;
  for (size_t i = 0; i < sizeof td__ops / sizeof td__ops[0]; i++)
    if (!strcmp(name, td__ops[i].name))
      return 0;
  int nonfinite = !strcasecmp(name, "nan") || !strcasecmp(name, "inf") || !strcasecmp(name, "infinity");
  td__perr(ps, &ps->tok, "%s expects a %snumber as its %s, found '%s'", td_op_name(op), nonfinite ? "finite " : "",
           op == TD_OP_SCALE ? "factor" : "eps", name);
  return 1;
}

static int td__call(td__parser *ps, const td__tok *optok, td_op_kind op, int depth, td_value *out) {
  td__arg args[4];
  int nargs = 0;
  char b[64];
  if (!td__lex(ps)) /* the '(' */
    return 0;
  for (;;) {
    if (nargs == 4) {
      td__perr(ps, &ps->tok, "too many arguments to %s", td_op_name(op));
      return 0;
    }
    td__arg *a = &args[nargs];
    memset(a, 0, sizeof *a);
    a->tok = ps->tok;
    if (ps->tok.kind == T_NUM) {
      a->num = ps->tok.num;
      a->is_int = ps->tok.is_int;
      if (!td__lex(ps))
        return 0;
    } else if (td__is(&ps->tok, "transpose_a") || td__is(&ps->tok, "transpose_b")) {
      a->is_flag = 1;
      a->flag = td__is(&ps->tok, "transpose_a") ? TD_MATMUL_TRANSPOSE_A : TD_MATMUL_TRANSPOSE_B;
      if (!td__lex(ps))
        return 0;
    } else if (ps->tok.kind == T_NAME && td__number_expected(ps, op, nargs)) {
      return 0;
    } else if (ps->tok.kind == T_NAME) {
      a->is_value = 1;
      if (!td__expr(ps, depth + 1, &a->v))
        return 0;
    } else {
      td__perr(ps, &ps->tok, "expected an argument of %s, found %s", td_op_name(op),
               td__tokstr(&ps->tok, b, sizeof b));
      return 0;
    }
    nargs++;
    if (td__is(&ps->tok, ")"))
      break;
    if (!td__expect(ps, ",", "or ')' between arguments"))
      return 0;
  }
  if (!td__lex(ps)) /* the ')' */
    return 0;
  /* Check argument kinds: values first, then numbers/flags as the op allows. */
  int nvals = 0;
  while (nvals < nargs && args[nvals].is_value)
    nvals++;
  int want = (op == TD_OP_MATMUL || op == TD_OP_ADD || op == TD_OP_MUL || op == TD_OP_RMSNORM) ? 2 : 1;
  if (nvals != want) {
    const td__tok *at = nvals < nargs ? &args[nvals].tok : optok;
    td__perr(ps, at, "%s takes %d tensor operand%s, got %d", td_op_name(op), want, want > 1 ? "s" : "",
             nvals);
    return 0;
  }
  unsigned flags = 0;
  int have_num = 0;
  double num = 0;
  for (int i = nvals; i < nargs; i++) {
    if (args[i].is_value || (args[i].is_flag && op != TD_OP_MATMUL) ||
        (!args[i].is_flag && op == TD_OP_MATMUL) ||
        (!args[i].is_flag && (have_num || (op != TD_OP_SCALE && op != TD_OP_RMSNORM &&
                                           op != TD_OP_REDUCE_SCATTER && op != TD_OP_ALL_TO_ALL)))) {
      td__perr(ps, &args[i].tok, "unexpected argument %s to %s", td__tokstr(&args[i].tok, b, sizeof b),
               td_op_name(op));
      return 0;
    }
    if (args[i].is_flag) {
      if (flags & args[i].flag) {
        td__perr(ps, &args[i].tok, "%s given twice to %s", td__tokstr(&args[i].tok, b, sizeof b),
                 td_op_name(op));
        return 0;
      }
      flags |= args[i].flag;
    } else {
      if ((op == TD_OP_REDUCE_SCATTER || op == TD_OP_ALL_TO_ALL) &&
          (!args[i].is_int || (args[i].num != 0 && args[i].num != 1))) {
        td__perr(ps, &args[i].tok, "%s's dim must be 0 or 1, found %s", td_op_name(op),
                 td__tokstr(&args[i].tok, b, sizeof b));
        return 0;
      }
      have_num = 1;
      num = args[i].num;
    }
  }
  if ((op == TD_OP_SCALE || op == TD_OP_ALL_TO_ALL) && !have_num) {
    td__perr(ps, optok, "%s needs a number argument (%s)", td_op_name(op),
             op == TD_OP_SCALE ? "the factor" : "the target dim");
    return 0;
  }
  ps->p->cur = (td__srcloc){optok->line, optok->col};
  td_status st;
  switch (op) {
  case TD_OP_MATMUL: st = td_program_matmul(ps->p, args[0].v, args[1].v, flags, out); break;
  case TD_OP_ALL_GATHER: st = td_program_all_gather(ps->p, args[0].v, out); break;
  case TD_OP_REDUCE_SCATTER: st = td_program_reduce_scatter(ps->p, args[0].v, have_num ? (int)num : 0, out); break;
  case TD_OP_ALL_REDUCE: st = td_program_all_reduce(ps->p, args[0].v, out); break;
  case TD_OP_ALL_TO_ALL: st = td_program_all_to_all(ps->p, args[0].v, (int)num, out); break;
  case TD_OP_SCALE: st = td_program_scale(ps->p, args[0].v, (float)num, out); break;
  case TD_OP_RMSNORM: st = td_program_rmsnorm(ps->p, args[0].v, args[1].v, have_num ? (float)num : 1e-6f, out); break;
  default: st = td_program_ewise(ps->p, op, args[0].v, nvals > 1 ? args[1].v : -1, out); break;
  }
  if (st != TD_OK) {
    ps->st = st; /* the builder's message already carries the location */
    return 0;
  }
  return 1;
}

/* "did you mean 'x'? " when `name` is a near miss of a value the program has, else "" (a program too large to
 * list gets no guess). */
static void td__value_hint(const td__parser *ps, const char *name, char *buf, size_t cap) {
  char names[2048] = "", near[96];
  size_t used = 0;
  buf[0] = 0;
  for (td_value v = 0; v < ps->p->nvals; v++) {
    const int w = snprintf(names + used, sizeof names - used, "%s,", ps->p->vals[v].name);
    if (w < 0 || (size_t)w >= sizeof names - used)
      return;
    used += (size_t)w;
  }
  if (td__suggest(name, names, NULL, near, sizeof near))
    snprintf(buf, cap, "did you mean %s? ", near);
}

static int td__expr(td__parser *ps, int depth, td_value *out) {
  char b[64], name[TD__NAME_MAX];
  if (depth > TD__MAX_DEPTH) {
    td__perr(ps, &ps->tok, "expression is nested deeper than %d levels", TD__MAX_DEPTH);
    return 0;
  }
  if (ps->tok.kind != T_NAME) {
    td__perr(ps, &ps->tok, "expected a value name or an op, found %s", td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  td__tok nt = ps->tok;
  td__name(&nt, name);
  if (!td__lex(ps))
    return 0;
  if (td__is(&ps->tok, "(")) {
    for (size_t i = 0; i < sizeof td__ops / sizeof td__ops[0]; i++)
      if (!strcmp(name, td__ops[i].name))
        return td__call(ps, &nt, td__ops[i].op, depth, out);
    char ops[256] = "", hint[96] = "", near[64];
    for (size_t i = 0; i < sizeof td__ops / sizeof td__ops[0]; i++)
      snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%s", i ? ", " : "", td__ops[i].name);
    if (td__suggest(name, ops, ", ", near, sizeof near))
      snprintf(hint, sizeof hint, "did you mean %s? ", near);
    td__perr(ps, &nt, "unknown op '%s' (%sops: %s)", name, hint, ops);
    return 0;
  }
  for (td_value v = 0; v < ps->p->nvals; v++)
    if (!strcmp(ps->p->vals[v].name, name)) {
      *out = v;
      return 1;
    }
  char hint[128] = "";
  td__value_hint(ps, name, hint, sizeof hint);
  td__perr(ps, &nt, "unknown value '%s' (%sdeclare it with input/weight or assign it first)", name, hint);
  return 0;
}

static int td__end_of_stmt(td__parser *ps) {
  char b[64];
  if (ps->tok.kind != T_NL && ps->tok.kind != T_EOF) {
    td__perr(ps, &ps->tok, "expected end of line after the statement, found %s",
             td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  return 1;
}

static int td__stmt_dim(td__parser *ps) {
  char b[64], name[TD__NAME_MAX];
  do {
    if (!td__lex(ps)) /* 'dim' or ',' */
      return 0;
    if (ps->tok.kind != T_NAME) {
      td__perr(ps, &ps->tok, "expected a dim name, found %s", td__tokstr(&ps->tok, b, sizeof b));
      return 0;
    }
    td__tok nt = ps->tok;
    td__name(&nt, name);
    if (!td__lex(ps) || !td__expect(ps, "=", "after the dim name"))
      return 0;
    if (ps->tok.kind == T_NUM && ps->tok.is_int && ps->tok.num > TD__DIM_MAX) {
      td__perr(ps, &ps->tok, "dim %s = %s is too large: at most %.0f (1e15)", name,
               td__tokstr(&ps->tok, b, sizeof b), TD__DIM_MAX);
      return 0;
    }
    if (ps->tok.kind != T_NUM || !ps->tok.is_int || ps->tok.num < 1) {
      td__perr(ps, &ps->tok, "expected a positive integer for dim %s, found %s", name,
               td__tokstr(&ps->tok, b, sizeof b));
      return 0;
    }
    if (td_program_dim(ps->p, name, (int64_t)ps->tok.num) != TD_OK)
      return td__rewrap(ps, &nt);
    if (!td__lex(ps))
      return 0;
  } while (td__is(&ps->tok, ","));
  return td__end_of_stmt(ps);
}

static int td__dimtext(td__parser *ps, char out[TD__NAME_MAX]) {
  char b[64];
  if (ps->tok.kind == T_NAME) {
    td__name(&ps->tok, out);
  } else if (ps->tok.kind == T_NUM && ps->tok.is_int && ps->tok.num >= 1 && ps->tok.num <= TD__DIM_MAX) {
    snprintf(out, TD__NAME_MAX, "%lld", (long long)ps->tok.num);
  } else if (ps->tok.kind == T_NUM && ps->tok.is_int && ps->tok.num > TD__DIM_MAX) {
    td__perr(ps, &ps->tok, "dim %s is too large: at most %.0f (1e15)", td__tokstr(&ps->tok, b, sizeof b),
             TD__DIM_MAX);
    return 0;
  } else {
    td__perr(ps, &ps->tok, "expected a dim name or a positive integer, found %s",
             td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  return td__lex(ps);
}

static int td__stmt_input(td__parser *ps, int is_weight) {
  char b[64], name[TD__NAME_MAX], rows[TD__NAME_MAX] = "1", cols[TD__NAME_MAX];
  if (!td__lex(ps))
    return 0;
  if (ps->tok.kind != T_NAME) {
    td__perr(ps, &ps->tok, "expected a name after '%s', found %s", is_weight ? "weight" : "input",
             td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  td__tok nt = ps->tok;
  td__name(&nt, name);
  if (!td__lex(ps) || !td__expect(ps, ":", "after the name"))
    return 0;
  td_dtype dt;
  char dname[TD__NAME_MAX] = "";
  if (ps->tok.kind == T_NAME)
    td__name(&ps->tok, dname);
  if (!(!strcmp(dname, "f32") || !strcmp(dname, "f16") || !strcmp(dname, "bf16")) ||
      td_dtype_parse(dname, &dt) != TD_OK) {
    td__perr(ps, &ps->tok, "expected a dtype (f32, f16 or bf16), found %s", td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  if (!td__lex(ps) || !td__expect(ps, "[", "before the shape"))
    return 0;
  td__tok rows_tok = ps->tok, cols_tok = ps->tok; /* a 1-D shape [N] is [1, N] */
  int has_rows = 0;
  if (!td__dimtext(ps, cols))
    return 0;
  if (td__is(&ps->tok, ",")) {
    memcpy(rows, cols, sizeof rows);
    has_rows = 1;
    if (!td__lex(ps))
      return 0;
    cols_tok = ps->tok;
    if (!td__dimtext(ps, cols))
      return 0;
  }
  if (!td__expect(ps, "]", "after the shape (2-D at most)"))
    return 0;
  td_layout layout = {TD_LAYOUT_REPLICATED, 0};
  if (td__is(&ps->tok, "replicated")) {
    if (!td__lex(ps))
      return 0;
  } else if (td__is(&ps->tok, "shard")) {
    if (!td__lex(ps) || !td__expect(ps, "(", "after 'shard'"))
      return 0;
    if (ps->tok.kind != T_NUM || !ps->tok.is_int || (ps->tok.num != 0 && ps->tok.num != 1)) {
      td__perr(ps, &ps->tok, "expected the shard dim 0 or 1, found %s", td__tokstr(&ps->tok, b, sizeof b));
      return 0;
    }
    layout = (td_layout){TD_LAYOUT_SHARD, (int)ps->tok.num};
    if (!td__lex(ps) || !td__expect(ps, ")", "after the shard dim"))
      return 0;
  } else if (td__is(&ps->tok, "partial")) {
    layout.kind = TD_LAYOUT_PARTIAL;
    if (!td__lex(ps))
      return 0;
    if (td__is(&ps->tok, "(")) {
      if (!td__lex(ps))
        return 0;
      if (!td__is(&ps->tok, "sum")) {
        td__perr(ps, &ps->tok, "expected 'sum' (the only partial reduction), found %s",
                 td__tokstr(&ps->tok, b, sizeof b));
        return 0;
      }
      if (!td__lex(ps) || !td__expect(ps, ")", "after 'sum'"))
        return 0;
    }
  } else if (ps->tok.kind != T_NL && ps->tok.kind != T_EOF) {
    td__perr(ps, &ps->tok, "expected a layout (replicated, shard(0), shard(1) or partial), found %s",
             td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  if (!td__end_of_stmt(ps))
    return 0;
  ps->p->cur = (td__srcloc){nt.line, nt.col};
  td_status st = td_program_input(ps->p, name, is_weight, dt, rows, cols, layout, NULL);
  if (st != TD_OK && st == TD_ERR_SHAPE) { /* point at the dim the message names */
    char q[TD__NAME_MAX + 8];
    snprintf(q, sizeof q, "dim '%s'", rows);
    int on_rows = has_rows && strstr(td_last_error(), q) != NULL;
    return td__rewrap(ps, on_rows ? &rows_tok : &cols_tok);
  }
  if (st != TD_OK)
    return td__rewrap(ps, &nt);
  return 1;
}

static int td__assign(td__parser *ps, const td__tok *nt, int is_output) {
  char name[TD__NAME_MAX];
  td__name(nt, name);
  for (td_value v = 0; v < ps->p->nvals; v++)
    if (!strcmp(ps->p->vals[v].name, name)) {
      td__perr(ps, nt, "'%s' is already defined", name);
      return 0;
    }
  td_value v;
  if (!td__expr(ps, 0, &v) || !td__end_of_stmt(ps))
    return 0;
  if (ps->p->vals[v].name[0] || ps->p->vals[v].op == TD_OP_INPUT || ps->p->vals[v].op == TD_OP_WEIGHT) {
    /* `y = x`: an alias; copy through scale(1) keeps one name per value. */
    ps->p->cur = (td__srcloc){nt->line, nt->col};
    if (td_program_scale(ps->p, v, 1.0f, &v) != TD_OK)
      return td__rewrap(ps, nt);
  }
  snprintf(ps->p->vals[v].name, TD__NAME_MAX, "%s", name);
  if (is_output)
    ps->p->vals[v].is_output = 1;
  return 1;
}

static int td__stmt(td__parser *ps) {
  char b[64];
  td__tok first = ps->tok;
  if (first.kind == T_NL || first.kind == T_EOF)
    return 1;
  if (first.kind != T_NAME) {
    td__perr(ps, &first, "expected a statement (dim, input, weight, output or NAME = expression), found %s",
             td__tokstr(&first, b, sizeof b));
    return 0;
  }
  if (td__is(&first, "dim"))
    return td__stmt_dim(ps);
  if (td__is(&first, "input") || td__is(&first, "weight"))
    return td__stmt_input(ps, td__is(&first, "weight"));
  if (!td__lex(ps))
    return 0;
  if (td__is(&first, "output")) {
    if (ps->tok.kind != T_NAME) {
      td__perr(ps, &ps->tok, "expected a value name after 'output', found %s", td__tokstr(&ps->tok, b, sizeof b));
      return 0;
    }
    td__tok nt = ps->tok;
    if (!td__lex(ps))
      return 0;
    if (td__is(&ps->tok, "=")) {
      if (!td__lex(ps))
        return 0;
      return td__assign(ps, &nt, 1);
    }
    char name[TD__NAME_MAX];
    td__name(&nt, name);
    if (!td__end_of_stmt(ps))
      return 0;
    for (td_value v = 0; v < ps->p->nvals; v++)
      if (!strcmp(ps->p->vals[v].name, name)) {
        if (td_program_output(ps->p, v) != TD_OK)
          return td__rewrap(ps, &nt);
        return 1;
      }
    char hint[128] = "";
    td__value_hint(ps, name, hint, sizeof hint);
    td__perr(ps, &nt, "unknown value '%s' (%sdeclare it with input/weight or assign it first)", name, hint);
    return 0;
  }
  if (!td__is(&ps->tok, "=")) {
    char word[TD__NAME_MAX], near[64], hint[96] = "";
    td__name(&first, word);
    if (td__suggest(word, "dim,input,weight,output", NULL, near, sizeof near)) /* a misspelt keyword */
      snprintf(hint, sizeof hint, "did you mean %s? ", near);
    td__perr(ps, &ps->tok, "expected '=' after '%.*s' (%sstatements are dim, input, weight, output or "
             "NAME = expression), found %s", (int)first.len, first.s, hint, td__tokstr(&ps->tok, b, sizeof b));
    return 0;
  }
  if (!td__lex(ps))
    return 0;
  return td__assign(ps, &first, 0);
}

/* What the whole file must hold, with a location even when it is empty:
 * an output (at the end of file), and values of a size the compiler can
 * plan (at the value). */
static int td__check_whole(td__parser *ps) {
  const td_program *p = ps->p;
  int outputs = 0;
  for (td_value v = 0; v < p->nvals; v++) {
    outputs += p->vals[v].is_output != 0;
    int64_t R, C;
    td__val_shape(p, v, &R, &C);
    if ((double)R * (double)C > TD__VALUE_MAX_ELEMS) {
      td__tok at = {.line = p->vals[v].loc.line, .col = p->vals[v].loc.col};
      char lab[40];
      td__perr_shape(ps, &at, "value %s is [%lld, %lld] = %.3g elements: too large, at most 2^48 (%.3g) per value",
               td__val_label(p, v, lab, sizeof lab), (long long)R, (long long)C, (double)R * (double)C,
               TD__VALUE_MAX_ELEMS);
      return 0;
    }
  }
  if (p->nvals == 0) {
    td__perr_shape(ps, &ps->tok, "empty program (only blank lines and comments): a program needs an input, e.g. "
             "`input x : f32[M, K] shard(0)`, and `output NAME`");
    return 0;
  }
  if (!outputs) {
    td__perr_shape(ps, &ps->tok, "program has no output: mark one with `output NAME` (or `output NAME = expression`)");
    return 0;
  }
  return 1;
}

td_status td_program_parse(const char *text, size_t length, const char *filename, td_program **out) {
  if (!text || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_program_parse: text or out is NULL");
  td__parser ps = {0};
  ps.text = ps.pos = text;
  ps.end = text + length;
  ps.line = ps.col = 1;
  ps.file = filename ? filename : "<text>";
  ps.st = TD_OK;
  TD_CHECK(td_program_create(&ps.p));
  snprintf(ps.p->file, sizeof ps.p->file, "%s", ps.file);
  int ok = td__lex(&ps);
  while (ok && ps.tok.kind != T_EOF) {
    ok = td__stmt(&ps);
    if (ok && ps.tok.kind == T_NL)
      ok = td__lex(&ps);
  }
  if (ok)
    ok = td__check_whole(&ps);
  td_status st = ok ? td_program_check(ps.p) : (ps.st != TD_OK ? ps.st : TD_ERR_PARSE);
  if (st != TD_OK) {
    td_program_destroy(ps.p);
    return st;
  }
  ps.p->cur = (td__srcloc){0, 0};
  *out = ps.p;
  return TD_OK;
}

td_status td_program_load(const char *path, td_program **out) {
  if (!path || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_program_load: path or out is NULL");
  FILE *f = fopen(path, "rb");
  if (!f)
    return td__error(TD_ERR_NOT_FOUND, "cannot open program '%s': %s", path, strerror(errno));
  /* fopen succeeds on a directory and reading it gives nothing: say what it
   * is rather than "empty program". Pipes (process substitution) and
   * character devices such as /dev/stdin stay readable. */
  const char *kind = td__fd_not_a_file(fileno(f));
  if (kind) {
    fclose(f);
    return td__error(TD_ERR_INVALID_ARG, "%s is %s, expected a file (a .td program)", path, kind);
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      return td__error(TD_ERR_NO_MEMORY, "reading '%s': out of memory", path);
    }
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap)
      break;
    if (cap >= ((size_t)64 << 20)) {
      free(buf);
      fclose(f);
      return td__error(TD_ERR_PARSE, "%s: file is larger than 64 MiB", path);
    }
    cap *= 2;
    char *n = realloc(buf, cap);
    if (!n)
      free(buf);
    buf = n;
  }
  fclose(f);
  td_status st = td_program_parse(buf, len, path, out);
  free(buf);
  return st;
}
