/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, fused cuda variant: the low-latency all-reduce
 * (td_ll_all_reduce with TD_TP_FUSED) for ranks that are threads of one
 * process, on one GPU or on GPUs with peer access (the reduction kernel then
 * loads the peers' src over NVLink). A peer's device pointers are directly
 * usable, so
 * the ranks swap this call's src and dst through their shared host state
 * (fused.h) instead of staging data in symmetric buffers:
 *   one-shot (output up to 1 MiB): after the opening barrier (the call's
 *     operand-check exchange, tp_op.c) every rank reduces
 *     all ranks' src into its dst with one kernel (td__fused_reduce: f32
 *     sums in rank order, so every rank gets the same bits);
 *   two-shot (larger): every rank reduces its part (whole 16-byte vectors,
 *     td__f_split) of all ranks' src into the same part of its own dst and
 *     records an event; after a second barrier it waits for each peer's
 *     event and copies that peer's reduced part from the peer's dst.
 * A closing barrier after the host wait keeps a rank from returning (and
 * its caller from reusing src or dst) while a peer still reads them. Every
 * cross-rank dependency is an event recorded before a barrier and waited
 * for after it, as in fused.c; no kernel waits on anything. */
#include <inttypes.h>

#include "core/error.h"
#include "ops/cuda/fused.h"

td_status td__f_all_reduce(td_tp_op *op, td__tp_fused *f, void *dst, const void *src, uint64_t e) {
  const int n = f->n, r = f->r, dt = td__f_dt(op->d.dtype);
  td_status st = TD_OK;
  /* 1. the operand-check exchange (tp_op.c) was this call's opening
   * barrier: every rank's operands of call e are published
   * (td__tp_fused_publish), its src is ready, and its call e-1 is over (so
   * nobody still reads an older dst) */
  const void *srcs[TD__MAXR];
  for (int p = 0; p < n; p++)
    srcs[p] = __atomic_load_n(&f->peer[p]->ar_src, __ATOMIC_ACQUIRE);
  int le;
  if (f->one_shot) {
    le = td__fused_reduce(dst, srcs, n, (long long)op->d.count, dt, f->sms, f->s);
  } else {
    const int64_t off = f->ar_off[r];
    for (int p = 0; p < n; p++)
      srcs[p] = (const char *)srcs[p] + (size_t)off * f->esz;
    le = td__fused_reduce((char *)dst + (size_t)off * f->esz, srcs, n, (long long)(f->ar_off[r + 1] - off), dt,
                          f->sms, f->s);
    td__f_keep(&st, td__f_cu(cudaEventRecord(f->ev_rdone, f->s), "cudaEventRecord"));
    /* 2. every rank's reduction of call e is enqueued */
    TD_CHECK(td__f_sync_mid(op, f));
    for (int j = 1; j < n; j++) {
      int p = (r + j) % n;
      const td__tp_fused *q = f->peer[p];
      size_t bytes = (size_t)(f->ar_off[p + 1] - f->ar_off[p]) * f->esz;
      td__f_keep(&st, td__f_cu(cudaStreamWaitEvent(f->s, q->ev_rdone, 0), "cudaStreamWaitEvent"));
      if (bytes)
        td__f_keep(&st, td__f_cu(cudaMemcpyAsync((char *)dst + (size_t)f->ar_off[p] * f->esz,
                                                 (const char *)__atomic_load_n(&q->ar_dst, __ATOMIC_ACQUIRE) +
                                                     (size_t)f->ar_off[p] * f->esz,
                                                 bytes, cudaMemcpyDeviceToDevice, f->s),
                                 "cudaMemcpyAsync (a peer's reduced part)"));
    }
  }
  if (le != 0)
    td__f_keep(&st, td__f_cu((cudaError_t)le, "the reduction kernel's launch"));
  td__f_keep(&st, td__f_setv(f->s, f->ctl + TD__CTL_FIN, e));
  td_status fin = td__f_finish(op, f);
  /* 3. nobody reads this rank's src or dst any more */
  td_status done = td__f_sync(op, f);
  return st != TD_OK ? st : fin != TD_OK ? fin : done;
}
