/* SPDX-License-Identifier: Apache-2.0
 * Runtime test: error paths of the symmetric heap and one-sided calls, each
 * with its message checked: mismatched allocation sizes (every rank fails, no
 * hang, heap unchanged), invalid alignment, heap exhaustion, double free,
 * foreign pointers, freeing on the wrong team, bad peers, addresses outside
 * the heap, invalid signal operations and comparisons. */
#include "runtime/rt_harness.h"

#define HAS(text) RT_CHECK(strstr(td_last_error(), (text)) != NULL)

static td_status mismatch_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  size_t used0 = 0;
  td_symm_usage(w, &used0, NULL);
  void *p = (void *)1;
  td_status st = td_symm_alloc(team, rank == 1 ? 2048 : 1024, 0, &p);
  RT_CHECK(st == TD_ERR_MISMATCH);
  RT_CHECK(p == (void *)1);
  HAS("members asked for different blocks");
  HAS("team rank 0: 1024 bytes align 64");
  HAS("team rank 1: 2048 bytes align 64");
  size_t used = 1;
  td_symm_usage(w, &used, NULL);
  RT_CHECK(used == used0);
  /* Same bytes, different align: also a mismatch. */
  st = td_symm_alloc(team, 64, rank == 0 ? 128 : 64, &p);
  RT_CHECK(st == TD_ERR_MISMATCH);
  HAS("align 128");
  /* The heap still works, and the first block lands at offset 0. */
  void *base = NULL;
  size_t heap = 0;
  RT_OK(td_symm_heap_base(w, rank, &base, &heap));
  RT_OK(td_symm_alloc(team, 1024, 0, &p));
  RT_CHECK(p == base);
  RT_OK(td_symm_free(team, p));
  return TD_OK;
}

static void test_mismatch(void **state) {
  td_status st = td_local_world_run(3, NULL, mismatch_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

static td_status args_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  int n = td_world_size(w);
  void *p = NULL;
  RT_CHECK(td_symm_alloc(team, 64, 48, &p) == TD_ERR_INVALID_ARG);
  HAS("align=48");
  RT_CHECK(td_symm_alloc(team, 64, 2 << 20, &p) == TD_ERR_INVALID_ARG);
  HAS("power of two up to 1048576");
  RT_CHECK(td_symm_alloc(NULL, 64, 0, &p) == TD_ERR_INVALID_ARG);
  HAS("team is NULL");
  /* Exhaustion: the heap is 1 MiB. */
  RT_CHECK(td_symm_alloc(team, (size_t)2 << 20, 0, &p) == TD_ERR_HEAP_EXHAUSTED);
  HAS("requested 2097152 bytes");
  HAS("1048576 of 1048576 bytes free");
  RT_CHECK(td_symm_alloc(team, SIZE_MAX, 0, &p) == TD_ERR_HEAP_EXHAUSTED);
  HAS("no range that large is free on every member");
  RT_OK(td_symm_alloc(team, 600 << 10, 0, &p));
  void *q = NULL;
  RT_CHECK(td_symm_alloc(team, 600 << 10, 0, &q) == TD_ERR_HEAP_EXHAUSTED);
  char expect[96];
  snprintf(expect, sizeof expect, "%zu of %zu bytes free", ((size_t)1 << 20) - (600 << 10), (size_t)1 << 20);
  HAS(expect);
  /* Bad peers and addresses. */
  uint64_t x = 7;
  RT_CHECK(td_putmem(team, p, &x, sizeof x, n) == TD_ERR_INVALID_ARG);
  HAS("is not a rank of the team");
  RT_CHECK(td_getmem(team, &x, p, sizeof x, -1) == TD_ERR_INVALID_ARG);
  HAS("pe=-1");
  RT_CHECK(td_putmem(team, &x, &x, sizeof x, 0) == TD_ERR_INVALID_ARG);
  HAS("dest=");
  HAS("outside this rank's symmetric heap");
  RT_CHECK(td_putmem(team, (char *)p + (600 << 10), &x, (size_t)1 << 20, 0) == TD_ERR_INVALID_ARG);
  HAS("outside this rank's symmetric heap");
  void *at = NULL;
  RT_CHECK(td_symm_at(team, p, n + 3, &at) == TD_ERR_INVALID_ARG);
  HAS("team (size");
  RT_CHECK(td_symm_ptr(team, &x, 0) == NULL);
  HAS("ptr=");
  RT_CHECK(td_symm_heap_base(w, n, &at, &(size_t){0}) == TD_ERR_INVALID_ARG);
  HAS("not a world rank");
  uint64_t *sig = p;
  RT_CHECK(td_signal_op(team, sig, 1, (td_sigop)9, 0) == TD_ERR_INVALID_ARG);
  HAS("op=9");
  RT_CHECK(td_signal_op(team, (uint64_t *)((char *)p + 4), 1, TD_SIGNAL_ADD, 0) == TD_ERR_INVALID_ARG);
  HAS("not 8-byte aligned");
  RT_CHECK(td_signal_wait_until(team, sig, (td_cmp)17, 0, NULL) == TD_ERR_INVALID_ARG);
  HAS("cmp=17");
  RT_CHECK(td_signal_wait_until(team, &x, TD_CMP_EQ, 7, NULL) == TD_ERR_INVALID_ARG);
  HAS("sig=");
  RT_OK(td_barrier_all(w));
  RT_OK(td_symm_free(team, p));
  return TD_OK;
}

static void test_args_and_exhaustion(void **state) {
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 1 << 20;
  td_status st = td_local_world_run(2, &o, args_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

static td_status free_rank(td_world *w, int rank, void *arg) {
  td_team *world = td_world_team(w);
  void *a = NULL, *b = NULL;
  RT_OK(td_symm_alloc(world, 256, 0, &a));
  RT_OK(td_symm_free(world, a));
  /* Double free: every rank passes it, every rank gets the error. */
  RT_CHECK(td_symm_free(world, a) == TD_ERR_INVALID_ARG);
  HAS("already freed");
  /* A pointer that was never a block, and one inside a block. */
  RT_OK(td_symm_alloc(world, 256, 0, &b));
  RT_CHECK(td_symm_free(world, (char *)b + 8) == TD_ERR_INVALID_ARG);
  HAS("points inside a block");
  RT_CHECK(td_symm_free(world, (char *)b + 4096) == TD_ERR_INVALID_ARG);
  HAS("was never allocated");
  /* A foreign pointer (not in the heap). */
  int local = 0;
  RT_CHECK(td_symm_free(world, &local) == TD_ERR_INVALID_ARG);
  HAS("outside this rank's symmetric heap");
  /* Only rank 0 passes a bad pointer: the others are told who. */
  RT_CHECK(td_symm_free(world, rank == 0 ? (void *)&local : b) == TD_ERR_INVALID_ARG);
  HAS(rank == 0 ? "outside this rank's symmetric heap" : "team rank 0 passed an invalid pointer");
  /* The block is still live (nothing was freed): free it properly. */
  RT_OK(td_symm_free(world, b));
  /* Wrong team: allocated on a sub-team, freed on the world. */
  td_team *sub = NULL;
  RT_OK(td_team_split(world, 0, 0, &sub));
  void *c = NULL;
  RT_OK(td_symm_alloc(sub, 128, 0, &c));
  RT_CHECK(td_symm_free(world, c) == TD_ERR_INVALID_ARG);
  HAS("allocated on another team");
  RT_OK(td_symm_free(sub, c));
  /* A team's remaining blocks go with it. */
  RT_OK(td_symm_alloc(sub, 128, 0, &c));
  RT_OK(td_team_destroy(sub));
  size_t used = 1;
  td_symm_usage(w, &used, NULL);
  RT_CHECK(used == 0);
  return TD_OK;
}

static void test_free_errors(void **state) {
  td_status st = td_local_world_run(3, NULL, free_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

static void test_create_errors(void **state) {
  td_local_world *lw = NULL;
  assert_int_equal(td_local_world_create(0, NULL, &lw), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "nranks=0"));
  assert_int_equal(td_local_world_create(5000, NULL, &lw), TD_ERR_INVALID_ARG);
  td_world_opts o;
  td_world_opts_init(&o);
  o.heap_size = 100;
  assert_int_equal(td_local_world_create(2, &o, &lw), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "heap_size=100"));
  td_world_opts_init(&o);
  o.transport = "shm";
  assert_int_equal(td_local_world_create(2, &o, &lw), TD_ERR_INVALID_ARG);
  assert_non_null(strstr(td_last_error(), "transport 'shm'"));
  assert_null(lw);
  assert_int_equal(td_local_world_run(2, NULL, NULL, NULL), TD_ERR_INVALID_ARG);
  assert_int_equal(td_local_world_create(2, NULL, &lw), TD_OK);
  assert_null(td_local_world_rank(lw, 2));
  assert_non_null(td_local_world_rank(lw, 1));
  assert_int_equal(td_world_rank(td_local_world_rank(lw, 1)), 1);
  td_local_world_destroy(lw);
  td_local_world_destroy(NULL);
}

/* NULL handles and outputs of every entry point, and local-world misuse. */
static td_status null_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  uint64_t *p = NULL;
  RT_OK(td_symm_alloc(team, 64, 0, (void **)&p));
  RT_CHECK(td_symm_alloc(team, 64, 0, NULL) == TD_ERR_INVALID_ARG);
  HAS("out is NULL");
  RT_CHECK(td_symm_free(NULL, p) == TD_ERR_INVALID_ARG);
  HAS("team is NULL");
  RT_CHECK(td_symm_at(team, p, 0, NULL) == TD_ERR_INVALID_ARG);
  HAS("td_symm_at: out is NULL");
  RT_CHECK(td_symm_heap_base(w, 0, NULL, &(size_t){0}) == TD_ERR_INVALID_ARG);
  HAS("base is NULL");
  RT_CHECK(td_putmem(NULL, p, p, 8, 0) == TD_ERR_INVALID_ARG);
  HAS("td_putmem: team is NULL");
  RT_CHECK(td_getmem(team, NULL, p, 8, 0) == TD_ERR_INVALID_ARG);
  HAS("td_getmem: dest is NULL with 8 bytes");
  RT_CHECK(td_putmem_signal(team, p, p, 8, NULL, 1, TD_SIGNAL_SET, 0) == TD_ERR_INVALID_ARG);
  HAS("td_putmem_signal: sig=");
  RT_CHECK(td_signal_wait_until(NULL, p, TD_CMP_EQ, 0, NULL) == TD_ERR_INVALID_ARG);
  HAS("td_signal_wait_until: team is NULL");
  RT_CHECK(td_fence(NULL) == TD_ERR_INVALID_ARG);
  HAS("td_fence: team is NULL");
  RT_CHECK(td_quiet(NULL) == TD_ERR_INVALID_ARG);
  HAS("td_quiet: team is NULL");
  RT_CHECK(td_team_sync(NULL) == TD_ERR_INVALID_ARG);
  HAS("td_team_sync: team is NULL");
  RT_CHECK(td_team_barrier(NULL) == TD_ERR_INVALID_ARG);
  HAS("td_team_barrier: team is NULL");
  RT_CHECK(td_barrier_all(NULL) == TD_ERR_INVALID_ARG);
  HAS("td_barrier_all: world is NULL");
  RT_CHECK(td_team_split_strided(team, 0, 1, 1, NULL) == TD_ERR_INVALID_ARG);
  HAS("out is NULL");
  RT_CHECK(td_team_translate_rank(NULL, 0, team) == -1);
  RT_CHECK(td_team_size(NULL) == 0 && td_team_rank(NULL) == -1 && td_team_world(NULL) == NULL);
  RT_CHECK(td_world_size(NULL) == 0 && td_world_rank(NULL) == -1 && td_world_team(NULL) == NULL);
  RT_CHECK(strcmp(td_cmp_name((td_cmp)77), "invalid") == 0 && strcmp(td_cmp_name(TD_CMP_LE), "le") == 0);
  RT_OK(td_symm_free(team, p));
  /* Finalizing a local-world rank twice. */
  RT_OK(td_world_finalize(w));
  RT_CHECK(td_world_finalize(w) == TD_ERR_STATE);
  HAS("already finalized");
  return TD_OK;
}

static void test_null_args(void **state) {
  td_status st = td_local_world_run(2, NULL, null_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

/* Limits: 512 live blocks per rank, 64 live teams per rank; different blocks freed. */
static td_status limits_rank(td_world *w, int rank, void *arg) {
  td_team *team = td_world_team(w);
  enum { MAXB = 512, MAXT = 64 };
  static void *blocks[2][MAXB];
  void **b = blocks[rank];
  for (int i = 0; i < MAXB; i++)
    RT_OK(td_symm_alloc(team, 8, 8, &b[i]));
  void *extra = NULL;
  RT_CHECK(td_symm_alloc(team, 8, 8, &extra) == TD_ERR_HEAP_EXHAUSTED);
  HAS("already has 512 live blocks");
  RT_CHECK(td_symm_free(team, b[rank]) == TD_ERR_MISMATCH);
  HAS("members passed different blocks");
  for (int i = 0; i < MAXB; i++)
    RT_OK(td_symm_free(team, b[i]));
  td_team *teams[MAXT];
  int made = 0;
  td_status st = TD_OK;
  while (made < MAXT && (st = td_team_split(team, 0, 0, &teams[made])) == TD_OK)
    made++;
  RT_CHECK(made == MAXT - 1); /* the world team holds one of the 64 */
  RT_CHECK(st == TD_ERR_NO_MEMORY);
  HAS("already belongs to 64 live teams");
  for (int i = made - 1; i >= 0; i--)
    RT_OK(td_team_destroy(teams[i]));
  RT_OK(td_team_split(team, 0, 0, &teams[0]));
  RT_OK(td_team_destroy(teams[0]));
  return TD_OK;
}

static void test_limits(void **state) {
  td_status st = td_local_world_run(2, NULL, limits_rank, NULL);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_args_and_exhaustion),
      cmocka_unit_test(test_free_errors),
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test(test_null_args),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
