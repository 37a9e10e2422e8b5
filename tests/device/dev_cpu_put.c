/* SPDX-License-Identifier: Apache-2.0
 * Device API from CPU tile code: puts, gets and signals in every form.
 * Each rank builds its device context from the world team and, like a CPU
 * tile would, moves data with td_dev_* calls only: a ring of putmem_signal in
 * thread, warp, block and nbi forms, put + signal_op / notify, gets, adds
 * from every rank to one counter, and two workers per rank sharing one
 * context. Runs as local worlds of 1, 2, 3, 4 and 8 ranks, and as processes
 * (shm) when launched by tdrun. */
#include <pthread.h>

#include "runtime/rt_harness.h"
#include "tdist/device.h"

enum { ROUNDS = 200, WORDS = 300, FORMS = 9 };

static uint64_t pattern(uint64_t round, int rank, int k) {
  return round * 1000003u + (uint64_t)rank * 7919u + (uint64_t)k * 31u + 5u;
}

/* One round's transfer to `next` in form `form` (0..FORMS-1). */
static void send(const td_dev_ctx *c, int form, uint64_t *buf, const uint64_t *local, size_t bytes,
                 uint64_t *sig, uint64_t round, int next) {
  switch (form) {
  case 0: td_dev_putmem_signal(c, buf, local, bytes, sig, round, TD_SIGNAL_SET, next); break;
  case 1: td_dev_putmem_signal_warp(c, buf, local, bytes, sig, 1, TD_SIGNAL_ADD, next); break;
  case 2: td_dev_putmem_signal_block(c, buf, local, bytes, sig, round, TD_SIGNAL_SET, next); break;
  case 3: td_dev_putmem_signal_nbi(c, buf, local, bytes, sig, 1, TD_SIGNAL_ADD, next); break;
  case 4:
    td_dev_putmem_signal_nbi_warp(c, buf, local, bytes, sig, round, TD_SIGNAL_SET, next);
    td_dev_quiet(c);
    break;
  case 5:
    td_dev_putmem_signal_nbi_block(c, buf, local, bytes, sig, 1, TD_SIGNAL_ADD, next);
    break;
  case 6: /* blocking put in two halves, then a separate signal */
    td_dev_putmem(c, buf, local, bytes / 2, next);
    td_dev_putmem_warp(c, (char *)buf + bytes / 2, (const char *)local + bytes / 2, bytes - bytes / 2,
                       next);
    td_dev_fence(c);
    td_dev_signal_op(c, sig, round, TD_SIGNAL_SET, next);
    break;
  case 7: /* nbi puts, quiet, then notify */
    td_dev_putmem_nbi(c, buf, local, bytes / 3, next);
    td_dev_putmem_nbi_warp(c, (char *)buf + bytes / 3, (const char *)local + bytes / 3, bytes / 3, next);
    td_dev_putmem_nbi_block(c, (char *)buf + 2 * (bytes / 3), (const char *)local + 2 * (bytes / 3),
                            bytes - 2 * (bytes / 3), next);
    td_dev_quiet(c);
    td_dev_notify(c, sig, 1, TD_SIGNAL_ADD, next);
    break;
  default: /* plain stores through symm_at, then notify_block */
    memcpy(td_dev_symm_at(c, buf, next), local, bytes);
    td_dev_notify_block(c, sig, round, TD_SIGNAL_SET, next);
    break;
  }
}

/* Whether form f raises the signal by adding 1 per round (else sets it to the round). */
static int adds(int f) { return f == 1 || f == 3 || f == 5 || f == 7; }

static td_status ring_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  RT_CHECK(td_dev_my_pe(&c) == rank && td_dev_n_pes(&c) == td_world_size(w));
  const int n = c.n_pes, next = (rank + 1) % n, prev = (rank + n - 1) % n;
  uint64_t *buf = NULL, *sig = NULL;
  RT_OK(td_symm_alloc(team, WORDS * sizeof(uint64_t), 0, (void **)&buf));
  RT_OK(td_symm_alloc(team, (FORMS + 1) * sizeof(uint64_t), 0, (void **)&sig));
  memset(sig, 0, (FORMS + 1) * sizeof(uint64_t));
  uint64_t *ack = &sig[FORMS];
  RT_OK(td_dev_barrier_all_block(&c));
  uint64_t local[WORDS];
  uint64_t sent = 0; /* rounds sent over all forms: the ack counter */
  for (int f = 0; f < FORMS; f++) {
    for (uint64_t i = 1; i <= ROUNDS; i++) {
      RT_OK(td_dev_signal_wait_until(&c, ack, TD_CMP_GE, sent));
      for (int k = 0; k < WORDS; k++)
        local[k] = pattern(i + (uint64_t)f * ROUNDS, rank, k);
      send(&c, f, buf, local, sizeof local, &sig[f], i, next);
      RT_OK(td_dev_signal_wait_until(&c, &sig[f], adds(f) ? TD_CMP_GE : TD_CMP_EQ, i));
      for (int k = 0; k < WORDS; k++)
        if (buf[k] != pattern(i + (uint64_t)f * ROUNDS, prev, k))
          return RT_FAIL("form %d round %llu word %d: got %llu", f, (unsigned long long)i, k,
                         (unsigned long long)buf[k]);
      sent++;
      td_dev_signal_op(&c, ack, 1, TD_SIGNAL_ADD, prev);
    }
  }
  RT_OK(td_dev_barrier_all_block(&c));
  /* The barrier is a release/acquire with every rank: every ack has landed. */
  RT_CHECK(td_dev_signal_fetch(&c, ack) == sent);
  RT_OK(td_symm_free(team, sig));
  RT_OK(td_symm_free(team, buf));
  return TD_OK;
}

/* Every rank adds to rank 0's counter; then everybody reads every rank's block
 * with the get forms. */
static td_status add_get_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  td_dev_ctx c;
  RT_OK(td_dev_ctx_cpu(team, &c));
  const int n = c.n_pes;
  uint64_t *counter = NULL, *block = NULL;
  RT_OK(td_symm_alloc(team, sizeof *counter, 8, (void **)&counter));
  RT_OK(td_symm_alloc(team, 64 * sizeof *block, 0, (void **)&block));
  *counter = 0;
  for (int k = 0; k < 64; k++)
    block[k] = pattern(7, rank, k);
  RT_OK(td_dev_barrier_all_block(&c));
  for (int i = 0; i < 50; i++)
    td_dev_signal_op(&c, counter, 2, TD_SIGNAL_ADD, 0);
  if (rank == 0)
    RT_OK(td_dev_signal_wait_until(&c, counter, TD_CMP_EQ, (uint64_t)n * 100));
  uint64_t got[64];
  for (int p = 0; p < n; p++) {
    RT_CHECK(td_dev_symm_at(&c, block, p) != NULL);
    for (int form = 0; form < 6; form++) {
      memset(got, 0, sizeof got);
      switch (form) {
      case 0: td_dev_getmem(&c, got, block, sizeof got, p); break;
      case 1: td_dev_getmem_warp(&c, got, block, sizeof got, p); break;
      case 2: td_dev_getmem_block(&c, got, block, sizeof got, p); break;
      case 3: td_dev_getmem_nbi(&c, got, block, sizeof got, p); break;
      case 4: td_dev_getmem_nbi_warp(&c, got, block, sizeof got, p); break;
      default: td_dev_getmem_nbi_block(&c, got, block, sizeof got, p); break;
      }
      td_dev_quiet(&c);
      for (int k = 0; k < 64; k++)
        if (got[k] != pattern(7, p, k))
          return RT_FAIL("get form %d from rank %d word %d: got %llu", form, p, k,
                         (unsigned long long)got[k]);
    }
  }
  RT_OK(td_dev_barrier_all_block(&c));
  RT_OK(td_symm_free(team, block));
  RT_OK(td_symm_free(team, counter));
  return TD_OK;
}

/* Two workers of each rank share one context: worker 0 sends even blocks,
 * worker 1 odd ones, each with its own signal; both wait on theirs. */
typedef struct worker_arg {
  td_dev_ctx c;
  uint64_t *buf, *sig;
  int id;
  td_status st;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  td_dev_ctx c = a->c;
  c.worker = a->id;
  const int n = c.n_pes, rank = c.rank, next = (rank + 1) % n, prev = (rank + n - 1) % n;
  uint64_t local[32];
  a->st = TD_OK;
  for (uint64_t i = 1; i <= 100; i++) {
    for (int k = 0; k < 32; k++)
      local[k] = pattern(i, rank, k + 32 * a->id);
    /* Each round writes a fresh slot, so no acknowledgement is needed. */
    uint64_t *dst = a->buf + (i % 100) * 64 + 32 * a->id;
    td_dev_putmem_signal(&c, dst, local, sizeof local, &a->sig[a->id], 1, TD_SIGNAL_ADD, next);
    td_status st = td_dev_signal_wait_until(&c, &a->sig[a->id], TD_CMP_GE, i);
    if (st != TD_OK) {
      a->st = st;
      return NULL;
    }
    const uint64_t *got = a->buf + (i % 100) * 64 + 32 * a->id;
    for (int k = 0; k < 32; k++)
      if (got[k] != pattern(i, prev, k + 32 * a->id)) {
        a->st = RT_FAIL("worker %d round %llu word %d wrong", a->id, (unsigned long long)i, k);
        return NULL;
      }
  }
  return NULL;
}

static td_status workers_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  (void)rank;
  td_team *team = td_world_team(w);
  worker_arg a[2];
  RT_OK(td_dev_ctx_cpu(team, &a[0].c));
  uint64_t *buf = NULL, *sig = NULL;
  RT_OK(td_symm_alloc(team, 100 * 64 * sizeof(uint64_t), 0, (void **)&buf));
  RT_OK(td_symm_alloc(team, 2 * sizeof(uint64_t), 0, (void **)&sig));
  sig[0] = sig[1] = 0;
  RT_OK(td_dev_barrier_all_block(&a[0].c));
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    a[i].c = a[0].c;
    a[i].buf = buf;
    a[i].sig = sig;
    a[i].id = i;
    pthread_create(&t[i], NULL, worker, &a[i]);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++)
    RT_OK(a[i].st);
  RT_OK(td_dev_barrier_all_block(&a[0].c));
  RT_OK(td_symm_free(team, sig));
  RT_OK(td_symm_free(team, buf));
  return TD_OK;
}

static void test_ring_all_forms(void **state) { rt_run_all(NULL, ring_rank, NULL); }
static void test_add_and_get(void **state) { rt_run_all(NULL, add_get_rank, NULL); }
static void test_two_workers_per_rank(void **state) { rt_run_all(NULL, workers_rank, NULL); }

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_all_forms),
      cmocka_unit_test(test_add_and_get),
      cmocka_unit_test(test_two_workers_per_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
