/* SPDX-License-Identifier: Apache-2.0
 * Overlapped tensor-parallel operators: AllGather+GEMM, GEMM+ReduceScatter,
 * GEMM+AllReduce and a low-latency AllReduce, on the cpu or cuda backend.
 *
 * Each operator is a handle made once per shape (collective over a team) and
 * called many times: td_ag_gemm_create(...) then td_ag_gemm(op, c, a, b) as
 * often as needed, then td_tp_destroy(op). Creating compiles a small program
 * (program.h) into an overlapped plan and starts an executor (exec.h) of the
 * chosen backend, so the cpu and cuda paths share one lowering. Every call is
 * one executor launch with a new epoch: nothing is reset between calls.
 * The team must outlive every operator made on it: td_team_destroy refuses
 * (TD_ERR_STATE, naming how many operators still use it) until they are
 * destroyed.
 *
 * Shapes are global; each operand is split with td_chunk_range (types.h), so
 * sizes need not divide by the rank count (a rank's part may be empty when a
 * dim is smaller than the rank count, except a contraction dim, which is
 * refused). Matrices are row-major. Each rank passes its local part stored
 * at the top-left of a buffer whose row stride ("ld") and allocation size
 * are those of the largest part: query td_tp_operand() for the exact rows,
 * cols, ld and bytes of each operand on each rank. On cpu buffers are host
 * memory; on cuda they are device memory of the rank's GPU.
 *
 *   operator     A (input)               B (weight)              C (output)
 *   ag_gemm      [M, K]  shard rows      [K, N]  shard cols      [M, N]  shard cols
 *                C_r = AllGather(A) * B_r
 *   gemm_rs      [M, K]  shard cols      [K, N]  shard rows      [M, N]  shard rows
 *                C_r = rows r of sum over ranks (A_s * B_s)
 *   gemm_ar      [M, K]  shard cols      [K, N]  shard rows      [M, N]  replicated
 *                C = sum over ranks (A_s * B_s)
 *   ll_all_reduce src: count elements (each rank's addend) -> dst: their sum
 *
 * ag_gemm's C (M x N, shard cols) is laid out exactly as the A of a gemm_rs
 * with K = N, so a tensor-parallel MLP passes it on with no copy
 * (examples/tp_mlp_ops.c).
 *
 * dtypes: f32, f16 or bf16, the same for every operand; 16-bit GEMMs
 * accumulate in f32. Reductions add the ranks' contributions in a fixed
 * order, so every rank of gemm_ar / ll_all_reduce gets the same C.
 *
 * Collective checks: creation is collective over the team; every rank checks
 * its own arguments, then the ranks compare them, so a bad or differing
 * argument on any rank makes every rank fail with the same message naming the
 * rank and the value (never a hang).
 *
 * Thread-safety: an operator handle is used by one thread at a time (the
 * thread playing its rank); different ranks' handles run concurrently. */
#ifndef TDIST_OPS_H
#define TDIST_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/exec.h"
#include "tdist/status.h"
#include "tdist/types.h"
#include "tdist/world.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_tp_kind {
  TD_TP_AG_GEMM = 0,
  TD_TP_GEMM_RS = 1,
  TD_TP_GEMM_AR = 2,
  TD_TP_ALL_REDUCE = 3,
  TD_TP_KIND_COUNT
} td_tp_kind;

/** How an operator moves and overlaps its data. TD_TP_AUTO lets the perf
 * model choose (it predicts the overlapped and the sequential plans and keeps
 * the faster); the others force one, for benchmarking and tests. */
typedef enum td_tp_variant {
  TD_TP_AUTO = 0,
  TD_TP_SEQUENTIAL = 1,  /* baseline: the whole collective, then the GEMM (same tiles) */
  TD_TP_SM = 2,          /* overlapped; chunks moved by communication workers
                            (cuda: SMs of the persistent kernel; cpu: comm threads) */
  TD_TP_COPY_ENGINE = 3, /* ag_gemm only: overlapped; chunk puts issued on the copy
                            engine (cuda); on cpu a comm thread runs them */
  TD_TP_RING = 4,        /* ag_gemm only: overlapped; chunks forwarded along a ring */
  TD_TP_ONE_SHOT = 5,    /* gemm_ar, ll_all_reduce: every rank pushes to every peer and
                            reduces all contributions itself */
  TD_TP_TWO_SHOT = 6,    /* gemm_ar, ll_all_reduce: ReduceScatter, then AllGather */
  TD_TP_FUSED = 7,       /* cuda only, ranks that are threads of one process on one
                            GPU, or on GPUs with peer access between every pair
                            (enabled at creation; a pair without it is refused
                            naming both ranks and GPUs): ag_gemm, gemm_rs,
                            gemm_ar run the Hopper GEMM
                            (src/tile/cuda) with copy-engine puts and reduction
                            kernels, ll_all_reduce one-shot/two-shot reduction
                            kernels reading the peers' buffers, all outside the
                            executor (src/ops/cuda/, docs/architecture.md).
                            On one shared GPU, gemm_rs / gemm_ar in bf16 with
                            K / ranks % 64 == 0 may run as one launch by rank 0
                            for every rank (kgather: every row over the whole K,
                            stored at its owner's C or at every rank's; no
                            partial sums), where TD_OPS_FUSED_RS / _AR ask for
                            it or AUTO's rule takes it; each rank's call still
                            returns once its C is complete, and a launch that
                            failed is reported on every rank.
                            The GEMM operators need bf16 or f16, the GEMM library
                            linked in, a compute capability 9.x GPU and shapes
                            its kernels take (K % 8 == 0, N / ranks % 8 == 0;
                            gemm_rs/gemm_ar: K % (8 * ranks) == 0, N % 8 == 0);
                            up to 8 ranks. Forced where a rule fails, creation
                            fails with TD_ERR_UNSUPPORTED naming the rule. AUTO
                            picks it on cuda wherever every rule holds on every
                            rank (unless TD_OPS_FUSED=0); otherwise it keeps the
                            executor variants. */
  TD_TP_VARIANT_COUNT
} td_tp_variant;

/** Operator options. Initialise with td_tp_opts_init(); 0 means "choose". */
typedef struct td_tp_opts {
  td_exec_backend backend; /* TD_EXEC_CPU (default) or TD_EXEC_CUDA */
  td_tp_variant variant;
  int chunks_per_rank;     /* pieces of each rank's part; 0 = perf model (1..4) */
  int64_t tile_rows;       /* GEMM tile rows; 0 = perf model */
  int64_t tile_cols;       /* GEMM tile cols; 0 = perf model */
  int compute_workers;     /* cpu: threads per rank; cuda: persistent compute blocks
                              per rank (the SM split); 0 = perf model / backend */
  int comm_workers;        /* likewise for communication */
  int timeout_ms;          /* deadline of each wait; 0 = the world's (TD_TIMEOUT_MS). Must
                              be the same value on every rank (compared at create) */
  void *cuda_stream;       /* cuda: the cudaStream_t whose earlier work produces the operands;
                              the executor variants launch on it, the fused variant waits
                              (under the deadline) for its earlier work before the call;
                              every variant's results are complete when the call returns.
                              NULL = the operands are ready when the call starts */
} td_tp_opts;

/** Fills *opts: cpu backend, TD_TP_AUTO, everything chosen by the perf model. */
void td_tp_opts_init(td_tp_opts *opts);

typedef struct td_tp_op td_tp_op;

/* Common errors of the create calls (every rank of the team gets the same one):
 *  TD_ERR_INVALID_ARG  NULL team or out, a dim < 1, dtype not f32/f16/bf16,
 *                      variant not valid for the operator, backend unknown,
 *                      negative option; the message names the rank and value;
 *  TD_ERR_SHAPE        the contraction dim K is smaller than the rank count
 *                      (gemm_rs, gemm_ar);
 *  TD_ERR_MISMATCH     ranks passed different arguments (message lists them),
 *                      timeout_ms included (message names both values);
 *  TD_ERR_UNSUPPORTED  cuda asked for in a build without it or with no usable
 *                      GPU, or more ranks on a GPU than their persistent
 *                      kernels can share;
 *  TD_ERR_HEAP_EXHAUSTED, TD_ERR_NO_MEMORY, TD_ERR_TIMEOUT, TD_ERR_CUDA, and
 *  those of td_program_compile / td_exec_create. *out written only on success. */

/** C = AllGather(A, rows) * B (see the file comment for layouts). The GEMM
 * tiles of a rank start on its own rows and then follow the order in which
 * peers' chunks arrive (r+1, r+2, ...), each waiting only for the chunk that
 * holds its rows. */
td_status td_ag_gemm_create(td_team *team, int64_t m, int64_t n, int64_t k, td_dtype dtype,
                            const td_tp_opts *opts, td_tp_op **out);
/** C = ReduceScatter(A * B, rows). GEMM tiles are produced by destination,
 * starting at rank+1, each finished piece pushed to its owner, which reduces
 * the pieces as they arrive. */
td_status td_gemm_rs_create(td_team *team, int64_t m, int64_t n, int64_t k, td_dtype dtype,
                            const td_tp_opts *opts, td_tp_op **out);
/** C = AllReduce(A * B): one-shot for small outputs, ReduceScatter +
 * AllGather for large ones (threshold from the perf model). */
td_status td_gemm_ar_create(td_team *team, int64_t m, int64_t n, int64_t k, td_dtype dtype,
                            const td_tp_opts *opts, td_tp_op **out);
/** dst = sum over ranks of src, `count` elements (decode-size messages,
 * 8 KiB - 64 MiB and beyond): one-shot or two-shot from the perf model; on
 * cuda with every rank a thread of this process sharing one GPU, AUTO runs
 * the fused variant (reduction kernels reading the peers' buffers). Besides
 * the common errors: TD_ERR_INVALID_ARG when count is too large for one
 * operator (the message names the count, dtype and bytes per rank). */
td_status td_ll_all_reduce_create(td_team *team, size_t count, td_dtype dtype,
                                  const td_tp_opts *opts, td_tp_op **out);

/* Common errors of the calls below: TD_ERR_INVALID_ARG (NULL op, an operand
 * NULL (even where this rank's part is empty), C sharing a byte with A or
 * B (src and dst for ll_all_reduce: no in-place calls; names the operands
 * and their byte ranges), where the ranks are threads of one process (a
 * local world) one rank's C (dst) sharing a byte with another rank's A, B
 * or C (src, dst: each rank passes outputs of its own; inputs may be
 * shared; names both ranks, operands and byte ranges), an operator of
 * another kind: names both kinds;
 * NULL and overlapping operands are checked collectively: every rank of a
 * multi-rank team refuses the call, naming the rank at fault, nothing runs
 * and the operator stays usable), TD_ERR_TIMEOUT (a wait
 * passed its deadline: names rank, task and signal), TD_ERR_PEER_FAILED,
 * TD_ERR_CUDA. Every rank of the team must make the same number of calls.
 * After an error other than TD_ERR_INVALID_ARG (TD_ERR_STATE afterwards) the handle can only be
 * destroyed. Blocking: on return C is complete on this rank. */

/** Runs an ag_gemm operator: c (this rank's columns), a (this rank's rows), b. */
td_status td_ag_gemm(td_tp_op *op, void *c, const void *a, const void *b);
/** Runs a gemm_rs operator: c (this rank's rows), a (its K-columns), b (its K-rows). */
td_status td_gemm_rs(td_tp_op *op, void *c, const void *a, const void *b);
/** Runs a gemm_ar operator: c (all of it), a (its K-columns), b (its K-rows). */
td_status td_gemm_ar(td_tp_op *op, void *c, const void *a, const void *b);
/** Runs an ll_all_reduce operator: dst, src of `count` elements each. */
td_status td_ll_all_reduce(td_tp_op *op, void *dst, const void *src);

/** Which operand. For ll_all_reduce, A is src and C is dst (B has no elements). */
typedef enum td_tp_operand_id { TD_TP_A = 0, TD_TP_B = 1, TD_TP_C = 2 } td_tp_operand_id;

/** What team rank `rank` holds of an operand. */
typedef struct td_tp_layout {
  int64_t row0, col0;   /* first global row and column of the part */
  int64_t rows, cols;   /* the part's extent (0 when empty) */
  int64_t ld;           /* row stride of the buffer in elements */
  size_t bytes;         /* bytes the buffer must hold (same on every rank) */
} td_tp_layout;

/** Writes the layout of operand `which` on team rank `rank`. Errors:
 * TD_ERR_INVALID_ARG (NULL op/out, rank or operand out of range). */
td_status td_tp_operand(const td_tp_op *op, td_tp_operand_id which, int rank, td_tp_layout *out);

/** The variant the operator runs (never TD_TP_AUTO after creation), and the
 * chunking and worker split it uses. Any output pointer may be NULL. */
void td_tp_choices(const td_tp_op *op, td_tp_variant *variant, int *chunks_per_rank,
                   int *compute_workers, int *comm_workers);

/** Writes a one-line description of the schedule this rank's operator runs
 * into buf (at most cap bytes, NUL-terminated, cut if longer) and returns
 * buf: the variant, and for the fused variant its schedule and GEMM engine,
 * e.g. "fused: ag gather, sm90 128x256x64 s4 c1 g8" or "fused: rs push,
 * cuBLAS"; for the executor variants the chunks and the worker split. For
 * reports, logs and tests; the wording may change between versions. A NULL
 * op or buf, or cap 0, writes nothing and returns buf. Thread-safe. */
const char *td_tp_schedule(const td_tp_op *op, char *buf, size_t cap);

/** Predicted time of one call by the perf model, in seconds (max over ranks);
 * < 0 when unknown. */
double td_tp_predicted_seconds(const td_tp_op *op);

/** "ag_gemm", "gemm_rs", "gemm_ar", "all_reduce"; "invalid" otherwise. */
const char *td_tp_kind_name(td_tp_kind kind);
/** "auto", "sequential", "sm", "copy_engine", "ring", "one_shot", "two_shot", "fused"; "invalid" otherwise. */
const char *td_tp_variant_name(td_tp_variant variant);
/** Parses a name printed by td_tp_variant_name. TD_ERR_INVALID_ARG (lists the
 * names) when unknown; *out written only on success. */
td_status td_tp_variant_parse(const char *name, td_tp_variant *out);

/** Collective over the operator's team: stops its executor and frees
 * everything. NULL is allowed. Errors (the handle is freed in every case, so
 * never use or destroy it again: a second destroy of the same handle is
 * undefined, as with free()):
 *  TD_ERR_TIMEOUT      a member never came;
 *  TD_ERR_STATE        the team was broken by an earlier failed call (e.g. a
 *                      call that timed out because a rank skipped it): the
 *                      collective frees cannot run; the message names that
 *                      failure;
 *  TD_ERR_MISMATCH     this rank's destroy met a member still in another
 *                      call (e.g. this rank skipped a call the others made);
 *  TD_ERR_PEER_FAILED, and any failure of the executor's collective frees
 *                      (td_exec_destroy's; the first one's message). */
td_status td_tp_destroy(td_tp_op *op);

#ifdef __cplusplus
}
#endif
#endif
