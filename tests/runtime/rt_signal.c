/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: put/get/signal ordering. Data written before a signal is
 * visible to the rank that waited for the signal, over many rounds, for
 * putmem_signal, putmem + signal_op, nbi + quiet, getmem, and atomic adds
 * from every rank to one counter. */
#include <pthread.h>

#include "runtime/rt_harness.h"

enum { ROUNDS = 300, WORDS = 512 };

/* Ring: rank r sends round i's block to r+1 and waits for r-1's. The
 * receiver acknowledges each round so the sender never overwrites unread data. */
static td_status ring_rank(td_world *w, int rank, void *arg) {
  int mode = *(int *)arg;
  td_team *team = td_world_team(w);
  int n = td_world_size(w), next = (rank + 1) % n, prev = (rank + n - 1) % n;
  uint64_t *buf = NULL, *sig = NULL, *ack = NULL;
  RT_OK(td_symm_alloc(team, WORDS * sizeof(uint64_t), 0, (void **)&buf));
  RT_OK(td_symm_alloc(team, 2 * sizeof(uint64_t), 0, (void **)&sig));
  ack = sig + 1;
  sig[0] = sig[1] = 0;
  RT_OK(td_barrier_all(w));
  uint64_t local[WORDS];
  for (uint64_t i = 1; i <= ROUNDS; i++) {
    RT_OK(td_signal_wait_until(team, ack, TD_CMP_GE, i - 1, NULL));
    for (int k = 0; k < WORDS; k++)
      local[k] = i * 1000003u + (uint64_t)rank * 7919u + (uint64_t)k;
    if (mode == 0) {
      RT_OK(td_putmem_signal(team, buf, local, sizeof local, sig, i, TD_SIGNAL_SET, next));
    } else if (mode == 1) {
      RT_OK(td_putmem(team, buf, local, sizeof local, next));
      RT_OK(td_signal_op(team, sig, 1, TD_SIGNAL_ADD, next));
    } else {
      RT_OK(td_putmem_nbi(team, buf, local, sizeof local / 2, next));
      RT_OK(td_putmem_signal_nbi(team, buf + WORDS / 2, local + WORDS / 2, sizeof local / 2, sig, 1, TD_SIGNAL_ADD,
                                 next));
      RT_OK(td_quiet(team));
    }
    uint64_t seen = 0;
    RT_OK(td_signal_wait_until(team, sig, TD_CMP_GE, i, &seen));
    RT_CHECK(seen == i);
    for (int k = 0; k < WORDS; k++)
      if (buf[k] != i * 1000003u + (uint64_t)prev * 7919u + (uint64_t)k)
        return RT_FAIL("rank %d round %llu word %d: got %llu", rank, (unsigned long long)i, k,
                       (unsigned long long)buf[k]);
    RT_OK(td_signal_op(team, ack, i, TD_SIGNAL_SET, prev));
  }
  RT_OK(td_barrier_all(w));
  RT_OK(td_symm_free(team, sig));
  RT_OK(td_symm_free(team, buf));
  return TD_OK;
}

static void test_ring_putmem_signal(void **state) {
  int mode = 0;
  rt_run_all(NULL, ring_rank, &mode);
}
static void test_ring_put_then_signal_op(void **state) {
  int mode = 1;
  rt_run_all(NULL, ring_rank, &mode);
}
static void test_ring_nbi_quiet(void **state) {
  int mode = 2;
  rt_run_all(NULL, ring_rank, &mode);
}

/* Every rank adds to rank 0's counter; rank 0 waits for the total, then reads
 * every rank's block with getmem. */
static td_status add_get_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  int n = td_world_size(w);
  uint64_t *counter = NULL, *block = NULL;
  RT_OK(td_symm_alloc(team, sizeof *counter, 8, (void **)&counter));
  RT_OK(td_symm_alloc(team, 64 * sizeof *block, 0, (void **)&block));
  *counter = 0;
  for (int k = 0; k < 64; k++)
    block[k] = (uint64_t)rank * 100 + (uint64_t)k;
  RT_OK(td_barrier_all(w));
  for (int i = 0; i < 100; i++)
    RT_OK(td_signal_op(team, counter, 1, TD_SIGNAL_ADD, 0));
  if (rank == 0) {
    RT_OK(td_signal_wait_until(team, counter, TD_CMP_EQ, (uint64_t)n * 100, NULL));
    RT_CHECK(td_signal_fetch(counter) == (uint64_t)n * 100);
  }
  uint64_t got[64];
  for (int p = 0; p < n; p++) {
    RT_OK(td_getmem(team, got, block, sizeof got, p));
    for (int k = 0; k < 64; k++)
      RT_CHECK(got[k] == (uint64_t)p * 100 + (uint64_t)k);
    RT_OK(td_getmem_nbi(team, got, block + 1, sizeof(uint64_t), p));
    RT_OK(td_quiet(team));
    RT_CHECK(got[0] == (uint64_t)p * 100 + 1);
  }
  RT_OK(td_fence(team));
  RT_OK(td_barrier_all(w));
  RT_OK(td_symm_free(team, block));
  RT_OK(td_symm_free(team, counter));
  return TD_OK;
}

static void test_add_and_get(void **state) { rt_run_all(NULL, add_get_rank, NULL); }

/* Several threads of one rank use one-sided calls and waits at once: worker
 * k of rank r sends to worker k of rank r+1 on its own signal word. */
enum { WORKERS = 3, WROUNDS = 200 };

typedef struct {
  td_team *team;
  uint64_t *data, *sig; /* per worker: data[k], sig[2k] (arrival), sig[2k+1] (ack) */
  int k;
  td_status st;
  char msg[512];
} worker_arg;

static td_status worker_body(worker_arg *a) {
  td_team *team = a->team;
  int n = td_team_size(team), rank = td_team_rank(team);
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  uint64_t *arrive = &a->sig[2 * a->k], *ack = &a->sig[2 * a->k + 1];
  for (uint64_t i = 1; i <= WROUNDS; i++) {
    RT_OK(td_signal_wait_until(team, ack, TD_CMP_GE, i - 1, NULL));
    uint64_t v = i * 7 + (uint64_t)rank * 1000 + (uint64_t)a->k;
    RT_OK(td_putmem_signal(team, &a->data[a->k], &v, sizeof v, arrive, i, TD_SIGNAL_SET, next));
    RT_OK(td_signal_wait_until(team, arrive, TD_CMP_GE, i, NULL));
    RT_CHECK(a->data[a->k] == i * 7 + (uint64_t)prev * 1000 + (uint64_t)a->k);
    RT_OK(td_signal_op(team, ack, i, TD_SIGNAL_SET, prev));
  }
  return TD_OK;
}

static void *worker_main(void *p) {
  worker_arg *a = p;
  a->st = worker_body(a);
  if (a->st != TD_OK)
    snprintf(a->msg, sizeof a->msg, "%s", td_last_error());
  return NULL;
}

static td_status threads_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  uint64_t *data = NULL, *sig = NULL;
  RT_OK(td_symm_alloc(team, WORKERS * sizeof(uint64_t), 0, (void **)&data));
  RT_OK(td_symm_alloc(team, 2 * WORKERS * sizeof(uint64_t), 0, (void **)&sig));
  memset(sig, 0, 2 * WORKERS * sizeof(uint64_t));
  RT_OK(td_barrier_all(w));
  worker_arg args[WORKERS];
  pthread_t th[WORKERS];
  for (int k = 0; k < WORKERS; k++) {
    args[k] = (worker_arg){.team = team, .data = data, .sig = sig, .k = k};
    RT_CHECK(pthread_create(&th[k], NULL, worker_main, &args[k]) == 0);
  }
  for (int k = 0; k < WORKERS; k++)
    pthread_join(th[k], NULL);
  for (int k = 0; k < WORKERS; k++)
    if (args[k].st != TD_OK)
      return td__error(args[k].st, "worker %d: %s", k, args[k].msg);
  RT_OK(td_barrier_all(w));
  RT_OK(td_symm_free(team, sig));
  RT_OK(td_symm_free(team, data));
  return TD_OK;
}

static void test_threads_per_rank(void **state) { rt_run_all(NULL, threads_rank, NULL); }

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_putmem_signal),
      cmocka_unit_test(test_ring_put_then_signal_op),
      cmocka_unit_test(test_ring_nbi_quiet),
      cmocka_unit_test(test_add_and_get),
      cmocka_unit_test(test_threads_per_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
