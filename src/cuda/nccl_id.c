/* SPDX-License-Identifier: Apache-2.0
 * Moving a few bytes from one rank to all through the team's symmetric heap
 * (primitives layer, transports): how the nccl transport hands NCCL's unique
 * id to every rank without any other bootstrap. Uses only the host runtime
 * below it (symmetric allocation, get, barrier), and checks that every rank
 * made the same call before anyone reads. */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "tdist/device/nccl.h"
#include "tdist/rma.h"
#include "tdist/symm.h"

enum { TD__BCAST_MAX = 4096 };

td_status td__nccl_bcast_bytes(td_team *team, int root, void *buf, size_t bytes) {
  if (team == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td__nccl_bcast_bytes: team is NULL");
  const int n = td_team_size(team), me = td_team_rank(team);
  /* Fixed-size area, so a size mismatch cannot break the allocation itself. */
  const size_t header = (size_t)n * 2 * sizeof(uint64_t);
  uint64_t *area = NULL;
  TD_CHECK(td_symm_alloc(team, header + TD__BCAST_MAX, 64, (void **)&area));
  const uint64_t mine[2] = {(uint64_t)bytes, (uint64_t)(int64_t)root};
  td_status st = TD_OK;
  for (int p = 0; p < n && st == TD_OK; p++)
    st = td_putmem(team, &area[2 * me], mine, sizeof mine, p);
  if (st == TD_OK && me == root && bytes <= TD__BCAST_MAX && buf != NULL)
    memcpy((char *)area + header, buf, bytes);
  if (st == TD_OK)
    st = td_team_barrier(team);
  if (st == TD_OK) {
    for (int p = 0; p < n; p++)
      if (area[2 * p] != mine[0] || area[2 * p + 1] != mine[1]) {
        st = td__error(TD_ERR_MISMATCH,
                       "td__nccl_bcast_bytes: rank %d passed %" PRIu64 " bytes from root %d, rank "
                       "%d passed %" PRIu64 " bytes from root %d",
                       me, mine[0], root, p, area[2 * p], (int)(int64_t)area[2 * p + 1]);
        break;
      }
  }
  if (st == TD_OK && (root < 0 || root >= n || bytes > TD__BCAST_MAX || (bytes && buf == NULL)))
    st = td__error(TD_ERR_INVALID_ARG,
                   "td__nccl_bcast_bytes: root %d of a team of %d, %zu bytes (at most %d), buf %s",
                   root, n, bytes, TD__BCAST_MAX, buf ? "set" : "NULL");
  if (st == TD_OK && me != root && bytes)
    st = td_getmem(team, buf, (char *)area + header, bytes, root);
  /* Free in every case: it is collective and ends with a barrier, so the root's
   * area outlives every reader. */
  td_status fst = td_symm_free(team, area);
  return st != TD_OK ? st : fst;
}
