/* SPDX-License-Identifier: Apache-2.0
 * The nccl transport's CPU side (CI, no GPU needed): the unique-id exchange
 * through the symmetric heap over local worlds of 1-8 ranks (bytes arrive
 * intact; mismatched calls fail on every rank, naming both), and every
 * argument error of td_nccl_create. A well-formed create fails cleanly on
 * every rank with no GPU (CI) and is refused when ranks share the one GPU
 * (the device machine): NCCL would refuse two ranks on one GPU obscurely. */
#include "runtime/rt_harness.h"
#include "tdist/device/nccl.h"

static td_status bcast_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *team = td_world_team(w);
  const int n = td_world_size(w);
  for (int root = 0; root < n; root += (n > 2 ? n - 1 : 1)) {
    unsigned char id[128];
    for (int k = 0; k < 128; k++)
      id[k] = rank == root ? (unsigned char)(k * 37 + root * 11 + 1) : 0xee;
    RT_OK(td__nccl_bcast_bytes(team, root, id, sizeof id));
    for (int k = 0; k < 128; k++)
      RT_CHECK(id[k] == (unsigned char)(k * 37 + root * 11 + 1));
  }
  RT_OK(td__nccl_bcast_bytes(team, 0, NULL, 0));
  return TD_OK;
}

static td_status mismatch_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  unsigned char id[128] = {0};
  td_status st = td__nccl_bcast_bytes(td_world_team(w), 0, id, rank == 1 ? 64 : 128);
  RT_CHECK(st == TD_ERR_MISMATCH);
  RT_CHECK(strstr(td_last_error(), "passed 64 bytes from root 0") != NULL);
  st = td__nccl_bcast_bytes(td_world_team(w), 0, id, 5000);
  RT_CHECK(st == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "5000 bytes (at most 4096)") != NULL);
  st = td__nccl_bcast_bytes(td_world_team(w), 7, id, 8);
  RT_CHECK(st == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "root 7 of a team of 2") != NULL);
  return TD_OK;
}

static td_status args_rank(td_world *w, int rank, void *arg) {
  (void)arg;
  (void)rank;
  td_team *team = td_world_team(w);
  td_nccl *nc = NULL;
  RT_CHECK(td_nccl_create(NULL, 0, 0, 0, &nc) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "team is NULL") != NULL);
  RT_CHECK(td_nccl_create(team, 0, 0, 0, NULL) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "out is NULL") != NULL);
  RT_CHECK(td_nccl_create(team, -1, 0, 0, &nc) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "device -1 is negative") != NULL);
  RT_CHECK(td_nccl_create(team, 0, 100, 0, &nc) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "heap_size = 100 bytes") != NULL);
  RT_CHECK(td_nccl_create(team, 0, 0, -3, &nc) == TD_ERR_INVALID_ARG);
  RT_CHECK(strstr(td_last_error(), "timeout_ms = -3") != NULL);
  /* Well-formed: every rank on device 0. */
  td_status st = td_nccl_create(team, 0, 1 << 20, 0, &nc);
  const char *msg = td_last_error();
  if (st == TD_ERR_CUDA)
    RT_CHECK(strstr(msg, "could not use its CUDA device") != NULL); /* no GPU here */
  else if (st == TD_ERR_UNSUPPORTED)
    RT_CHECK(strstr(msg, "ranks 0 and 1 use the same GPU") != NULL ||
             strstr(msg, "built without NCCL") != NULL);
  else
    return RT_FAIL("td_nccl_create with two ranks on device 0: %s: %s", td_status_name(st), msg);
  RT_CHECK(nc == NULL);
  RT_CHECK(td_nccl_destroy(NULL) == TD_OK);
  RT_CHECK(td_nccl_ptr(NULL, 0) == NULL);
  RT_CHECK(td_nccl_diagnostic(NULL) == NULL);
  td_dev_ctx c;
  RT_CHECK(td_nccl_ctx(NULL, &c) != TD_OK);
  size_t off;
  RT_CHECK(td_nccl_alloc(NULL, 8, 0, &off) != TD_OK);
  return TD_OK;
}

static void test_id_exchange(void **state) { rt_run_all(NULL, bcast_rank, NULL); }
static void test_id_exchange_mismatch(void **state) {
  assert_int_equal(td_local_world_run(2, NULL, mismatch_rank, NULL), TD_OK);
}
static void test_create_errors(void **state) {
  assert_int_equal(td_local_world_run(2, NULL, args_rank, NULL), TD_OK);
}

int main(int argc, char **argv) {
  rt_parse_args(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_id_exchange),
      cmocka_unit_test(test_id_exchange_mismatch),
      cmocka_unit_test(test_create_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
