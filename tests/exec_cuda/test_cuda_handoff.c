/* SPDX-License-Identifier: Apache-2.0
 * The CUDA executor's hand-off rule (handoff.c), which needs no GPU: a
 * queue task is enqueued only once the persistent kernel published its go
 * word for this launch, and each stream's tasks go in schedule order. So no
 * stream ever parks on a wait that depends on another rank (the stall
 * exec_gemm_queue_test hit on the H200 with bf16 4 ranks M = 3: rank 2's
 * parked stream wait held up rank 1's copy in a shared hardware queue).
 * Cases: nothing published, a prefix, out-of-order publication, words left
 * over from the previous launch (epochs never reset), an empty list (a rank
 * whose chunks are all empty, as rank 3 at M = 3 over 4 ranks), resuming
 * from a position. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "exec/cuda/cuda_exec.h"

static void nothing_published(void **state) {
  (void)state;
  uint64_t go[4] = {0, 0, 0, 0};
  const uint32_t list[3] = {0, 2, 3};
  assert_int_equal(td__cuda_handoff_ready(go, 1, list, 3, 0), 0);
}

static void prefix_in_schedule_order(void **state) {
  (void)state;
  uint64_t go[6] = {0};
  const uint32_t list[4] = {1, 3, 4, 5};
  go[1] = 1;
  assert_int_equal(td__cuda_handoff_ready(go, 1, list, 4, 0), 1);
  go[3] = 1;
  go[4] = 1;
  assert_int_equal(td__cuda_handoff_ready(go, 1, list, 4, 1), 3);
  go[5] = 1;
  assert_int_equal(td__cuda_handoff_ready(go, 1, list, 4, 3), 4);
  /* at the end it stays there */
  assert_int_equal(td__cuda_handoff_ready(go, 1, list, 4, 4), 4);
}

/* A later task published before an earlier one of the same stream waits for it:
 * the stream runs its tasks in schedule order, as the kernel's block pulls them. */
static void out_of_order_waits_for_the_head(void **state) {
  (void)state;
  uint64_t go[3] = {0, 7, 7};
  const uint32_t list[3] = {0, 1, 2};
  assert_int_equal(td__cuda_handoff_ready(go, 7, list, 3, 0), 0);
  go[0] = 7;
  assert_int_equal(td__cuda_handoff_ready(go, 7, list, 3, 0), 3);
}

/* Go words keep the previous launch's epoch until this launch publishes:
 * launch 2 must not take launch 1's words as ready, nor a skipped task's. */
static void stale_epochs_are_not_ready(void **state) {
  (void)state;
  uint64_t go[3] = {1, 1, 1}; /* all handed off in launch 1 */
  const uint32_t list[3] = {0, 1, 2};
  assert_int_equal(td__cuda_handoff_ready(go, 2, list, 3, 0), 0);
  go[0] = 2;
  assert_int_equal(td__cuda_handoff_ready(go, 2, list, 3, 0), 1);
  /* a word already past this epoch (never happens, but GEQ like the stream waits were) */
  go[1] = 3;
  assert_int_equal(td__cuda_handoff_ready(go, 2, list, 3, 1), 2);
}

static void empty_list(void **state) {
  (void)state;
  uint64_t go[1] = {5};
  assert_int_equal(td__cuda_handoff_ready(go, 5, NULL, 0, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nothing_published),
      cmocka_unit_test(prefix_in_schedule_order),
      cmocka_unit_test(out_of_order_waits_for_the_head),
      cmocka_unit_test(stale_epochs_are_not_ready),
      cmocka_unit_test(empty_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
