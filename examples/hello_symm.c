/* SPDX-License-Identifier: Apache-2.0
 * Example: the runtime in 60 lines. Every rank allocates a symmetric buffer
 * and a signal, puts a greeting into its right neighbour's buffer with
 * td_putmem_signal, waits for the greeting from its left neighbour, prints
 * it, and leaves.
 *
 *   ./hello_symm            # a local world of 4 ranks (threads)
 *   ./hello_symm 8          # ... of 8 ranks
 *   tdrun -n 4 ./hello_symm # 4 processes over shared memory */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdist/rma.h"
#include "tdist/symm.h"
#include "tdist/world.h"

static td_status hello(td_world *world, int rank, void *arg) {
  td_team *team = td_world_team(world);
  int size = td_world_size(world), right = (rank + 1) % size;
  char *box = NULL;
  uint64_t *arrived = NULL;
  td_status st = td_symm_alloc(team, 64, 0, (void **)&box);
  if (st == TD_OK)
    st = td_symm_alloc(team, sizeof *arrived, 0, (void **)&arrived);
  if (st != TD_OK)
    return st;
  *arrived = 0;
  if ((st = td_barrier_all(world)) != TD_OK) /* every rank's signal is cleared before anyone puts */
    return st;
  char note[64];
  snprintf(note, sizeof note, "hello from rank %d of %d", rank, size);
  /* The data lands first, then the signal (release): the waiter sees both. */
  st = td_putmem_signal(team, box, note, sizeof note, arrived, 1, TD_SIGNAL_SET, right);
  if (st == TD_OK)
    st = td_signal_wait_until(team, arrived, TD_CMP_EQ, 1, NULL);
  if (st == TD_OK)
    printf("rank %d (%s transport) got: %s\n", rank, td_world_transport(world), box);
  if (st == TD_OK)
    st = td_symm_free(team, arrived);
  if (st == TD_OK)
    st = td_symm_free(team, box);
  return st;
}

int main(int argc, char **argv) {
  td_status st;
  if (getenv("TD_RANK") || getenv("OMPI_COMM_WORLD_RANK")) {
    td_world *world = NULL; /* launched: this process is one rank */
    st = td_world_init(NULL, &world);
    if (st == TD_OK) {
      st = hello(world, td_world_rank(world), NULL);
      td_status fin = td_world_finalize(world);
      st = st != TD_OK ? st : fin;
    }
  } else {
    int ranks = argc > 1 ? atoi(argv[1]) : 4;
    st = td_local_world_run(ranks, NULL, hello, NULL);
  }
  if (st != TD_OK) {
    fprintf(stderr, "hello_symm: %s: %s\n", td_status_name(st), td_last_error());
    return 1;
  }
  return 0;
}
