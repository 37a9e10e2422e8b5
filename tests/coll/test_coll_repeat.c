/* SPDX-License-Identifier: Apache-2.0
 * 1,000 consecutive collective calls with no reset in between, on 2, 3, 4
 * and 8 ranks: sizes cycle through the inline, one-shot and pipelined
 * all_reduce paths and all_gather, each result checked, so a stale flag or
 * a scratch region reused too early shows up as a wrong value or a hang.
 * Inputs are cheap pseudo-random i32 values that change with every call. */
#include <stdlib.h>
#include <string.h>

#include "coll/coll_harness.h"
#include "core/error.h"

enum { REPEAT_CALLS = 1000 };

static int32_t rep_value(int call, int rank, size_t j) {
  uint32_t x = (uint32_t)j * 2654435761u ^ (uint32_t)(call * 40503 + rank * 9973 + 1);
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  return (int32_t)(x | 1u);
}

static td_status repeat_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  int n = td_world_size(w);
  static const size_t counts[] = {2, 1000, 17000}; /* inline, one-shot, pipelined */
  int32_t *src = malloc(17000 * sizeof(int32_t)), *dst = malloc(17000 * sizeof(int32_t) * (size_t)n);
  if (!src || !dst)
    return td__error(TD_ERR_NO_MEMORY, "buffers");
  td_status st = TD_OK;
  for (int call = 0; call < REPEAT_CALLS && st == TD_OK; call++) {
    size_t count = counts[call % 3];
    for (size_t j = 0; j < count; j++)
      src[j] = rep_value(call, rank, j);
    if (call % 4 == 3) {
      st = td_all_gather(t, dst, src, count, TD_I32);
      for (int p = 0; p < n && st == TD_OK; p++)
        for (size_t j = 0; j < count && st == TD_OK; j++)
          if (dst[(size_t)p * count + j] != rep_value(call, p, j))
            st = td__error(TD_ERR_CHECK_FAILED, "all_gather block of rank %d element %zu wrong", p, j);
    } else {
      st = td_all_reduce(t, dst, src, count, TD_I32, TD_SUM);
      for (size_t j = 0; j < count && st == TD_OK; j++) {
        uint32_t want = 0;
        for (int p = 0; p < n; p++)
          want += (uint32_t)rep_value(call, p, j);
        if ((uint32_t)dst[j] != want)
          st = td__error(TD_ERR_CHECK_FAILED, "all_reduce count %zu element %zu wrong", count, j);
      }
    }
    if (st != TD_OK)
      td__error_prefix("call %d: ", call);
  }
  free(src);
  free(dst);
  return st;
}

static void test_repeat(void **state) {
  (void)state;
  static const int sizes[] = {2, 3, 4, 8};
  for (unsigned i = 0; i < 4; i++) {
    td_status st = td_local_world_run(sizes[i], NULL, repeat_rank, NULL);
    if (st != TD_OK)
      fprintf(stderr, "%d ranks: %s\n", sizes[i], td_last_error());
    assert_int_equal(st, TD_OK);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_repeat)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
