/* SPDX-License-Identifier: Apache-2.0
 * Programs of distributed tensors and the compiler that turns them into
 * overlapped schedules (td_plan, see schedule.h).
 *
 * A program is a list of 2-D tensors ("values") over a team of N ranks. Each
 * value has a global shape [rows, cols] whose dims are numbers or symbolic
 * names (M, H, ...) bound before compiling, a dtype (f32, f16, bf16) and a
 * layout: replicated (every rank holds all of it), shard(d) (split along dim
 * d with td_chunk_range: rank r holds part r; parts may be empty when the dim
 * is smaller than N) or partial(sum) (every rank holds a full-shape addend;
 * the value is their sum). Inputs and weights are declared; every other value
 * is the result of an op. Shapes and layouts are inferred and checked op by
 * op; an inconsistency is TD_ERR_SHAPE naming the op (and, for programs read
 * from `.td` text, file:line:col).
 *
 * Local storage of a value on a rank is a row-major buffer of the plan whose
 * size is the same on every rank: the largest part (ceil) for a sharded dim,
 * the full size otherwise; a rank's part occupies its top-left corner and the
 * row stride is the buffer's column count. td_compiled_local_shape gives the
 * extent a rank actually holds. The buffer's dtype is the value's, except on
 * the cpu backend for f16/bf16 weights read only by matmul/rmsnorm: those are
 * *prepacked* as f32 buffers (bind the values converted to f32 once; exact),
 * so GEMM tiles need no per-tile conversion; and 16-bit values that are only
 * computed and read locally (not communicated, not outputs) are kept in f32
 * unless td_compile_opts.exact_dtypes is set. td_plan_buffer(plan,
 * td_compiled_buffer(c, v))->dtype tells which. On cpu a matmul whose only
 * reader is a gelu (neither an output) is computed with the gelu in its GEMM
 * tiles' epilogue and stores nothing: its td_compiled_buffer is -1.
 *
 * The `.td` text format, one statement per line, `#` starts a comment:
 *     dim M = 512, H = 1024            # symbolic dims with their defaults
 *     input  x : bf16[M, H] shard(0)   # also: replicated, partial
 *     weight w : bf16[H, F] shard(1)   # [H] is short for [1, H]
 *     h = gelu(matmul(all_gather(x), w))
 *     output h                         # or: output name = expression
 * `y = x` (a plain name) makes y a copy of x. Dims are bound with --dims or
 * td_program_set_dims. Ops: matmul(a, b [, transpose_a] [, transpose_b]), all_gather(x),
 * reduce_scatter(x [, dim]), all_reduce(x), all_to_all(x, dim), add(a, b),
 * mul(a, b), gelu(x), silu(x), scale(x, number), rmsnorm(x, w [, eps]).
 *
 * Thread-safety: a program or compiled program is used by one thread at a
 * time while it is built; a finished td_compiled may be read by many. */
#ifndef TDIST_PROGRAM_H
#define TDIST_PROGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tdist/schedule.h"
#include "tdist/status.h"
#include "tdist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct td_program td_program;
/** A value of a program: its index, 0, 1, ... in creation order. */
typedef int32_t td_value;

typedef enum td_layout_kind {
  TD_LAYOUT_REPLICATED = 0,
  TD_LAYOUT_SHARD = 1,   /* split along `dim` (0 = rows, 1 = cols) */
  TD_LAYOUT_PARTIAL = 2, /* partial(sum): the value is the sum of every rank's copy */
} td_layout_kind;

typedef struct td_layout {
  td_layout_kind kind;
  int dim; /* TD_LAYOUT_SHARD only */
} td_layout;

typedef enum td_op_kind {
  TD_OP_INPUT = 0, TD_OP_WEIGHT, TD_OP_MATMUL, TD_OP_ALL_GATHER, TD_OP_REDUCE_SCATTER,
  TD_OP_ALL_REDUCE, TD_OP_ALL_TO_ALL, TD_OP_ADD, TD_OP_MUL, TD_OP_GELU, TD_OP_SILU, TD_OP_SCALE,
  TD_OP_RMSNORM, TD_OP_KIND_COUNT
} td_op_kind;

enum { TD_MATMUL_TRANSPOSE_A = 1, TD_MATMUL_TRANSPOSE_B = 2 };

/** "matmul", "all_gather", ... as written in `.td`; "invalid" otherwise. */
const char *td_op_name(td_op_kind op);
/** Writes "replicated", "shard(0)", "partial(sum)" into buf (size >= 16). */
const char *td_layout_format(td_layout layout, char *buf, size_t size);

/** Creates an empty program. Errors: TD_ERR_INVALID_ARG (out NULL), TD_ERR_NO_MEMORY. */
td_status td_program_create(td_program **out);
/** Frees a program. NULL is allowed. */
void td_program_destroy(td_program *program);

/** Declares symbolic dim `name` (letter or '_' then letters, digits, '_'; at
 * most 31 chars) with a default value >= 1. Errors: TD_ERR_INVALID_ARG (bad
 * name, value < 1, name declared twice). */
td_status td_program_dim(td_program *program, const char *name, int64_t default_value);
/** Binds a declared dim to `value` (>= 1), e.g. from `--dims M=4096`.
 * Errors: TD_ERR_NOT_FOUND (undeclared: lists the declared dims), TD_ERR_INVALID_ARG. */
td_status td_program_set_dim(td_program *program, const char *name, int64_t value);
/** Parses "M=4096,H=1024" and binds each; errors as td_program_set_dim, and
 * TD_ERR_INVALID_ARG for malformed text (names the offending item). */
td_status td_program_set_dims(td_program *program, const char *text);

/** Declares an input (is_weight = 0) or weight (1) named `name`, dtype f32,
 * f16 or bf16, global shape rows x cols where each dim is a decimal number or
 * a declared dim name. Errors: TD_ERR_INVALID_ARG (bad name or dtype, name
 * used twice), TD_ERR_SHAPE (unknown dim name, shard dim not 0/1). */
td_status td_program_input(td_program *program, const char *name, int is_weight, td_dtype dtype,
                           const char *rows, const char *cols, td_layout layout, td_value *out);

/** out = op(a) * op(b), op = transpose when the flag is set. Layout rules (in
 * logical, post-transpose terms): replicated x replicated -> replicated;
 * shard(0) x replicated -> shard(0); replicated x shard(1) -> shard(1);
 * shard(1) x shard(0), replicated x shard(0), shard(1) x replicated ->
 * partial; partial x replicated, replicated x partial -> partial. Others are
 * TD_ERR_SHAPE (message names the layouts and what would work). */
td_status td_program_matmul(td_program *program, td_value a, td_value b, unsigned flags,
                            td_value *out);
/** shard(d) -> replicated. Errors: TD_ERR_SHAPE when x is not sharded. */
td_status td_program_all_gather(td_program *program, td_value x, td_value *out);
/** partial -> shard(dim). Errors: TD_ERR_SHAPE when x is not partial or dim not 0/1. */
td_status td_program_reduce_scatter(td_program *program, td_value x, int dim, td_value *out);
/** partial -> replicated. Errors: TD_ERR_SHAPE when x is not partial. */
td_status td_program_all_reduce(td_program *program, td_value x, td_value *out);
/** shard(1 - dim) -> shard(dim). Errors: TD_ERR_SHAPE otherwise. */
td_status td_program_all_to_all(td_program *program, td_value x, int dim, td_value *out);
/** Element-wise: op TD_OP_ADD or TD_OP_MUL (a, b same shape and dtype), TD_OP_GELU or
 * TD_OP_SILU (b ignored, pass -1). Layouts: equal layouts keep theirs (partial only for
 * add); a replicated operand next to a sharded one is sliced. gelu/silu of a
 * partial value are TD_ERR_SHAPE (reduce it first). */
td_status td_program_ewise(td_program *program, td_op_kind op, td_value a, td_value b,
                           td_value *out);
/** out = factor * x (any layout). */
td_status td_program_scale(td_program *program, td_value x, float factor, td_value *out);
/** out = x / sqrt(mean(x row^2) + eps) * w; x replicated or shard(0) (whole
 * rows), w [1, cols] replicated. eps > 0. */
td_status td_program_rmsnorm(td_program *program, td_value x, td_value w, float eps,
                             td_value *out);
/** Names value v (for messages, explain and outputs). Errors: TD_ERR_INVALID_ARG. */
td_status td_program_set_name(td_program *program, td_value v, const char *name);
/** Marks v as an output (a buffer the caller binds). Errors: TD_ERR_INVALID_ARG (bad v, an input or
 * weight, or v already marked). */
td_status td_program_output(td_program *program, td_value v);

/** Reads `.td` text. `filename` is used in messages only. Errors: TD_ERR_PARSE
 * and TD_ERR_SHAPE with "file:line:col: message"; *out written only on
 * success. Never crashes on any input. */
td_status td_program_parse(const char *text, size_t length, const char *filename,
                           td_program **out);
/** Reads a `.td` file. Errors as td_program_parse, plus TD_ERR_NOT_FOUND (cannot open),
 * TD_ERR_INVALID_ARG ("PATH is a directory, not a program file"; also a block device). */
td_status td_program_load(const char *path, td_program **out);

/** Checks every op's shapes with the current dim bindings. Errors: TD_ERR_SHAPE
 * naming the op, its location and the two shapes. */
td_status td_program_check(const td_program *program);

/* Inspection. */
/** Number of declared dims; name and current value of dim i (0 <= i < ndims). */
int td_program_ndims(const td_program *program);
const char *td_program_dim_name(const td_program *program, int i);
int64_t td_program_dim_value(const td_program *program, int i);
int32_t td_program_nvalues(const td_program *program);
const char *td_program_value_name(const td_program *program, td_value v);
td_op_kind td_program_value_op(const td_program *program, td_value v);
td_dtype td_program_value_dtype(const td_program *program, td_value v);
td_layout td_program_value_layout(const td_program *program, td_value v);
/** Global shape with the current dim bindings. */
void td_program_value_shape(const td_program *program, td_value v, int64_t *rows, int64_t *cols);
int td_program_value_is_output(const td_program *program, td_value v);

/* ---- Compiling ---- */

/** Constants of the perf model: alpha-beta communication and roofline compute. */
typedef struct td_perf_model {
  double alpha_s;         /* latency of one chunk put + signal (seconds) */
  double beta_bytes_s;    /* put bandwidth between two ranks (bytes/second) */
  double flops_s;         /* GEMM rate of one compute worker (flop/second, f32) */
  double mem_bytes_s;     /* memory bandwidth of one worker for element-wise tiles */
  double task_overhead_s; /* executor cost of one task */
  int cores;              /* cores of the machine (0 = detect) */
  double transcendental_s; /* extra cost per element of gelu/silu (tanh, exp) */
} td_perf_model;

/** Fills *model with the calibrated constants of this machine
 * ($TD_CACHE_DIR/calibration.json, else ~/.cache/tdist/calibration.json),
 * or with built-in defaults when there is no calibration (and for a value the
 * file does not hold or holds out of range, see td_perf_model_load_checked).
 * Never fails. */
void td_perf_model_load(td_perf_model *model);
/** Like td_perf_model_load, but refuses a calibration file that does not
 * parse as a JSON object (of at most 4 KiB) or holds a value out of its sane
 * range (alpha_s 1e-9..1, beta_bytes_s and mem_bytes_s 1e3..1e14, flops_s
 * 1e3..1e17, task_overhead_s 1e-10..1, transcendental_s 0..1e-3, cores an
 * integer 0..100000), or holds a key that is none of these or one key twice;
 * td_perf_model_load skips such keys and values instead. *model is written
 * only on success. Errors: TD_ERR_INVALID_ARG (model NULL, or the file, key,
 * value and allowed range named; for a key unknown or given twice, FILE:LINE
 * and the allowed keys). */
td_status td_perf_model_load_checked(td_perf_model *model);
/** Writes *model to the calibration file; creates the folder. Writes the path
 * used into path (size >= 512) when non-NULL. Errors: TD_ERR_SYSTEM. */
td_status td_perf_model_save(const td_perf_model *model, char *path, size_t path_size);

typedef struct td_compile_opts {
  int nranks;            /* >= 1 */
  int overlap;           /* 1: overlapped patterns; 0: sequential baseline (each
                            collective completes before its consumer starts; same tiles) */
  int ring;              /* 1: all-gather chunks travel along a ring instead of direct puts */
  int chunks_per_rank;   /* sub-chunks of each rank's part; 0 = perf model */
  int64_t tile_rows;     /* GEMM/element-wise tile rows; 0 = perf model */
  int64_t tile_cols;     /* GEMM tile cols; 0 = perf model */
  int compute_workers;   /* per rank, as the executor will run it; 0 = perf model */
  int comm_workers;      /* per rank; 0 = perf model */
  int64_t one_shot_bytes; /* all_reduce outputs up to this size use one-shot; -1 = perf model */
  const td_perf_model *model; /* NULL = td_perf_model_load() */
  int exact_dtypes;      /* cpu: 1 = store every value in its declared dtype; 0 (default) =
                            keep 16-bit local intermediates (never communicated, not
                            outputs) in f32, like XLA's excess precision */
  int backend_cuda;      /* 0: plan for the cpu backend (default), 1: for cuda. On cpu,
                            f16/bf16 weights multiplied by more than one GEMM tile are
                            converted to f32 once per launch (the cpu GEMM tile would
                            otherwise convert its whole B operand for every tile). */
} td_compile_opts;

/** Fills opts: nranks 1, overlap 1, everything else chosen by the perf model. */
void td_compile_opts_init(td_compile_opts *opts);

typedef struct td_compiled td_compiled;

/** Lowers the program (with its current dim bindings) into a validated plan.
 * Errors: TD_ERR_SHAPE (checks above, or a split the lowering refuses, e.g.
 * a contraction dim smaller than the rank count), TD_ERR_INVALID_ARG (bad
 * opts), TD_ERR_SCHEDULE (internal: the plan failed td_plan_validate),
 * TD_ERR_NO_MEMORY. The compiled program keeps no pointer to `program`. */
td_status td_program_compile(const td_program *program, const td_compile_opts *opts,
                             td_compiled **out);
void td_compiled_destroy(td_compiled *compiled);
const td_plan *td_compiled_plan(const td_compiled *compiled);
/** The plan buffer holding value v (-1 when v has none). */
int32_t td_compiled_buffer(const td_compiled *compiled, td_value v);
/** What rank holds of v: rows x cols starting at global (row0, col0). */
void td_compiled_local_shape(const td_compiled *compiled, td_value v, int rank, int64_t *row0,
                             int64_t *rows, int64_t *col0, int64_t *cols);
/** The worker counts and chunking the compiler chose. */
void td_compiled_choices(const td_compiled *compiled, int *compute_workers, int *comm_workers,
                         int *chunks_per_rank, int64_t *tile_rows, int64_t *tile_cols);

typedef struct td_prediction {
  double makespan_s;   /* predicted time of one launch (max over ranks) */
  double comm_s;       /* communication task time, summed over ranks */
  double hidden_share; /* share of comm_s under some compute task of the same rank (0..1) */
} td_prediction;

/** Simulates the plan with the perf model. Errors: TD_ERR_SCHEDULE (a wait
 * nobody satisfies: names rank, task and signal). */
td_status td_compiled_predict(const td_compiled *compiled, td_prediction *out);
/** Writes, per rank, the schedule (task order, worker classes, deps, waits,
 * raises) and the predicted timeline with the hidden share. */
td_status td_compiled_explain(const td_compiled *compiled, FILE *out);

/* ---- Running on a local world and checking against the reference ---- */

typedef struct td_program_run_opts {
  int nranks;
  const char *backend; /* "cpu" (default; NULL = cpu) or "cuda" (needs a build with the
                          CUDA executor; caller buffers are copied to and from the GPU) */
  int iters;           /* timed launches (>= 1); one warm-up launch precedes them */
  uint64_t seed;       /* input data */
  int overlap;         /* as td_compile_opts.overlap */
  int check;           /* compare outputs with the single-rank f64 reference */
  const char *trace_path; /* Chrome trace of the last launch, NULL = none */
  const td_compile_opts *compile; /* NULL = defaults (nranks/overlap from here) */
  /* Optional data from NumPy .npy files (1-D or 2-D, C order, little-endian
   * f2/f4/f8/i4/i8) instead of random values: input_paths[i] feeds the input
   * or weight named input_names[i] and must have its global shape ([C] for a
   * [1, C] value). Partial inputs cannot be fed from a file. */
  int ninputs;
  const char *const *input_names;
  const char *const *input_paths;
} td_program_run_opts;

typedef struct td_program_run_result {
  double seconds;      /* median time of one launch (max over ranks) */
  double comm_hidden;  /* executor trace: share of communication hidden, -1 if unknown */
  double max_rel_error; /* max |out - ref| / max |ref| over all outputs (check only) */
  double tolerance;    /* tolerance used for the check, by dtype */
  int pass;            /* check passed (1 when check is off) */
  int nonfinite;       /* check only: 1 when an input or the reference holds inf or NaN
                          (an error that is NaN, e.g. inf - inf, counts as inf) */
} td_program_run_result;

/** Compiles the program for opts->nranks, fills inputs with seeded uniform
 * values in [-1, 1) (weights scaled by 1/sqrt(rows)), runs it on a local world
 * of nranks threads, and checks every output against the reference (f64
 * math on the full tensors, rounded to the dtype after each op). On cuda,
 * caller buffers are copied to the GPU before the runs and outputs back
 * after. Errors: TD_ERR_INVALID_ARG (unknown backend; nranks or iters < 1;
 * an input file naming no input, feeding a partial input, or not a readable
 * .npy of a supported dtype), TD_ERR_NOT_FOUND (input file missing),
 * TD_ERR_SHAPE (input file shape differs from the value's),
 * TD_ERR_UNSUPPORTED (cuda in a build without the CUDA executor),
 * TD_ERR_HEAP_EXHAUSTED (cpu: the plan's symmetric buffers and signal words
 * exceed TD_SYMM_HEAP_SIZE per rank; checked before any operand is
 * allocated, the message gives the total and the value to set),
 * TD_ERR_NO_MEMORY (the run needs more host memory than the machine has --
 * physical memory, or TD_RUN_HOST_MEMORY bytes when set: every rank's
 * operands, the reference's f64 inputs and, with check, values, and on cpu
 * the symmetric buffers; checked before anything is allocated, each part
 * named), TD_ERR_INVALID_ARG also for a malformed TD_RUN_HOST_MEMORY or
 * TD_SYMM_HEAP_SIZE, a compile
 * error (prefixed "compiling the overlapped plan: " or "... sequential ..."),
 * TD_ERR_CUDA, those of td_program_compile, the executor's and the runtime's;
 * TD_ERR_CHECK_FAILED is not returned: a failing check sets pass = 0. When
 * ranks fail, the status and message are those of the cause: the earliest
 * failure whose status is not a consequence of another rank's (TD_ERR_PEER_FAILED,
 * TD_ERR_MISMATCH, TD_ERR_STATE, then TD_ERR_TIMEOUT, and an executor create
 * that failed because another rank's step did, are passed over while another
 * exists), as "rank R failed first, with STATUS: message" (or "rank R failed
 * with STATUS: message [the cause; ...]" when a consequence came earlier). */
td_status td_program_run(const td_program *program, const td_program_run_opts *opts,
                         td_program_run_result *out);

/** The reference: evaluates every value on full tensors in f64 from the
 * global inputs given in `inputs` (indexed by value; NULL for non-inputs;
 * each rows*cols doubles, row-major; a partial input is given as its sum),
 * rounding each op's result to its dtype. Writes values[v] (malloc'ed,
 * rows*cols) for every value; free them with free(). Errors: TD_ERR_SHAPE,
 * TD_ERR_INVALID_ARG (an input without data: names it), TD_ERR_NO_MEMORY. */
td_status td_program_reference(const td_program *program, const double *const *inputs,
                               double **values);

#ifdef __cplusplus
}
#endif
#endif
