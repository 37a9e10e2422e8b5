/* SPDX-License-Identifier: Apache-2.0
 * Device API from CPU tile code: waits, group waits, ordering and the block
 * barrier. Every comparison of td_dev_signal_wait_until, td_dev_wait_until_all
 * over a contiguous group of signals (one per peer) in its three forms,
 * td_dev_ld_acquire / td_dev_st_release message passing at every scope, 1,000
 * barriers in a row, and 1,000 "calls" that each use a new epoch of the same
 * signals with no reset in between. Local worlds of 1, 2, 3, 4 and 8 ranks;
 * processes (shm) when launched by tdrun. */
#include "runtime/rt_harness.h"
#include "tdist/device.h"

/* Rank 0 sets every rank's word to 10; each rank checks all six comparisons
 * against values that hold, then waits with each. */
static td_status cmp_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(td_world_team(w), &c));
  uint64_t *sig = NULL;
  RT_OK(td_symm_alloc(td_world_team(w), sizeof *sig, 8, (void **)&sig));
  *sig = 0;
  RT_OK(td_dev_barrier_all_block(&c));
  if (rank == 0)
    for (int p = 0; p < c.n_pes; p++)
      td_dev_signal_op(&c, sig, 10, TD_SIGNAL_SET, p);
  RT_OK(td_dev_signal_wait_until(&c, sig, TD_CMP_EQ, 10));
  RT_OK(td_dev_signal_wait_until(&c, sig, TD_CMP_NE, 0));
  RT_OK(td_dev_signal_wait_until(&c, sig, TD_CMP_GT, 9));
  RT_OK(td_dev_signal_wait_until(&c, sig, TD_CMP_GE, 10));
  RT_OK(td_dev_signal_wait_until(&c, sig, TD_CMP_LT, 11));
  RT_OK(td_dev_signal_wait_until_block(&c, sig, TD_CMP_LE, 10));
  RT_CHECK(td_dev_signal_fetch(&c, sig) == 10);
  RT_OK(td_dev_barrier_all_block(&c));
  RT_OK(td_symm_free(td_world_team(w), sig));
  return TD_OK;
}

/* Each rank writes a block to every peer and adds 1 to the peer's word for
 * it (slot = sender); receivers wait on the whole group at once, with each
 * group-wait form in turn, and check every block. */
static td_status group_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  const int n = c.n_pes;
  uint64_t *data = NULL, *sigs = NULL;
  RT_OK(td_symm_alloc(team, (size_t)n * 16 * sizeof(uint64_t), 0, (void **)&data));
  RT_OK(td_symm_alloc(team, (size_t)n * sizeof(uint64_t), 0, (void **)&sigs));
  memset(sigs, 0, (size_t)n * sizeof(uint64_t));
  RT_OK(td_dev_barrier_all_block(&c));
  for (uint64_t round = 1; round <= 30; round++) {
    uint64_t local[16];
    for (int p = 0; p < n; p++) {
      for (int k = 0; k < 16; k++)
        local[k] = round * 100000u + (uint64_t)rank * 100u + (uint64_t)p * 16u + (uint64_t)k;
      td_dev_putmem_signal(&c, data + (size_t)rank * 16, local, sizeof local, &sigs[rank], 1,
                           TD_SIGNAL_ADD, p);
    }
    const td_dev_scope scope = (td_dev_scope)(round % 3);
    if (round % 3 == 0)
      RT_OK(td_dev_wait_until_all(&c, sigs, n, TD_CMP_GE, round, scope));
    else if (round % 3 == 1)
      RT_OK(td_dev_wait_until_all_warp(&c, sigs, n, TD_CMP_GE, round, scope));
    else
      RT_OK(td_dev_wait_until_all_block(&c, sigs, n, TD_CMP_GE, round, scope));
    for (int s = 0; s < n; s++)
      for (int k = 0; k < 16; k++)
        RT_CHECK(data[s * 16 + k] ==
                 round * 100000u + (uint64_t)s * 100u + (uint64_t)rank * 16u + (uint64_t)k);
    /* Nobody may overwrite `data` before everybody checked it. */
    RT_OK(td_dev_barrier_all_block(&c));
  }
  RT_OK(td_symm_free(team, sigs));
  RT_OK(td_symm_free(team, data));
  return TD_OK;
}

/* Message passing with plain stores + st_release, read with ld_acquire, at
 * each scope (all are system-wide on the CPU; the pairing must hold). */
static td_status ldst_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  const int n = c.n_pes, next = (rank + 1) % n;
  uint64_t *data = NULL, *flag = NULL;
  RT_OK(td_symm_alloc(team, 8 * sizeof(uint64_t), 0, (void **)&data));
  RT_OK(td_symm_alloc(team, sizeof(uint64_t), 0, (void **)&flag));
  *flag = 0;
  RT_OK(td_dev_barrier_all_block(&c));
  for (uint64_t i = 1; i <= 300; i++) {
    uint64_t *peer_data = td_dev_symm_at(&c, data, next);
    for (int k = 0; k < 8; k++)
      peer_data[k] = i * 8 + (uint64_t)k;
    td_dev_st_release(td_dev_symm_at(&c, flag, next), i, (td_dev_scope)(i % 3));
    td_dev_cpu_wake(&c, next);
    while (td_dev_ld_acquire(flag, (td_dev_scope)(i % 3)) < i)
      RT_OK(td_dev_signal_wait_until(&c, flag, TD_CMP_GE, i));
    for (int k = 0; k < 8; k++)
      RT_CHECK(data[k] == i * 8 + (uint64_t)k);
    RT_OK(td_dev_barrier_all_block(&c));
  }
  RT_OK(td_symm_free(team, flag));
  RT_OK(td_symm_free(team, data));
  return TD_OK;
}

/* 1,000 barriers: each rank writes its barrier count to a symmetric word
 * before the barrier; after it, every peer's word must be at least ours. */
static td_status barrier_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  uint64_t *count = NULL;
  RT_OK(td_symm_alloc(team, sizeof *count, 8, (void **)&count));
  *count = 0;
  RT_OK(td_dev_barrier_all_block(&c));
  for (uint64_t i = 1; i <= 1000; i++) {
    td_dev_st_release(count, i, TD_SCOPE_SYS);
    RT_OK(td_dev_barrier_all_block(&c));
    for (int p = 0; p < c.n_pes; p++) {
      uint64_t seen = td_dev_ld_acquire(td_dev_symm_at(&c, count, p), TD_SCOPE_SYS);
      if (seen < i)
        return RT_FAIL("barrier %llu: rank %d saw rank %d's count %llu", (unsigned long long)i,
                       rank, p, (unsigned long long)seen);
    }
    RT_OK(td_dev_barrier_all_block(&c));
  }
  RT_CHECK(*c.barrier_epoch == 2001);
  RT_OK(td_symm_free(team, count));
  return TD_OK;
}

/* 1,000 "operator calls" on the same signal words, never reset: call e puts
 * to every peer and adds 1; the receiver waits for e * n (epoch value). */
static td_status epoch_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  const int n = c.n_pes;
  uint64_t *data = NULL, *sig = NULL, *done = NULL;
  RT_OK(td_symm_alloc(team, (size_t)n * sizeof(uint64_t), 0, (void **)&data));
  RT_OK(td_symm_alloc(team, 2 * sizeof(uint64_t), 0, (void **)&sig));
  sig[0] = sig[1] = 0;
  done = &sig[1];
  RT_OK(td_dev_barrier_all_block(&c));
  for (uint64_t e = 1; e <= 1000; e++) {
    /* Before overwriting a peer's slot, that peer must have finished call e-1. */
    for (int p = 0; p < n; p++) {
      const uint64_t v = e * 1000u + (uint64_t)rank;
      td_dev_putmem_signal(&c, &data[rank], &v, sizeof v, sig, 1, TD_SIGNAL_ADD, p);
    }
    RT_OK(td_dev_signal_wait_until(&c, sig, TD_CMP_GE, e * (uint64_t)n));
    for (int s = 0; s < n; s++)
      RT_CHECK(data[s] == e * 1000u + (uint64_t)s);
    for (int p = 0; p < n; p++)
      td_dev_signal_op(&c, done, 1, TD_SIGNAL_ADD, p);
    RT_OK(td_dev_signal_wait_until(&c, done, TD_CMP_GE, e * (uint64_t)n));
  }
  RT_CHECK(td_dev_signal_fetch(&c, sig) == 1000u * (uint64_t)n);
  RT_OK(td_dev_barrier_all_block(&c));
  RT_OK(td_symm_free(team, sig));
  RT_OK(td_symm_free(team, data));
  return TD_OK;
}

static void test_comparisons(void **state) { rt_run_all(NULL, cmp_rank, NULL); }
static void test_group_waits(void **state) { rt_run_all(NULL, group_rank, NULL); }
static void test_acquire_release(void **state) { rt_run_all(NULL, ldst_rank, NULL); }
static void test_barrier_1000(void **state) { rt_run_all(NULL, barrier_rank, NULL); }
static void test_epochs_without_reset(void **state) { rt_run_all(NULL, epoch_rank, NULL); }

/* A sub-team (even world ranks): the context's ranks, peers and barrier are
 * the team's; odd ranks are not members and get no team. */
static td_status subteam_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  const int n = td_world_size(w), members = (n + 1) / 2;
  td_team *even = NULL;
  RT_OK(td_team_split_strided(td_world_team(w), 0, 2, members, &even));
  if (rank % 2) {
    RT_CHECK(even == NULL);
    return TD_OK;
  }
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(even, &c));
  RT_CHECK(c.rank == rank / 2 && c.n_pes == members && c.world_rank == rank);
  uint64_t *slot = NULL;
  RT_OK(td_symm_alloc(even, (size_t)members * sizeof(uint64_t), 0, (void **)&slot));
  memset(slot, 0, (size_t)members * sizeof(uint64_t));
  RT_OK(td_dev_barrier_all_block(&c));
  for (int p = 0; p < members; p++) {
    const uint64_t v = 1000u + (uint64_t)rank;
    td_dev_putmem_signal(&c, &slot[c.rank], &v, 0, &slot[c.rank], v, TD_SIGNAL_SET, p);
  }
  RT_OK(td_dev_wait_until_all_block(&c, slot, members, TD_CMP_GE, 1000, TD_SCOPE_SYS));
  for (int q = 0; q < members; q++)
    RT_CHECK(slot[q] == 1000u + 2u * (uint64_t)q);
  RT_OK(td_dev_barrier_all_block(&c));
  RT_OK(td_symm_free(even, slot));
  return td_team_destroy(even);
}
static void test_subteam(void **state) { rt_run_all(NULL, subteam_rank, NULL); }

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_comparisons),          cmocka_unit_test(test_group_waits),
      cmocka_unit_test(test_acquire_release),      cmocka_unit_test(test_barrier_1000),
      cmocka_unit_test(test_epochs_without_reset), cmocka_unit_test(test_subteam),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
