/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: the symmetric heap. Blocks sit at the same offset on every
 * rank, td_symm_at names each peer's copy, usage is counted, zero-size
 * blocks are unique, and alignment is honoured; freed space is reused. */
#include "runtime/rt_harness.h"

static td_status symmetry_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  int n = td_world_size(w);
  void *base = NULL;
  size_t heap = 0, used = 0, total = 0;
  RT_OK(td_symm_heap_base(w, rank, &base, &heap));
  td_symm_usage(w, &used, &total);
  RT_CHECK(used == 0 && total == heap);
  enum { NB = 6 };
  static const size_t sizes[NB] = {1, 100, 4096, 0, 65536 + 3, 24};
  static const size_t aligns[NB] = {0, 8, 4096, 0, 1 << 20, 128};
  void *blk[NB];
  size_t want = 0;
  for (int i = 0; i < NB; i++) {
    RT_OK(td_symm_alloc(team, sizes[i], aligns[i], &blk[i]));
    RT_CHECK(td_symm_contains(w, blk[i], sizes[i]));
    RT_CHECK((uintptr_t)blk[i] % (aligns[i] ? aligns[i] : 64) == 0);
    want += sizes[i];
  }
  td_symm_usage(w, &used, NULL);
  RT_CHECK(used == want);
  RT_CHECK(blk[3] != blk[0] && blk[3] != blk[5]); /* a zero-size block is unique */
  /* Every rank writes its offsets into its own copy of a table; all compare. */
  uint64_t *table = NULL;
  RT_OK(td_symm_alloc(team, NB * sizeof(uint64_t), 0, (void **)&table));
  for (int i = 0; i < NB; i++)
    table[i] = (uint64_t)((char *)blk[i] - (char *)base);
  RT_OK(td_barrier_all(w));
  for (int p = 0; p < n; p++) {
    uint64_t theirs[NB];
    RT_OK(td_getmem(team, theirs, table, sizeof theirs, p));
    for (int i = 0; i < NB; i++)
      RT_CHECK(theirs[i] == table[i]);
    void *pb = NULL, *at = NULL;
    size_t ps = 0;
    RT_OK(td_symm_heap_base(w, p, &pb, &ps));
    RT_OK(td_symm_at(team, (char *)blk[2] + 5, p, &at));
    RT_CHECK((char *)at == (char *)pb + table[2] + 5);
    RT_CHECK(td_symm_ptr(team, blk[2], p) == (char *)pb + table[2]);
  }
  RT_OK(td_barrier_all(w));
  /* Free the middle block; an allocation of the same size reuses its offset. */
  uint64_t off2 = table[2];
  RT_OK(td_symm_free(team, blk[2]));
  void *again = NULL;
  RT_OK(td_symm_alloc(team, 4096, 4096, &again));
  RT_CHECK((uint64_t)((char *)again - (char *)base) == off2);
  RT_OK(td_symm_free(team, again));
  RT_OK(td_symm_free(team, table));
  for (int i = 0; i < NB; i++)
    if (i != 2)
      RT_OK(td_symm_free(team, blk[i]));
  RT_OK(td_symm_free(team, NULL));
  td_symm_usage(w, &used, NULL);
  RT_CHECK(used == 0);
  return TD_OK;
}

static void test_symmetry(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 8 << 20;
  rt_run_all(&o, symmetry_rank, NULL);
}

/* Many alloc/free cycles must not leak or drift. */
static td_status churn_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  void *p[16];
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 16; i++)
      RT_OK(td_symm_alloc(team, (size_t)(i * 97 + round), 0, &p[i]));
    for (int i = 15; i >= 0; i -= 2)
      RT_OK(td_symm_free(team, p[i]));
    for (int i = 0; i < 16; i += 2)
      RT_OK(td_symm_free(team, p[i]));
  }
  size_t used = 1;
  td_symm_usage(w, &used, NULL);
  RT_CHECK(used == 0);
  return TD_OK;
}

static void test_churn(void **state) { rt_run_all(NULL, churn_rank, NULL); }

/* A world of one with no launcher variables (td_world_init) works too. */
static void test_world_of_one(void **state) {
  if (rt_launched())
    skip();
  td_world *w = NULL;
  assert_int_equal(td_world_init(NULL, &w), TD_OK);
  assert_int_equal(td_world_size(w), 1);
  assert_int_equal(td_world_rank(w), 0);
  assert_int_equal(td_world_local_size(w), 1);
  assert_string_equal(td_world_transport(w), "local");
  assert_true(td_world_timeout_ms(w) > 0);
  void *p = NULL;
  assert_int_equal(td_symm_alloc(td_world_team(w), 100, 0, &p), TD_OK);
  assert_int_equal(td_barrier_all(w), TD_OK);
  assert_int_equal(td_symm_free(td_world_team(w), p), TD_OK);
  assert_int_equal(td_world_finalize(w), TD_OK);
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_symmetry),
      cmocka_unit_test(test_churn),
      cmocka_unit_test(test_world_of_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
