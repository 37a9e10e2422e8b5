/* SPDX-License-Identifier: Apache-2.0
 * Internal: the compiler's data structures. A program is a table of values
 * (inputs, weights, op results); lowering turns it into a td_plan. Lowering
 * keeps, per value and rank, a *readiness map*: the row blocks of the value's
 * local buffer and what a consumer must wait for before reading them (local
 * tasks, signals). Every consumer tile asks the map for the rows it reads, so
 * overlap falls out of the producers' granularity; the sequential baseline asks
 * for the whole value instead. */
#ifndef TD_COMPILER_COMPILER_H
#define TD_COMPILER_COMPILER_H

#include <stdint.h>

#include "tdist/program.h"

#define TD__NAME_MAX 32

typedef struct td__dimref {
  int32_t dim;   /* index into program->dims, or -1 for a literal */
  int64_t value; /* literal */
} td__dimref;

typedef struct td__srcloc {
  int line, col; /* 0 = built with the C API */
} td__srcloc;

typedef struct td__val {
  char name[TD__NAME_MAX];
  td_op_kind op;
  td_dtype dtype;
  td_layout layout;
  td__dimref shape[2];
  int32_t in[2]; /* operands (-1 = none) */
  unsigned flags; /* matmul TD_MATMUL_* */
  int dim;        /* reduce_scatter / all_to_all target dim */
  float alpha;    /* scale factor, rmsnorm eps */
  int is_output;
  td__srcloc loc;
} td__val;

typedef struct td__dim {
  char name[TD__NAME_MAX];
  int64_t value;
} td__dim;

struct td_program {
  td__val *vals;
  int32_t nvals, cap;
  td__dim *dims;
  int32_t ndims, dimcap;
  char file[128]; /* for messages; empty for C-built programs */
  td__srcloc cur; /* location stamped on values created next (parser) */
};

/* program.c */
int64_t td__dim_value(const td_program *p, td__dimref d);
/* Two dims that should be equal, as the program names them ("K: 4096 vs 4095",
 * "H vs M: 4 vs 8", "4 vs 5"), written into buf; returns buf. */
const char *td__dim_diff(const td_program *p, td__dimref a, td__dimref b, char *buf, size_t size);
void td__val_shape(const td_program *p, td_value v, int64_t *rows, int64_t *cols);
/** "file:line:col: " or "" into buf, for messages about value v. */
const char *td__val_where(const td_program *p, td_value v, char *buf, size_t size);
const char *td__val_label(const td_program *p, td_value v, char *buf, size_t size);
td_status td__program_copy(const td_program *src, td_program **out);

/* ---- lowering ---- */

/** One readiness entry: rows [row0, row0+rows) of a value's local buffer on one
 * rank become readable after local task `task` is done (signal == UINT32_MAX)
 * or after this rank's copy of `signal` reaches `value` (task unused). */
typedef struct td__ready {
  int64_t row0, rows;
  uint32_t task;
  uint32_t signal;
  uint64_t value;
} td__ready;

typedef struct td__readymap {
  td__ready *e;
  uint32_t n, cap;
  /* Preferred order in which consumers should visit row blocks (the order in
   * which they become ready): pairs (row0, rows). */
  int64_t *order;
  uint32_t norder, ordercap;
} td__readymap;

/** Deps and waits gathered for one task. */
typedef struct td__need {
  uint32_t *deps;
  uint32_t ndeps, depcap;
  td_wait *waits;
  uint32_t nwaits, waitcap;
  int oom;
} td__need;
void td__need_clear(td__need *need); /* empties, keeps memory */
void td__need_free(td__need *need);

/** cuda: whole-GEMM tasks for the executor's kernel queue (model.c decides,
 * lower_matmul.c emits; explain reports). */
typedef struct td__gemm_queue {
  int on;             /* GEMM tasks carry TD_GEMM_QUEUE, tiles span whole row blocks */
  char gpu[96];       /* target GPU the tuning cache was asked about */
  char why[160];      /* when off on the cuda backend: why */
  int cached, rule;   /* queue GEMMs configured from the tuning cache / by the default rule */
  int plain;          /* queue GEMMs whose layout the Hopper GEMM does not take (sub-tile grids) */
  char first[48];     /* configuration of the first queue GEMM, for explain */
} td__gemm_queue;

/** cpu, GEMM -> ReduceScatter cut into row blocks (one chunk per rank): the GEMM tile of
 * a rank's own rows, held back by lower_matmul.c so that rs_core emits it as
 * the last step of the owner's chain, accumulating onto the peers' partial
 * sums already in the accumulator (no separate add pass after the GEMM). */
typedef struct td__rs_fold {
  int set;       /* a held-back tile for this rank */
  td_value v;    /* the matmul */
  td_task task;  /* c and the ACCUMULATE flag are filled in by rs_core */
  td__need need; /* what its A and B rows wait for */
} td__rs_fold;

typedef struct td__lower {
  const td_program *p;
  td_compile_opts o;
  td_perf_model model;
  int n;               /* ranks */
  td_plan *plan;
  int32_t *buf;        /* per value: plan buffer */
  int32_t *symbuf;     /* per value: extra symmetric buffer (receive slots), -1 */
  int32_t *f32buf;     /* per value: f32 copy of a 16-bit weight for cpu GEMMs, -1 */
  td__readymap *ready; /* [value * n + rank] */
  int *nuses;          /* per value: number of consuming ops */
  int32_t *consumer;   /* per value: the (last) consuming value */
  int chunks;          /* sub-chunks per rank part */
  int one_queue;       /* cpu: every task on the compute workers (model.c) */
  int64_t tile_rows, tile_cols;
  int compute_workers, comm_workers;
  int64_t one_shot_bytes;
  td_status st;        /* first error */
  td__gemm_queue gq;   /* cuda kernel queue (zero elsewhere) */
  td__rs_fold *rs_fold; /* [rank], see td__rs_fold */
} td__lower;

struct td_compiled {
  td_plan *plan;
  td_program *program; /* private copy (names, shapes, layouts) */
  int32_t *buf;
  int n;
  int chunks;
  int64_t tile_rows, tile_cols;
  int compute_workers, comm_workers;
  td_perf_model model;
  td__gemm_queue gq;
};

/* lower.c: helpers shared by the pattern files */
void td__local_extent(const td__lower *L, td_value v, int rank, int64_t *row0, int64_t *rows,
                      int64_t *col0, int64_t *cols);
/** Adds readiness of value v on rank for rows [row0,row0+rows). */
void td__ready_task(td__lower *L, td_value v, int rank, int64_t row0, int64_t rows, uint32_t task);
void td__ready_signal(td__lower *L, td_value v, int rank, int64_t row0, int64_t rows,
                      uint32_t signal, uint64_t value);
void td__ready_order(td__lower *L, td_value v, int rank, int64_t row0, int64_t rows);
/** Adds to *need what reading rows [row0,row0+rows) of v on rank requires
 * (the whole value when `whole`). */
void td__need_rows(td__lower *L, td__need *need, td_value v, int rank, int64_t row0,
                   int64_t rows, int whole);
void td__need_task(td__need *need, uint32_t task);
void td__need_wait(td__need *need, uint32_t signal, uint64_t value);
/** Appends a task; returns its index (UINT32_MAX after an error, recorded in L->st). */
uint32_t td__emit(td__lower *L, int rank, td_task *task, const td__need *need,
                  const td_raise *raises, uint32_t nraises);
uint32_t td__signal(td__lower *L, const char *fmt, ...);
/** Formats a task label, truncated to fit (labels are for traces only). */
void td__label(td_task *task, const char *fmt, ...);
int32_t td__buffer(td__lower *L, const char *name, td_buffer_kind kind, td_dtype dtype,
                   int64_t rows, int64_t cols);
td_view td__view(int32_t buf, int32_t peer, int64_t row0, int64_t col0, int64_t rows,
                 int64_t cols);
/** Whether consumers of v should wait for the whole value (sequential, or fallback). */
int td__whole(const td__lower *L, td_value v);
/** Row blocks [row0, rows) of v on rank in the order consumers should visit them;
 * writes up to max pairs, returns the count. */
uint32_t td__visit_order(td__lower *L, td_value v, int rank, int64_t *pairs, uint32_t max);

/* pattern files */
/** cpu: the gelu value whose GEMM epilogue matmul v's tiles compute (lower_matmul.c),
 * or -1. Such a v has no buffer of its own; the gelu value has nothing to lower. */
td_value td__fused_gelu(const td__lower *L, td_value v);
td_status td__lower_matmul(td__lower *L, td_value v);
td_status td__lower_all_gather(td__lower *L, td_value v);
td_status td__lower_reduce_scatter(td__lower *L, td_value v);
td_status td__lower_all_reduce(td__lower *L, td_value v);
td_status td__lower_all_to_all(td__lower *L, td_value v);
td_status td__lower_ewise(td__lower *L, td_value v);
/** Fallback for collectives whose neighbours are not GEMMs: chunks wait for the
 * whole producer and consumers for the whole result. */
int td__fallback(const td__lower *L, td_value v);
/** The collective cores shared by the patterns. `*_rv` index readiness maps
 * (a value, or nvals + v for v's hidden intermediate); buffers are plan buffers;
 * R x C is the global shape. */
td_status td__ag_core(td__lower *L, const char *tag, td_value src_rv, int32_t src_buf, int whole_src,
                      td_value dst_rv, int32_t dst_buf, int dim, int64_t R, int64_t C);
/** cpu: whether every reader of all_gather v takes the rank's own rows from its
 * shard (f32 staging of lower_matmul.c), so the local copy into the gather
 * buffer is dead work. */
int td__ag_own_rows_unread(const td__lower *L, td_value v);
td_status td__rs_core(td__lower *L, const char *tag, td_value src_rv, int32_t src_buf, int whole_src,
                      td_value dst_rv, int32_t dst_buf, int dim, int64_t R, int64_t C);

/* npy.c: reads a 1-D/2-D .npy file into malloc'ed doubles (1-D n -> 1 x n). */
td_status td__npy_load(const char *path, int64_t *rows, int64_t *cols, double **out);
/* The calibration file's path ($TD_CACHE_DIR/calibration.json, else
 * ~/.cache/tdist/calibration.json) into path; 0 when neither TD_CACHE_DIR
 * nor HOME is set. Creates nothing (tdist calibrate checks it before
 * measuring). */
int td__perf_model_path(char *path, size_t size);
/* explain.c: symmetric bytes per rank the cpu executor allocates for the plan:
 * its symm buffers, signal words and its own control block
 * (td__exec_control_bytes), each rounded up to td_symm_alloc's 64-byte
 * alignment. Writes the counts when the pointers are non-NULL. */
uint64_t td__compiled_symm_bytes(const td_compiled *c, int *nbuffers, uint32_t *nsignals);
/* explain.c: bytes of td_exec_create's control block (agreement slots) per rank. */
uint64_t td__exec_control_bytes(int nranks);

/* model.c */
void td__model_choose(td__lower *L);
double td__model_task_seconds(const td_perf_model *m, const td_plan *plan, const td_task *t);

#endif
