/* SPDX-License-Identifier: Apache-2.0
 * Collectives refuse a buffer that starts in the symmetric heap but does not
 * fit in its block: the rank that passed it gets TD_ERR_INVALID_ARG naming the
 * block's size and the bytes needed, every other rank TD_ERR_MISMATCH naming
 * that rank, before any data moves (the neighbouring block is untouched), and
 * the next matching call works. Also a dst running off the end of the heap
 * and a buffer in unallocated heap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll_harness.h"
#include "core/error.h"
#include "tdist/symm.h"

static td_status expect(td_status st, td_status want, const char *a, const char *b) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", td_last_error());
  if (st != want || (a && !strstr(msg, a)) || (b && !strstr(msg, b)))
    return td__error(TD_ERR_CHECK_FAILED, "expected %s with '%s' and '%s', got %s: '%s'", td_status_name(want),
                     a ? a : "", b ? b : "", td_status_name(st), msg);
  return TD_OK;
}

/* Rank `bad` (or every rank when bad < 0) gets the symmetric error `a`; the others a mismatch naming it. */
static td_status expect_one(td_status st, int r, int bad, const char *a) {
  if (bad < 0 || r == bad)
    return expect(st, TD_ERR_INVALID_ARG, a, "runs past the end of its symmetric block");
  char who[64];
  snprintf(who, sizeof who, "rank %d's arguments failed its own checks", bad);
  return expect(st, TD_ERR_MISMATCH, who, "its error: "); /* the verdict travels with the call */
}

static td_status still_works(td_team *t) {
  int one = 1, sum = 0;
  TD_CHECK(td_all_reduce(t, &sum, &one, 1, TD_I32, TD_SUM));
  if (sum != td_team_size(t))
    return td__error(TD_ERR_CHECK_FAILED, "sum %d after an error, expected %d", sum, td_team_size(t));
  return TD_OK;
}

enum { BIG = 1000 };

static td_status range_rank(td_world *w, int r, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  const int n = td_team_size(t);
  TD_CHECK(still_works(t)); /* the collectives' own block comes first */
  float *x = NULL, *next = NULL;
  TD_CHECK(td_symm_alloc(t, 64, 0, (void **)&x));
  TD_CHECK(td_symm_alloc(t, 4096, 0, (void **)&next));
  memset(next, 0x5a, 4096);
  float *big = calloc((size_t)BIG * (size_t)n, sizeof *big), *out = calloc((size_t)BIG * (size_t)n, sizeof *out);
  if (!big || !out)
    return td__error(TD_ERR_NO_MEMORY, "test buffers");
  char need[64];
  snprintf(need, sizeof need, "needs %zu bytes", (size_t)BIG * sizeof(float) * (size_t)n);
  /* The tester's case: a 64-byte symmetric dst for 1000 floats per rank, on rank 1 only, then on all. */
  TD_CHECK(expect_one(td_all_gather(t, r == 1 ? x : out, big, BIG, TD_F32), r, 1, "td_all_gather: dst="));
  if (r != 1) /* peers quote rank 1's own verdict */
    TD_CHECK(expect(TD_ERR_MISMATCH, TD_ERR_MISMATCH, "its error: rank 1: td_all_gather: dst=",
                    "runs past the end of its symmetric block (64 bytes"));
  TD_CHECK(expect_one(td_all_gather(t, x, big, BIG, TD_F32), r, -1, need));
  TD_CHECK(expect_one(td_all_gather(t, out, x, BIG, TD_F32), r, -1, "td_all_gather: src="));
  TD_CHECK(still_works(t));
  TD_CHECK(expect_one(td_all_reduce(t, out, r == 0 ? x : big, BIG, TD_F32, TD_SUM), r, 0, "td_all_reduce: src="));
  TD_CHECK(expect_one(td_all_reduce(t, x, big, BIG, TD_F32, TD_SUM), r, -1, "td_all_reduce: dst="));
  TD_CHECK(expect_one(td_reduce_scatter(t, x, big, (size_t)BIG * (size_t)n, TD_F32, TD_SUM), r, -1,
                      "td_reduce_scatter: dst="));
  TD_CHECK(expect_one(td_broadcast(t, r == n - 1 ? x : out, big, BIG, TD_F32, 0), r, n - 1, "td_broadcast: dst="));
  TD_CHECK(expect_one(td_all_to_all(t, out, x, BIG / (size_t)n, TD_F32), r, -1, "td_all_to_all: src="));
  size_t cnt[8], disp[8];
  for (int p = 0; p < n; p++) {
    cnt[p] = 100;
    disp[p] = (size_t)p * 100;
  }
  TD_CHECK(expect_one(td_all_to_allv(t, x, cnt, disp, big, cnt, disp, TD_F32), r, -1, "td_all_to_allv: dst="));
  TD_CHECK(still_works(t));
  for (int i = 0; i < 4096; i++)
    if (((unsigned char *)next)[i] != 0x5a)
      return td__error(TD_ERR_CHECK_FAILED, "rank %d: byte %d of the next block was overwritten", r, i);
  /* A dst starting in the last block and running off the end of the heap. */
  void *heap = NULL;
  size_t heap_bytes = 0, used = 0;
  TD_CHECK(td_symm_heap_base(w, r, &heap, &heap_bytes));
  td_symm_usage(w, &used, NULL);
  TD_CHECK(td_symm_free(t, next));
  float *last = NULL;
  size_t last_bytes = 4096;
  TD_CHECK(td_symm_alloc(t, last_bytes, 4096, (void **)&last));
  size_t count = ((char *)heap + heap_bytes - (char *)last) / sizeof(float) + 1024;
  float *src = calloc(count, sizeof *src);
  if (!src)
    return td__error(TD_ERR_NO_MEMORY, "test buffers");
  TD_CHECK(expect_one(td_all_reduce(t, last, src, count, TD_F32, TD_SUM), r, -1, "td_all_reduce: dst="));
  /* A buffer in unallocated heap. */
  char *gap = (char *)heap + heap_bytes - 256;
  TD_CHECK(expect(td_all_reduce(t, gap, big, 16, TD_F32, TD_SUM), TD_ERR_INVALID_ARG, "td_all_reduce: dst=",
                  "not inside a live block"));
  TD_CHECK(still_works(t));
  free(src);
  free(big);
  free(out);
  TD_CHECK(td_symm_free(t, last));
  TD_CHECK(td_symm_free(t, x));
  return TD_OK;
}

static void test_symm_ranges(void **state) {
  (void)state;
  static const int sizes[] = {2, 3};
  for (unsigned i = 0; i < 2; i++) {
    td_world_opts o;
    td_world_opts_init(&o);
    o.heap_size = (size_t)4 << 20;
    td_status st = td_local_world_run(sizes[i], &o, range_rank, NULL);
    if (st != TD_OK)
      fail_msg("%d ranks: %s: %s", sizes[i], td_status_name(st), td_last_error());
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_symm_ranges)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
