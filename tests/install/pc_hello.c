/* SPDX-License-Identifier: Apache-2.0
 * The program the install test builds against an installed tdist with
 * nothing but pkg-config's flags: a local world of two ranks that allocates
 * a symmetric block and all-reduces into it. Exits 0 and prints "ok" when the
 * sum is right. */
#include <stdio.h>

#include <tdist/tdist.h>

static td_status rank_main(td_world *w, int rank, void *arg) {
  (void)arg;
  td_team *t = td_world_team(w);
  float *x = NULL;
  td_status st = td_symm_alloc(t, 64 * sizeof(float), 0, (void **)&x);
  if (st != TD_OK)
    return st;
  float mine[64];
  for (int i = 0; i < 64; i++)
    mine[i] = (float)(rank + 1);
  if ((st = td_all_reduce(t, x, mine, 64, TD_F32, TD_SUM)) != TD_OK)
    return st;
  for (int i = 0; i < 64; i++)
    if (x[i] != 3.0f)
      return TD_ERR_CHECK_FAILED;
  return td_symm_free(t, x);
}

int main(void) {
  td_status st = td_local_world_run(2, NULL, rank_main, NULL);
  if (st != TD_OK) {
    fprintf(stderr, "pc_hello: %s: %s\n", td_status_name(st), td_last_error());
    return 1;
  }
  printf("pc_hello ok (tdist %s)\n", td_version());
  return 0;
}
