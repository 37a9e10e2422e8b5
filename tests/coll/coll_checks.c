/* SPDX-License-Identifier: Apache-2.0
 * Check routines of the collective tests (see coll_checks.h). Every routine
 * loops over counts, dtypes/ops and buffer kinds:
 *   0 ordinary src and dst        1 symmetric src and dst
 *   2 symmetric src, ordinary dst 3 in-place, ordinary (where allowed)
 *   4 in-place, symmetric         5 mixed: symmetric on even ranks only
 * and compares every element with the reference, bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_checks.h"
#include "core/error.h"

static uint64_t cu_mix(uint64_t x) { /* splitmix64 finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static float cu_unit(uint64_t h, td_red_op op) { /* nonzero, |v| in [1/64, 1] or [0.5, 1.5) */
  float u = (float)(h >> 40) * (1.0f / 16777216.0f);
  float v = op == TD_PROD ? 0.5f + u : 0.015625f + u * 0.984375f;
  return (h & 1) ? -v : v;
}

uint64_t cu_value(td_dtype dt, td_red_op op, uint64_t seed, int rank, size_t i) {
  uint64_t h = cu_mix(seed * 0x100000001b3ull ^ cu_mix((uint64_t)rank * 0x51ed27ull + i));
  uint64_t out = 0;
  switch (dt) {
  case TD_F32: {
    float f = cu_unit(h, op);
    memcpy(&out, &f, 4);
    break;
  }
  case TD_F64: {
    double d = (double)cu_unit(h, op) + (double)(h >> 8 & 0xffff) * 1e-9;
    memcpy(&out, &d, 8);
    break;
  }
  case TD_F16: out = td_f32_to_f16(cu_unit(h, op)); break;
  case TD_BF16: out = td_f32_to_bf16(cu_unit(h, op)); break;
  case TD_I32: {
    int32_t v = op == TD_PROD ? (int32_t)(h % 3 + 1) * ((h >> 9 & 1) ? -1 : 1) : (int32_t)(h >> 16);
    if (!v)
      v = 1;
    memcpy(&out, &v, 4);
    break;
  }
  case TD_I64: {
    int64_t v = op == TD_PROD ? (int64_t)(h % 3 + 1) * ((h >> 9 & 1) ? -1 : 1) : (int64_t)h;
    if (!v)
      v = 1;
    memcpy(&out, &v, 8);
    break;
  }
  default: out = (h & 0xff) | 1; break;
  }
  return out;
}

void cu_fill(void *buf, td_dtype dt, td_red_op op, uint64_t seed, int rank, size_t first,
             size_t count) {
  size_t es = td_dtype_size(dt);
  for (size_t j = 0; j < count; j++) {
    uint64_t v = cu_value(dt, op, seed, rank, first + j);
    memcpy((char *)buf + j * es, &v, es);
  }
}

static float cu_f(td_dtype dt, uint64_t v) {
  if (dt == TD_F16)
    return td_f16_to_f32((uint16_t)v);
  if (dt == TD_BF16)
    return td_bf16_to_f32((uint16_t)v);
  float f;
  memcpy(&f, &v, 4);
  return f;
}

uint64_t cu_reduce_ref(td_dtype dt, td_red_op op, uint64_t seed, int n, size_t i) {
  uint64_t out = 0;
  if (dt == TD_F32 || dt == TD_F16 || dt == TD_BF16) {
    float acc = cu_f(dt, cu_value(dt, op, seed, 0, i));
    for (int r = 1; r < n; r++) {
      float x = cu_f(dt, cu_value(dt, op, seed, r, i));
      acc = op == TD_SUM ? acc + x : op == TD_PROD ? acc * x : op == TD_MAX ? (x > acc ? x : acc)
                                                                            : (x < acc ? x : acc);
    }
    if (dt == TD_F16)
      return td_f32_to_f16(acc);
    if (dt == TD_BF16)
      return td_f32_to_bf16(acc);
    memcpy(&out, &acc, 4);
    return out;
  }
  if (dt == TD_F64) {
    double acc, x;
    uint64_t v = cu_value(dt, op, seed, 0, i);
    memcpy(&acc, &v, 8);
    for (int r = 1; r < n; r++) {
      v = cu_value(dt, op, seed, r, i);
      memcpy(&x, &v, 8);
      acc = op == TD_SUM ? acc + x : op == TD_PROD ? acc * x : op == TD_MAX ? (x > acc ? x : acc)
                                                                            : (x < acc ? x : acc);
    }
    memcpy(&out, &acc, 8);
    return out;
  }
  /* integers: i32 values sign-extended to 64 bits, wrapped at the end */
  int64_t acc = dt == TD_I32 ? (int32_t)cu_value(dt, op, seed, 0, i) : (int64_t)cu_value(dt, op, seed, 0, i);
  for (int r = 1; r < n; r++) {
    uint64_t raw = cu_value(dt, op, seed, r, i);
    int64_t x = dt == TD_I32 ? (int32_t)raw : (int64_t)raw;
    if (dt == TD_I32) {
      int32_t a = (int32_t)acc, y = (int32_t)x;
      a = op == TD_SUM ? (int32_t)((uint32_t)a + (uint32_t)y) : op == TD_PROD ? (int32_t)((uint32_t)a * (uint32_t)y)
          : op == TD_MAX ? (y > a ? y : a) : (y < a ? y : a);
      acc = a;
    } else {
      acc = op == TD_SUM ? (int64_t)((uint64_t)acc + (uint64_t)x) : op == TD_PROD ? (int64_t)((uint64_t)acc * (uint64_t)x)
            : op == TD_MAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
    }
  }
  if (dt == TD_I32) {
    int32_t a = (int32_t)acc;
    memcpy(&out, &a, 4);
  } else {
    memcpy(&out, &acc, 8);
  }
  return out;
}

td_status cu_expect(const char *what, const void *buf, td_dtype dt, size_t count,
                    uint64_t (*want)(const void *ctx, size_t j), const void *ctx) {
  size_t es = td_dtype_size(dt);
  for (size_t j = 0; j < count; j++) {
    uint64_t got = 0, w = want(ctx, j);
    memcpy(&got, (const char *)buf + j * es, es);
    if (got != w)
      return td__error(TD_ERR_CHECK_FAILED, "%s: element %zu of %zu (%s) is 0x%llx, expected 0x%llx",
                       what, j, count, td_dtype_name(dt), (unsigned long long)got,
                       (unsigned long long)w);
  }
  return TD_OK;
}

/* ---- cases ---- */

typedef struct cu_case {
  td_dtype dt;
  td_red_op op;
} cu_case;

static const cu_case cu_few[] = {{TD_F32, TD_SUM}, {TD_BF16, TD_SUM}, {TD_I32, TD_MAX}};

/* Lists the dtype/op cases: reductions skip u8. Returns how many. */
static int cu_cases(const cu_opts *o, int reduce, cu_case *out) {
  if (!o->all_dtypes) {
    memcpy(out, cu_few, sizeof cu_few);
    return 3;
  }
  int k = 0;
  static const td_dtype dts[] = {TD_F32, TD_F16, TD_BF16, TD_I32, TD_F64, TD_I64, TD_U8};
  for (int d = 0; d < 7; d++) {
    if (!reduce) {
      out[k++] = (cu_case){dts[d], TD_SUM};
      continue;
    }
    if (dts[d] == TD_U8)
      continue;
    for (int op = 0; op < TD_RED_OP_COUNT; op++)
      out[k++] = (cu_case){dts[d], (td_red_op)op};
  }
  return k;
}

static const size_t cu_counts[] = {0, 1, 7, 4097, CU_BIG_COUNT};

/* Symmetric src/dst of `bytes` each, allocated once per routine. */
typedef struct cu_bufs {
  td_team *team;
  char *ssrc, *sdst; /* symmetric */
  char *hsrc, *hdst; /* ordinary */
} cu_bufs;

static td_status cu_bufs_init(cu_bufs *b, td_team *team, size_t src_bytes, size_t dst_bytes) {
  memset(b, 0, sizeof *b);
  b->team = team;
  TD_CHECK(td_symm_alloc(team, src_bytes, 0, (void **)&b->ssrc));
  TD_CHECK(td_symm_alloc(team, dst_bytes, 0, (void **)&b->sdst));
  b->hsrc = malloc(src_bytes ? src_bytes : 1);
  b->hdst = malloc(dst_bytes ? dst_bytes : 1);
  if (!b->hsrc || !b->hdst)
    return td__error(TD_ERR_NO_MEMORY, "test buffers");
  return TD_OK;
}

static td_status cu_bufs_free(cu_bufs *b) {
  free(b->hsrc);
  free(b->hdst);
  td_status st = td_symm_free(b->team, b->sdst);
  td_status st2 = td_symm_free(b->team, b->ssrc);
  return st != TD_OK ? st : st2;
}

/* Picks src and dst for mode m (see the file comment). */
static void cu_pick(const cu_bufs *b, int m, int rank, char **src, char **dst) {
  int symm_src = m == 1 || m == 2 || m == 4 || (m == 5 && rank % 2 == 0);
  int symm_dst = m == 1 || m == 4 || (m == 5 && rank % 2 == 0);
  *src = symm_src ? b->ssrc : b->hsrc;
  *dst = symm_dst ? b->sdst : b->hdst;
}

static int cu_size_ok(const cu_opts *o, size_t count, cu_case cs, int m) {
  if (count != CU_BIG_COUNT)
    return 1;
  return o->big && (m == 0 || m == 1 || m == 5) && cs.op == TD_SUM &&
         (cs.dt == TD_F32 || cs.dt == TD_BF16);
}

#define CU_MAXCASES 32
#define CU_TRY(expr, ...)                                                       \
  do {                                                                          \
    td_status cu_st_ = (expr);                                                  \
    if (cu_st_ != TD_OK) {                                                      \
      td__error_prefix(__VA_ARGS__);                                            \
      return cu_st_;                                                            \
    }                                                                           \
  } while (0)

/* Context of the expected-value callbacks. */
typedef struct cu_want {
  td_dtype dt;
  td_red_op op;
  uint64_t seed;
  int n, rank, peer;
  size_t base, count;
} cu_want;

static uint64_t cu_want_value(const void *ctx, size_t j) {
  const cu_want *w = ctx;
  return cu_value(w->dt, w->op, w->seed, w->peer, w->base + j);
}

static uint64_t cu_want_reduced(const void *ctx, size_t j) {
  const cu_want *w = ctx;
  return cu_reduce_ref(w->dt, w->op, w->seed, w->n, w->base + j);
}

td_status cu_check_all_gather(td_team *t, const cu_opts *o) {
  const int n = td_team_size(t), r = td_team_rank(t);
  cu_case cs[CU_MAXCASES];
  int nc = cu_cases(o, 0, cs);
  cu_bufs b;
  TD_CHECK(cu_bufs_init(&b, t, CU_BIG_COUNT * 8, CU_BIG_COUNT * 8 * (size_t)n));
  uint64_t seed = 1000;
  for (size_t ci = 0; ci < sizeof cu_counts / sizeof cu_counts[0]; ci++)
    for (int k = 0; k < nc; k++)
      for (int m = 0; m <= 5; m++) {
        size_t count = cu_counts[ci], es = td_dtype_size(cs[k].dt);
        if (!cu_size_ok(o, count, cs[k], m))
          continue;
        char *src, *dst;
        cu_pick(&b, m, r, &src, &dst);
        if (m >= 3 && m <= 4)
          src = dst + (size_t)r * count * es; /* in place */
        seed++;
        cu_fill(src, cs[k].dt, TD_SUM, seed, r, 0, count);
        CU_TRY(td_all_gather(t, dst, src, count, cs[k].dt), "all_gather count %zu %s mode %d: ",
               count, td_dtype_name(cs[k].dt), m);
        for (int p = 0; p < n; p++) {
          cu_want w = {cs[k].dt, TD_SUM, seed, n, r, p, 0, count};
          CU_TRY(cu_expect("all_gather", dst + (size_t)p * count * es, cs[k].dt, count, cu_want_value, &w),
                 "count %zu mode %d block of rank %d: ", count, m, p);
        }
      }
  return cu_bufs_free(&b);
}

td_status cu_check_broadcast(td_team *t, const cu_opts *o) {
  const int n = td_team_size(t), r = td_team_rank(t);
  cu_case cs[CU_MAXCASES];
  int nc = cu_cases(o, 0, cs);
  cu_bufs b;
  TD_CHECK(cu_bufs_init(&b, t, CU_BIG_COUNT * 8, CU_BIG_COUNT * 8));
  uint64_t seed = 2000;
  for (size_t ci = 0; ci < sizeof cu_counts / sizeof cu_counts[0]; ci++)
    for (int k = 0; k < nc; k++)
      for (int m = 0; m <= 5; m++) {
        size_t count = cu_counts[ci];
        if (!cu_size_ok(o, count, cs[k], m) || m == 2)
          continue;
        int root = (int)(seed % (uint64_t)n);
        char *src, *dst;
        cu_pick(&b, m, r, &src, &dst);
        if (m >= 3 && m <= 4)
          src = dst;
        seed++;
        if (r == root)
          cu_fill(src, cs[k].dt, TD_SUM, seed, root, 0, count);
        CU_TRY(td_broadcast(t, dst, r == root ? src : NULL, count, cs[k].dt, root),
               "broadcast count %zu %s mode %d root %d: ", count, td_dtype_name(cs[k].dt), m, root);
        cu_want w = {cs[k].dt, TD_SUM, seed, n, r, root, 0, count};
        CU_TRY(cu_expect("broadcast", dst, cs[k].dt, count, cu_want_value, &w),
               "count %zu mode %d root %d: ", count, m, root);
      }
  return cu_bufs_free(&b);
}

td_status cu_check_reduce_scatter(td_team *t, const cu_opts *o) {
  const int n = td_team_size(t), r = td_team_rank(t);
  cu_case cs[CU_MAXCASES];
  int nc = cu_cases(o, 1, cs);
  cu_bufs b;
  TD_CHECK(cu_bufs_init(&b, t, CU_BIG_COUNT * 8, CU_BIG_COUNT * 8));
  uint64_t seed = 3000;
  for (size_t ci = 0; ci < sizeof cu_counts / sizeof cu_counts[0]; ci++)
    for (int k = 0; k < nc; k++)
      for (int m = 0; m <= 5; m++) {
        size_t count = cu_counts[ci], es = td_dtype_size(cs[k].dt), off, len;
        if (!cu_size_ok(o, count, cs[k], m))
          continue;
        td_chunk_range(count, n, r, &off, &len);
        char *src, *dst;
        cu_pick(&b, m, r, &src, &dst);
        if (m >= 3 && m <= 4) {
          src = m == 4 ? b.ssrc : b.hsrc;
          dst = src + off * es;
        }
        seed++;
        cu_fill(src, cs[k].dt, cs[k].op, seed, r, 0, count);
        CU_TRY(td_reduce_scatter(t, dst, src, count, cs[k].dt, cs[k].op),
               "reduce_scatter count %zu %s %s mode %d: ", count, td_dtype_name(cs[k].dt),
               td_red_op_name(cs[k].op), m);
        cu_want w = {cs[k].dt, cs[k].op, seed, n, r, 0, off, len};
        CU_TRY(cu_expect("reduce_scatter", dst, cs[k].dt, len, cu_want_reduced, &w),
               "count %zu %s mode %d: ", count, td_red_op_name(cs[k].op), m);
      }
  return cu_bufs_free(&b);
}

td_status cu_check_all_reduce(td_team *t, const cu_opts *o) {
  const int n = td_team_size(t), r = td_team_rank(t);
  cu_case cs[CU_MAXCASES];
  int nc = cu_cases(o, 1, cs);
  cu_bufs b;
  TD_CHECK(cu_bufs_init(&b, t, CU_BIG_COUNT * 8, CU_BIG_COUNT * 8));
  uint64_t seed = 4000;
  /* 20000 f32 elements take the one-shot path; the others cover inline and pipelined. */
  static const size_t counts[] = {0, 1, 7, 4097, 20000, 300001, CU_BIG_COUNT};
  for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++)
    for (int k = 0; k < nc; k++)
      for (int m = 0; m <= 5; m++) {
        size_t count = counts[ci];
        int few = (cs[k].dt == TD_F32 && cs[k].op == TD_SUM) || (cs[k].dt == TD_BF16 && cs[k].op == TD_SUM) ||
                  (cs[k].dt == TD_I32 && cs[k].op == TD_MAX);
        if (!cu_size_ok(o, count, cs[k], m) || (count == 20000 && !few) ||
            (count == 300001 && (!few || !o->big)))
          continue;
        char *src, *dst;
        cu_pick(&b, m, r, &src, &dst);
        if (m >= 3 && m <= 4)
          dst = src;
        seed++;
        cu_fill(src, cs[k].dt, cs[k].op, seed, r, 0, count);
        CU_TRY(td_all_reduce(t, dst, src, count, cs[k].dt, cs[k].op),
               "all_reduce count %zu %s %s mode %d: ", count, td_dtype_name(cs[k].dt),
               td_red_op_name(cs[k].op), m);
        cu_want w = {cs[k].dt, cs[k].op, seed, n, r, 0, 0, count};
        CU_TRY(cu_expect("all_reduce", dst, cs[k].dt, count, cu_want_reduced, &w),
               "count %zu %s mode %d: ", count, td_red_op_name(cs[k].op), m);
      }
  return cu_bufs_free(&b);
}

td_status cu_check_all_to_all(td_team *t, const cu_opts *o) {
  const int n = td_team_size(t), r = td_team_rank(t);
  cu_case cs[CU_MAXCASES];
  int nc = cu_cases(o, 0, cs);
  cu_bufs b;
  size_t most = CU_BIG_COUNT / (size_t)n + 1;
  TD_CHECK(cu_bufs_init(&b, t, most * 8 * (size_t)n, most * 8 * (size_t)n));
  uint64_t seed = 5000;
  for (size_t ci = 0; ci < sizeof cu_counts / sizeof cu_counts[0]; ci++)
    for (int k = 0; k < nc; k++)
      for (int m = 0; m <= 5; m++) {
        /* the big case moves CU_BIG_COUNT elements per rank in all */
        size_t count = cu_counts[ci] == CU_BIG_COUNT ? most : cu_counts[ci];
        size_t es = td_dtype_size(cs[k].dt);
        if (!cu_size_ok(o, cu_counts[ci], cs[k], m) || m == 3 || m == 4)
          continue;
        char *src, *dst;
        cu_pick(&b, m, r, &src, &dst);
        seed++;
        cu_fill(src, cs[k].dt, TD_SUM, seed, r, 0, count * (size_t)n);
        CU_TRY(td_all_to_all(t, dst, src, count, cs[k].dt), "all_to_all count %zu %s mode %d: ",
               count, td_dtype_name(cs[k].dt), m);
        for (int p = 0; p < n; p++) {
          cu_want w = {cs[k].dt, TD_SUM, seed, n, r, p, (size_t)r * count, count};
          CU_TRY(cu_expect("all_to_all", dst + (size_t)p * count * es, cs[k].dt, count, cu_want_value, &w),
                 "count %zu mode %d block from rank %d: ", count, m, p);
        }
      }
  return cu_bufs_free(&b);
}

/* Elements rank p sends rank q in all_to_allv case `scale`: uneven, often zero. */
static size_t cu_a2av_count(int p, int q, uint64_t seed, size_t scale) {
  uint64_t h = cu_mix(seed + (uint64_t)p * 131 + (uint64_t)q * 7);
  return (h % 4 == 0) ? 0 : (size_t)(h % 5) * scale + (size_t)(h >> 20) % 3;
}

/* Layout of rank p's send buffer: blocks in order of q with one-element gaps. */
static size_t cu_a2av_sdispl(int p, int q, uint64_t seed, size_t scale) {
  size_t d = 0;
  for (int i = 0; i < q; i++)
    d += cu_a2av_count(p, i, seed, scale) + 1;
  return d;
}

td_status cu_check_all_to_allv(td_team *t, const cu_opts *o) {
  const int n = td_team_size(t), r = td_team_rank(t);
  cu_case cs[CU_MAXCASES];
  int nc = cu_cases(o, 0, cs);
  size_t *sc = calloc((size_t)n * 4, sizeof *sc);
  if (!sc)
    return td__error(TD_ERR_NO_MEMORY, "test arrays");
  size_t *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
  static const size_t scales[] = {1, 1000, 100000};
  size_t most = (4 * 100000 + 3) * (size_t)n * 8 + 64 * (size_t)n;
  cu_bufs b;
  td_status st = cu_bufs_init(&b, t, most, most * 2);
  uint64_t seed = 6000;
  for (int si = 0; st == TD_OK && si < 3; si++)
    for (int k = 0; k < nc && st == TD_OK; k++)
      for (int m = 0; m <= 5 && st == TD_OK; m++) {
        if (m == 3 || m == 4 || (si == 2 && (!o->big || k > 0)))
          continue;
        size_t es = td_dtype_size(cs[k].dt), rtot = 0;
        seed++;
        for (int q = 0; q < n; q++) {
          sc[q] = cu_a2av_count(r, q, seed, scales[si]);
          sd[q] = cu_a2av_sdispl(r, q, seed, scales[si]);
          rc[q] = cu_a2av_count(q, r, seed, scales[si]);
          rd[q] = rtot + 2; /* gaps of two elements in dst */
          rtot += rc[q] + 2;
        }
        char *src, *dst;
        cu_pick(&b, m, r, &src, &dst);
        cu_fill(src, cs[k].dt, TD_SUM, seed, r, 0, sd[n - 1] + sc[n - 1]);
        st = td_all_to_allv(t, dst, rc, rd, src, sc, sd, cs[k].dt);
        if (st != TD_OK) {
          td__error_prefix("all_to_allv scale %zu %s mode %d: ", scales[si], td_dtype_name(cs[k].dt), m);
          break;
        }
        for (int p = 0; p < n && st == TD_OK; p++) {
          cu_want w = {cs[k].dt, TD_SUM, seed, n, r, p, cu_a2av_sdispl(p, r, seed, scales[si]), rc[p]};
          st = cu_expect("all_to_allv", dst + rd[p] * es, cs[k].dt, rc[p], cu_want_value, &w);
          if (st != TD_OK)
            td__error_prefix("scale %zu mode %d block from rank %d: ", scales[si], m, p);
        }
      }
  free(sc);
  td_status fst = cu_bufs_free(&b);
  return st != TD_OK ? st : fst;
}
