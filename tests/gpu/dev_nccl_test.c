/* SPDX-License-Identifier: Apache-2.0
 * The nccl transport on GPUs (label gpu): one process per rank (alone, or
 * under tdrun -n N), rank r on device r % devices. With one GPU per rank it
 * builds the NCCL window heap and LSA table and runs every ring form and
 * 1,000 block barriers through the resulting td_dev_ctx, across NVLink when
 * there are several GPUs. When ranks outnumber GPUs, td_nccl_create must
 * refuse with the same-GPU message instead (NCCL's rule), on every rank. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "gpu/dev_kernels.h"
#include "tdist/device/nccl.h"
#include "tdist/rma.h"
#include "tdist/world.h"

static void test_nccl_ring_and_barrier(void **state) {
  td_world *w = NULL;
  td_status st = td_world_init(NULL, &w);
  if (st != TD_OK)
    fail_msg("td_world_init: %s", td_last_error());
  int ndev = 0;
  assert_int_equal(cudaGetDeviceCount(&ndev), cudaSuccess);
  const int rank = td_world_rank(w), n = td_world_size(w);
  td_nccl *nc = NULL;
  st = td_nccl_create(td_world_team(w), td_world_local_rank(w) % ndev, 64u << 20, 10000, &nc);
  if (n > ndev) {
    assert_int_equal(st, TD_ERR_UNSUPPORTED);
    if (strstr(td_last_error(), "use the same GPU") == NULL)
      fail_msg("rank %d: %s", rank, td_last_error());
    print_message("rank %d: %d ranks on %d GPU(s), refused as designed: %s\n", rank, n, ndev, td_last_error());
    assert_int_equal(td_world_finalize(w), TD_OK);
    return;
  }
  if (st != TD_OK)
    fail_msg("rank %d: td_nccl_create: %s: %s", rank, td_status_name(st), td_last_error());
  td_dev_ctx c;
  assert_int_equal(td_nccl_ctx(nc, &c), TD_OK);
  assert_int_equal(c.rank, rank);
  assert_int_equal(c.n_pes, n);
  for (int p = 0; p < n; p++)
    if (c.peer_base[p] == 0)
      fail_msg("rank %d: peer %d is not an LSA peer", rank, p);
  const size_t words = 1001;
  size_t off[6];
  assert_int_equal(td_nccl_alloc(nc, words * 8, 0, &off[0]), TD_OK);
  assert_int_equal(td_nccl_alloc(nc, words * 8, 0, &off[1]), TD_OK);
  assert_int_equal(td_nccl_alloc(nc, 2 * GDEV_RING_FORMS * 8, 0, &off[2]), TD_OK);
  assert_int_equal(td_nccl_alloc(nc, 16, 0, &off[3]), TD_OK);
  assert_int_equal(td_nccl_alloc(nc, 8, 0, &off[4]), TD_OK);
  assert_int_equal(td_nccl_alloc(nc, 16, 0, &off[5]), TD_OK);
  assert_ptr_equal(td_nccl_ptr(nc, off[0]), (void *)(c.peer_base[rank] + off[0]));
  assert_int_equal(td_barrier_all(w), TD_OK);
  st = gdev_ctx_ring_and_barrier(&c, td_nccl_diagnostic(nc), off, 50, words, 1000);
  if (st != TD_OK)
    fail_msg("rank %d of %d: %s: %s", rank, n, td_status_name(st), td_last_error());
  print_message("rank %d of %d on device %d: ring (9 forms) and 2,000 barriers passed over the nccl transport\n",
                rank, n, td_world_local_rank(w) % ndev);
  assert_int_equal(td_barrier_all(w), TD_OK);
  assert_int_equal(td_nccl_destroy(nc), TD_OK);
  assert_int_equal(td_world_finalize(w), TD_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_nccl_ring_and_barrier)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
