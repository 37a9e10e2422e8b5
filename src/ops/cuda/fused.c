/* SPDX-License-Identifier: Apache-2.0
 * Operators layer, the fused cuda variant (TD_TP_FUSED) of ag_gemm, gemm_rs
 * and gemm_ar (their calls are in fused_gemm.c, the all-reduce in
 * fused_ar.c), in the manner of Triton-distributed: set-up, the barriers and
 * the deadline. The ranks are threads of one process, on one GPU or on GPUs
 * that can all access each other's memory: creation exchanges every rank's
 * device and peer-access mask (td__tp_fused_agree refuses a pair of GPUs
 * without peer access, on every rank alike), enables peer access from each
 * rank's device to every other rank's device, allocates the buffers as plain
 * cudaMalloc memory and swaps their addresses with td_all_gather; a peer's
 * pointer is then usable from every rank's device (UVA): kernels load and
 * store it over NVLink / PCIe, cudaMemcpyAsync copies it device to device,
 * and a stream waits on an event of another device.
 * Where the ranks are picks each call's schedule (fused_gemm.c): a shared
 * GPU runs ag_gemm's GEMMs on the peers' A in place (equal parts: one launch
 * of our tile with the GATHER hook) and gemm_rs's reduction
 * pulling the peers' partials; across GPUs ag_gemm pulls the peers' rows
 * with the copy engine and GEMMs each source as it arrives, and gemm_rs
 * pushes each row block of the partial to its owner as it is computed
 * (TD_OPS_FUSED_AG, TD_OPS_FUSED_RS force either).
 * The GEMM's tile configuration is chosen once per operator
 * (td__f_pick_config): TD_OPS_FUSED_TILE, else the tuning cache's entry for
 * this GPU and shape, else the compiled configuration that the shape's tile
 * count and the tiles' measured efficiency favour.
 * Every call starts with a host barrier: the operand-check exchange of
 * tp_op.c, before which td__tp_fused_publish hands this call's operands to
 * the peers (each rank's previous call ended with a host wait on its
 * streams, so no buffer is overwritten while a peer still reads it). Every
 * call ends with a host wait under the operator's deadline. The
 * 64-bit progress words (cuStreamWriteValue64 of the epoch, never reset) are
 * only written, for diagnostics and poisoning; nothing waits on them.
 *
 * Deadlock freedom (ranks sharing a GPU; see docs/architecture.md "fused"):
 * the first version waited in-kernel (GEMM tiles spinning on signals while
 * their persistent grid held every SM) and with cuStreamWaitValue64 on words
 * that peers wrote from work they had possibly not enqueued yet; CUDA sees
 * neither dependency, streams share a few hardware queues, and it hung on the
 * H200. Now every cross-rank dependency is a CUDA event recorded before a
 * host barrier and waited for after it: each operation waits only on work
 * enqueued before it, and no kernel waits for anything once running, so no
 * cycle can form whatever the queue mapping, copy implementation or
 * residency of the grids. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "exec/cuda/device_stuck.h"
#include "ops/cuda/fused.h"
#include "tdist/coll.h"
#include "tdist/config.h"
#include "tdist/rma.h"

/* The GEMM library (tdist_gemm_cuda) links tdist, not the other way round:
 * programs that link it (the tdist CLI, the GPU tests) bind these references;
 * elsewhere they stay NULL and the fused GEMM operators say so. The tuning
 * cache's reader lives in another object of that library, which a program
 * may leave out: it is optional. */
#pragma weak td__gemm_cuda_run
#pragma weak td__gemm_cuda_configs
#pragma weak td__gemm_tune_lookup
#pragma weak td__gemm_cublas_batched
#pragma weak td__gemm_cuda_run_gather
#pragma weak td__gemm_cuda_run_gather_cols
#pragma weak td__gemm_cuda_run_kgather
#pragma weak td__gemm_cuda_configs_hooked
#pragma weak td__gemm_config_name
#pragma weak td__gemm_split_plan_waves
#pragma weak td__gemm_cuda_has_variant

/* ag gather-share: rank r's share of the SMs, sms / n and one more for the
 * first sms % n ranks, so that the n launches at once hold every SM once. */
int td__f_share(const td__tp_fused *f, int r) {
  const int q = f->sms / f->n;
  return q > 0 ? q + (r < f->sms % f->n) : 1; /* fewer SMs than ranks: one each, shared */
}

/* The split tail as the launch plans it (gemm.h, "Split tail"; one block per
 * SM, the same on every rank): kgather's and ag_one's (rank 0's one launch:
 * every rank's tiles on every SM) and ag_share's (this rank's tiles on its
 * share); the tiles split and their slices, within a workspace of ws bytes. */
static void td__f_split_plan(const td_tp_op *op, const td__tp_fused *f, long long ws, int *tail, int *split) {
  *tail = 0, *split = 1;
  if (!f->tail_split || !td__gemm_split_plan_waves || !(f->kgather || f->ag_one || f->ag_share) ||
      f->cfg.cluster > 1) /* a clustered kernel does not split (gemm_sm90.cuh, SPLITS) */
    return;
  const int64_t cols = f->kgather ? op->d.n : f->nb;
  long long units = ((op->d.m + f->cfg.bm - 1) / f->cfg.bm) * ((cols + f->cfg.bn - 1) / f->cfg.bn);
  if (f->ag_one)
    units *= f->n;
  const int slots = f->ag_share ? td__f_share(f, f->r) : f->sms;
  td__gemm_split_plan_waves(units, slots, (int)((op->d.k + 63) / 64), ws, (long long)f->cfg.bm * f->cfg.bn * 4,
                            f->tail_split, tail, split);
}

/* TD_OPS_FUSED_TAIL into f->tail_split, and the workspace of the split this
 * rank's launch will plan (rank 0's for kgather and ag_one, every rank's for
 * ag_share), its counters zeroed on the stream. */
static td_status td__f_alloc_tail(const td_tp_op *op, td__tp_fused *f) {
  const char *tail = NULL;
  TD_CHECK(td_config_str("TD_OPS_FUSED_TAIL", &tail));
  f->tail_split = tail && !strcmp(tail, "none") ? 0 : tail && !strcmp(tail, "split2") ? 2 : 1;
  int t = 0, s = 1; /* the workspace the plan for this shape needs, exactly (the launch plans the same) */
  td__f_split_plan(op, f, LLONG_MAX, &t, &s);
  if (t < 1 || (f->r != 0 && !f->ag_share))
    return TD_OK;
  f->split_ws_bytes = TD_GEMM_SPLIT_CNT_BYTES + (long long)t * s * f->cfg.bm * f->cfg.bn * 4;
  TD_CHECK(td__f_cu(cudaMalloc(&f->split_ws, (size_t)f->split_ws_bytes), "cudaMalloc (split-tail workspace)"));
  return td__f_cu(cudaMemsetAsync(f->split_ws, 0, TD_GEMM_SPLIT_CNT_BYTES, f->s), "cudaMemsetAsync");
}

/* The two records swapped at creation: where each rank is (its status and
 * its probe), then what it allocated. */
enum { TD__PL_STATUS, TD__PL_OK, TD__PL_PID, TD__PL_DEV, TD__PL_PEERS, TD__PL_N };
enum { TD__REC_STATUS, TD__REC_BUF, TD__REC_RED, TD__REC_RECV, TD__REC_CTL, TD__REC_SELF, TD__REC_N };

static PFN_cuStreamWriteValue64_v11070 td__fw64;
static pthread_once_t td__f_once = PTHREAD_ONCE_INIT;

static void td__f_resolve(void) {
  enum cudaDriverEntryPointQueryResult q;
  void *p = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__fw64 = (PFN_cuStreamWriteValue64_v11070)p;
}

int td__tp_fused_linked(void) { return td__gemm_cuda_run != NULL && td__gemm_cuda_configs != NULL; }

td_status td__f_cu(cudaError_t e, const char *what) {
  return e == cudaSuccess ? TD_OK
                          : td__error(TD_ERR_CUDA, "fused: %s failed: %s (%s)", what, cudaGetErrorString(e),
                                      cudaGetErrorName(e));
}

int td__f_dt(td_dtype dt) { return dt == TD_BF16 ? TD__FR_BF16 : dt == TD_F16 ? TD__FR_F16 : TD__FR_F32; }

/* Stream-ordered progress word (default flags: a memory barrier first). */
td_status td__f_setv(cudaStream_t s, uint64_t *addr, uint64_t v) {
  CUresult r = td__fw64((CUstream)s, (CUdeviceptr)(uintptr_t)addr, v, CU_STREAM_WRITE_VALUE_DEFAULT);
  return r == CUDA_SUCCESS ? TD_OK : td__error(TD_ERR_CUDA, "fused: cuStreamWriteValue64 failed (CUresult %d)", (int)r);
}

/* The device a rank uses: TD_CUDA_DEVICE, else its local rank modulo the
 * device count (as the executor). */
static td_status td__f_device(td_team *team, int rank, int *out) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
    return td__error(TD_ERR_UNSUPPORTED, "fused: rank %d: no usable CUDA device; use the cpu backend", rank);
  int64_t dev = -1;
  const char *env = getenv("TD_CUDA_DEVICE");
  if (env && *env)
    TD_CHECK(td_config_int("TD_CUDA_DEVICE", &dev));
  else
    dev = td_world_local_rank(td_team_world(team)) % count;
  if (dev < 0 || dev >= count)
    return td__error(TD_ERR_INVALID_ARG, "fused: rank %d: TD_CUDA_DEVICE=%" PRId64 " but %d devices", rank, dev,
                     count);
  *out = (int)dev;
  return TD_OK;
}

/* Bit d set: a kernel or copy on device `dev` can reach device d's memory
 * (its own bit too); devices 0..63. */
static int64_t td__f_peer_mask(int dev) {
  int count = 0;
  uint64_t mask = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess)
    return 0;
  for (int d = 0; d < count && d < 64; d++) {
    int can = d == dev;
    if (!can && cudaDeviceCanAccessPeer(&can, dev, d) != cudaSuccess)
      can = 0;
    if (can)
      mask |= (uint64_t)1 << d;
  }
  return (int64_t)mask;
}

void td__tp_fused_probe_rank(const td__tp_desc *d, td_team *team, td__tp_fused_probe *out) {
  td__tp_fused_probe pr = {0, (int64_t)getpid(), -1, 0};
  int dev = -1, major = 0;
  if ((d->kind == TD_TP_ALL_REDUCE || td__tp_fused_linked()) &&
      td__f_device(team, td_team_rank(team), &dev) == TD_OK) {
    pr.dev = dev;
    pr.peers = td__f_peer_mask(dev);
    pr.ok = d->kind == TD_TP_ALL_REDUCE ||
            (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9);
  }
  *out = pr;
}

static void td__f_free(td__tp_fused *f) {
  if (!f)
    return;
  if (td__cuda_device_stuck(f->dev)) { /* cudaFree would wait for the device's blocked work forever */
    free(f->map_cache), free(f->prof), free(f->prof_gpu), free(f);
    return;
  }
  cudaSetDevice(f->dev);
  cudaFree(f->buf), cudaFree(f->red), cudaFree(f->recv), cudaFree(f->ptrs), cudaFree(f->amaps), cudaFree(f->kmaps);
  cudaFree(f->ctl), cudaFree(f->split_ws);
  free(f->map_cache), free(f->prof), free(f->prof_gpu);
  for (int i = 0; i < 3; i++)
    if (f->prof_ev[i])
      cudaEventDestroy(f->prof_ev[i]);
  if (f->ce_done)
    cudaEventDestroy(f->ce_done);
  for (int p = 0; p < TD__MAXR; p++)
    if (f->ev_put[p])
      cudaEventDestroy(f->ev_put[p]);
  if (f->ev_gdone)
    cudaEventDestroy(f->ev_gdone);
  if (f->ev_rdone)
    cudaEventDestroy(f->ev_rdone);
  if (f->ev_push)
    cudaEventDestroy(f->ev_push);
  if (f->s)
    cudaStreamDestroy(f->s);
  if (f->ce)
    cudaStreamDestroy(f->ce);
  for (int j = 0; j < TD__MAXR - 1; j++)
    if (f->cep[j])
      cudaStreamDestroy(f->cep[j]);
  free(f);
}

/* Of cnt configurations (compiled with `hooks`), the one with the least work
 * per SM for `launches` launches of M x N running at once on the GPU (every
 * rank's: ranks share it): td__tp_fused_least_work (tp_fused_check.c, the
 * measured tile rates). Clusters of 2 (B shared by multicast) gained nothing
 * measurable with 8 ranks sharing the GPU and lose half a cluster on launches
 * of one tile row (ag_gemm's own rows at M = 1024), so they only win a tie
 * they are listed first in. cnt >= 1; none eligible (split-K only) gives 0. */
static int td__f_least_work(const td__tp_fused *f, const td_gemm_config *all, int cnt, int m, int n,
                            int launches, unsigned hooks) {
  int bm[64], bn[64], ok[64];
  if (cnt > 64)
    cnt = 64;
  for (int i = 0; i < cnt; i++)
    bm[i] = all[i].bm, bn[i] = all[i].bn, ok[i] = all[i].split_k == 1;
  const int routed = (hooks & TD_GEMM_HOOK_KGATHER) && (hooks & (TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_BCAST));
  const int best = td__tp_fused_least_work(f->multi, f->sms, bm, bn, ok, cnt, m, n, launches, routed);
  return best < 0 ? 0 : best;
}

/* The GEMM configuration of an M x N x K problem that `ranks` ranks run at
 * once on this GPU: TD_OPS_FUSED_TILE (BMxBN or BMxBNcC, a compiled one),
 * else the tuning cache's entry, else the compiled configuration with the
 * least work per SM: the waves of every rank's tiles together (ranks share
 * the GPU), each weighted by its tile's size over its efficiency. */
static td_status td__f_pick_config(td_tp_op *op, td__tp_fused *f, int m, int n, int k, td_gemm_config *out) {
  td_gemm_config all[64];
  int cnt = td__gemm_cuda_configs(TD_GEMM_SM90, op->d.dtype, TD_GEMM_B_KN, all, 64);
  if (cnt > 64)
    cnt = 64;
  if (cnt < 1)
    return td__error(TD_ERR_UNSUPPORTED, "fused: no Hopper GEMM kernel compiled for %s with B as [K,N]",
                     td_dtype_name(op->d.dtype));
  const char *want = NULL;
  TD_CHECK(td_config_str("TD_OPS_FUSED_TILE", &want));
  if (want && !strcmp(want, "cublas")) {
    *out = (td_gemm_config){TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
    return TD_OK;
  }
  const int tiles_only = want && !strcmp(want, "tiles");
  if (want && *want && !tiles_only) {
    int bm = 0, bn = 0, cl = 1;
    char extra = 0;
    int got = sscanf(want, "%dx%dc%d%c", &bm, &bn, &cl, &extra);
    if (got != 2 && got != 3)
      return td__error(TD_ERR_INVALID_ARG, "fused: TD_OPS_FUSED_TILE=%s: use BMxBN or BMxBNcC (e.g. 128x256c2), "
                       "cublas, or tiles (our tiles, chosen by shape)", want);
    for (int i = 0; i < cnt; i++)
      if (all[i].bm == bm && all[i].bn == bn && all[i].cluster == cl) {
        *out = all[i];
        return TD_OK;
      }
    return td__error(TD_ERR_UNSUPPORTED, "fused: TD_OPS_FUSED_TILE=%s: no such %s kernel for B [K,N] is compiled "
                     "(tdist tune gemm lists them)", want, td_dtype_name(op->d.dtype));
  }
  struct cudaDeviceProp prop;
  td_gemm_config tuned;
  if (td__gemm_tune_lookup && cudaGetDeviceProperties(&prop, f->dev) == cudaSuccess &&
      td__gemm_tune_lookup(prop.name, op->d.dtype, TD_GEMM_B_KN, m, n, k, &tuned) == TD_OK) {
    if (tuned.arch == TD_GEMM_CUBLAS) {
      *out = tuned;
      return TD_OK;
    }
    for (int i = 0; i < cnt; i++)
      if (!memcmp(&all[i], &tuned, sizeof tuned)) {
        *out = tuned;
        return TD_OK;
      }
  }
  /* No tuned entry: these launches wait for nothing inside the kernel, so the
   * engine is free. With B as [K,N] cuBLAS measured 0-7% faster than our
   * tiles on the operators' shapes (H200, docs/perf.md "Fused operators as
   * AUTO"), so it is the default; TD_OPS_FUSED_TILE or `tdist tune gemm`
   * (which times both) choose otherwise; TD_OPS_FUSED_TILE=tiles keeps to our
   * tiles, picked by the rule below. */
  if (!tiles_only) {
    *out = (td_gemm_config){TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
    return TD_OK;
  }
  *out = all[td__f_least_work(f, all, cnt, m, n, f->n, 0)];
  return TD_OK;
}

/* ag_gemm on one shared GPU with equal parts: one launch of our tile reading
 * every rank's A in place (the GATHER hook), no gather copy and no small
 * per-part launches; its configuration is one compiled with GATHER whose BM
 * divides a part (TD_OPS_FUSED_TILE may name one). Returns 1 and sets
 * f->cfg when the shape runs that way (td__tp_fused_ag_gather: can, and for
 * AUTO (forced == 0) should), else 0. */
/* The configurations compiled with `hooks` for this operator's dtype (B as
 * [K,N]) that TD_OPS_FUSED_TILE allows: none when it asks for cuBLAS, the
 * one it names (if compiled with the hook), else all; at most 16, into all.
 * Shared by the gather and kgather schedules. */
static int td__f_hooked_configs(const td_tp_op *op, unsigned hooks, td_gemm_config all[16]) {
  if (!td__gemm_cuda_configs_hooked)
    return 0;
  int cnt = td__gemm_cuda_configs_hooked(op->d.dtype, TD_GEMM_B_KN, hooks, all, 16);
  const char *want = NULL;
  if (td_config_str("TD_OPS_FUSED_TILE", &want) != TD_OK || (want && !strcmp(want, "cublas")))
    return 0;
  int bm = 0, bn = 0, cl = 1, usable = 0;
  if (want && strcmp(want, "tiles") && sscanf(want, "%dx%dc%d", &bm, &bn, &cl) < 2)
    return 0;
  for (int i = 0; i < cnt && i < 16; i++)
    if (!bm || (all[i].bm == bm && all[i].bn == bn && all[i].cluster == cl))
      all[usable++] = all[i];
  return usable;
}

/* per_rank (AUTO and TD_OPS_FUSED_AG=gather): each rank's own launch;
 * otherwise (TD_OPS_FUSED_AG=gather-one) rank 0's one launch for every rank
 * (GATHER | NSPLIT, f->ag_one) where a kernel is compiled for it and every
 * rank's B and C fit its table, else each rank's. The one launch ran
 * 0.6-5.4% slower than the n launches at once in all 13 shapes where both
 * ran our tile (8 ranks on one H200, 2026-12-01, docs/perf.md "Seventh
 * session on the H200", runs 3 and 4): the ranks' launches already share A
 * through L2 (they run the same tile rows at the same time) and overlap
 * each other's prologue and tail. On 256x128 tiles the one launch
 * measured faster than AUTO's old pick on parts of 128 rows and tied or won
 * at 512 and 1024 (td__tp_fused_ag_one_auto, twelfth session), so AUTO
 * takes it on parts of a multiple of 128 rows unless TD_OPS_FUSED_TILE
 * names a tile, in clusters of 2 on parts of 256 rows and more
 * (td__tp_fused_ag_one_cluster), on 128x256 tiles in clusters of 2 at a
 * long K on parts of 128 and 256 rows (td__tp_fused_ag_one_tile); B rows that are not whole 128-byte lines included (forced
 * past td__tp_fused_ag_gather's rule for each rank's launch: qwen2-72b ran
 * 1.008-1.018x of the GEMM alone in the one launch, 1.051-1.054x batched). */
static int td__f_gather_config(const td_tp_op *op, td__tp_fused *f, int forced, int per_rank) {
  if (!td__gemm_cuda_run_gather)
    return 0;
  td_gemm_config all[16];
  unsigned hooks = TD_GEMM_HOOK_GATHER;
  int usable = 0, bms[16];
  const char *tile = NULL;
  const int named = td_config_str("TD_OPS_FUSED_TILE", &tile) == TD_OK && tile && strcmp(tile, "tiles");
  /* AUTO on parts of a multiple of 128 rows: rank 0's one launch of 256x128 tiles (td__tp_fused_ag_one_auto) */
  const int part[1] = {TD__GEMM_GATHER_ROWS(256)};
  if (!forced && !named && td__gemm_cuda_run_gather_cols &&
      td__tp_fused_ag_one_auto(f->multi, f->n, f->rows[0], TD_GEMM_MAX_PEERS) &&
      td__tp_fused_ag_gather(f->multi, op->d.m, f->n, f->nb, f->esz, part, 1, 1)) {
    const int cnt = td__f_hooked_configs(op, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, all);
    /* its tile and cluster by the part's rows, nb and K (td__tp_fused_ag_one_tile); where that is not compiled,
     * 256x128 in its cluster (td__tp_fused_ag_one_cluster), else alone */
    int bm, bn;
    const int cl = td__tp_fused_ag_one_tile(f->rows[0], f->nb, op->d.k, &bm, &bn);
    const int want[3][3] = {{bm, bn, cl}, {256, 128, td__tp_fused_ag_one_cluster(f->rows[0])}, {256, 128, 1}};
    for (int pass = 0; pass < 3; pass++)
      for (int i = 0; i < cnt; i++)
        if (all[i].bm == want[pass][0] && all[i].bn == want[pass][1] && all[i].cluster == want[pass][2]) {
          f->cfg = all[i];
          f->ag_one = 1;
          return 1;
        }
  }
  if (!per_rank && td__gemm_cuda_run_gather_cols && f->n <= TD_GEMM_MAX_PEERS) {
    usable = td__f_hooked_configs(op, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, all);
    hooks = usable > 0 ? TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT : hooks;
  }
  if (usable < 1)
    usable = td__f_hooked_configs(op, TD_GEMM_HOOK_GATHER, all);
  /* 256-row tiles (two 128-row parts) otherwise only where TD_OPS_FUSED_TILE names one: in each rank's launch
   * they ran 1-4% slower than AUTO's pick, so the gather's model does not pick them (the plain GEMM's
   * TD_OPS_FUSED_TILE=tiles model and `tdist tune` may: 1.01x cuBLAS at 8192 x 3584 x 8192) */
  int kept = 0;
  for (int i = 0; i < usable; i++)
    if (named || all[i].bm <= 128)
      all[kept++] = all[i];
  usable = kept;
  for (int i = 0; i < usable; i++)
    bms[i] = TD__GEMM_GATHER_ROWS(all[i].bm);
  if (!td__tp_fused_ag_gather(f->multi, op->d.m, f->n, f->nb, f->esz, bms, usable, forced))
    return 0;
  int fit = 0; /* those whose GATHER part (TD__GEMM_GATHER_ROWS) divides a rank's part */
  for (int i = 0; i < usable; i++)
    if (f->rows[0] % TD__GEMM_GATHER_ROWS(all[i].bm) == 0)
      all[fit++] = all[i];
  usable = fit;
  /* one launch over every rank's columns has the same tiles as n launches of M x nb */
  f->cfg = all[td__f_least_work(f, all, usable, (int)op->d.m, (int)f->nb, f->n, hooks)];
  f->ag_one = hooks != TD_GEMM_HOOK_GATHER;
  return 1;
}

/* ag_gemm's schedule. TD_OPS_FUSED_AG: direct (GEMMs on the peers' A in
 * place, one launch per rank), batched (the same as one cuBLAS batched launch
 * where the parts are equal, set up in td__f_alloc), gather (one launch of
 * our tile whose tiles read each rank's A in place: td__f_gather_config, set
 * up in td__f_alloc; auto takes it where td__tp_fused_ag_gather says it pays:
 * it removes both the gather copy and the small launches) or copy (gather, then
 * GEMM); otherwise auto = direct (batched where it can) when every rank shares
 * this GPU, its part has at least 512 rows and TD_OPS_FUSED_AG_GEMMS does not
 * ask for a split of the copy path (H200, 8 ranks, 2026-11-29: direct
 * 1.10-1.13x of the baseline where the copy path gave 1.00-1.02x, but
 * 0.52-0.59x at M = 1024, whose 128-row launches run far below the GEMM's
 * speed, where copy + one launch gave 0.98-1.04x; docs/perf.md).
 * Copy's GEMM launches: TD_OPS_FUSED_AG_GEMMS, else by placement and
 * shape -- across GPUs one per source (own rows first, then each peer's as
 * its copy lands: the natural order when the copies cross NVLink) where the
 * split pays (td__tp_fused_ag_split, tp_fused_check.c), else one launch after the copies;
 * on one
 * GPU (H200, 8 ranks, 2026-11-29) one launch over every row while a rank's
 * part is small (M / ranks < 512: the split launches are too small to fill
 * their share of the GPU), else 3 (own rows, then after, then before). */
static td_status td__f_ag_mode(const td_tp_op *op, td__tp_fused *f) {
  int64_t v = 0;
  const char *mode = NULL;
  TD_CHECK(td_config_int("TD_OPS_FUSED_AG_GEMMS", &v));
  TD_CHECK(td_config_str("TD_OPS_FUSED_AG", &mode));
  if (v != 0 && v != 1 && v != 3 && v != 8)
    return td__error(TD_ERR_INVALID_ARG, "fused: TD_OPS_FUSED_AG_GEMMS=%" PRId64 ": use 0 (by shape), 1, 3 or 8",
                     v);
  f->ag_direct = mode && (!strcmp(mode, "direct") || !strcmp(mode, "batched") || !strcmp(mode, "batched-one") ||
                          !strcmp(mode, "gather") ||
                          !strcmp(mode, "gather-one") || !strcmp(mode, "gather-share"))
                     ? 1
                : mode && !strcmp(mode, "copy")                                 ? 0
                                                : !f->multi && v == 0 && op->d.m / f->n >= 512;
  if (v == 0)
    v = f->multi ? (td__tp_fused_ag_split(op->d.m, f->rows, f->n, f->r, f->nb, f->sms, f->esz) ? 8 : 1) : op->d.m / f->n < 512 ? 1 : 3;
  f->ag_blocks = f->ag_direct || v == 8 ? f->n : (int)v;
  if (f->ag_blocks > f->n)
    f->ag_blocks = f->n;
  return TD_OK;
}

/* gemm_rs / gemm_ar two-shot: TD_OPS_FUSED_RS, else push when some peer is
 * on another GPU (its transfers then cross NVLink and are worth hiding behind
 * the GEMM), pull on one shared GPU (measured 1.3-2.7x there: a push would
 * only add copies inside one memory). */
static td_status td__f_rs_mode(td__tp_fused *f) {
  const char *mode = NULL;
  TD_CHECK(td_config_str("TD_OPS_FUSED_RS", &mode));
  f->rs_push = mode && !strcmp(mode, "push") ? 1 : mode && !strcmp(mode, "pull") ? 0 : f->multi;
  return TD_OK;
}

/* gemm_rs / gemm_ar of ranks sharing one GPU: kgather. Rank 0 makes one
 * launch of our tile over every rank's A and B in place (the KGATHER hook),
 * computing every row of the sum over the whole K: gemm_rs stores each row
 * at its owner's C (PUSH, td_chunk_range's split), gemm_ar at every rank's
 * (BCAST). No partial is written, pulled or reduced, and B is read once
 * (per-rank launches, each over its own rows, read all of B once a rank:
 * 1.3-1.5x the GEMM's time at M = 1024, docs/perf.md "kgather").
 * TD_OPS_FUSED_RS (gemm_rs) / TD_OPS_FUSED_AR (gemm_ar) = kgather forces it
 * where it can run, auto takes it where td__tp_fused_kgather says it pays.
 * Needs bf16, a compiled configuration with the route that TD_OPS_FUSED_TILE
 * allows; otherwise the other schedules run. Returns 1 and sets f->cfg when
 * it runs. The same verdict on every rank: it depends on the environment,
 * the checked shape, the agreed placement and the GPU they share. */
static int td__f_kgather_config(const td_tp_op *op, td__tp_fused *f) {
  const char *rmode = NULL, *amode = NULL;
  const int rs = op->d.kind == TD_TP_GEMM_RS;
  /* checked before this by td__f_rs_mode (both) and td__f_ar_mode (gemm_ar, the one that reads AR) */
  if (td_config_str("TD_OPS_FUSED_RS", &rmode) != TD_OK ||
      (!rs && td_config_str("TD_OPS_FUSED_AR", &amode) != TD_OK))
    return 0;
  /* a forced pull / push for gemm_ar keeps the reduction schedules too */
  const int want = td__tp_fused_kgather_mode(rs, rmode, amode), forced = want == 1;
  if (want < 0 || (!rs && op->d.kind != TD_TP_GEMM_AR) || !td__gemm_cuda_run_kgather || op->d.dtype != TD_BF16)
    return 0;
  if (!td__tp_fused_kgather(f->multi, op->d.m, op->d.n, op->d.k, f->n, f->sms, forced))
    return 0;
  td_gemm_config all[16];
  const unsigned hooks = TD_GEMM_HOOK_KGATHER | (rs ? TD_GEMM_HOOK_PUSH : TD_GEMM_HOOK_BCAST);
  int cnt = td__f_hooked_configs(op, hooks, all);
  if (cnt < 1)
    return 0;
  f->cfg = all[td__f_least_work(f, all, cnt, (int)op->d.m, (int)op->d.n, 1, hooks)];
  return 1;
}

/* gemm_ar above the one-shot size: TD_OPS_FUSED_AR, else
 * td__tp_fused_ar_all_push (tp_fused_check.c says why). Row blocks: about
 * 2048 rows each, at most 4, so the last block's push (the exposed one) is
 * small while each GEMM still fills the GPU. */
static td_status td__f_ar_mode(const td_tp_op *op, td__tp_fused *f) {
  const char *mode = NULL;
  TD_CHECK(td_config_str("TD_OPS_FUSED_AR", &mode));
  f->ar_all_push = !f->one_shot && (mode && !strcmp(mode, "all-push")   ? 1
                                    : mode && !strcmp(mode, "two-shot") ? 0
                                                                        : td__tp_fused_ar_all_push(
                                                                              f->n, f->multi, op->d.m));
  int64_t b = (op->d.m + 2047) / 2048;
  f->ar_blocks = (int)(b < 1 ? 1 : b > 4 ? 4 : b);
  return TD_OK;
}

/* This rank's device, checked: TD_CUDA_DEVICE or its local rank's, and
 * compute capability 9.x for the GEMM operators. */
static td_status td__f_open_device(td_tp_op *op, td__tp_fused *f) {
  int64_t prof = 0; /* read here, so a bad value fails the first exchange on every rank */
  TD_CHECK(td_config_int("TD_OPS_FUSED_PROFILE", &prof));
  if (prof && (!(f->prof = calloc((size_t)TD__PROF_CALLS * TD__PROF_N, sizeof *f->prof)) ||
               !(f->prof_gpu = calloc((size_t)TD__PROF_CALLS * TD__PROF_GPU_N, sizeof *f->prof_gpu))))
    return td__error(TD_ERR_NO_MEMORY, "fused: rank %d: out of memory for TD_OPS_FUSED_PROFILE's stamps", op->rank);
  TD_CHECK(td__f_device(op->team, op->rank, &f->dev));
  TD_CHECK(td__f_cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  int major = 0;
  TD_CHECK(td__f_cu(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, f->dev),
                    "cudaDeviceGetAttribute"));
  if (major != 9 && op->d.kind != TD_TP_ALL_REDUCE)
    return td__error(TD_ERR_UNSUPPORTED, "fused: rank %d: the Hopper GEMM needs compute capability 9.x; device %d "
                     "is %d.x", op->rank, f->dev, major);
  return td__f_cu(cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, f->dev),
                  "cudaDeviceGetAttribute");
}

/* Peer access from this rank's device to every other rank's device: kernels
 * and copies of this rank then reach the peers' buffers. Several ranks of a
 * device ask alike; the second one's "already enabled" is success (and is
 * cleared, so no later cudaGetLastError reports it). */
static td_status td__f_enable_peers(td_tp_op *op, td__tp_fused *f) {
  for (int p = 0; p < f->n; p++) {
    int d = f->pdev[p], seen = d == f->dev;
    for (int q = 0; q < p && !seen; q++)
      seen = f->pdev[q] == d;
    if (seen)
      continue;
    cudaError_t e = cudaDeviceEnablePeerAccess(d, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
      e = cudaSuccess;
    }
    if (e != cudaSuccess)
      return td__error(TD_ERR_CUDA, "fused: rank %d: cudaDeviceEnablePeerAccess from GPU %d to GPU %d (rank %d's) "
                       "failed: %s", op->rank, f->dev, d, p, cudaGetErrorString(e));
  }
  return TD_OK;
}

/* This rank's allocations (after the placement exchange, before the
 * pointer exchange). */
/* The map table's host shadow (td_gemm_map_cache), unless
 * TD_OPS_FUSED_MAP_CACHE=0: on the heap, it is ~19 KiB. */
static td_status td__f_alloc_map_cache(const td_tp_op *op, td__tp_fused *f) {
  int64_t on = 1;
  TD_CHECK(td_config_int("TD_OPS_FUSED_MAP_CACHE", &on));
  if (!on)
    return TD_OK;
  f->map_cache = calloc(1, sizeof *f->map_cache);
  if (!f->map_cache)
    return td__error(TD_ERR_NO_MEMORY, "fused: rank %d: out of memory for the tensor maps' host shadow (%zu bytes)",
                     op->rank, sizeof *f->map_cache);
  return TD_OK;
}

static td_status td__f_alloc(td_tp_op *op, td__tp_fused *f) {
  const td__tp_desc *d = &op->d;
  TD_CHECK(td__f_cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  int lo = 0, hi = 0;
  TD_CHECK(td__f_cu(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange"));
  TD_CHECK(td__f_cu(cudaStreamCreateWithPriority(&f->s, cudaStreamNonBlocking, lo), "cudaStreamCreateWithPriority"));
  TD_CHECK(td__f_cu(cudaStreamCreateWithPriority(&f->ce, cudaStreamNonBlocking, hi), "cudaStreamCreateWithPriority"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ce_done, cudaEventDisableTiming), "cudaEventCreate"));
  for (int p = 0; p < TD__MAXR; p++) /* per source (ag), per owner (rs push) or per row block (ar all-push) */
    TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_put[p], cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_gdone, cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_rdone, cudaEventDisableTiming), "cudaEventCreate"));
  TD_CHECK(td__f_cu(cudaEventCreateWithFlags(&f->ev_push, cudaEventDisableTiming), "cudaEventCreate"));
  for (int i = 0; f->prof && f->r == 0 && i < 3; i++) /* timed: the one launch's GPU times (td__f_prof_event) */
    TD_CHECK(td__f_cu(cudaEventCreate(&f->prof_ev[i]), "cudaEventCreate"));
  const size_t m = (size_t)d->m;
  if (d->kind == TD_TP_AG_GEMM) {
    TD_CHECK(td__f_ag_mode(op, f));
    /* tiles for the launches' rows: all of M, or about one rank's part */
    int64_t lm = f->ag_blocks == 1 ? d->m : (d->m + f->n - 1) / f->n;
    const char *mode = NULL;
    TD_CHECK(td_config_str("TD_OPS_FUSED_AG", &mode));
    /* one shared GPU, equal parts: one zero-copy launch of our tile (auto and
     * gather; batched and direct keep their own launches) */
    /* gather where td__tp_fused_ag_gather allows (AUTO: where it pays, tp_fused_check.c says why) */
    const int one = mode && !strcmp(mode, "gather-one"), share = mode && !strcmp(mode, "gather-share");
    const int forced_gather = one || share || (mode && !strcmp(mode, "gather"));
    /* batched-one: asked for, or AUTO's pick on parts of >= 512 rows with B rows of whole 128-byte lines
     * (td__tp_fused_ag_one_blas_auto) where
     * AUTO runs direct (no TD_OPS_FUSED_AG_GEMMS split) and no tile of ours is asked for */
    const char *tile = NULL;
    TD_CHECK(td_config_str("TD_OPS_FUSED_TILE", &tile));
    const int blas_one = td__gemm_cublas_batched && !f->multi && d->m % f->n == 0 && (!tile || !strcmp(tile, "cublas")) &&
                         ((mode && !strcmp(mode, "batched-one")) ||
                          ((!mode || !strcmp(mode, "auto")) && f->ag_direct &&
                           td__tp_fused_ag_one_blas_auto(f->multi, f->n, d->m, f->nb, f->esz, TD__MAXR)));
    const int gather_ok = !blas_one && (forced_gather || !mode || !strcmp(mode, "auto")) &&
                          td__f_gather_config(op, f, forced_gather, !one);
    if (gather_ok && (f->ag_direct || !mode || !strcmp(mode, "auto"))) {
      int64_t v = 0;
      TD_CHECK(td_config_int("TD_OPS_FUSED_AG_GEMMS", &v));
      if (v == 0 || f->ag_direct) /* an asked-for copy split keeps the copy path */
        f->ag_direct = f->ag_gather = 1, f->ag_blocks = f->n;
    }
    if (blas_one) /* cuBLAS's kernel, not the tuning cache's pick for one rank's launch */
      f->cfg = (td_gemm_config){TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
    else if (!f->ag_gather)
      TD_CHECK(td__f_pick_config(op, f, (int)lm, (int)f->nb, (int)d->k, &f->cfg));
    /* the gather buffer in global row order; this rank's own rows stay in A */
    if (!f->ag_direct)
      TD_CHECK(td__f_cu(cudaMalloc(&f->buf, m * (size_t)d->k * f->esz), "cudaMalloc (gather buffer)"));
    if (!f->ag_gather)
      f->ag_one = 0; /* an asked-for copy split keeps the copy path */
    if (f->ag_gather) {
      const char *fence = NULL;
      TD_CHECK(td_config_str("TD_OPS_FUSED_MAP_FENCE", &fence));
      f->map_fence = fence && !strcmp(fence, "start");
      f->ag_share = share && !f->ag_one;
      TD_CHECK(td__f_cu(cudaMalloc(&f->amaps, (f->ag_one ? 2 : 1) * (size_t)f->n * TD_GEMM_MAP_BYTES),
                        "cudaMalloc (tensor maps)"));
      TD_CHECK(td__f_alloc_map_cache(op, f));
      if (f->ag_one || f->ag_share) /* the last wave split along K: rank 0's one launch, or every rank's share */
        TD_CHECK(td__f_alloc_tail(op, f));
    }
    /* across GPUs the copy path pulls from every peer at once, one stream each */
    for (int j = 0; f->multi && !f->ag_direct && j < f->n - 1; j++)
      TD_CHECK(td__f_cu(cudaStreamCreateWithPriority(&f->cep[j], cudaStreamNonBlocking, hi),
                        "cudaStreamCreateWithPriority"));
    /* direct with equal parts on cuBLAS: one batched launch (unless TD_OPS_FUSED_AG=direct) */
    f->ag_batched = f->ag_direct && !f->ag_gather && !(mode && !strcmp(mode, "direct")) &&
                    td__gemm_cublas_batched && f->cfg.arch == TD_GEMM_CUBLAS && d->m % f->n == 0;
    /* batched-one: rank 0's one batched launch for every rank, on one shared GPU */
    f->ag_one_blas = f->ag_batched && blas_one;
    if (f->ag_batched)
      TD_CHECK(td__f_cu(cudaMalloc((void **)&f->ptrs, 3 * (size_t)f->n * (f->ag_one_blas ? f->n : 1) *
                                                           sizeof(void *)),
                        "cudaMalloc (pointer table)"));
  } else if (d->kind != TD_TP_ALL_REDUCE) {
    TD_CHECK(td__f_rs_mode(f));
    if (d->kind == TD_TP_GEMM_AR)
      TD_CHECK(td__f_ar_mode(op, f));
    if (td__f_kgather_config(op, f)) { /* no partial, no slots: the tensor maps only */
      f->kgather = 1, f->rs_push = 0, f->ar_all_push = 0, f->one_shot = 0;
      const char *hint = NULL;
      TD_CHECK(td_config_str("TD_OPS_FUSED_BCAST_HINT", &hint));
      f->bcast_hint = hint && !strcmp(hint, "evict_first");
      const char *half = NULL;
      TD_CHECK(td_config_str("TD_OPS_FUSED_BCAST_HALF", &half));
      f->bcast_defer = half && !strcmp(half, "defer") ? 1 : half && !strcmp(half, "pace") ? 2 : 0;
      int64_t pace_kb = 0;
      TD_CHECK(td_config_int("TD_OPS_FUSED_BCAST_PACE", &pace_kb));
      f->bcast_pace_kb = (int)pace_kb;
      TD_CHECK(td__f_cu(cudaMalloc(&f->kmaps, 3 * (size_t)f->n * TD_GEMM_MAP_BYTES), "cudaMalloc (tensor maps)"));
      TD_CHECK(td__f_alloc_map_cache(op, f));
      TD_CHECK(td__f_alloc_tail(op, f)); /* rank 0's launch splits its last wave's (or two waves') tiles along K */
      TD_CHECK(td__f_cu(cudaMalloc((void **)&f->ctl, TD__CTL_WORDS * 8), "cudaMalloc (progress words)"));
      TD_CHECK(td__f_cu(cudaMemsetAsync(f->ctl, 0, TD__CTL_WORDS * 8, f->s), "cudaMemsetAsync"));
      return td__f_cu(cudaStreamSynchronize(f->s), "cudaStreamSynchronize");
    }
    const int push = f->rs_push && (d->kind == TD_TP_GEMM_RS || !f->one_shot) && !f->ar_all_push;
    const int64_t lm = f->ar_all_push ? (d->m + f->ar_blocks - 1) / f->ar_blocks : push ? f->rows[0] : d->m;
    TD_CHECK(td__f_pick_config(op, f, (int)lm, (int)d->n, (int)(d->k / f->n), &f->cfg));
    TD_CHECK(td__f_cu(cudaMalloc(&f->buf, m * (size_t)d->n * f->esz), "cudaMalloc (partial)"));
    if (d->kind == TD_TP_GEMM_AR && !f->one_shot && !f->ar_all_push)
      TD_CHECK(td__f_cu(cudaMalloc(&f->red, m * (size_t)d->n * f->esz), "cudaMalloc (reduced rows)"));
    if (f->ar_all_push && f->n > 1)
      TD_CHECK(td__f_cu(cudaMalloc(&f->recv, (size_t)(f->n - 1) * m * (size_t)d->n * f->esz),
                        "cudaMalloc (receive slots)"));
    else if (push && f->rows[0] > 0)
      TD_CHECK(td__f_cu(cudaMalloc(&f->recv, (size_t)f->n * (size_t)f->rows[0] * (size_t)d->n * f->esz),
                        "cudaMalloc (receive slots)"));
  }
  TD_CHECK(td__f_cu(cudaMalloc((void **)&f->ctl, TD__CTL_WORDS * 8), "cudaMalloc (progress words)"));
  TD_CHECK(td__f_cu(cudaMemsetAsync(f->ctl, 0, TD__CTL_WORDS * 8, f->s), "cudaMemsetAsync"));
  return td__f_cu(cudaStreamSynchronize(f->s), "cudaStreamSynchronize");
}

/* The row split of the operands (td_chunk_range), and the all-reduce's
 * two-shot parts: whole 16-byte vectors, so each part's reduction keeps the
 * vector path. */
static void td__f_split(const td__tp_desc *d, td__tp_fused *f) {
  for (int p = 0; p < f->n; p++) {
    size_t off, len;
    td_chunk_range((size_t)d->m, f->n, p, &off, &len);
    f->row0[p] = (int64_t)off, f->rows[p] = (int64_t)len;
  }
  size_t off, len;
  td_chunk_range((size_t)d->n, f->n, 0, &off, &len); /* part 0 is the widest */
  f->nb = (int64_t)len;
  if (d->kind == TD_TP_ALL_REDUCE) {
    size_t unit = 16 / f->esz, units = (d->count + unit - 1) / unit;
    for (int p = 0; p < f->n; p++) {
      td_chunk_range(units, f->n, p, &off, &len);
      f->ar_off[p] = (int64_t)(off * unit < d->count ? off * unit : d->count);
    }
    f->ar_off[f->n] = (int64_t)d->count;
  }
}

/* Collective, first exchange: every rank's status, process, device and
 * peer-access mask; the same verdict on every rank (the first rank that
 * failed, or td__tp_fused_agree's reason). On success fills f->pdev and
 * f->multi. */
static td_status td__f_place(td_tp_op *op, td__tp_fused *f, td_status mine) {
  char msg[256] = "";
  if (mine != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  int64_t rec[TD__PL_N] = {mine, 1, (int64_t)getpid(), mine == TD_OK ? f->dev : -1,
                           mine == TD_OK ? td__f_peer_mask(f->dev) : 0};
  int64_t all[TD__MAXR * TD__PL_N];
  TD_CHECK(td_all_gather(op->team, all, rec, TD__PL_N, TD_I64));
  if (mine != TD_OK) /* this rank's own reason first */
    return td__error(mine, "%s", msg);
  td__tp_fused_probe pr[TD__MAXR];
  for (int p = 0; p < op->nranks; p++) {
    const int64_t *q = all + p * TD__PL_N;
    if (q[TD__PL_STATUS] != TD_OK)
      return td__error((td_status)q[TD__PL_STATUS], "fused: rank %d could not set up (see its error)", p);
    pr[p] = (td__tp_fused_probe){q[TD__PL_OK], q[TD__PL_PID], q[TD__PL_DEV], q[TD__PL_PEERS]};
  }
  char why[200];
  if (!td__tp_fused_agree(pr, op->nranks, why, sizeof why))
    return td__error(TD_ERR_UNSUPPORTED, "fused: %s; the fused variant needs the ranks of one process (a local "
                     "world), on one GPU or on GPUs that can all access each other's memory", why);
  for (int p = 0; p < op->nranks; p++) {
    f->pdev[p] = (int)pr[p].dev;
    f->multi |= f->pdev[p] != f->dev;
  }
  return TD_OK;
}

td_status td__tp_fused_create(td_tp_op *op) {
  const td__tp_desc *d = &op->d;
  if (d->kind != TD_TP_ALL_REDUCE && !td__tp_fused_linked())
    return td__error(TD_ERR_UNSUPPORTED, "the fused variant needs the Hopper GEMM library: link tdist_gemm_cuda "
                     "into the program (the tdist CLI does)");
  pthread_once(&td__f_once, td__f_resolve);
  if (!td__fw64)
    return td__error(TD_ERR_UNSUPPORTED, "fused: the CUDA driver lacks cuStreamWriteValue64");
  td__tp_fused *f = calloc(1, sizeof *f);
  if (!f) { /* still take part in the first exchange, so peers fail with it instead of at its deadline */
    int64_t rec[TD__PL_N] = {TD_ERR_NO_MEMORY}, all[TD__MAXR * TD__PL_N];
    td_all_gather(op->team, all, rec, TD__PL_N, TD_I64);
    return td__error(TD_ERR_NO_MEMORY, "fused: rank %d: out of memory for the operator's state", op->rank);
  }
  f->n = op->nranks, f->r = op->rank, f->esz = td_dtype_size(d->dtype);
  f->timeout_ms = op->opts.timeout_ms ? op->opts.timeout_ms : td_world_timeout_ms(td_team_world(op->team));
  /* one-shot (every rank reduces everything) while the reads it multiplies by
   * the rank count stay cheaper than two-shot's extra barrier and copies */
  size_t out_bytes = d->kind == TD_TP_ALL_REDUCE ? d->count * f->esz : (size_t)d->m * (size_t)d->n * f->esz;
  f->one_shot = out_bytes <= ((size_t)1 << 20);
  td__f_split(d, f);
  /* 1. where every rank is; every rank goes on only if all can */
  td_status st = td__f_place(op, f, td__f_open_device(op, f));
  if (st != TD_OK) {
    td__f_free(f);
    return st;
  }
  /* 2. peer access and the allocations, then every rank's pointers (this
   * exchange also orders every rank's peer access before any use of it) */
  td_status mine = td__f_enable_peers(op, f);
  if (mine == TD_OK)
    mine = td__f_alloc(op, f);
  char msg[256] = "";
  if (mine != TD_OK)
    snprintf(msg, sizeof msg, "%s", td_last_error());
  int64_t rec[TD__REC_N] = {mine, (int64_t)(uintptr_t)f->buf, (int64_t)(uintptr_t)f->red,
                            (int64_t)(uintptr_t)f->recv, (int64_t)(uintptr_t)f->ctl, (int64_t)(uintptr_t)f};
  int64_t all[TD__MAXR * TD__REC_N];
  st = td_all_gather(op->team, all, rec, TD__REC_N, TD_I64);
  if (st == TD_OK && mine != TD_OK) /* this rank's own reason first */
    st = td__error(mine, "%s", msg);
  for (int p = 0; st == TD_OK && p < f->n; p++) {
    const int64_t *q = all + p * TD__REC_N;
    if (q[TD__REC_STATUS] != TD_OK)
      st = td__error((td_status)q[TD__REC_STATUS], "fused: rank %d could not set up (see its error)", p);
    else {
      f->pbuf[p] = (void *)(uintptr_t)q[TD__REC_BUF];
      f->pred[p] = (void *)(uintptr_t)q[TD__REC_RED];
      f->precv[p] = (void *)(uintptr_t)q[TD__REC_RECV];
      f->pctl[p] = (uint64_t *)(uintptr_t)q[TD__REC_CTL];
      f->peer[p] = (td__tp_fused *)(uintptr_t)q[TD__REC_SELF];
    }
  }
  if (st != TD_OK) {
    td__f_free(f);
    return st;
  }
  op->fused = f;
  op->compute_workers = f->sms, op->comm_workers = 0, op->chunks = 1;
  return TD_OK;
}

/* After a failed call: sets every rank's progress words to a value no epoch
 * reaches and tells every rank on the host: peers still in that call may
 * finish it on incomplete data, so their next call check answers
 * TD_ERR_PEER_FAILED instead of a result. */
static void td__f_poison(td__tp_fused *f) {
  for (int p = 0; p < f->n; p++)
    __atomic_store_n(&f->peer[p]->poisoned, 1, __ATOMIC_SEQ_CST);
  uint64_t big[TD__CTL_WORDS];
  for (int i = 0; i < TD__CTL_WORDS; i++)
    big[i] = (uint64_t)1 << 62;
  /* each word from its owner's device (a peer's may be another GPU) */
  for (int p = 0; p < f->n; p++)
    if (cudaSetDevice(f->pdev[p]) == cudaSuccess)
      cudaMemcpy(f->pctl[p], big, sizeof big, cudaMemcpyHostToDevice);
  cudaSetDevice(f->dev);
}

/* Whether more than timeout_ms have passed since t0 (CLOCK_MONOTONIC): the
 * deadline of the fused layer's host waits. */
static int td__f_past(const struct timespec *t0, int timeout_ms) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) * 1e-6 > timeout_ms;
}

/* Polls stream s until its work is done, failed (*err set) or timeout_ms
 * passed: 0, 1 or 2. Polling (not cudaStreamSynchronize) keeps the deadline. */
static int td__f_poll(cudaStream_t s, int timeout_ms, cudaError_t *err) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess)
      return 0;
    if (q != cudaErrorNotReady) {
      *err = q;
      return 1;
    }
    if (td__f_past(&t0, timeout_ms))
      return 2;
    sched_yield();
  }
}

/* Waits for the compute stream (which joined the copy-engine stream) under
 * the deadline; past it, poisons. */
td_status td__f_finish(td_tp_op *op, td__tp_fused *f) {
  cudaError_t err = cudaSuccess;
  int rc = td__f_poll(f->s, f->timeout_ms, &err);
  if (rc == 1)
    return td__f_cu(err, "the call's GPU work");
  if (rc == 2) {
    td__f_poison(f);
    return td__error(TD_ERR_TIMEOUT, "fused: rank %d: call %" PRIu64 " did not finish within %d ms (a peer "
                     "never made this call, or its GPU work failed)", op->rank, f->epoch, f->timeout_ms);
  }
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's call %" PRIu64 " or earlier failed (timeout); "
                     "this call's result is void", op->rank, f->epoch);
  return TD_OK;
}

void td__f_end_publish(td__tp_fused *f, uint64_t e, td_status st) {
  __atomic_store_n(&f->end_word, e << 8 | ((uint64_t)st & 0xff), __ATOMIC_RELEASE);
}

td_status td__f_end_wait(td_tp_op *op, td__tp_fused *f, uint64_t e) {
  const td__tp_fused *z = f->peer[0];
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  uint64_t w;
  /* one load reads the call and its status, so nothing of rank 0's state is read after it published (its
   * caller may destroy the operator once the call returns) */
  for (unsigned i = 1; ((w = __atomic_load_n(&z->end_word, __ATOMIC_ACQUIRE)) >> 8) < e; i++)
    if (i % 64 == 0) { /* the deadline, and the core to a thread that needs it (ranks may outnumber cores) */
      if (td__f_past(&t0, f->timeout_ms)) {
        td__f_poison(f);
        return td__error(TD_ERR_TIMEOUT, "fused: rank %d: call %" PRIu64 ": rank 0's launch for every rank was not "
                         "seen to end within %d ms (rank 0 left the call, or its GPU work hung)", op->rank, e,
                         f->timeout_ms);
      }
      sched_yield();
    }
  const td_status st = (td_status)(w & 0xff);
  if (st != TD_OK)
    return td__error(st, "fused: rank %d: call %" PRIu64 ": rank 0's launch for every rank failed on the GPU, did "
                     "not finish, or rank 0 left the call (rank 0's error says which), so this call's result is void",
                     op->rank, e);
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's call %" PRIu64 " or earlier failed (timeout); "
                     "this call's result is void", op->rank, e);
  return TD_OK;
}

/* Keeps the first failure of a call: the call goes on to its barriers even
 * after one (a rank leaving early would leave its peers at a barrier until
 * the deadline), and reports the first failure at the end. */
void td__f_keep(td_status *first, td_status st) {
  if (*first == TD_OK && st != TD_OK)
    *first = st;
}

/* Host barrier between the ranks' enqueues. Every cross-rank dependency of a
 * call is an event recorded by a rank before this barrier and waited for
 * (cudaStreamWaitEvent) by a peer after it: CUDA sees every dependency, and
 * each waits only on work enqueued earlier, so no ordering of the hardware
 * queues (streams share them) and no set of resident kernels can close a
 * cycle. A failed barrier (deadline) poisons the operator. */
td_status td__f_sync(td_tp_op *op, td__tp_fused *f) {
  if (f->n < 2)
    return TD_OK;
  td_status st = td_team_sync(op->team);
  if (st != TD_OK)
    td__f_poison(f);
  return st;
}

td_status td__f_sync_mid(td_tp_op *op, td__tp_fused *f) {
  td_status st = td__f_sync(op, f);
  if (st != TD_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    td__f_finish(op, f);
    return td__error(st, "%s", msg);
  }
  return TD_OK;
}

td_status td__f_gather_mid(td_tp_op *op, td__tp_fused *f, int64_t mine, int64_t *all) {
  all[0] = mine;
  if (f->n < 2)
    return TD_OK;
  td_status st = td_all_gather(op->team, all, &mine, 1, TD_I64);
  if (st != TD_OK) { /* as td__f_sync_mid: peers told, this rank's streams waited for */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    td__f_poison(f);
    td__f_finish(op, f);
    return td__error(st, "%s", msg);
  }
  return TD_OK;
}

void td__f_stamp(td__tp_fused *f, int what) {
  if (!f->prof || f->prof_calls >= TD__PROF_CALLS)
    return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double *call = f->prof + (size_t)f->prof_calls * TD__PROF_N;
  if (what == TD__PROF_ENTER) /* a call refused before its run leaves stamps of its own: start afresh */
    memset(call, 0, TD__PROF_N * sizeof *call);
  call[what] = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
  if (what == TD__PROF_DONE)
    f->prof_calls++;
}

void td__f_prof_event(td__tp_fused *f, int i) {
  if (f->prof && f->prof_ev[i] && f->prof_calls < TD__PROF_CALLS)
    cudaEventRecord(f->prof_ev[i], f->s); /* a measurement aid: its failure leaves this call unmeasured */
}

/* Rank 0 of a one-launch call, after its streams finished: the call's GPU
 * times from its profile events (td__f_prof_event). */
void td__f_prof_gpu(td__tp_fused *f) {
  if (!f->prof || !f->prof_ev[0] || f->prof_calls >= TD__PROF_CALLS)
    return;
  float *g = f->prof_gpu + (size_t)f->prof_calls * TD__PROF_GPU_N, ms = 0;
  g[TD__PROF_GPU_TO_LAUNCH] = cudaEventElapsedTime(&ms, f->prof_ev[0], f->prof_ev[1]) == cudaSuccess ? ms : 0;
  g[TD__PROF_GPU_KERNEL] = cudaEventElapsedTime(&ms, f->prof_ev[1], f->prof_ev[2]) == cudaSuccess ? ms : 0;
  cudaGetLastError(); /* an event not recorded in this call (another schedule) is no error of the caller's */
}

static int td__f_cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* The median over the profiled calls of stamp `to` minus stamp `from`, in
 * microseconds, over the calls that have both; -1 when none has. */
static double td__f_prof_median(const td__tp_fused *f, int from, int to, double *tmp) {
  int k = 0;
  for (int c = 0; c < f->prof_calls; c++) {
    const double *call = f->prof + (size_t)c * TD__PROF_N;
    if (call[from] > 0 && call[to] > 0)
      tmp[k++] = (call[to] - call[from]) * 1e6;
  }
  if (k == 0)
    return -1;
  qsort(tmp, (size_t)k, sizeof *tmp, td__f_cmp_double);
  return k % 2 ? tmp[k / 2] : 0.5 * (tmp[k / 2 - 1] + tmp[k / 2]);
}

/* TD_OPS_FUSED_PROFILE's report, one line per rank on stderr: where a
 * call's host time went, and on rank 0 of a one-launch schedule the GPU's
 * side (td__f_prof_gpu) -- a measurement aid. */
static void td__f_prof_report(const td_tp_op *op, const td__tp_fused *f) {
  if (!f->prof || f->prof_calls == 0)
    return;
  double *tmp = malloc((size_t)f->prof_calls * sizeof *tmp);
  if (!tmp)
    return;
  static const char *const names[TD__PROF_N - 1] = {"operand-check exchange", "launcher", "enqueue",
                                                     "middle exchange", "finish"};
  char line[512];
  int len = snprintf(line, sizeof line, "tdist: fused profile: %s rank %d, %d calls, median us:",
                     td_tp_kind_name(op->d.kind), op->rank, f->prof_calls);
  int prev = TD__PROF_ENTER;
  for (int w = TD__PROF_AGREED; w < TD__PROF_N && len < (int)sizeof line; w++) {
    double v = td__f_prof_median(f, prev, w, tmp);
    if (v < 0) /* a stamp this schedule does not make: the next segment starts from the last one made */
      continue;
    len += snprintf(line + len, sizeof line - (size_t)len, " %s %.1f,", names[w - 1], v);
    prev = w;
  }
  if (len < (int)sizeof line)
    len += snprintf(line + len, sizeof line - (size_t)len, " call %.1f",
                    td__f_prof_median(f, TD__PROF_ENTER, TD__PROF_DONE, tmp));
  static const char *const gnames[TD__PROF_GPU_N] = {"call start to launch", "launch"};
  for (int g = 0, shown = 0; f->prof_gpu && g < TD__PROF_GPU_N && len < (int)sizeof line; g++) {
    int k = 0;
    for (int c = 0; c < f->prof_calls; c++)
      if (f->prof_gpu[(size_t)c * TD__PROF_GPU_N + g] > 0)
        tmp[k++] = 1e3 * f->prof_gpu[(size_t)c * TD__PROF_GPU_N + g];
    if (k == 0)
      continue;
    qsort(tmp, (size_t)k, sizeof *tmp, td__f_cmp_double);
    len += snprintf(line + len, sizeof line - (size_t)len, "%s %s %.1f", shown++ ? "," : "; GPU (events)",
                    gnames[g], k % 2 ? tmp[k / 2] : 0.5 * (tmp[k / 2 - 1] + tmp[k / 2]));
  }
  if (len < (int)sizeof line)
    snprintf(line + len, sizeof line - (size_t)len, "\n");
  fputs(line, stderr);
  free(tmp);
}

td_status td__tp_fused_publish(td_tp_op *op, void *c, const void *a, const void *b) {
  td__tp_fused *f = op->fused;
  td__f_stamp(f, TD__PROF_ENTER);
  td__f_prof_event(f, 0); /* the previous call left the stream idle: this marks the call's start on the GPU */
  /* The caller's stream produces the operands: its earlier work must be
   * over before any rank reads them (the peers read A or src from their own
   * streams). Calls are blocking, so this host wait costs little; an event
   * recorded here and waited for by every reader's stream would let the host
   * enqueue sooner (docs/architecture.md, "Opening barrier"). */
  cudaStream_t user = (cudaStream_t)op->opts.cuda_stream;
  cudaError_t err = cudaSuccess;
  int rc = user ? td__f_poll(user, f->timeout_ms, &err) : 0;
  if (rc == 1)
    return td__error(TD_ERR_CUDA, "fused: rank %d: the work on opts.cuda_stream before this call failed: %s",
                     op->rank, cudaGetErrorString(err));
  if (rc == 2)
    return td__error(TD_ERR_TIMEOUT, "fused: rank %d: the work on opts.cuda_stream before this call did not "
                     "finish within %d ms", op->rank, f->timeout_ms);
  /* the exchange that follows publishes these (release/acquire through the
   * collective); a peer reads them only after it */
  __atomic_store_n(&f->ar_src, a, __ATOMIC_RELEASE);
  __atomic_store_n(&f->ar_dst, c, __ATOMIC_RELEASE);
  __atomic_store_n(&f->ar_b, b, __ATOMIC_RELEASE);
  return TD_OK;
}

td_status td__tp_fused_run(td_tp_op *op, void *c, const void *a, const void *b) {
  td__tp_fused *f = op->fused;
  /* operand alignment is checked with the other operand checks, on every rank (tp_op.c) */
  if (__atomic_load_n(&f->poisoned, __ATOMIC_SEQ_CST))
    return td__error(TD_ERR_PEER_FAILED, "fused: rank %d: a peer's earlier call failed (timeout); the operator "
                     "can only be destroyed", op->rank);
  td__f_stamp(f, TD__PROF_AGREED);
  TD_CHECK(td__f_cu(cudaSetDevice(f->dev), "cudaSetDevice"));
  uint64_t e = ++f->epoch;
  td_status st;
  switch (op->d.kind) {
  case TD_TP_AG_GEMM: st = td__f_ag(op, f, c, a, b, e); break;
  case TD_TP_ALL_REDUCE: st = td__f_all_reduce(op, f, c, a, e); break;
  default: st = td__f_rs_ar(op, f, c, a, b, e); break;
  }
  td__f_stamp(f, TD__PROF_DONE);
  return st;
}

void td__tp_fused_describe(const td_tp_op *op, char *buf, size_t cap) {
  const td__tp_fused *f = op->fused;
  char eng[64] = "no GEMM";
  if (td__gemm_config_name && op->d.kind != TD_TP_ALL_REDUCE)
    td__gemm_config_name(&f->cfg, eng, sizeof eng);
  switch (op->d.kind) {
  case TD_TP_AG_GEMM:
    if (f->ag_gather || f->ag_batched || f->ag_direct) {
      char share[48] = "", tail[96] = "";
      int t = 0, s = 1;
      td__f_split_plan(op, f, LLONG_MAX, &t, &s);
      if (f->ag_share)
        snprintf(share, sizeof share, " on %d of %d SMs", td__f_share(f, f->r), f->sms);
      if (t > 0)
        snprintf(tail, sizeof tail, ", last %d tile%s in %d K-slices", t, t > 1 ? "s" : "", s);
      snprintf(buf, cap, "ag %s%s, %s%s",
               f->ag_one        ? "gather, one launch for every rank"
               : f->ag_gather   ? "gather"
               : f->ag_one_blas ? "batched, one launch for every rank"
               : f->ag_batched  ? "batched"
                                : "direct",
               share, f->ag_batched ? "cuBLAS batched" : eng, tail);
    }
    else if (f->ag_blocks == 1)
      snprintf(buf, cap, "ag copy, one GEMM launch, %s", eng);
    else /* a rank whose part sits at an end has no rows before (or after) it: fewer launches */
      snprintf(buf, cap, "ag copy, up to %d GEMM launches, %s", f->ag_blocks, eng);
    break;
  case TD_TP_ALL_REDUCE:
    snprintf(buf, cap, "all_reduce %s", f->one_shot ? "one-shot" : "two-shot");
    break;
  default: {
    /* kgather's split tail as rank 0's launch will plan it (one block per SM) */
    char tail[96] = "";
    int t = 0, s = 1;
    td__f_split_plan(op, f, LLONG_MAX, &t, &s);
    if (t > 0)
      snprintf(tail, sizeof tail, ", last %d tile%s in %d K-slices", t, t > 1 ? "s" : "", s);
    /* only a tile staged half at a time has the deferred variant (128x256; 128x128 stages it whole) */
    if (f->kgather && op->d.kind == TD_TP_GEMM_AR && f->bcast_defer && td__gemm_cuda_has_variant &&
        td__gemm_cuda_has_variant(&f->cfg, op->d.dtype, TD_GEMM_B_KN, TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST, 1))
      snprintf(tail + strlen(tail), sizeof tail - strlen(tail),
               f->bcast_defer == 2 ? ", copies paced" : ", second half deferred");
    snprintf(buf, cap, "%s %s%s, %s", td_tp_kind_name(op->d.kind),
             f->kgather && f->bcast_hint                ? "kgather, one launch for every rank, stores L2 evict-first"
             : f->kgather                               ? "kgather, one launch for every rank"
             : op->d.kind == TD_TP_GEMM_AR && f->one_shot ? "one-shot"
             : f->ar_all_push                           ? "all-push"
             : op->d.kind == TD_TP_GEMM_AR              ? (f->rs_push ? "two-shot push" : "two-shot pull")
             : f->rs_push                               ? "push"
                                                        : "pull",
             tail, eng);
    break;
  }
  }
}

td_status td__tp_fused_destroy(td_tp_op *op) {
  td__tp_fused *f = op->fused;
  /* every rank's last call has finished (calls are blocking) once all are here */
  int64_t mine = 0, all[TD__MAXR];
  td_status st = td_all_gather(op->team, all, &mine, 1, TD_I64);
  td__f_prof_report(op, f);
  if (f->map_cache && f->prof) /* with the profile: how often the maps' upload was skipped */
    fprintf(stderr, "tdist: fused profile: %s rank %d: tensor maps uploaded %lld times, reused %lld times\n",
            td_tp_kind_name(op->d.kind), op->rank, f->map_cache->uploads, f->map_cache->hits);
  td__f_free(f);
  op->fused = NULL;
  return st;
}
