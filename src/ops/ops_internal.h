/* SPDX-License-Identifier: Apache-2.0
 * Internal interface of the operators layer (src/ops, include/tdist/ops.h).
 * An operator is a program of a few values compiled into a plan and run by
 * one executor per rank; the per-operator files only say which program to
 * build, which variants it accepts and which candidates the perf model
 * compares. Everything else (collective argument check, compiling, variant
 * choice, the copy-engine plan rewrite, binding, running) is in tp_op.c. */
#ifndef TD_OPS_INTERNAL_H
#define TD_OPS_INTERNAL_H

#include "tdist/ops.h"
#include "tdist/program.h"

/** What a kind's create call hands to the common code. */
typedef struct td__tp_desc {
  td_tp_kind kind;
  int64_t m, n, k;      /* GEMM dims; all-reduce: rows, cols of its 2-D view, k = 0 */
  size_t count;         /* all-reduce elements (0 for GEMM operators) */
  td_dtype dtype;
  unsigned variants;    /* bit v set: variant v may be forced */
  td_tp_variant auto_candidates[4]; /* compared by the perf model for TD_TP_AUTO, in
                                       order of preference on a tie; TD_TP_AUTO ends */
  int min_k_ranks;      /* 1: K must be >= the rank count (K is split over ranks) */
  /* Builds the program; writes the values of A, B (-1 if none) and C. */
  td_status (*build)(const struct td__tp_desc *d, td_program *p, td_value vals[3]);
} td__tp_desc;

struct td_tp_op {
  td__tp_desc d;
  td_team *team;
  int nranks, rank;
  td_tp_opts opts;
  td_tp_variant variant;
  td_compiled *compiled;
  td_plan *plan_ce;       /* the plan with puts moved to the copy engine, or NULL */
  const td_plan *plan;    /* the plan run: compiled's or plan_ce */
  td_exec *exec;
  td_value vals[3];
  int32_t bufs[3];
  const void *bound[3];   /* last pointers bound, to skip re-binding */
  int chunks, compute_workers, comm_workers;
  double predicted_s;
  int failed;             /* a run failed: only destroy is allowed */
  struct td__tp_fused *fused; /* TD_TP_FUSED: its state (src/ops/cuda/), no executor */
};

/* ---- the fused cuda variant (src/ops/tp_fused_check.c, src/ops/cuda/) ---- */

/** Whether TD_TP_FUSED can run this operator: backend, dtype, rank count and
 * the shape rules of the Hopper GEMM kernels. Depends only on its arguments
 * (so every rank reaches the same answer with no message exchange).
 * TD_ERR_UNSUPPORTED with the rule broken, else TD_OK. */
td_status td__tp_fused_check(const td__tp_desc *d, int nranks, const td_tp_opts *o);
/** 1 when this build has the fused code and the process links the GEMM
 * library (tdist_gemm_cuda), else 0. */
int td__tp_fused_linked(void);

/** What one rank knows of its ability to run TD_TP_FUSED, exchanged when
 * AUTO decides (td__tp_fused_auto). */
typedef struct td__tp_fused_probe {
  int64_t ok;  /* 1: the GEMM library is linked (GEMM operators), a device is usable and,
                  for the GEMM operators, it is compute capability 9.x */
  int64_t pid; /* this process */
  int64_t dev; /* the CUDA device this rank would use; -1 if none */
  int64_t peers; /* bit d set: device `dev` can access device d's memory (cudaDeviceCanAccessPeer; its
                    own bit set too); devices 0..63 */
} td__tp_fused_probe;
/** Fills *out for this rank (cuda builds ask the driver; others say not ok). */
void td__tp_fused_probe_rank(const td__tp_desc *d, td_team *team, td__tp_fused_probe *out);
/** AUTO's rule from every rank's probe (and create's, td__tp_fused_create):
 * 1 when every rank is ok, all are threads of one process and every pair of
 * distinct GPUs they use can access each other's memory (peer access); else
 * 0 with the first reason in why (may be NULL). Pure: the same probes give
 * the same answer on every rank. */
int td__tp_fused_agree(const td__tp_fused_probe *all, int nranks, char *why, size_t why_size);
/** Across GPUs, whether fused ag_gemm's GEMM is split into one launch per
 * rank's part (rows[p] rows of part p, this rank r's part needs no copy)
 * rather than one launch over all m rows after the copies: the waves of
 * 128 x 256 tiles over sms SMs that the split adds, against the copy it hides
 * (the peers' rows, esz bytes a K element each); nb = output columns of a
 * rank. Pure (tp_fused_check.c; measured rule in its comment). 1: split. */
int td__tp_fused_ag_split(int64_t m, const int64_t *rows, int n, int r, int64_t nb, int sms, size_t esz);
/** Fused ag_gemm, whether a shape can run the gather schedule (one launch of
 * our tile reading every rank's A in place) and whether AUTO takes it: ranks
 * on one GPU (multi == 0), m rows in n equal parts of a multiple of one of
 * the nbm compiled BMs (bms), and -- for AUTO (forced == 0) -- parts under
 * 512 rows or B rows (nb elements of esz bytes) of whole 128-byte lines.
 * Returns the largest BM that fits, or 0. Pure (tp_fused_check.c; measured
 * rule in its comment). */
int td__tp_fused_ag_gather(int multi, int64_t m, int n, int64_t nb, size_t esz, const int *bms, int nbm, int forced);
/* ag_gemm's AUTO on ranks sharing one GPU whose gather runs (td__tp_fused_ag_gather): 1 where rank 0's one
 * launch of 256x128 tiles (GATHER | NSPLIT, each tile's halves from two ranks' A) takes the place of each
 * rank's launch: parts of a multiple of 128 rows, 2..max_peers ranks; else 0. Pure; tp_fused_check.c says why. */
int td__tp_fused_ag_one_auto(int multi, int n, int64_t part_rows, int max_peers);
/* Fused ag_gemm AUTO: 1 where rank 0's one cuBLAS batched launch of n x n GEMMs (TD_OPS_FUSED_AG=batched-one)
 * takes the place of the one launch of our tile: one shared GPU (multi == 0), 2..max_ranks ranks, m rows in equal
 * parts of >= 512 rows, a rank's B rows (nb elements of esz bytes) whole 128-byte lines; else 0. Pure;
 * tp_fused_check.c gives the measurements. */
int td__tp_fused_ag_one_blas_auto(int multi, int n, int64_t m, int64_t nb, size_t esz, int max_ranks);
/* The cluster of that launch's 256x128 tiles by a rank's part (rows): 2 from 256 rows on, else 1. Pure. */
int td__tp_fused_ag_one_cluster(int64_t part_rows);
/* That launch's tile for a rank's part of part_rows rows, nb of B's columns per rank and the depth k (elements):
 * sets *bm x *bn (128x256 or 256x128) and returns its cluster (1 or 2). Pure; measured rule in tp_fused_check.c.
 * The caller falls back to 256x128 where the tile it names is not compiled. */
int td__tp_fused_ag_one_tile(int64_t part_rows, int64_t nb, int64_t k, int *bm, int *bn);
/** Fused gemm_rs / gemm_ar, whether a shape can run the kgather schedule
 * (rank 0's one launch of our tile over every rank's A and B in place,
 * m x n x k with k split over the ranks) and whether AUTO takes it: ranks
 * on one GPU (multi == 0), 1..8 ranks, m, n, k in 1..INT32_MAX (the
 * launch's int sizes), k / ranks a whole multiple of 64, n % 8 == 0 and
 * -- for AUTO (forced == 0) -- at least as many 128 x 256 tiles as the GPU
 * has SMs (sms). 1: it runs. Pure (tp_fused_check.c; measured rule in its
 * comment). */
int td__tp_fused_kgather(int multi, int64_t m, int64_t n, int64_t k, int ranks, int sms, int forced);
/** Fused gemm_rs (rs = 1) / gemm_ar (rs = 0): what the checked values of
 * TD_OPS_FUSED_RS and TD_OPS_FUSED_AR (NULL = unset) say of kgather: 1
 * forced (the schedule's own value, kgather), 0 left to AUTO's rule
 * (td__tp_fused_kgather), -1 another schedule asked for (for gemm_ar also
 * TD_OPS_FUSED_RS=pull or push under TD_OPS_FUSED_AR=auto). Pure. */
int td__tp_fused_kgather_mode(int rs, const char *rs_mode, const char *ar_mode);
/** Fused operators: relative throughput of a GEMM tile BN wide on the H200
 * (1.0 for 256): multi = ranks on GPUs of their own; kgather_routed = the
 * launch is kgather's (KGATHER with PUSH or BCAST), which measured its own
 * 128x128 rate. Pure (tp_fused_check.c; measurements in its comment). */
double td__tp_fused_tile_eff(int multi, int bn, int kgather_routed);
/** Of cnt GEMM configurations (tile bm[i] x bn[i]; ok[i] == 0 or a size < 1
 * skips one; ok may be NULL), the index of the one with the least work per
 * SM for `launches` launches of m x n at once on a GPU of `sms`
 * multiprocessors: the waves of all their tiles, each wave weighted by the
 * tile's size over td__tp_fused_tile_eff. Ties go to the first. -1 when none
 * is eligible or an argument is out of range (NULL arrays, sms or launches
 * < 1, m or n < 0). Pure (tp_fused_check.c). */
int td__tp_fused_least_work(int multi, int sms, const int *bm, const int *bn, const int *ok, int cnt, int64_t m,
                            int64_t n, int launches, int kgather_routed);
/** Fused gemm_ar above the one-shot size, auto: whether all-push (every row
 * block of the partial pushed to every peer) beats two-shot: 2 ranks on
 * different GPUs (multi) and m > 4096. Pure (tp_fused_check.c). */
int td__tp_fused_ar_all_push(int n, int multi, int64_t m);
/** Collective: whether AUTO runs TD_TP_FUSED for this operator: its static
 * rules (td__tp_fused_check), TD_OPS_FUSED (0 turns AUTO's choice off), then
 * every rank's probe exchanged and td__tp_fused_agree. Every rank gets the
 * same *out; TD_OK unless the exchange or TD_OPS_FUSED's parsing failed. */
td_status td__tp_fused_auto(td_team *team, const td__tp_desc *d, const td_tp_opts *o, int *out);
/** Collective: allocates the symmetric buffers and streams, exchanges device
 * pointers; every rank fails alike. */
td_status td__tp_fused_create(td_tp_op *op);
/** One rank's operands of a call as byte ranges: i = 0 A / src, 1 B, 2 C / dst; len 0 = none. */
typedef struct td__tp_ranges {
  uint64_t lo[3], len[3];
} td__tp_ranges;
/** Ranks that are threads of one process (transport local) share an address
 * space, so one rank's output can be another's operand. Given every rank's
 * operand ranges (rank r's at (const char *)first + r * stride, so that they
 * can be read in place from larger records), finds the first rank p whose
 * output overlaps an operand of another rank q (q's output first, then its
 * inputs): sets *p, *q and *qi (q's operand) and returns 1; 0 when none does.
 * Inputs shared between ranks (the same B, say) are no overlap: nobody writes
 * them. Pure (tp_check.c). */
int td__tp_cross_overlap(int n, const td__tp_ranges *first, size_t stride, int *p, int *q, int *qi);
/** Before a call's operand-check exchange (td__tp_call_agree): waits
 * (under the operator's deadline) for the work already on opts.cuda_stream,
 * which produces the operands, then publishes this rank's operands of the
 * coming call to its peers (threads of one process). That exchange
 * completes on a rank only once every rank has entered the call, so it is
 * the call's opening barrier; td__tp_fused_run relies on it when the team
 * has more than one rank. Returns TD_ERR_TIMEOUT or TD_ERR_CUDA when the
 * stream's work does not finish or failed (the exchange then makes every
 * rank refuse the call). */
td_status td__tp_fused_publish(td_tp_op *op, void *c, const void *a, const void *b);
/** One call (blocking, deadline op->opts.timeout_ms or the world's), after
 * td__tp_fused_publish and the operand-check exchange. */
td_status td__tp_fused_run(td_tp_op *op, void *c, const void *a, const void *b);
/** Collective: waits for the peers, then frees. */
td_status td__tp_fused_destroy(td_tp_op *op);
/** The fused schedule of op (op->fused set), e.g. "ag gather, sm90 128x256x64
 * s4 c1 g8", into buf (cap bytes, NUL-terminated): td_tp_schedule's detail. */
void td__tp_fused_describe(const td_tp_op *op, char *buf, size_t cap);

/** Descriptors of each kind (what its create call passes on). */
void td__ag_gemm_desc(int64_t m, int64_t n, int64_t k, td_dtype dtype, td_exec_backend be, td__tp_desc *out);
void td__gemm_rs_desc(int64_t m, int64_t n, int64_t k, td_dtype dtype, td__tp_desc *out);
void td__gemm_ar_desc(int64_t m, int64_t n, int64_t k, td_dtype dtype, td__tp_desc *out);
void td__all_reduce_desc(size_t count, td_dtype dtype, td__tp_desc *out);

/** Creates an operator of any kind (collective). */
td_status td__tp_create(td_team *team, const td__tp_desc *d, const td_tp_opts *opts, td_tp_op **out);
/** Runs one call: binds the three operands (C is written), launches. */
td_status td__tp_run(td_tp_op *op, td_tp_kind kind, void *c, const void *a, const void *b);

/** The variant AUTO picks for this descriptor on `nranks` ranks with options
 * `o` (the backend matters: cuda plans use the GPU model), given the built
 * program: every candidate is compiled and simulated; the smallest predicted
 * makespan wins. predicted[i] (if non-NULL, 4 entries) gets candidate i's
 * prediction. Used by create (rank 0) and by tests. */
td_status td__tp_auto_variant(const td__tp_desc *d, int nranks, const td_tp_opts *o, const td_program *p,
                              td_tp_variant *out, double *predicted);

/** Text "[rows, cols]" for the program builder's dims. */
void td__tp_dim(char *buf, size_t size, int64_t v);

/** The row-parallel GEMM both GEMM+RS and GEMM+AR start from: inputs
 * a : [M, K] shard(1) and b : [K, N] shard(0) of d->dtype, and their local
 * partial product prod = matmul(a, b) : [M, N], which the caller then reduces
 * (all_reduce or reduce_scatter). Returns the program builder's status. */
td_status td__tp_row_parallel_matmul(const td__tp_desc *d, td_program *p, td_value *a, td_value *b,
                                     td_value *prod);

#endif
