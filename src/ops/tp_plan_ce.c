/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: the copy-engine producer variant of AG+GEMM. The compiler
 * emits every chunk move as a communication-worker copy; this pass copies the
 * plan and moves the puts (copies into a peer's symmetric buffer, same dtype
 * on both sides) to the copy-engine worker class. On cuda the executor then
 * issues them with cudaMemcpy2DAsync on a high-priority stream, so every SM
 * stays on the GEMM (DESIGN.md lesson 4); on cpu a communication thread runs
 * copy-engine tasks, so the variant computes the same thing there. Waits,
 * raises and dependencies are copied unchanged, so the readiness logic is
 * exactly the compiler's. */
#include <stdlib.h>

#include "core/error.h"
#include "tdist/schedule.h"

static int td__is_put(const td_plan *p, const td_task *t) {
  if (t->kind != TD_TASK_COPY || t->worker != TD_WORKER_COMM || t->c.peer == TD_PEER_SELF)
    return 0;
  if (t->a.buf < 0 || t->c.buf < 0)
    return 0;
  return td_plan_buffer(p, t->a.buf)->dtype == td_plan_buffer(p, t->c.buf)->dtype;
}

td_status td__tp_plan_copy_engine(const td_plan *src, td_plan **out) {
  td_plan *p = NULL;
  TD_CHECK(td_plan_create(td_plan_nranks(src), &p));
  td_status st = TD_OK;
  for (int32_t b = 0; b < td_plan_nbuffers(src) && st == TD_OK; b++) {
    int32_t idx;
    st = td_plan_add_buffer(p, td_plan_buffer(src, b), &idx);
  }
  for (uint32_t s = 0; s < td_plan_nsignals(src) && st == TD_OK; s++) {
    uint32_t idx;
    st = td_plan_add_signal(p, td_plan_signal_name(src, s), &idx);
  }
  for (int r = 0; r < td_plan_nranks(src) && st == TD_OK; r++) {
    const td_schedule *sc = td_plan_schedule(src, r);
    for (uint32_t i = 0; i < sc->ntasks && st == TD_OK; i++) {
      td_task t = sc->tasks[i];
      if (td__is_put(src, &t))
        t.worker = TD_WORKER_COPY_ENGINE;
      uint32_t idx;
      st = td_plan_add_task(p, r, &t, sc->deps + t.dep_first, t.dep_count, sc->waits + t.wait_first,
                            t.wait_count, sc->raises + t.raise_first, t.raise_count, &idx);
    }
  }
  if (st == TD_OK)
    st = td_plan_validate(p);
  if (st != TD_OK) {
    td__error_prefix("copy-engine rewrite of the plan: ");
    td_plan_destroy(p);
    return st;
  }
  *out = p;
  return TD_OK;
}
