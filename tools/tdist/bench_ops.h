/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench ag_gemm|gemm_rs|gemm_ar|all_reduce` (tools layer): what the
 * driver (bench_ops.c) and the sides from outside tdist (bench_ops_base.c,
 * bench_ops_cuda.c, bench_ops_nccl.c) share. Those sides are:
 *   sequential   on cpu the host collective (coll.h) then one OpenBLAS
 *                sgemm; on cuda the collective done by cudaMemcpyAsync copies
 *                and cuBLAS axpy reductions straight from the peers' buffers
 *                (works with ranks sharing one GPU, where NCCL refuses to
 *                run), then cuBLAS GEMM, all on the rank's one stream;
 *   nccl+cublas  cuda with every rank on its own GPU: one NCCL communicator
 *                per rank and ncclAllGather / ncclReduceScatter /
 *                ncclAllReduce beside cublasGemmEx on the rank's stream (the
 *                baseline the field compares against); skipped, with the
 *                reason, when ranks share a GPU;
 *   gemm only    cuda: that side's cuBLAS GEMM alone, no communication (the
 *                GEMM term of an operator's floor). */
#ifndef TD_TOOLS_BENCH_OPS_H
#define TD_TOOLS_BENCH_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/tdist.h"

typedef struct bo_shape {
  char name[40];
  int64_t m, n, k; /* GEMM operators */
  size_t count;    /* all_reduce */
} bo_shape;

/* Memory of a backend: host (cpu) or the current CUDA device. */
void *bo_alloc(int cuda, size_t bytes);
void bo_free(int cuda, void *p);
/* Fills `bytes` with uniform values in [-scale, scale) of dtype (random, never zeros). */
int bo_fill(int cuda, void *p, size_t bytes, td_dtype dt, uint64_t seed, double scale);
/* Copies `rows` rows of `cols` elements (row stride ld) from p to host dst (packed). */
int bo_rows_to_host(int cuda, void *dst, const void *p, int64_t row0, int64_t rows, int64_t cols, int64_t ld,
                    td_dtype dt);
/* Bytes of memory in use: cuda, device memory summed over the GPUs the ranks
 * use (each once; bo_devices must have run); cpu, the symmetric heap. */
size_t bo_mem_used(int cuda, td_world *w);
/* cuda: checks the GPUs once, before any rank runs, and works out every
 * rank's device (rank r on GPU r % count, or all on TD_CUDA_DEVICE) into
 * devices[0..ranks-1] (ranks 1..64), making a context on each. Returns 0, or
 * -1 with a message in msg: the CUDA error string (no driver, no device, a
 * device that fails), or TD_CUDA_DEVICE malformed or outside 0..count-1.
 * cpu: returns 0, devices untouched. Not thread-safe (call once, first). */
int bo_devices(int cuda, int ranks, int *devices, char *msg, size_t msg_size);
/* Environment lines for the report: fills a cJSON object (opaque here).
 * On cuda also the GPU count, the placement of `ranks` ranks, NCCL's
 * version, the peer links of every GPU pair (cudaDeviceGetP2PAttribute) and
 * `nvidia-smi topo -m`; sets NCCL_NVLS_ENABLE=0 when unset (NVLink
 * multicast stays off). Call before any rank thread starts (it may setenv). */
void bo_env(int cuda, int ranks, const int *devices, void *json_obj);
/* Binds the calling thread to the rank's device (cuda: the one bo_devices chose). */
int bo_set_device(int cuda, int rank);

/* Largest symmetric heap per rank (bytes) the cpu bench gives a case by
 * itself when TD_SYMM_HEAP_SIZE is unset and the default is too small: its
 * own default cases need up to ~450 MiB (all_reduce 64M), more than the
 * library's 256 MiB default; past this the user is asked to choose. */
#define BO_AUTO_HEAP_MAX ((double)(2ull << 30))
/* cuda: the GPU memory (bytes) each rank can count on, the smallest share of
 * a device among the ranks placed on it (bo_devices must have run); 0 on cpu
 * or when it cannot be read. */
double bo_device_capacity(int cuda, int ranks);
/* bench_ops_fit.c. The host memory a cpu case is checked against, in bytes:
 * TD_RUN_HOST_MEMORY when set (and valid; *from_config = 1), else the
 * physical memory sysconf reports (*from_config = 0); 0 when unknown (no
 * check). One rule for every bench kind (bench exec's GEMM too) and, with
 * src/compiler/run.c, for tdist run. */
double bo_host_memory(int *from_config);
/* What bo_fit_check found beyond its verdict. */
typedef struct bo_fit {
  double heap_need; /* symmetric bytes per rank the case needs (0 when TD_SYMM_HEAP_SIZE is bad) */
  size_t heap_auto; /* 0, or on cpu with TD_SYMM_HEAP_SIZE unset (or empty) and a need over the default but
                     * at most BO_AUTO_HEAP_MAX: the heap per rank (whole MiB) to create the case's world with */
  double heap_ask;  /* refused only because the heap is too small, and a heap of this many bytes (whole MiB)
                     * would hold it on this machine: that size; else 0 */
} bo_fit;
/* bench_ops_fit.c. Whether a case can fit before anything is allocated:
 * sides[0..nsides_tdist-1] are the tdist sides' variants (auto first) named
 * names[], nsides_all counts every side (each has its own C). The limits:
 * the heap (TD_SYMM_HEAP_SIZE, or the default), the largest heap it allows
 * (1 TiB), on cpu the host memory (physical, or TD_RUN_HOST_MEMORY), on cuda
 * each rank's share of its GPU (bo_device_capacity). Returns 0, or 1 with the
 * reason in msg: what the case needs and why it cannot have it (the limit,
 * and whether it can fit here at all), then only the remedies that apply
 * (a heap size that this machine can hold, fewer sides when more than auto
 * run and auto alone would fit, fewer ranks when that would fit, the largest
 * all_reduce size that fits). msg starts with a lower-case word, for a
 * "case NAME: " prefix. */
int bo_fit_check(td_tp_kind kind, const bo_shape *s, td_dtype dt, int ranks, int cuda, const td_tp_variant *sides,
                 const char *const *names, int nsides_tdist, int nsides_all, char *msg, size_t cap, bo_fit *fit);
/* Ranks x threads beyond this many times the cores draws a note. */
enum { BO_OVERSUB_FACTOR = 4 };
/* cpu: one note on stderr, prefixed `cmd`, when ranks x (compute + comm)
 * workers exceed BO_OVERSUB_FACTOR x the cores online (0 workers: what the
 * executor chooses). Nothing on cuda. */
void bo_oversub_warn(const char *cmd, int cuda, int ranks, int compute, int comm);

/* Which side from outside tdist a bo_base is. */
typedef enum bo_base_mode {
  BO_BASE_SEQ = 0,  /* the sequential baseline (cpu and cuda) */
  BO_BASE_NCCL = 1, /* cuda, one GPU per rank: NCCL collective + cuBLAS GEMM */
  BO_BASE_GEMM = 2, /* cuda: the nccl+cublas side's GEMM alone (GEMM operators only) */
} bo_base_mode;
/* The side's name in the table ("baseline", "nccl+cublas", "gemm only") and
 * its variant column ("sequential", "nccl", "cublas"). */
const char *bo_base_mode_name(bo_base_mode mode);
const char *bo_base_mode_variant(bo_base_mode mode);

typedef struct bo_base bo_base;
/* A side's state (shared by bench_ops_base.c, bench_ops_cuda.c and bench_ops_nccl.c). */
struct bo_base {
  int cuda;
  bo_base_mode mode;
  td_tp_kind kind;
  bo_shape s;
  td_dtype dt;
  td_team *team;
  int n, me;
  td_tp_layout la[64], lb, lc[64]; /* A and C layouts of every rank (n <= 64) */
  const void *a, *b;
  void *c;
  void *work;           /* cpu: gathered A / padded partial; cuda: gathered A / partial */
  size_t work_bytes;
  uint64_t *peer_a, *peer_c, *peer_w; /* cuda: every rank's pointers */
  void *stream; /* cuda: cudaStream_t */
  void *blas;   /* cuda: cublasHandle_t */
  void *nccl;   /* nccl+cublas: ncclComm_t */
  double timeout_s; /* nccl+cublas: deadline of one wait (TD_TIMEOUT_MS) */
};

#ifdef TD_HAVE_GEMM_CUDA
/* Collective: `local_ok` is this rank's readiness (scratch allocated); every
 * rank learns every rank's, so all fail or skip together (same return). */
int bo_cuda_setup(bo_base *b, int local_ok, char *msg, size_t msg_size);
int bo_cuda_run(bo_base *b, char *msg, size_t msg_size);
void bo_cuda_release(bo_base *b);
/* bench_ops_nccl.c. Setup: collective; 1 = skipped (ranks share a GPU, or no
 * NCCL in this build), same on every rank. Run: one call of the NCCL side
 * (with_comm) or its GEMM alone, waited for with the deadline. */
int bo_nccl_setup(bo_base *b, const int *devices, char *msg, size_t msg_size);
int bo_nccl_run(bo_base *b, int with_comm, char *msg, size_t msg_size);
void bo_nccl_release(bo_base *b);
/* The GPU count, where `ranks` ranks run (devices: bo_devices'), the peer
 * links of every ordered GPU pair and `nvidia-smi topo -m`, into a cJSON
 * object; no placement or links without a usable GPU. */
void bo_cuda_env(void *json_obj, int ranks, const int *devices);
/* NCCL's version as "2.28.9" into buf ("none" without NCCL in this build). */
void bo_nccl_version(char *buf, size_t size);
#endif
/* Collective over the team: makes the side `mode` of one case, reading this
 * rank's operands a, b laid out as op's (td_tp_operand). Returns 0; 1 when
 * the side does not apply here (ranks sharing a GPU for nccl+cublas; the
 * reason in msg, the same on every rank); or -1 with a message in msg. */
int bo_base_create(int cuda, bo_base_mode mode, td_tp_kind kind, const bo_shape *s, td_dtype dt, td_team *team,
                   const td_tp_op *op, const void *a, const void *b, void *c, bo_base **out, char *msg,
                   size_t msg_size);
/* One call: c = the operator's result by the side's route (gemm only: the
 * GEMM's output, not the operator's). Blocking. */
int bo_base_run(bo_base *b, char *msg, size_t msg_size);
void bo_base_destroy(bo_base *b);

#endif
