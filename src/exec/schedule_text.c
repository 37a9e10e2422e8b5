/* SPDX-License-Identifier: Apache-2.0
 * The text form of a plan (executor layer): written by td_plan_dump, read
 * by td_plan_parse, used by `tdist explain`, tests and bug reports. One item
 * a line, whitespace-separated tokens, '#' starts a comment:
 *
 *   tdist-plan 1
 *   ranks 2
 *   buffer 0 "x" symm f32 64 32
 *   signal 0 "x ready"
 *   task 0 0 copy comm op 0 alpha 0x0p+0 a 0 -1 0 0 32 32 b -1 -1 0 0 0 0
 *        c 0 1 0 0 32 32 deps 0 waits 0 raises 1 0 1 1 label "put x r1"   (one line)
 *
 * A view is `buf peer row0 col0 rows cols`; a wait `signal cmp value`
 * (cmp: ge, eq); a raise `signal peer value`. Floats are written in hex so
 * a dump parses back to the identical plan. Strings are double-quoted with
 * \" \\ and \xHH escapes. Buffers, signals and each rank's tasks appear in
 * index order. The parsed plan is not validated. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/schedule_internal.h"

static void td__put_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(out, "\\%c", ch);
    else if (ch < 0x20 || ch >= 0x7f)
      fprintf(out, "\\x%02x", ch);
    else
      fputc(ch, out);
  }
  fputc('"', out);
}

static void td__put_view(FILE *out, const char *name, const td_view *v) {
  fprintf(out, " %s %d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64, name, v->buf, v->peer, v->row0, v->col0,
          v->rows, v->cols);
}

td_status td_plan_dump(const td_plan *plan, FILE *out) {
  if (!plan || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_dump: plan and out must not be NULL");
  fprintf(out, "tdist-plan %d\nranks %d\n", TD_SCHEDULE_VERSION, plan->nranks);
  for (int32_t b = 0; b < plan->nbufs; b++) {
    const td_buffer_desc *d = &plan->bufs[b];
    fprintf(out, "buffer %d ", b);
    td__put_string(out, d->name);
    fprintf(out, " %s %s %" PRId64 " %" PRId64 "\n", td__buffer_kind_name(d->kind), td_dtype_name(d->dtype),
            d->rows, d->cols);
  }
  for (uint32_t s = 0; s < plan->nsignals; s++) {
    fprintf(out, "signal %u ", s);
    td__put_string(out, plan->signal_names[s]);
    fputc('\n', out);
  }
  for (int r = 0; r < plan->nranks; r++) {
    const td_schedule *s = &plan->scheds[r];
    for (uint32_t i = 0; i < s->ntasks; i++) {
      const td_task *t = &s->tasks[i];
      fprintf(out, "task %d %u %s %s op %u alpha %a", r, i, td__task_kind_name(t->kind),
              td__worker_class_name(t->worker), t->op, (double)t->alpha);
      td__put_view(out, "a", &t->a);
      td__put_view(out, "b", &t->b);
      td__put_view(out, "c", &t->c);
      fprintf(out, " deps %u", t->dep_count);
      for (uint32_t d = 0; d < t->dep_count; d++)
        fprintf(out, " %u", s->deps[t->dep_first + d]);
      fprintf(out, " waits %u", t->wait_count);
      for (uint32_t w = 0; w < t->wait_count; w++) {
        const td_wait *wt = &s->waits[t->wait_first + w];
        fprintf(out, " %u %s %" PRIu64, wt->signal, td_cmp_name(wt->cmp), wt->value);
      }
      fprintf(out, " raises %u", t->raise_count);
      for (uint32_t k = 0; k < t->raise_count; k++) {
        const td_raise *rs = &s->raises[t->raise_first + k];
        fprintf(out, " %u %d %" PRIu64, rs->signal, rs->peer, rs->value);
      }
      fprintf(out, " label ");
      td__put_string(out, t->label);
      fputc('\n', out);
    }
  }
  if (ferror(out))
    return td__error(TD_ERR_SYSTEM, "td_plan_dump: writing the plan failed");
  return TD_OK;
}

/* ---- parsing ---- */

typedef struct td__lexer {
  const char *p;
  int line, col;          /* of p */
  int tline, tcol;        /* of the last token */
  char tok[256];
  int quoted;             /* last token was a string */
} td__lexer;

static void td__advance(td__lexer *lx) {
  if (*lx->p == '\n')
    lx->line++, lx->col = 1;
  else
    lx->col++;
  lx->p++;
}

/* Skips blanks and comments; stops at a newline when `stop_at_newline`. */
static void td__skip(td__lexer *lx, int stop_at_newline) {
  for (;;) {
    char ch = *lx->p;
    if (ch == '#') {
      while (*lx->p && *lx->p != '\n')
        td__advance(lx);
    } else if (ch == ' ' || ch == '\t' || ch == '\r' || (ch == '\n' && !stop_at_newline)) {
      td__advance(lx);
    } else {
      return;
    }
  }
}

static td_status td__perr(const td__lexer *lx, const char *what) {
  return td__error(TD_ERR_PARSE, "plan text line %d:%d: expected %s, got %s%s%s", lx->tline, lx->tcol, what,
                   lx->tok[0] || lx->quoted ? "'" : "", lx->tok[0] || lx->quoted ? lx->tok : "end of line",
                   lx->tok[0] || lx->quoted ? "'" : "");
}

/* Reads the next token of the current line into lx->tok (empty at end of line). */
static td_status td__next(td__lexer *lx) {
  td__skip(lx, 1);
  lx->tline = lx->line, lx->tcol = lx->col;
  lx->quoted = 0;
  size_t n = 0;
  if (*lx->p == '"') {
    lx->quoted = 1;
    td__advance(lx);
    while (*lx->p != '"') {
      if (!*lx->p || *lx->p == '\n') {
        lx->tok[n] = 0;
        return td__error(TD_ERR_PARSE, "plan text line %d:%d: string is not closed", lx->tline, lx->tcol);
      }
      int ch = (unsigned char)*lx->p;
      if (ch == '\\') {
        td__advance(lx);
        if (*lx->p == 'x' && lx->p[1] && lx->p[2]) {
          char hex[3] = {lx->p[1], lx->p[2], 0};
          /* exactly two hex digits: strtol alone would take "-1" or "+1" */
          ch = isxdigit((unsigned char)hex[0]) && isxdigit((unsigned char)hex[1]) ? (int)strtol(hex, NULL, 16) : 0;
          if (ch == 0)
            return td__error(TD_ERR_PARSE, "plan text line %d:%d: bad escape \\x%s; allowed \\x01 to \\xff (two "
                             "hex digits)", lx->line, lx->col, hex);
          td__advance(lx), td__advance(lx);
        } else if (*lx->p == '"' || *lx->p == '\\') {
          ch = (unsigned char)*lx->p;
        } else {
          return td__error(TD_ERR_PARSE, "plan text line %d:%d: unknown escape; allowed \\\" \\\\ \\xHH",
                           lx->line, lx->col);
        }
      }
      if (n + 1 >= sizeof lx->tok)
        return td__error(TD_ERR_PARSE, "plan text line %d:%d: string longer than %zu characters", lx->tline,
                         lx->tcol, sizeof lx->tok - 1);
      lx->tok[n++] = (char)ch;
      td__advance(lx);
    }
    td__advance(lx);
  } else {
    while (*lx->p && *lx->p != ' ' && *lx->p != '\t' && *lx->p != '\r' && *lx->p != '\n' && *lx->p != '#') {
      if (n + 1 >= sizeof lx->tok) { /* never truncate silently: "000...07" would read as 0 */
        lx->tok[n] = 0;
        return td__error(TD_ERR_PARSE, "plan text line %d:%d: token longer than %zu characters", lx->tline,
                         lx->tcol, sizeof lx->tok - 1);
      }
      lx->tok[n++] = *lx->p;
      td__advance(lx);
    }
  }
  lx->tok[n] = 0;
  return TD_OK;
}

static td_status td__expect_word(td__lexer *lx, const char *word) {
  TD_CHECK(td__next(lx));
  if (lx->quoted || strcmp(lx->tok, word) != 0) {
    char what[64];
    snprintf(what, sizeof what, "'%s'", word);
    return td__perr(lx, what);
  }
  return TD_OK;
}

/* Whether tok is a plain decimal: digits, with a leading '-' only when
 * `sign` (strtoll alone would also take "+1" and leading blanks). */
static int td__decimal(const char *tok, int sign) {
  if (sign && *tok == '-')
    tok++;
  if (!*tok)
    return 0;
  for (; *tok; tok++)
    if (!isdigit((unsigned char)*tok))
      return 0;
  return 1;
}

static td_status td__int(td__lexer *lx, int64_t lo, int64_t hi, int64_t *out) {
  TD_CHECK(td__next(lx));
  errno = 0;
  char *end;
  long long v = strtoll(lx->tok, &end, 10);
  if (lx->quoted || !td__decimal(lx->tok, 1) || *end || errno || v < lo || v > hi) {
    char what[96];
    snprintf(what, sizeof what, "an integer from %" PRId64 " to %" PRId64, lo, hi);
    return td__perr(lx, what);
  }
  *out = v;
  return TD_OK;
}

static td_status td__u64(td__lexer *lx, uint64_t *out) {
  TD_CHECK(td__next(lx));
  errno = 0;
  char *end;
  unsigned long long v = strtoull(lx->tok, &end, 10);
  if (lx->quoted || !td__decimal(lx->tok, 0) || *end || errno)
    return td__perr(lx, "an unsigned 64-bit integer");
  *out = v;
  return TD_OK;
}

static td_status td__u32(td__lexer *lx, uint32_t *out) {
  int64_t v;
  TD_CHECK(td__int(lx, 0, UINT32_MAX, &v));
  *out = (uint32_t)v;
  return TD_OK;
}

/* Reads a name from `names` (count entries) and writes its index. */
static td_status td__enum(td__lexer *lx, const char *(*name_of)(int), int count, const char *what, int *out) {
  TD_CHECK(td__next(lx));
  for (int i = 0; i < count && !lx->quoted; i++)
    if (strcmp(lx->tok, name_of(i)) == 0) {
      *out = i;
      return TD_OK;
    }
  return td__perr(lx, what);
}

static const char *td__kind_i(int i) { return td__task_kind_name((td_task_kind)i); }
static const char *td__class_i(int i) { return td__worker_class_name((td_worker_class)i); }
static const char *td__bufkind_i(int i) { return td__buffer_kind_name((td_buffer_kind)i); }
static const char *td__dtype_i(int i) { return td_dtype_name((td_dtype)i); }
static const char *td__cmp_i(int i) { return td_cmp_name((td_cmp)i); }

static td_status td__string(td__lexer *lx, size_t max, char *out) {
  TD_CHECK(td__next(lx));
  if (!lx->quoted)
    return td__perr(lx, "a double-quoted string");
  if (strlen(lx->tok) >= max)
    return td__error(TD_ERR_PARSE, "plan text line %d:%d: string '%s' is longer than %zu characters", lx->tline,
                     lx->tcol, lx->tok, max - 1);
  strcpy(out, lx->tok);
  return TD_OK;
}

static td_status td__view(td__lexer *lx, const char *name, td_view *v) {
  int64_t x[6];
  TD_CHECK(td__expect_word(lx, name));
  TD_CHECK(td__int(lx, -1, INT32_MAX, &x[0]));
  TD_CHECK(td__int(lx, -1, INT32_MAX, &x[1]));
  for (int i = 2; i < 6; i++)
    TD_CHECK(td__int(lx, 0, INT64_MAX, &x[i]));
  v->buf = (int32_t)x[0], v->peer = (int32_t)x[1];
  v->row0 = x[2], v->col0 = x[3], v->rows = x[4], v->cols = x[5];
  return TD_OK;
}

/* Scratch arrays for one task line. */
typedef struct td__task_lists {
  uint32_t *deps;
  td_wait *waits;
  td_raise *raises;
} td__task_lists;

static td_status td__count(td__lexer *lx, const char *word, uint32_t *n) {
  TD_CHECK(td__expect_word(lx, word));
  int64_t v;
  TD_CHECK(td__int(lx, 0, 1 << 20, &v));
  *n = (uint32_t)v;
  return TD_OK;
}

static td_status td__task_line(td__lexer *lx, td_plan *plan, td__task_lists *l) {
  int64_t rank, idx;
  td_task t;
  memset(&t, 0, sizeof t);
  int kind = 0, cls = 0;
  TD_CHECK(td__int(lx, 0, plan->nranks - 1, &rank));
  TD_CHECK(td__int(lx, 0, UINT32_MAX, &idx));
  if ((uint32_t)idx != plan->scheds[rank].ntasks)
    return td__error(TD_ERR_PARSE, "plan text line %d:%d: task index %" PRId64 " of rank %" PRId64
                     " out of order; expected %u", lx->tline, lx->tcol, idx, rank, plan->scheds[rank].ntasks);
  TD_CHECK(td__enum(lx, td__kind_i, TD_TASK_KIND_COUNT, "a task kind (nop, gemm, copy, reduce, ewise, rmsnorm)",
                    &kind));
  TD_CHECK(td__enum(lx, td__class_i, TD_WORKER_CLASS_COUNT, "a worker class (compute, comm, copy_engine)", &cls));
  t.kind = (td_task_kind)kind, t.worker = (td_worker_class)cls;
  TD_CHECK(td__expect_word(lx, "op"));
  TD_CHECK(td__u32(lx, &t.op));
  TD_CHECK(td__expect_word(lx, "alpha"));
  TD_CHECK(td__next(lx));
  char *end;
  t.alpha = strtof(lx->tok, &end);
  if (lx->quoted || !lx->tok[0] || *end)
    return td__perr(lx, "a floating-point number");
  TD_CHECK(td__view(lx, "a", &t.a));
  TD_CHECK(td__view(lx, "b", &t.b));
  TD_CHECK(td__view(lx, "c", &t.c));
  uint32_t nd, nw, nr;
  TD_CHECK(td__count(lx, "deps", &nd));
  uint32_t *deps = realloc(l->deps, (nd + 1) * sizeof *deps);
  if (!deps)
    return td__error(TD_ERR_NO_MEMORY, "td_plan_parse: out of memory");
  l->deps = deps;
  for (uint32_t d = 0; d < nd; d++)
    TD_CHECK(td__u32(lx, &deps[d]));
  TD_CHECK(td__count(lx, "waits", &nw));
  td_wait *waits = realloc(l->waits, (nw + 1) * sizeof *waits);
  if (!waits)
    return td__error(TD_ERR_NO_MEMORY, "td_plan_parse: out of memory");
  l->waits = waits;
  for (uint32_t w = 0; w < nw; w++) {
    int cmp = 0;
    TD_CHECK(td__u32(lx, &waits[w].signal));
    TD_CHECK(td__enum(lx, td__cmp_i, 6, "a comparison (eq, ne, gt, ge, lt, le)", &cmp));
    waits[w].cmp = (td_cmp)cmp;
    TD_CHECK(td__u64(lx, &waits[w].value));
  }
  TD_CHECK(td__count(lx, "raises", &nr));
  td_raise *raises = realloc(l->raises, (nr + 1) * sizeof *raises);
  if (!raises)
    return td__error(TD_ERR_NO_MEMORY, "td_plan_parse: out of memory");
  l->raises = raises;
  for (uint32_t k = 0; k < nr; k++) {
    int64_t peer;
    TD_CHECK(td__u32(lx, &raises[k].signal));
    TD_CHECK(td__int(lx, -1, INT32_MAX, &peer));
    raises[k].peer = (int32_t)peer;
    TD_CHECK(td__u64(lx, &raises[k].value));
  }
  TD_CHECK(td__expect_word(lx, "label"));
  TD_CHECK(td__string(lx, sizeof t.label, t.label));
  uint32_t index;
  return td_plan_add_task(plan, (int)rank, &t, deps, nd, waits, nw, raises, nr, &index);
}

static td_status td__parse_lines(td__lexer *lx, td_plan **planp, td__task_lists *l) {
  int64_t v;
  TD_CHECK(td__expect_word(lx, "tdist-plan"));
  TD_CHECK(td__next(lx));
  if (lx->quoted || !td__decimal(lx->tok, 0) || strtoll(lx->tok, NULL, 10) != TD_SCHEDULE_VERSION)
    return td__error(TD_ERR_PARSE, "plan text line %d:%d: version '%s' is not supported; this build reads "
                     "version %d", lx->tline, lx->tcol, lx->tok, TD_SCHEDULE_VERSION);
  td__skip(lx, 0);
  TD_CHECK(td__expect_word(lx, "ranks"));
  TD_CHECK(td__int(lx, 1, 4096, &v));
  TD_CHECK(td_plan_create((int)v, planp));
  td_plan *plan = *planp;
  for (;;) {
    td__skip(lx, 1);
    if (*lx->p && *lx->p != '\n') { /* something after the last item of the line */
      TD_CHECK(td__next(lx));
      return td__perr(lx, "end of line");
    }
    td__skip(lx, 0);
    if (!*lx->p)
      return TD_OK;
    TD_CHECK(td__next(lx));
    if (!lx->quoted && strcmp(lx->tok, "buffer") == 0) {
      td_buffer_desc d;
      memset(&d, 0, sizeof d);
      int kind = 0, dtype = 0;
      int32_t index;
      TD_CHECK(td__int(lx, 0, INT32_MAX, &v));
      if (v != plan->nbufs)
        return td__error(TD_ERR_PARSE, "plan text line %d:%d: buffer %" PRId64 " out of order; expected %d",
                         lx->tline, lx->tcol, v, plan->nbufs);
      TD_CHECK(td__string(lx, sizeof d.name, d.name));
      TD_CHECK(td__enum(lx, td__bufkind_i, TD_BUF_KIND_COUNT, "a buffer kind (input, weight, output, symm, "
                        "local)", &kind));
      TD_CHECK(td__enum(lx, td__dtype_i, TD_DTYPE_COUNT, "a dtype (f32, f16, bf16, i32, f64, i64, u8)", &dtype));
      d.kind = (td_buffer_kind)kind, d.dtype = (td_dtype)dtype;
      TD_CHECK(td__int(lx, 0, INT64_MAX, &d.rows));
      TD_CHECK(td__int(lx, 0, INT64_MAX, &d.cols));
      TD_CHECK(td_plan_add_buffer(plan, &d, &index));
    } else if (!lx->quoted && strcmp(lx->tok, "signal") == 0) {
      char name[TD__SIGNAL_NAME_MAX];
      uint32_t index;
      TD_CHECK(td__int(lx, 0, UINT32_MAX, &v));
      if (v != plan->nsignals)
        return td__error(TD_ERR_PARSE, "plan text line %d:%d: signal %" PRId64 " out of order; expected %u",
                         lx->tline, lx->tcol, v, plan->nsignals);
      TD_CHECK(td__string(lx, sizeof name, name));
      TD_CHECK(td_plan_add_signal(plan, name, &index));
    } else if (!lx->quoted && strcmp(lx->tok, "task") == 0) {
      TD_CHECK(td__task_line(lx, plan, l));
    } else {
      return td__perr(lx, "'buffer', 'signal' or 'task'");
    }
  }
}

td_status td_plan_parse(const char *text, td_plan **out) {
  if (!text || !out)
    return td__error(TD_ERR_INVALID_ARG, "td_plan_parse: text and out must not be NULL");
  td__lexer lx = {.p = text, .line = 1, .col = 1, .tline = 1, .tcol = 1};
  td__skip(&lx, 0);
  td__task_lists l = {NULL, NULL, NULL};
  td_plan *plan = NULL;
  td_status st = td__parse_lines(&lx, &plan, &l);
  free(l.deps), free(l.waits), free(l.raises);
  if (st != TD_OK) {
    if (st != TD_ERR_PARSE && st != TD_ERR_NO_MEMORY)
      td__error_prefix("plan text line %d:%d: ", lx.tline, lx.tcol);
    td_plan_destroy(plan);
    return st == TD_ERR_NO_MEMORY ? st : TD_ERR_PARSE;
  }
  *out = plan;
  return TD_OK;
}
