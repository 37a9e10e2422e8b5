/* SPDX-License-Identifier: Apache-2.0
 * Operators layer: the rules of the fused cuda variant (TD_TP_FUSED) that
 * need no GPU, so every build (and CI without a GPU) checks them the same
 * way, and AUTO's decision to run it. The fused variant runs the Hopper GEMM
 * kernels of src/tile/cuda directly, and those take only some shapes:
 * 16-byte rows (K % 8 == 0, and N % 8 == 0 for B stored [K,N]), bf16 or f16;
 * the GEMM runs on each rank's whole buffer, so a split dimension must give
 * every rank the same width (the buffer's padding would otherwise enter the
 * sum). The all-reduce takes every dtype and count. The answer depends only
 * on the arguments, which the collective check already made equal on every
 * rank, so all ranks accept or refuse together.
 *
 * AUTO (td__tp_fused_auto) runs the fused variant on cuda wherever it
 * applies: the rules above hold, TD_OPS_FUSED is not 0, and every rank's
 * probe (GEMM library linked, a Hopper GPU for the GEMM operators) says yes
 * with all ranks in one process, on one GPU or on GPUs that can all access
 * each other's memory (peer access: NVLink or PCIe P2P). The probes are
 * exchanged, so every rank decides from the same data; otherwise AUTO keeps
 * the executor variants the perf model compares. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/ops_internal.h"
#include "tdist/coll.h"
#include "tdist/config.h"

#ifndef TD_HAVE_OPS_FUSED
int td__tp_fused_linked(void) { return 0; }
void td__tp_fused_probe_rank(const td__tp_desc *d, td_team *team, td__tp_fused_probe *out) {
  (void)d, (void)team;
  out->ok = 0, out->pid = 0, out->dev = -1, out->peers = 0;
}
td_status td__tp_fused_create(td_tp_op *op) {
  (void)op;
  return td__error(TD_ERR_UNSUPPORTED, "fused variant: this build has no CUDA (configure with -DTD_WITH_CUDA=ON)");
}
td_status td__tp_fused_publish(td_tp_op *op, void *c, const void *a, const void *b) {
  (void)op, (void)c, (void)a, (void)b;
  return TD_OK;
}
td_status td__tp_fused_run(td_tp_op *op, void *c, const void *a, const void *b) {
  (void)op, (void)c, (void)a, (void)b;
  return td__error(TD_ERR_UNSUPPORTED, "fused variant: this build has no CUDA");
}
td_status td__tp_fused_destroy(td_tp_op *op) {
  (void)op;
  return TD_OK;
}
void td__tp_fused_describe(const td_tp_op *op, char *buf, size_t cap) {
  (void)op;
  snprintf(buf, cap, "(no CUDA in this build)");
}
#endif

td_status td__tp_fused_check(const td__tp_desc *d, int nranks, const td_tp_opts *o) {
  const char *kn = td_tp_kind_name(d->kind);
  if ((int)d->kind < 0 || d->kind >= TD_TP_KIND_COUNT)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant exists for ag_gemm, gemm_rs, gemm_ar and "
                     "all_reduce only", kn);
  if (o->backend != TD_EXEC_CUDA)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant runs on the cuda backend only; use backend "
                     "TD_EXEC_CUDA or another variant", kn);
#ifndef TD_HAVE_OPS_FUSED
  return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs a build with CUDA (-DTD_WITH_CUDA=ON)", kn);
#else
  if (d->kind != TD_TP_ALL_REDUCE && (d->m > INT32_MAX || d->n > INT32_MAX || d->k > INT32_MAX))
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant's GEMMs take M, N, K up to %d; got M=%" PRId64
                     ", N=%" PRId64 ", K=%" PRId64, kn, INT32_MAX, d->m, d->n, d->k);
  if (nranks > 8)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant runs on up to 8 ranks (one node); got %d", kn,
                     nranks);
  if (d->kind == TD_TP_ALL_REDUCE)
    return TD_OK; /* a reduction kernel for every dtype, any count and alignment */
  if (d->dtype != TD_BF16 && d->dtype != TD_F16)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs bf16 or f16 (its Hopper GEMM kernels); "
                     "got %s", kn, td_dtype_name(d->dtype));
  if (d->kind == TD_TP_AG_GEMM) {
    size_t off, nb;
    td_chunk_range((size_t)d->n, nranks, 0, &off, &nb); /* part 0 is the widest: the buffers' row length */
    if (d->k % 8 != 0 || nb % 8 != 0)
      return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs K %% 8 == 0 and N / ranks (rounded up) "
                       "%% 8 == 0 (16-byte rows); got K=%" PRId64 ", N=%" PRId64 " on %d ranks (%zu)",
                       kn, d->k, d->n, nranks, nb);
    return TD_OK;
  }
  if (d->k % nranks != 0 || (d->k / nranks) % 8 != 0 || d->n % 8 != 0)
    return td__error(TD_ERR_UNSUPPORTED, "%s: the fused variant needs K %% (8 x ranks) == 0 and N %% 8 == 0 "
                     "(equal 16-byte K parts); got K=%" PRId64 ", N=%" PRId64 " on %d ranks", kn, d->k, d->n,
                     nranks);
  return TD_OK;
#endif
}

/* Whether a rank on device `from` (peer mask `mask`) can load and store
 * device `to`'s memory. */
static int td__fused_reaches(int64_t mask, int64_t from, int64_t to) {
  return from == to || (to >= 0 && to < 64 && ((uint64_t)mask >> to) & 1u);
}

int td__tp_fused_agree(const td__tp_fused_probe *all, int nranks, char *why, size_t why_size) {
  char buf[200] = "";
  int ok = 1;
  for (int r = 0; r < nranks && ok; r++) {
    if (!all[r].ok)
      snprintf(buf, sizeof buf, "rank %d cannot run it (no GEMM library, no usable GPU, or not a Hopper GPU)", r),
          ok = 0;
    else if (all[r].pid != all[0].pid)
      snprintf(buf, sizeof buf, "ranks 0 and %d are different processes", r), ok = 0;
  }
  /* every rank reads and writes its peers' buffers directly: each pair of
   * distinct devices needs peer access both ways (the first pair that lacks
   * it is named, the same on every rank) */
  for (int r = 0; r < nranks && ok; r++)
    for (int s = r + 1; s < nranks && ok; s++)
      if (!td__fused_reaches(all[r].peers, all[r].dev, all[s].dev) ||
          !td__fused_reaches(all[s].peers, all[s].dev, all[r].dev))
        snprintf(buf, sizeof buf, "ranks %d (GPU %" PRId64 ") and %d (GPU %" PRId64 ") cannot access each other's "
                 "memory (no peer access between the two GPUs)", r, all[r].dev, s, all[s].dev), ok = 0;
  if (why && why_size)
    snprintf(why, why_size, "%s", buf);
  return ok;
}

td_status td__tp_fused_auto(td_team *team, const td__tp_desc *d, const td_tp_opts *o, int *out) {
  *out = 0;
  /* equal arguments on every rank, so every rank skips the exchange together */
  if (!(d->variants & (1u << TD_TP_FUSED)) || o->backend != TD_EXEC_CUDA)
    return TD_OK;
  if (td__tp_fused_check(d, td_team_size(team), o) != TD_OK)
    return TD_OK;
  int64_t on = 1;
  td__tp_fused_probe mine = {0, 0, -1, 0};
  if (td_config_int("TD_OPS_FUSED", &on) != TD_OK)
    mine.ok = -1; /* every rank fails alike below, rather than this one alone */
  else if (on)
    td__tp_fused_probe_rank(d, team, &mine);
  int n = td_team_size(team);
  td__tp_fused_probe *all = calloc((size_t)n, sizeof *all);
  if (!all) /* rare; peers then meet the exchange's deadline */
    return td__error(TD_ERR_NO_MEMORY, "%s: out of memory", td_tp_kind_name(d->kind));
  td_status st = td_all_gather(team, all, &mine, sizeof mine / sizeof(int64_t), TD_I64);
  for (int r = 0; st == TD_OK && r < n; r++)
    if (all[r].ok < 0)
      st = td__error(TD_ERR_INVALID_ARG, "%s: rank %d: TD_OPS_FUSED is malformed; use 0 (AUTO never picks the "
                     "fused variant) or 1", td_tp_kind_name(d->kind), r);
  if (st == TD_OK)
    *out = td__tp_fused_agree(all, n, NULL, 0);
  free(all);
  return st;
}

/* Across GPUs, whether ag_gemm's GEMM is worth splitting into one launch
 * per rank's part: the waves of 128 x 256 tiles over the SMs that the split
 * adds (a part's last wave runs part-empty) against the copy it hides (the
 * peers' rows, over the link). Both scale with K, so the rule is rows
 * against waves: split when copied rows x bytes / link rate exceed the added
 * waves x one tile's work / one SM's rate (Hopper: ~7.5 TFLOP/s of bf16 per
 * SM, NVLink ~350 GB/s a direction). Measured on H200 x2, 2026-11-29,
 * ag_gemm at M = 1024 and 2048 over the five models (docs/perf.md): the
 * split was 1-8% faster in the 7 cases of no added wave and 5-6% slower in
 * the 3 that added one with 512 or 1024 copied rows; at M = 8192 the split
 * of 405b adds a wave but hides 4096 rows, and ran 1% ahead of copy + one
 * GEMM (the benchmark's baseline side). */
int td__tp_fused_ag_split(int64_t m, const int64_t *rows, int n, int r, int64_t nb, int sms, size_t esz) {
  const int64_t s = sms > 0 ? sms : 1, cols = (nb + 255) / 256;
  int64_t whole = ((m + 127) / 128 * cols + s - 1) / s, parts = 0;
  for (int p = 0; p < n; p++)
    parts += ((rows[p] + 127) / 128 * cols + s - 1) / s;
  const double sm_flops = 7.5e12, link = 350e9, tile = 2.0 * 128 * 256; /* per K */
  const double hidden = (double)(m - rows[r]) * (double)esz / link, added = (double)(parts - whole) * tile / sm_flops;
  return parts <= whole || hidden > added;
}

/* ag_gemm's gather schedule (ranks sharing one GPU): a tile's rows must lie
 * in one rank's A, so the parts are equal and a multiple of BM. AUTO takes
 * it wherever it can run (H200, 8 ranks, 2026-11-29, docs/perf.md
 * "zero-copy ag_gemm": 14-15 of 15-16 cases faster than the baseline, where
 * copy + one GEMM and the cuBLAS batched launch left five below), except
 * for parts of >= 512 rows (which the batched launch serves well) whose B
 * rows are not whole 128-byte lines: every 64-column TMA box of B then
 * straddles two lines, and qwen2-72b (N = 3696 a rank, 7392-byte rows) ran
 * 14-16% above cuBLAS's time, against 1.000-1.049x of the baseline batched. */
int td__tp_fused_ag_gather(int multi, int64_t m, int n, int64_t nb, size_t esz, const int *bms, int nbm, int forced) {
  if (multi || n < 1 || m < n || m % n != 0 || !bms)
    return 0;
  const int64_t rows = m / n;
  if (!forced && rows >= 512 && ((int64_t)esz * nb) % 128 != 0)
    return 0;
  int best = 0;
  for (int i = 0; i < nbm; i++)
    if (bms[i] > 0 && rows % bms[i] == 0 && bms[i] > best)
      best = bms[i];
  return best;
}

/* Parts of 128 rows (M = 1024 on 8 ranks) are where each rank's launch
 * misses most: M x nb has 8 tile rows of 128 and nb's partial column tile
 * (qwen2-72b, nb = 3696) in every launch, and 8 launches at once run below
 * one launch of all the columns even in cuBLAS (gemm_bench --streams 8,
 * docs/perf.md "Twelfth session"). Rank 0's one launch of 256x128 tiles
 * (cuBLASLt's own pick at 1024 x 29568 x 8192) over every rank's columns
 * ran at 1.062/1.070x of the GEMM alone for qwen2-72b against AUTO's
 * 1.126/1.177x, 1.084/1.088x against 1.091/1.114x (llama3.1-8b) and tied
 * at llama3.1-70b and gpt3-175b (H200, 8 ranks, two alternating runs, rev
 * 6d8da3d); 128x128 tiles in the same launch ran 5-19% slower than AUTO,
 * 256-row tiles in each rank's launch 1-4% slower. At parts of 512 and
 * 1024 rows (M = 4096, 8192; rev af74331, call 5) the same one launch tied
 * or beat each rank's launch (and cuBLAS batched, for qwen2-72b's B rows
 * of 7392 bytes) in 8 of 10 shapes in both rounds, by up to 4.5%, and lost
 * 0.4-1.2% in 2 (llama3.1-8b 4096, llama3.1-405b 8192): it is the rule for
 * every part of a multiple of 128 rows. Parts of other sizes cannot hold
 * the 128-row halves of its tiles. */
int td__tp_fused_ag_one_auto(int multi, int n, int64_t part_rows, int max_peers) {
  return !multi && n >= 2 && n <= max_peers && part_rows >= 128 && part_rows % 128 == 0;
}

/* From parts of 512 rows on, rank 0's one cuBLAS batched launch of n x n
 * GEMMs (batched-one: C_p[rows of q] = A_q * B_p, every rank's operands in
 * place) ran as fast as or faster than the one launch of our tile in 8 of
 * the 10 such shapes of the set, over two calls of two alternating
 * rounds each (H200, 8 ranks, revs e39eba3 and 0add7dd, docs/perf.md
 * "Seventeenth session"): p50s 0.96-1.00x of the tile's (llama3.1-8b
 * M = 8192 0.96, llama3.1-70b 4096 and 8192 0.97, gpt3-175b 4096 0.98 and
 * 8192 0.97; llama3.1-405b within 0.3%), cuBLAS's main loop being the faster
 * one at these sizes. qwen2-72b, whose rank's B rows (3696 columns, 7392
 * bytes) are not whole 128-byte lines, tied in the first call and lost 1.0-1.4%
 * in the second, so such B keeps the tile. At parts of 128 rows it lost in
 * all 5 (1.01-1.65x: 128-row GEMMs of a rank's columns are below cuBLAS's
 * good sizes, where the tile's 256x128 tiles span two parts). Parts between
 * were not measured and keep the tile. */
int td__tp_fused_ag_one_blas_auto(int multi, int n, int64_t m, int64_t nb, size_t esz, int max_ranks) {
  return !multi && n >= 2 && n <= max_ranks && m % n == 0 && m / n >= 512 && ((int64_t)esz * nb) % 128 == 0;
}

/* The cluster of that one launch's 256x128 tiles. In clusters of 2 along M
 * (each k-block's B multicast to the pair) it ran faster than alone in 14 of
 * 15 shapes at parts of 256, 512 and 1024 rows, in both of two alternating
 * rounds (H200, 8 ranks, rev 96e697e, docs/perf.md "Thirteenth session"):
 * by up to 4% (405b M = 8192 1.016/1.024x of the GEMM alone against
 * 1.061/1.062x; gpt3-175b M = 4096 1.048/1.057x against 1.073/1.085x). On
 * parts of 128 rows it lost (8b 1.21-1.26x against 1.16x, qwen2-72b
 * 1.15-1.17x against 1.10-1.12x): a cluster's launch never splits its last
 * wave, which pays there. */
int td__tp_fused_ag_one_cluster(int64_t part_rows) {
  return part_rows >= 256 ? 2 : 1;
}

/* That one launch's tile. 128x256 tiles in clusters of 2 (two 128-row tiles
 * of neighbouring parts sharing each k-block of B's 256 columns, multicast)
 * ran faster than AUTO's 256x128 at parts of 128 rows where K >= 8192 and a
 * rank's columns are whole 256-column tiles: llama3.1-70b 0.993/0.997x of the
 * GEMM alone against 1.038/1.041x, 405b 0.910/0.911x against 0.944/0.943x,
 * gpt3-175b 1.043/1.073x against 1.091/1.098x (H200, 8 ranks, two
 * alternating runs, rev 16929c4, docs/perf.md "Thirteenth session", call 6).
 * Its main loop is the faster one at these shapes (plain 1024 x 49152 x
 * 12288: 0.98x cuBLAS against 0.96x), and at a long K that outweighs the
 * last wave that a cluster's launch never splits; at K = 4096 (llama3.1-8b)
 * the unsplit tail lost 2-4%, and qwen2-72b's 3696 columns leave 0.44 of a
 * 256-column tile idle per rank (3-6% slower). At parts of 256 rows it won
 * only at gpt3-175b (K = 12288: 3.749/3.748 ms against 3.788/3.789) and tied
 * at 405b (K = 16384, within 0.6%), so K >= 12288 there; from 512 rows on it
 * tied everywhere but lost at qwen2-72b and llama3.1-8b, so 256x128 stays. */
int td__tp_fused_ag_one_tile(int64_t part_rows, int64_t nb, int64_t k, int *bm, int *bn) {
  const int wide = nb > 0 && nb % 256 == 0 &&
                   ((part_rows == 128 && k >= 8192) || (part_rows == 256 && k >= 12288));
  *bm = wide ? 128 : 256;
  *bn = wide ? 256 : 128;
  return wide ? 2 : td__tp_fused_ag_one_cluster(part_rows);
}

/* kgather (ranks sharing one GPU): every row of the sum is one GEMM over the
 * whole K, so one launch over every rank's A and B does the work of the n
 * partial GEMMs with none of their partials, reductions or all-gathers.
 * Measured on one H200 with 8 ranks (2026-12-01, docs/perf.md "kgather"),
 * gemm_rs with each rank's own launch over its rows: 0.95-1.00x of the
 * ranks' GEMM-only time at M >= 4096 (pull: 1.11-1.97x), but 1.32-1.47x
 * at M = 1024, each rank streaming all of B for 128 rows. One launch for
 * every rank reads B once: 0.67-1.04x in 14 of 16 shapes (llama3.1-8b and
 * qwen2-72b at M = 1024: 1.10x, 1.21x), 1.51-7.98x faster than the
 * sequential baseline; gemm_ar, every row stored into each rank's C,
 * 1.04-1.30x of its GEMM (pull: 1.54-2.27x), 1.55-5.20x faster. What it gives up is the partials'
 * parallelism: n launches of M x N, one of M x N over n times the K. With
 * fewer 128 x 256 tiles than SMs (decode-size M) part of the GPU would idle
 * through the long K, where the partial GEMMs fill it, so AUTO keeps the
 * reductions there. */
int td__tp_fused_kgather(int multi, int64_t m, int64_t n, int64_t k, int ranks, int sms, int forced) {
  /* the launch's problem holds M, N, K as int */
  if (multi || ranks < 1 || ranks > 8 || m < 1 || m > INT32_MAX || n < 8 || n > INT32_MAX || n % 8 != 0 || k < 1 ||
      k > INT32_MAX || k % ranks != 0 || (k / ranks) % 64 != 0)
    return 0;
  if (forced)
    return 1;
  const int64_t tiles = (m + 127) / 128 * ((n + 255) / 256);
  return tiles >= (sms > 0 ? sms : 1);
}

/* What TD_OPS_FUSED_RS / TD_OPS_FUSED_AR (their checked values; NULL =
 * unset) say of kgather: gemm_rs follows TD_OPS_FUSED_RS; gemm_ar follows
 * TD_OPS_FUSED_AR, whose auto leaves kgather to AUTO's rule unless
 * TD_OPS_FUSED_RS asks for a reduction schedule (pull or push; its kgather,
 * which names gemm_rs's schedule, is no such request). */
int td__tp_fused_kgather_mode(int rs, const char *rs_mode, const char *ar_mode) {
  const char *mode = rs ? rs_mode : ar_mode;
  if (mode && !strcmp(mode, "kgather"))
    return 1;
  if (mode && strcmp(mode, "auto"))
    return -1;
  if (!rs && rs_mode && (!strcmp(rs_mode, "pull") || !strcmp(rs_mode, "push")))
    return -1;
  return 0;
}

/* All-push for two ranks on two GPUs moves the same bytes as two-shot (the
 * whole partial once, against half of it twice) with the all-gather, its
 * barrier and its exposed copy gone; with n ranks it moves n - 1 partials.
 * Measured (H200 x2, 2026-11-29, the five models, docs/perf.md): at M = 8192
 * all-push 1.11-1.35x of NCCL + cuBLAS where two-shot gave 1.10-1.23x; at
 * 4096 1-2% behind two-shot; at 1024 (one row block, nothing to hide its
 * push behind) 0.97-1.00x against 1.02-1.12x. */
int td__tp_fused_ar_all_push(int n, int multi, int64_t m) {
  return multi && n == 2 && m > 4096;
}


/* Relative throughput of one tile width on the H200 (docs/perf.md, "GEMM
 * tiles"): wider tiles reuse A more. 128x192 with 8 ranks sharing the GPU
 * ran ~15% below 128x256 per unit of work (the gather launches, qwen2-72b
 * M = 1024 against llama3.1-70b M = 1024, 2026-11-29, docs/perf.md
 * "zero-copy ag_gemm"), so it counts 0.85 there, not the 0.96 of a lone
 * GEMM (kept for ranks on GPUs of their own, where it was not measured).
 * kgather's launches (KGATHER routed by PUSH or BCAST) ran 128x128 s6 at
 * ~0.78 of 128x256's rate: forced to 128x256 where the 0.90 had picked
 * 128x128, gemm_rs at M = 1024 went from 1.110x to 1.038x of the GEMM alone
 * (llama3.1-8b) and from 1.222x to 1.112x (qwen2-72b), gemm_ar (128x256 at 4
 * stages, half the tile staged) from 1.249x to 1.211x and 1.289x to 1.230x
 * (8 ranks on one H200, 2026-12-01, docs/perf.md "Seventh session"); the
 * per-rank gather launches of ag_gemm did not gain (8b M = 1024: 1.129x on
 * 128x256 against 1.112x on 128x128), so they keep the 0.90. */
double td__tp_fused_tile_eff(int multi, int bn, int kgather_routed) {
  const double e128 = kgather_routed ? 0.78 : 0.90;
  return bn >= 256 ? 1.0 : bn >= 192 ? (multi ? 0.96 : 0.85) : bn >= 128 ? e128 : 0.75;
}

int td__tp_fused_least_work(int multi, int sms, const int *bm, const int *bn, const int *ok, int cnt, int64_t m,
                            int64_t n, int launches, int kgather_routed) {
  int best = -1;
  double best_cost = -1;
  if (!bm || !bn || sms < 1 || launches < 1 || m < 0 || n < 0)
    return -1;
  for (int i = 0; i < cnt; i++) {
    if ((ok && !ok[i]) || bm[i] < 1 || bn[i] < 1)
      continue;
    /* in doubles: M + BM - 1 of an int M near INT32_MAX would wrap as an int */
    const double tiles = (double)((m + bm[i] - 1) / bm[i]) * (double)((n + bn[i] - 1) / bn[i]);
    const double waves = (double)(int64_t)((tiles * launches + sms - 1) / sms);
    const double cost = waves * bm[i] * bn[i] / td__tp_fused_tile_eff(multi, bn[i], kgather_routed);
    if (best_cost < 0 || cost < best_cost)
      best_cost = cost, best = i;
  }
  return best;
}
