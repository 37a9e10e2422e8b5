/* SPDX-License-Identifier: Apache-2.0
 * Compiler front end: the program builder. Declares dims, inputs and weights,
 * adds ops, and infers each op's layout, dtype and (symbolic) shape as it is
 * added; numeric shape checks run in td_program_check once dims are bound.
 * Errors name the op and, for programs read from `.td`, file:line:col. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler.h"
#include "core/error.h"

static const char *const td__op_names[TD_OP_KIND_COUNT] = {
    "input", "weight", "matmul", "all_gather", "reduce_scatter", "all_reduce", "all_to_all",
    "add",   "mul",    "gelu",   "silu",       "scale",          "rmsnorm"};

const char *td_op_name(td_op_kind op) {
  return (unsigned)op < TD_OP_KIND_COUNT ? td__op_names[op] : "invalid";
}

const char *td_layout_format(td_layout l, char *buf, size_t size) {
  if (l.kind == TD_LAYOUT_SHARD)
    snprintf(buf, size, "shard(%d)", l.dim);
  else
    snprintf(buf, size, "%s", l.kind == TD_LAYOUT_PARTIAL ? "partial(sum)" : "replicated");
  return buf;
}

td_status td_program_create(td_program **out) {
  if (!out)
    return td__error(TD_ERR_INVALID_ARG, "td_program_create: out is NULL");
  td_program *p = calloc(1, sizeof *p);
  if (!p)
    return td__error(TD_ERR_NO_MEMORY, "td_program_create: out of memory");
  *out = p;
  return TD_OK;
}

void td_program_destroy(td_program *p) {
  if (!p)
    return;
  free(p->vals);
  free(p->dims);
  free(p);
}

td_status td__program_copy(const td_program *src, td_program **out) {
  td_program *p = calloc(1, sizeof *p);
  if (!p)
    return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  *p = *src;
  p->vals = malloc(sizeof *p->vals * (size_t)(src->nvals ? src->nvals : 1));
  p->dims = malloc(sizeof *p->dims * (size_t)(src->ndims ? src->ndims : 1));
  if (!p->vals || !p->dims) {
    td_program_destroy(p);
    return td__error(TD_ERR_NO_MEMORY, "compile: out of memory");
  }
  if (src->nvals)
    memcpy(p->vals, src->vals, sizeof *p->vals * (size_t)src->nvals);
  if (src->ndims)
    memcpy(p->dims, src->dims, sizeof *p->dims * (size_t)src->ndims);
  p->cap = src->nvals;
  p->dimcap = src->ndims;
  *out = p;
  return TD_OK;
}

static int td__valid_name(const char *s) {
  if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_') || strlen(s) >= TD__NAME_MAX)
    return 0;
  for (const char *c = s; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_')
      return 0;
  return 1;
}

static int32_t td__find_dim(const td_program *p, const char *name) {
  for (int32_t i = 0; i < p->ndims; i++)
    if (!strcmp(p->dims[i].name, name))
      return i;
  return -1;
}

static int32_t td__find_val(const td_program *p, const char *name) {
  for (int32_t i = 0; i < p->nvals; i++)
    if (!strcmp(p->vals[i].name, name))
      return i;
  return -1;
}

td_status td_program_dim(td_program *p, const char *name, int64_t value) {
  if (!p || !td__valid_name(name))
    return td__error(TD_ERR_INVALID_ARG, "dim: invalid name '%s' (a letter or '_', then letters, "
                     "digits or '_', at most %d chars)", name ? name : "(null)", TD__NAME_MAX - 1);
  if (value < 1)
    return td__error(TD_ERR_INVALID_ARG, "dim %s: value %lld must be >= 1", name, (long long)value);
  if (td__find_dim(p, name) >= 0)
    return td__error(TD_ERR_INVALID_ARG, "dim %s is declared twice", name);
  if (p->ndims == p->dimcap) {
    int32_t cap = p->dimcap ? p->dimcap * 2 : 8;
    td__dim *d = realloc(p->dims, sizeof *d * (size_t)cap);
    if (!d)
      return td__error(TD_ERR_NO_MEMORY, "dim: out of memory");
    p->dims = d;
    p->dimcap = cap;
  }
  snprintf(p->dims[p->ndims].name, TD__NAME_MAX, "%s", name);
  p->dims[p->ndims++].value = value;
  return TD_OK;
}

td_status td_program_set_dim(td_program *p, const char *name, int64_t value) {
  if (!p || !name)
    return td__error(TD_ERR_INVALID_ARG, "set_dim: program or name is NULL");
  int32_t i = td__find_dim(p, name);
  if (i < 0) {
    char list[256] = "";
    for (int32_t k = 0; k < p->ndims; k++) {
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "", p->dims[k].name);
    }
    return td__error(TD_ERR_NOT_FOUND, "dim '%s' is not declared by the program (declared: %s)",
                     name, p->ndims ? list : "none");
  }
  if (value < 1)
    return td__error(TD_ERR_INVALID_ARG, "dim %s=%lld: must be >= 1", name, (long long)value);
  p->dims[i].value = value;
  return TD_OK;
}

td_status td_program_set_dims(td_program *p, const char *text) {
  if (!p || !text)
    return td__error(TD_ERR_INVALID_ARG, "set_dims: program or text is NULL");
  /* Two passes: check every item first, so a bad item leaves all dims unchanged. */
  for (int apply = 0; apply < 2; apply++) {
    const char *s = text;
    while (*s) {
      const char *end = strchr(s, ',');
      size_t len = end ? (size_t)(end - s) : strlen(s);
      char item[96];
      if (len == 0 || len >= sizeof item)
        return td__error(TD_ERR_INVALID_ARG, "--dims '%s': empty or overlong item (expected NAME=VALUE,...)", text);
      memcpy(item, s, len);
      item[len] = 0;
      char *eq = strchr(item, '=');
      if (!eq)
        return td__error(TD_ERR_INVALID_ARG, "--dims item '%s' has no '=' (expected NAME=VALUE)", item);
      if (eq == item)
        return td__error(TD_ERR_INVALID_ARG, "--dims item '%s' has no dim name before '=' (expected NAME=VALUE)",
                         item);
      *eq = 0;
      char *num = eq + 1, *stop;
      errno = 0;
      long long v = strtoll(num, &stop, 10);
      /* the same limit, in the same words, as a `dim` line in a .td file (parse.c) */
      if (*num && !*stop && ((errno == ERANGE && v > 0) || v > 1000000000000000LL))
        return td__error(TD_ERR_INVALID_ARG, "--dims %s=%s: too large: at most 1000000000000000 (1e15)", item, num);
      if (!*num || *stop || errno)
        return td__error(TD_ERR_INVALID_ARG, "--dims %s=%s: value is not an integer", item, num);
      if (apply) {
        TD_CHECK(td_program_set_dim(p, item, v));
      } else {
        int32_t i = td__find_dim(p, item);
        if (i < 0 || v < 1) /* let set_dim word the error */
          return td_program_set_dim(p, item, v);
      }
      s += len;
      if (*s == ',')
        s++;
    }
  }
  return TD_OK;
}

int64_t td__dim_value(const td_program *p, td__dimref d) {
  return d.dim >= 0 ? p->dims[d.dim].value : d.value;
}

void td__val_shape(const td_program *p, td_value v, int64_t *rows, int64_t *cols) {
  *rows = td__dim_value(p, p->vals[v].shape[0]);
  *cols = td__dim_value(p, p->vals[v].shape[1]);
}

const char *td__val_where(const td_program *p, td_value v, char *buf, size_t size) {
  buf[0] = 0;
  if (v >= 0 && v < p->nvals && p->vals[v].loc.line > 0)
    snprintf(buf, size, "%s:%d:%d: ", p->file[0] ? p->file : "<text>", p->vals[v].loc.line,
             p->vals[v].loc.col);
  return buf;
}

/* "name" or "#3" */
const char *td__val_label(const td_program *p, td_value v, char *buf, size_t size) {
  if (p->vals[v].name[0])
    snprintf(buf, size, "%s", p->vals[v].name);
  else
    snprintf(buf, size, "%%%d", (int)v);
  return buf;
}

static td_status td__check_value(const td_program *p, td_value v, const char *what) {
  if (!p)
    return td__error(TD_ERR_INVALID_ARG, "%s: program is NULL", what);
  if (v < 0 || v >= p->nvals)
    return td__error(TD_ERR_INVALID_ARG, "%s: value %d does not exist (program has %d values)",
                     what, (int)v, (int)p->nvals);
  return TD_OK;
}

static td_status td__push(td_program *p, td__val *val, td_value *out) {
  if (p->nvals == p->cap) {
    int32_t cap = p->cap ? p->cap * 2 : 16;
    td__val *n = realloc(p->vals, sizeof *n * (size_t)cap);
    if (!n)
      return td__error(TD_ERR_NO_MEMORY, "program: out of memory");
    p->vals = n;
    p->cap = cap;
  }
  val->loc = p->cur;
  p->vals[p->nvals] = *val;
  if (out)
    *out = p->nvals;
  p->nvals++;
  return TD_OK;
}

/* `kind` is "input" or "weight": the declaration the error names. */
static td_status td__parse_dimref(td_program *p, const char *s, const char *kind, const char *name,
                                  td__dimref *d) {
  if (!s || !*s)
    return td__error(TD_ERR_SHAPE, "%s %s: empty dim", kind, name);
  if (isdigit((unsigned char)s[0])) {
    char *stop;
    errno = 0;
    long long v = strtoll(s, &stop, 10);
    if (*stop || errno || v < 1)
      return td__error(TD_ERR_SHAPE, "%s %s: dim '%s' must be a number >= 1 or a dim name", kind, name, s);
    d->dim = -1;
    d->value = v;
    return TD_OK;
  }
  int32_t i = td__find_dim(p, s);
  if (i < 0)
    return td__error(TD_ERR_SHAPE, "%s %s: dim '%s' is not declared (declare it with `dim %s = VALUE`)",
                     kind, name, s, s);
  d->dim = i;
  d->value = 0;
  return TD_OK;
}

td_status td_program_input(td_program *p, const char *name, int is_weight, td_dtype dtype,
                           const char *rows, const char *cols, td_layout layout, td_value *out) {
  const char *kind = is_weight ? "weight" : "input"; /* every message names the declaration it is about */
  if (!p || !td__valid_name(name))
    return td__error(TD_ERR_INVALID_ARG, "%s: invalid name '%s'", kind, name ? name : "(null)");
  if (td__find_val(p, name) >= 0)
    return td__error(TD_ERR_INVALID_ARG, "%s %s: the name is already used", kind, name);
  if (dtype != TD_F32 && dtype != TD_F16 && dtype != TD_BF16)
    return td__error(TD_ERR_INVALID_ARG, "%s %s: dtype %s is not allowed (f32, f16, bf16)", kind, name,
                     td_dtype_name(dtype));
  if (layout.kind == TD_LAYOUT_SHARD && layout.dim != 0 && layout.dim != 1)
    return td__error(TD_ERR_SHAPE, "%s %s: shard(%d): a 2-D tensor shards along dim 0 or 1", kind, name,
                     layout.dim);
  if ((unsigned)layout.kind > TD_LAYOUT_PARTIAL)
    return td__error(TD_ERR_INVALID_ARG, "%s %s: invalid layout kind %d", kind, name, (int)layout.kind);
  td__val v = {0};
  snprintf(v.name, sizeof v.name, "%s", name);
  v.op = is_weight ? TD_OP_WEIGHT : TD_OP_INPUT;
  v.dtype = dtype;
  v.layout = layout;
  v.in[0] = v.in[1] = -1;
  TD_CHECK(td__parse_dimref(p, rows, kind, name, &v.shape[0]));
  TD_CHECK(td__parse_dimref(p, cols, kind, name, &v.shape[1]));
  return td__push(p, &v, out);
}

/* Error about op `op` at the parser's current location. */
static td_status td__op_error(const td_program *p, td_op_kind op, const char *fmt, const char *a1,
                              const char *a2) {
  char where[160] = "", msg[320];
  if (p->cur.line > 0)
    snprintf(where, sizeof where, "%s:%d:%d: ", p->file[0] ? p->file : "<text>", p->cur.line,
             p->cur.col);
  snprintf(msg, sizeof msg, fmt, a1, a2);
  return td__error(TD_ERR_SHAPE, "%s%s: %s", where, td_op_name(op), msg);
}

static td_layout td__logical(td_layout l, int trans) {
  if (l.kind == TD_LAYOUT_SHARD && trans)
    l.dim = 1 - l.dim;
  return l;
}

#define TD__IS(l, k, d) ((l).kind == (k) && ((k) != TD_LAYOUT_SHARD || (l).dim == (d)))

td_status td_program_matmul(td_program *p, td_value a, td_value b, unsigned flags, td_value *out) {
  TD_CHECK(td__check_value(p, a, "matmul"));
  TD_CHECK(td__check_value(p, b, "matmul"));
  const td__val *A = &p->vals[a], *B = &p->vals[b];
  if (A->dtype != B->dtype)
    return td__op_error(p, TD_OP_MATMUL, "operands have different dtypes (%s and %s)",
                        td_dtype_name(A->dtype), td_dtype_name(B->dtype));
  td_layout la = td__logical(A->layout, flags & TD_MATMUL_TRANSPOSE_A);
  td_layout lb = td__logical(B->layout, flags & TD_MATMUL_TRANSPOSE_B);
  const td_layout_kind R = TD_LAYOUT_REPLICATED, S = TD_LAYOUT_SHARD, P = TD_LAYOUT_PARTIAL;
  td_layout lo;
  if (TD__IS(la, R, 0) && TD__IS(lb, R, 0))
    lo = (td_layout){R, 0};
  else if (TD__IS(la, S, 0) && TD__IS(lb, R, 0))
    lo = (td_layout){S, 0};
  else if (TD__IS(la, R, 0) && TD__IS(lb, S, 1))
    lo = (td_layout){S, 1};
  else if ((TD__IS(la, S, 1) && TD__IS(lb, S, 0)) || (TD__IS(la, R, 0) && TD__IS(lb, S, 0)) ||
           (TD__IS(la, S, 1) && TD__IS(lb, R, 0)) || (TD__IS(la, P, 0) && TD__IS(lb, R, 0)) ||
           (TD__IS(la, R, 0) && TD__IS(lb, P, 0)))
    lo = (td_layout){P, 0};
  else {
    char l1[24], l2[24];
    return td__op_error(p, TD_OP_MATMUL,
                        "cannot multiply a %s by a %s operand (after transposes); allowed: "
                        "replicated or shard(0) times replicated, replicated times shard(1), a "
                        "contraction split as shard(1) times shard(0), or partial times replicated "
                        "(all_gather or reduce an operand first)",
                        td_layout_format(la, l1, sizeof l1), td_layout_format(lb, l2, sizeof l2));
  }
  td__val v = {0};
  v.op = TD_OP_MATMUL;
  v.dtype = A->dtype;
  v.layout = lo;
  v.in[0] = a;
  v.in[1] = b;
  v.flags = flags & (TD_MATMUL_TRANSPOSE_A | TD_MATMUL_TRANSPOSE_B);
  v.shape[0] = A->shape[(flags & TD_MATMUL_TRANSPOSE_A) ? 1 : 0];
  v.shape[1] = B->shape[(flags & TD_MATMUL_TRANSPOSE_B) ? 0 : 1];
  return td__push(p, &v, out);
}

static td_status td__coll(td_program *p, td_op_kind op, td_value x, td_layout want, int dim,
                          td_layout result, td_value *out) {
  const td__val *X = &p->vals[x];
  int ok = X->layout.kind == want.kind && (want.kind != TD_LAYOUT_SHARD || X->layout.dim == want.dim ||
                                           want.dim < 0);
  if (!ok) {
    char l1[24], l2[24];
    if (want.dim < 0)
      snprintf(l2, sizeof l2, "shard(0) or shard(1)");
    else
      td_layout_format(want, l2, sizeof l2);
    return td__op_error(p, op, "input is %s but must be %s", td_layout_format(X->layout, l1, sizeof l1), l2);
  }
  td__val v = *X;
  memset(v.name, 0, sizeof v.name);
  v.op = op;
  v.is_output = 0;
  v.layout = result;
  v.in[0] = x;
  v.in[1] = -1;
  v.dim = dim;
  v.flags = 0;
  return td__push(p, &v, out);
}

td_status td_program_all_gather(td_program *p, td_value x, td_value *out) {
  TD_CHECK(td__check_value(p, x, "all_gather"));
  return td__coll(p, TD_OP_ALL_GATHER, x, (td_layout){TD_LAYOUT_SHARD, -1}, p->vals[x].layout.dim,
                  (td_layout){TD_LAYOUT_REPLICATED, 0}, out);
}

td_status td_program_reduce_scatter(td_program *p, td_value x, int dim, td_value *out) {
  TD_CHECK(td__check_value(p, x, "reduce_scatter"));
  if (dim != 0 && dim != 1)
    return td__error(TD_ERR_SHAPE, "reduce_scatter: dim %d must be 0 or 1", dim);
  return td__coll(p, TD_OP_REDUCE_SCATTER, x, (td_layout){TD_LAYOUT_PARTIAL, 0}, dim,
                  (td_layout){TD_LAYOUT_SHARD, dim}, out);
}

td_status td_program_all_reduce(td_program *p, td_value x, td_value *out) {
  TD_CHECK(td__check_value(p, x, "all_reduce"));
  return td__coll(p, TD_OP_ALL_REDUCE, x, (td_layout){TD_LAYOUT_PARTIAL, 0}, 0,
                  (td_layout){TD_LAYOUT_REPLICATED, 0}, out);
}

td_status td_program_all_to_all(td_program *p, td_value x, int dim, td_value *out) {
  TD_CHECK(td__check_value(p, x, "all_to_all"));
  if (dim != 0 && dim != 1)
    return td__error(TD_ERR_SHAPE, "all_to_all: dim %d must be 0 or 1", dim);
  return td__coll(p, TD_OP_ALL_TO_ALL, x, (td_layout){TD_LAYOUT_SHARD, 1 - dim}, dim,
                  (td_layout){TD_LAYOUT_SHARD, dim}, out);
}

td_status td_program_ewise(td_program *p, td_op_kind op, td_value a, td_value b, td_value *out) {
  int binary = op == TD_OP_ADD || op == TD_OP_MUL;
  if (!binary && op != TD_OP_GELU && op != TD_OP_SILU)
    return td__error(TD_ERR_INVALID_ARG, "ewise: op %s is not add, mul, gelu or silu", td_op_name(op));
  TD_CHECK(td__check_value(p, a, td_op_name(op)));
  if (binary)
    TD_CHECK(td__check_value(p, b, td_op_name(op)));
  const td__val *A = &p->vals[a];
  td_layout lo = A->layout;
  char l1[24], l2[24];
  if (binary) {
    const td__val *B = &p->vals[b];
    if (A->dtype != B->dtype)
      return td__op_error(p, op, "operands have different dtypes (%s and %s)", td_dtype_name(A->dtype),
                          td_dtype_name(B->dtype));
    td_layout x = A->layout, y = B->layout;
    int same = x.kind == y.kind && (x.kind != TD_LAYOUT_SHARD || x.dim == y.dim);
    if (same && (x.kind != TD_LAYOUT_PARTIAL || op == TD_OP_ADD))
      lo = x;
    else if (x.kind == TD_LAYOUT_SHARD && y.kind == TD_LAYOUT_REPLICATED)
      lo = x;
    else if (y.kind == TD_LAYOUT_SHARD && x.kind == TD_LAYOUT_REPLICATED)
      lo = y;
    else if (op == TD_OP_MUL && ((x.kind == TD_LAYOUT_PARTIAL && y.kind == TD_LAYOUT_REPLICATED) ||
                                 (y.kind == TD_LAYOUT_PARTIAL && x.kind == TD_LAYOUT_REPLICATED)))
      lo = (td_layout){TD_LAYOUT_PARTIAL, 0};
    else
      return td__op_error(p, op,
                          "operand layouts %s and %s do not combine (allowed: equal layouts, "
                          "replicated with a shard, partial times replicated for mul)",
                          td_layout_format(x, l1, sizeof l1), td_layout_format(y, l2, sizeof l2));
  } else if (A->layout.kind == TD_LAYOUT_PARTIAL) {
    return td__op_error(p, op, "input is %s; a non-linear op needs the summed value (all_reduce or "
                        "reduce_scatter it first)%s", td_layout_format(A->layout, l1, sizeof l1), "");
  }
  td__val v = {0};
  v.op = op;
  v.dtype = A->dtype;
  v.layout = lo;
  v.shape[0] = A->shape[0];
  v.shape[1] = A->shape[1];
  v.in[0] = a;
  v.in[1] = binary ? b : -1;
  return td__push(p, &v, out);
}

td_status td_program_scale(td_program *p, td_value x, float factor, td_value *out) {
  TD_CHECK(td__check_value(p, x, "scale"));
  td__val v = p->vals[x];
  memset(v.name, 0, sizeof v.name);
  v.op = TD_OP_SCALE;
  v.is_output = 0;
  v.in[0] = x;
  v.in[1] = -1;
  v.alpha = factor;
  v.flags = 0;
  return td__push(p, &v, out);
}

td_status td_program_rmsnorm(td_program *p, td_value x, td_value w, float eps, td_value *out) {
  TD_CHECK(td__check_value(p, x, "rmsnorm"));
  TD_CHECK(td__check_value(p, w, "rmsnorm"));
  const td__val *X = &p->vals[x], *W = &p->vals[w];
  char l1[24];
  if (!(eps > 0))
    return td__op_error(p, TD_OP_RMSNORM, "eps must be > 0%s%s", "", "");
  if (X->dtype != W->dtype)
    return td__op_error(p, TD_OP_RMSNORM, "x and w have different dtypes (%s and %s)",
                        td_dtype_name(X->dtype), td_dtype_name(W->dtype));
  if (!(X->layout.kind == TD_LAYOUT_REPLICATED ||
        (X->layout.kind == TD_LAYOUT_SHARD && X->layout.dim == 0)))
    return td__op_error(p, TD_OP_RMSNORM, "x is %s; each rank needs whole rows (replicated or "
                        "shard(0))%s", td_layout_format(X->layout, l1, sizeof l1), "");
  if (W->layout.kind != TD_LAYOUT_REPLICATED)
    return td__op_error(p, TD_OP_RMSNORM, "weight is %s; it must be replicated%s",
                        td_layout_format(W->layout, l1, sizeof l1), "");
  td__val v = *X;
  memset(v.name, 0, sizeof v.name);
  v.op = TD_OP_RMSNORM;
  v.is_output = 0;
  v.in[0] = x;
  v.in[1] = w;
  v.alpha = eps;
  v.flags = 0;
  return td__push(p, &v, out);
}

td_status td_program_set_name(td_program *p, td_value v, const char *name) {
  TD_CHECK(td__check_value(p, v, "set_name"));
  if (!td__valid_name(name))
    return td__error(TD_ERR_INVALID_ARG, "set_name: invalid name '%s'", name ? name : "(null)");
  int32_t other = td__find_val(p, name);
  if (other >= 0 && other != v)
    return td__error(TD_ERR_INVALID_ARG, "name '%s' is already used", name);
  snprintf(p->vals[v].name, TD__NAME_MAX, "%s", name);
  return TD_OK;
}

td_status td_program_output(td_program *p, td_value v) {
  TD_CHECK(td__check_value(p, v, "output"));
  if (p->vals[v].op == TD_OP_INPUT || p->vals[v].op == TD_OP_WEIGHT)
    return td__error(TD_ERR_INVALID_ARG, "output %s: an input or weight cannot be an output",
                     p->vals[v].name);
  if (p->vals[v].is_output)
    return td__error(TD_ERR_INVALID_ARG, "output %s: it is already an output", p->vals[v].name);
  p->vals[v].is_output = 1;
  return TD_OK;
}

/* Two dims that should be equal and are not, as the user wrote them: "K:
 * 4096 vs 4095" when one or both are the dim K, "H vs M: 4 vs 8" for two
 * different dims, "4 vs 5" for two literals. */
const char *td__dim_diff(const td_program *p, td__dimref a, td__dimref b, char *buf, size_t size) {
  const char *na = a.dim >= 0 ? p->dims[a.dim].name : NULL, *nb = b.dim >= 0 ? p->dims[b.dim].name : NULL;
  long long va = (long long)td__dim_value(p, a), vb = (long long)td__dim_value(p, b);
  if (na && nb && strcmp(na, nb) != 0)
    snprintf(buf, size, "%s vs %s: %lld vs %lld", na, nb, va, vb);
  else if (na || nb)
    snprintf(buf, size, "%s: %lld vs %lld", na ? na : nb, va, vb);
  else
    snprintf(buf, size, "%lld vs %lld", va, vb);
  return buf;
}

/* A shape check of value v failed: "file:line:col: OP (value NAME): WHAT",
 * where WHAT names the dims that differ (td__dim_diff), not whole shapes. */
static td_status td__shape_error(const td_program *p, td_value v, const char *what) {
  char where[160], lab[40];
  return td__error(TD_ERR_SHAPE, "%s%s (value %s): %s", td__val_where(p, v, where, sizeof where),
                   td_op_name(p->vals[v].op), td__val_label(p, v, lab, sizeof lab), what);
}

td_status td_program_check(const td_program *p) {
  if (!p)
    return td__error(TD_ERR_INVALID_ARG, "check: program is NULL");
  int outputs = 0;
  for (td_value v = 0; v < p->nvals; v++) {
    const td__val *V = &p->vals[v];
    outputs += V->is_output;
    if (V->op == TD_OP_INPUT || V->op == TD_OP_WEIGHT)
      continue;
    if (V->in[1] < 0)
      continue; /* the shape checks below are of two operands */
    const td__dimref *sa = p->vals[V->in[0]].shape, *sb = p->vals[V->in[1]].shape;
    char what[400], d0[160], d1[160];
    switch (V->op) {
    case TD_OP_MATMUL: {
      td__dimref k1 = sa[(V->flags & TD_MATMUL_TRANSPOSE_A) ? 0 : 1];
      td__dimref k2 = sb[(V->flags & TD_MATMUL_TRANSPOSE_B) ? 1 : 0];
      if (td__dim_value(p, k1) != td__dim_value(p, k2)) {
        snprintf(what, sizeof what, "contraction dims differ (a's columns vs b's rows, after transposes): %s",
                 td__dim_diff(p, k1, k2, d0, sizeof d0));
        return td__shape_error(p, v, what);
      }
      break;
    }
    case TD_OP_ADD:
    case TD_OP_MUL: {
      int rows = td__dim_value(p, sa[0]) != td__dim_value(p, sb[0]);
      int cols = td__dim_value(p, sa[1]) != td__dim_value(p, sb[1]);
      if (rows || cols) {
        td__dim_diff(p, sa[0], sb[0], d0, sizeof d0);
        td__dim_diff(p, sa[1], sb[1], d1, sizeof d1);
        snprintf(what, sizeof what, "operand shapes differ in %s%s%s%s%s", rows ? "rows (" : "", rows ? d0 : "",
                 rows && cols ? ") and " : rows ? ")" : "", cols ? "columns (" : "", cols ? d1 : "");
        if (cols)
          snprintf(what + strlen(what), sizeof what - strlen(what), ")");
        return td__shape_error(p, v, what);
      }
      break;
    }
    case TD_OP_RMSNORM: {
      int64_t wr = td__dim_value(p, sb[0]);
      int cols = td__dim_value(p, sb[1]) != td__dim_value(p, sa[1]);
      if (wr != 1 || cols) {
        snprintf(what, sizeof what, "weight must be [1, cols of x]:");
        if (wr != 1)
          snprintf(what + strlen(what), sizeof what - strlen(what), " it has %s%s%lld rows%s",
                   sb[0].dim >= 0 ? p->dims[sb[0].dim].name : "", sb[0].dim >= 0 ? " = " : "", (long long)wr,
                   cols ? ";" : "");
        if (cols)
          snprintf(what + strlen(what), sizeof what - strlen(what), " columns of x vs the weight's: %s",
                   td__dim_diff(p, sa[1], sb[1], d1, sizeof d1));
        return td__shape_error(p, v, what);
      }
      break;
    }
    default:
      break;
    }
  }
  if (!outputs)
    return td__error(TD_ERR_SHAPE, "%s%sprogram has no output (mark one with `output NAME`)",
                     p->file[0] ? p->file : "", p->file[0] ? ": " : "");
  return TD_OK;
}

int td_program_ndims(const td_program *p) { return p ? p->ndims : 0; }
const char *td_program_dim_name(const td_program *p, int i) {
  return p && i >= 0 && i < p->ndims ? p->dims[i].name : "";
}
int64_t td_program_dim_value(const td_program *p, int i) {
  return p && i >= 0 && i < p->ndims ? p->dims[i].value : 0;
}
int32_t td_program_nvalues(const td_program *p) { return p ? p->nvals : 0; }
const char *td_program_value_name(const td_program *p, td_value v) {
  return p && v >= 0 && v < p->nvals ? p->vals[v].name : "";
}
td_op_kind td_program_value_op(const td_program *p, td_value v) { return p->vals[v].op; }
td_dtype td_program_value_dtype(const td_program *p, td_value v) { return p->vals[v].dtype; }
td_layout td_program_value_layout(const td_program *p, td_value v) { return p->vals[v].layout; }
void td_program_value_shape(const td_program *p, td_value v, int64_t *rows, int64_t *cols) {
  td__val_shape(p, v, rows, cols);
}
int td_program_value_is_output(const td_program *p, td_value v) { return p->vals[v].is_output; }
