/* SPDX-License-Identifier: Apache-2.0
 * A small tdist program that each launcher must be able to start (tdrun,
 * torchrun, Open MPI's mpirun): it creates its world from the environment,
 * allocates symmetric memory, sends its rank number to every peer with
 * put+signal, checks what arrived, does it a second time without clearing the
 * signal (epochs), and finalizes.
 *
 *   launch_check EXPECTED_WORLD_SIZE
 *
 * Prints "launch_check: rank R of N ok (transport T, job J)" and exits 0, or
 * prints what failed and exits 1. The test test_launch_compat runs it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/tdist.h"

#define CHECK(call)                                                                             \
  do {                                                                                          \
    td_status st_ = (call);                                                                     \
    if (st_ != TD_OK) {                                                                         \
      fprintf(stderr, "launch_check: %s failed: %s: %s\n", #call, td_status_name(st_), td_last_error()); \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

/* The value rank r sends in round `round`: distinct per rank and round. */
static uint64_t value_of(int r, int round) { return 0x5100000000ull + (uint64_t)round * 100000u + (uint64_t)r; }

/* One round: rank me puts value_of(me) into slot[me] of every peer, raising
 * the peer's signal by 1; then waits for n arrivals in total since the start. */
static int exchange(td_team *team, uint64_t *slots, uint64_t *sig, int me, int n, int round) {
  uint64_t mine = value_of(me, round);
  for (int k = 0; k < n; k++) {
    int peer = (me + k) % n; /* start with self, then the next ranks: spreads the load */
    CHECK(td_putmem_signal(team, &slots[me], &mine, sizeof mine, sig, 1, TD_SIGNAL_ADD, peer));
  }
  /* The signal is never reset: round r waits for r*n arrivals in all. */
  CHECK(td_signal_wait_until(team, sig, TD_CMP_GE, (uint64_t)n * (uint64_t)round, NULL));
  for (int r = 0; r < n; r++) {
    if (slots[r] != value_of(r, round)) {
      fprintf(stderr, "launch_check: rank %d round %d: slot %d holds %#" PRIx64 ", expected %#" PRIx64 "\n", me,
              round, r, slots[r], value_of(r, round));
      return 1;
    }
  }
  /* Nobody may start the next round (overwriting slots) before all checked. */
  CHECK(td_team_barrier(team));
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2 || atoi(argv[1]) < 1) {
    fprintf(stderr, "usage: launch_check EXPECTED_WORLD_SIZE\n");
    return 2;
  }
  int expected = atoi(argv[1]);
  td_world_opts opts;
  td_world_opts_init(&opts);
  opts.heap_size = 1 << 20; /* tests run many ranks on a small machine */
  td_world *world = NULL;
  CHECK(td_world_init(&opts, &world));
  int me = td_world_rank(world), n = td_world_size(world);
  if (n != expected || me < 0 || me >= n || td_world_local_size(world) != n || td_world_local_rank(world) != me) {
    fprintf(stderr, "launch_check: world says rank %d of %d (local %d of %d); the launcher started %d ranks\n", me,
            n, td_world_local_rank(world), td_world_local_size(world), expected);
    return 1;
  }
  td_team *team = td_world_team(world);
  uint64_t *slots = NULL, *sig = NULL;
  CHECK(td_symm_alloc(team, (size_t)n * sizeof *slots, 0, (void **)&slots));
  CHECK(td_symm_alloc(team, sizeof *sig, 0, (void **)&sig));
  memset(slots, 0, (size_t)n * sizeof *slots);
  *sig = 0;
  CHECK(td_team_barrier(team)); /* everyone's memory is cleared before any put */
  for (int round = 1; round <= 2; round++)
    if (exchange(team, slots, sig, me, n, round) != 0)
      return 1;
  CHECK(td_symm_free(team, sig));
  CHECK(td_symm_free(team, slots));
  const char *transport = td_world_transport(world);
  char transport_copy[32];
  snprintf(transport_copy, sizeof transport_copy, "%s", transport ? transport : "?");
  CHECK(td_world_finalize(world));
  const char *job = getenv("TD_JOB_ID");
  printf("launch_check: rank %d of %d ok (transport %s, job %s)\n", me, n, transport_copy, job ? job : "-");
  return 0;
}
