/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: one-sided calls and td_symm_at accept a range that starts in
 * the symmetric heap only when it lies inside ONE live block. A put or get
 * longer than its block, a signal word in unallocated heap and an address
 * past a block's end fail with TD_ERR_INVALID_ARG naming the block's size and
 * the bytes needed, and the neighbouring block is left untouched. Freeing a
 * block on a team it was not allocated on fails at once (no wait). */
#include "runtime/rt_harness.h"

#define HAS(text) RT_CHECK(strstr(td_last_error(), (text)) != NULL)

static td_status range_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  int peer = (rank + 1) % td_world_size(w);
  char *a = NULL, *b = NULL;
  RT_OK(td_symm_alloc(team, 100, 0, (void **)&a)); /* 100 bytes; the next block starts 28 bytes later */
  RT_OK(td_symm_alloc(team, 64, 0, (void **)&b));
  memset(b, 0x5a, 64);
  RT_OK(td_barrier_all(w));
  char buf[256] = {0};
  char want[160];
  snprintf(want, sizeof want, "(100 bytes at heap offset %zu;", (size_t)0);
  RT_CHECK(td_putmem(team, a, buf, sizeof buf, peer) == TD_ERR_INVALID_ARG);
  HAS("td_putmem: dest=");
  HAS("needs 256 bytes but runs past the end of its symmetric block");
  HAS(want);
  RT_CHECK(td_putmem_nbi(team, a + 50, buf, 51, peer) == TD_ERR_INVALID_ARG);
  HAS("50 bytes left from heap offset 50");
  RT_CHECK(td_getmem(team, buf, a, 101, peer) == TD_ERR_INVALID_ARG);
  HAS("td_getmem: src=");
  RT_CHECK(td_getmem_nbi(team, buf, a, 200, peer) == TD_ERR_INVALID_ARG);
  HAS("needs 200 bytes");
  /* In the heap but in no block: the gap after a, and past the last block. */
  void *heap = NULL;
  size_t heap_bytes = 0;
  RT_OK(td_symm_heap_base(w, rank, &heap, &heap_bytes));
  uint64_t *free_word = (uint64_t *)((char *)heap + heap_bytes - 64);
  RT_CHECK(td_putmem(team, a + 100, buf, 4, peer) == TD_ERR_INVALID_ARG);
  HAS("not inside a live block");
  RT_CHECK(td_signal_op(team, free_word, 1, TD_SIGNAL_ADD, peer) == TD_ERR_INVALID_ARG);
  HAS("td_signal_op: sig=");
  HAS("not inside a live block");
  RT_CHECK(td_putmem_signal(team, a, buf, 8, free_word, 1, TD_SIGNAL_SET, peer) == TD_ERR_INVALID_ARG);
  HAS("td_putmem_signal: sig=");
  RT_CHECK(td_putmem_signal_nbi(team, a, buf, 101, (uint64_t *)b, 1, TD_SIGNAL_SET, peer) == TD_ERR_INVALID_ARG);
  HAS("td_putmem_signal_nbi: dest=");
  RT_CHECK(td_signal_wait_until(team, free_word, TD_CMP_EQ, 0, NULL) == TD_ERR_INVALID_ARG);
  HAS("td_signal_wait_until: sig=");
  /* td_symm_at: any byte inside a live block, nothing else. */
  void *at = NULL;
  RT_OK(td_symm_at(team, a + 99, peer, &at));
  RT_CHECK(td_symm_at(team, a + 100, peer, &at) == TD_ERR_INVALID_ARG);
  HAS("td_symm_at: ptr=");
  HAS("not inside a live block");
  RT_CHECK(td_symm_ptr(team, b + 64, peer) == NULL);
  RT_CHECK(td_symm_ptr(team, free_word, peer) == NULL);
  /* Ranges inside one block still work, and nothing was written next door. */
  memset(buf, rank + 1, sizeof buf);
  RT_OK(td_putmem(team, a, buf, 100, peer));
  RT_OK(td_putmem_signal(team, a, buf, 1, (uint64_t *)(b + 56), 1, TD_SIGNAL_ADD, peer));
  RT_OK(td_barrier_all(w));
  for (int i = 0; i < 56; i++)
    RT_CHECK((unsigned char)b[i] == 0x5a);
  RT_OK(td_symm_free(team, b));
  RT_CHECK(td_putmem(team, b, buf, 8, peer) == TD_ERR_INVALID_ARG); /* freed: no longer a live block */
  HAS("not inside a live block");
  RT_OK(td_symm_free(team, a));
  return TD_OK;
}

static void test_rma_ranges(void **state) {
  (void)state;
  td_status st = td_local_world_run(2, NULL, range_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

/* Rank 0 frees its sub-team's block on the world team while rank 1 waits in
 * a barrier: rank 0 must fail at once (a wait would end in TD_ERR_TIMEOUT
 * with rank 1 in the barrier, which the check below would catch). */
static td_status other_team_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *world = td_world_team(w);
  td_team *sub = NULL;
  RT_OK(td_team_split(world, rank == 0 ? 0 : TD_COLOR_UNDEFINED, 0, &sub));
  if (rank == 0) {
    void *p = NULL;
    RT_OK(td_symm_alloc(sub, 128, 0, &p));
    td_status st = td_symm_free(world, p);
    RT_CHECK(st == TD_ERR_INVALID_ARG);
    HAS("allocated on another team");
    RT_OK(td_symm_free(sub, p));
    RT_OK(td_team_destroy(sub));
  }
  RT_OK(td_barrier_all(w));
  return TD_OK;
}

static void test_free_other_team(void **state) {
  (void)state;
  td_world_opts o;
  td_world_opts_init(&o);
  o.timeout_ms = 3000;
  td_status st = td_local_world_run(2, &o, other_team_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rma_ranges),
      cmocka_unit_test(test_free_other_team),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
