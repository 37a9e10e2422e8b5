/* SPDX-License-Identifier: Apache-2.0
 * The CUDA GEMM tile family (tiles layer, cuda backend): C[M,N] = A[M,K] * B,
 * 16-bit operands (bf16 or fp16), fp32 accumulation, C in the operand type.
 *
 * Two parts live here:
 *  - the types the device code shares with its launchers (hook flags, the hook
 *    description passed by value into kernels). This part includes nothing, so
 *    NVRTC can compile gemm_sm90.cuh / gemm_sm80.cuh with it: either give NVRTC
 *    the files as headers, or paste them into one source in the order gemm.h,
 *    gemm_sm80_hooks.cuh, gemm_sm90_wgmma.cuh, gemm_sm90.cuh (or gemm_sm80.cuh)
 *    after `#define TD_JIT_CONCAT`, which turns their #include lines off;
 *  - the host API (not seen by NVRTC): run one GEMM with a chosen tile
 *    configuration on a stream, list the configurations compiled into this
 *    build, pick a default one for a shape.
 *
 * Layouts (all row-major, contiguous, leading dimension = row length):
 *   A [M,K]; B either [N,K] (TD_GEMM_B_NK, "weights as stored by nn.Linear") or
 *   [K,N] (TD_GEMM_B_KN); C [M,N]. Rows must start on 16-byte boundaries
 *   (TMA and cp.async move 16-byte pieces): K % 8 == 0, and N % 8 == 0 for
 *   TD_GEMM_B_KN. M, N, K need not divide the tile sizes.
 *
 * Hooks (compile-time flags; a kernel built without a flag has no trace of it):
 *   TD_GEMM_HOOK_WAIT   before loading a tile's first A rows, wait until every
 *                       signal covering rows [m0, m0+BM) is >= wait_value
 *                       (acquire, system scope). Signal i covers A rows
 *                       [i*wait_rows, (i+1)*wait_rows). A wait past timeout_ns
 *                       (%globaltimer) records a diagnostic in diag and stops
 *                       waiting, so the kernel ends and the host reports it.
 *   TD_GEMM_HOOK_PUSH   output row r goes to dst[r / rows_per_peer] at local
 *                       row r % rows_per_peer (row length N): the tile is
 *                       pushed to its owner's buffer (GEMM + ReduceScatter).
 *                       Without PUSH, rows go to C.
 *   TD_GEMM_HOOK_ACCUMULATE  the output is added (atomically, in the operand
 *                       type) into the destination instead of stored
 *                       (GEMM + AllReduce partial sums).
 *   TD_GEMM_HOOK_RAISE  after all of a tile's rows are stored, add raise_value
 *                       (release, system scope) to each signal covering them:
 *                       raise_signals[peer][local_row / raise_rows].
 *                       Each signal therefore receives one add per N-tile
 *                       that covers its rows: a waiter expects
 *                       epoch * ceil(N / BN) * raise_value (per covering tile row).
 *   TD_GEMM_HOOK_GATHER A's rows come from several sources in place (zero
 *                       copy): source s holds rows [s*a_rows, (s+1)*a_rows)
 *                       as its own [rows_s, K] row-major matrix, described
 *                       by the tensor map a_maps[s] in device memory
 *                       (td__gemm_cuda_run_gather builds and uploads them).
 *                       a_rows is a multiple of TD__GEMM_GATHER_ROWS(BM) (BM;
 *                       128 for BM = 256, whose halves load apart and may
 *                       lie in two sources), so no load straddles two.
 *                       For AllGather + GEMM of ranks that share a
 *                       GPU: each rank's GEMM reads its peers' shards where
 *                       they are instead of gathering them first. sm_90a
 *                       only; not combined with the other hooks.
 *   TD_GEMM_HOOK_KGATHER the K dimension comes from several sources in place:
 *                       source s holds K columns [s*k_src, (s+1)*k_src) of A
 *                       as its own [M, k_src] matrix (a_maps[s]) and the
 *                       same K rows of B as its own [k_src, N] matrix
 *                       (b_maps[s]); k_src is a multiple of BK (64), so no
 *                       k-block straddles two sources, and the sum over every
 *                       source's K accumulates in one tile in f32. For GEMM +
 *                       ReduceScatter of ranks that share a GPU: rank r
 *                       computes its own rows of the sum directly from every
 *                       rank's A and B, with no partial sums to reduce
 *                       (td__gemm_cuda_run_kgather). sm_90a, B as [K,N]; with
 *                       no other hook, or with PUSH or BCAST (below) to route
 *                       the rows: then one launch computes every rank's rows
 *                       of the sum at once (each B read once, not once per
 *                       rank) and stores them where their owners want them.
 *   TD_GEMM_HOOK_BCAST  every output row goes to each of dst[0..bcast_peers)
 *                       at the same row (row length N), C is ignored: the
 *                       finished rows of GEMM + AllReduce stored straight into
 *                       every rank's output. Each consumer warpgroup stages
 *                       its rows of a tile in shared memory once and TMA
 *                       stores them to every destination (one map each,
 *                       c_maps) while the next tile computes. With KGATHER
 *                       only (td__gemm_cuda_run_kgather builds the maps; not
 *                       with WAIT, RAISE, PUSH or ACCUMULATE).
 *   TD_GEMM_HOOK_NSPLIT the N dimension is split over n_src column sources
 *                       in place: N (the kernel's n) is the columns of ONE
 *                       source; source j holds B's columns as its own [K, N]
 *                       matrix (b_maps[j]) and receives them in its own C,
 *                       dst[j], [M, N] row-major. The tiles of every source
 *                       run in one persistent launch, ceil(N / BN) column
 *                       tiles each (a source's last tile is clipped at its N).
 *                       With GATHER only, B as [K,N]: AllGather + GEMM of
 *                       ranks that share a GPU as one launch for every rank,
 *                       C_j = gather(A) * B_j, each rank's A read in place
 *                       once per tile row, not once per rank's launch
 *                       (td__gemm_cuda_run_gather_cols builds the maps).
 *
 * Split tail (KGATHER launches, any route, and GATHER ones, with NSPLIT or
 * not; never with WAIT or RAISE): a persistent launch of T tiles
 * on G blocks runs floor(T / G) full waves and a last one of T % G tiles,
 * which leaves most multiprocessors idle for a whole tile's time (qwen2-72b,
 * M = 1024: 928 tiles of 128x256 on 132 SMs, a last wave of 4). Given a
 * workspace (split_ws, split_ws_bytes), the launcher splits each of those
 * last split_tail tiles along K into split_k slices, run by split_k blocks at
 * once (td__gemm_split_plan decides; with split_waves = 2 the last two
 * waves' tiles may be split instead, over several rounds of the grid, each
 * block then running slices of several tiles). Each slice stores its fp32 partial
 * tile in the workspace and takes a ticket from the tile's counter; the
 * slice that draws the last ticket adds the others' partials to its own and
 * runs the tile's epilogue and routing as usual, then sets the counter back
 * to 0. No slice ever waits for another, so no order of the blocks can hang
 * (the "stream-K" fix-up of Osama et al., PPoPP 2023, with a ticket instead
 * of a wait; CUTLASS's stream-K waits). The workspace: TD_GEMM_SPLIT_CNT_BYTES
 * of counters (zero before the first launch; each launch leaves them zero),
 * then split_tail * split_k partial tiles of BM * BN fp32; one launch at a
 * time may use it (stream order). A launch that failed mid-way may leave
 * counters set: zero the workspace again before reusing it.
 *
 * PUSH's row split: with push_long_peers = 0 every peer owns rows_per_peer
 * rows (the last may own fewer); with push_long_peers = L > 0 the first L
 * peers own rows_per_peer rows and the others rows_per_peer - 1, which is
 * td_chunk_range's split of M over the peers (L = M % peers). The second
 * form is what KGATHER's routing uses; RAISE refuses it (its signals follow
 * rows_per_peer alone), the other hooks take it.
 *
 * Scope of the hooks' synchronisation (td_gemm_hooks.scope): system scope by
 * default (0), which is right whatever reads or writes the signals: the host,
 * a copy engine, a peer GPU over NVLink/PCIe. A launcher that knows the other
 * side runs on this GPU may say so and get GPU-scope acquires and releases,
 * which are never slower (on the H200 they saved 0.1-0.3 us per launch of a
 * one-tile-per-CTA GEMM; docs/perf.md, hooks6):
 *   TD_GEMM_SCOPE_WAIT_GPU   every write the waits depend on (the signals and
 *                       the A rows they cover) is made by threads of this
 *                       GPU, or is ordered before this launch by the stream
 *                       (an earlier kernel or copy): the waits acquire at GPU
 *                       scope. A copy engine or a peer GPU writing while the
 *                       kernel runs needs system scope.
 *   TD_GEMM_SCOPE_RAISE_GPU  everything that reads the raised signals (and the
 *                       rows behind them) while this kernel runs is a thread
 *                       of this GPU; later stream work is ordered anyway. The
 *                       raises release at GPU scope. A peer GPU, the host or
 *                       a stream memory operation polling the signals needs
 *                       system scope.
 * Both are ordinary PTX scopes: a GPU-scope release and a system-scope acquire
 * by two threads of one GPU still synchronise (each scope includes both).
 */
#ifndef TD_TILE_CUDA_GEMM_H
#define TD_TILE_CUDA_GEMM_H

typedef unsigned long long td__gemm_u64;

#define TD_GEMM_HOOK_WAIT 1u
#define TD_GEMM_HOOK_RAISE 2u
#define TD_GEMM_HOOK_PUSH 4u
#define TD_GEMM_HOOK_ACCUMULATE 8u
#define TD_GEMM_HOOK_ALL 15u /* the signalling hooks: WAIT | RAISE | PUSH | ACCUMULATE */
#define TD_GEMM_HOOK_GATHER 16u
#define TD_GEMM_HOOK_KGATHER 32u
#define TD_GEMM_HOOK_BCAST 64u
#define TD_GEMM_HOOK_NSPLIT 128u
#define TD_GEMM_HOOK_KNOWN 255u
/* Bytes of one tensor map in a GATHER table (a CUtensorMap). */
#define TD_GEMM_MAP_BYTES 128
/* Most sources a GATHER launch reads A from. */
#define TD_GEMM_MAX_SOURCES 64
/* td_gemm_hooks.scope bits (see above); 0 = system scope for both. */
#define TD_GEMM_SCOPE_WAIT_GPU 1u
#define TD_GEMM_SCOPE_RAISE_GPU 2u
#define TD_GEMM_SCOPE_ALL 3u

/* Split tail: the counters' bytes at the start of split_ws (one 32-bit
 * counter per split tile, so at most TD_GEMM_SPLIT_CNT_BYTES / 4 tiles), the
 * most slices per tile, and the fewest 64-deep k-blocks per slice. */
#define TD_GEMM_SPLIT_CNT_BYTES 4096
#define TD_GEMM_SPLIT_MAX 8
#define TD_GEMM_SPLIT_MIN_KB 8

/* Most destination peers a PUSH tile can address (one node of 8 GPUs). */
#define TD_GEMM_MAX_PEERS 8
/** Largest td_gemm_hooks.bcast_pace_kb (k-blocks between two paced BCAST copies), and the gap that 0 asks
 * for (measured on the H200: 2 and 4 no better, docs/perf.md, tenth session). */
#define TD_GEMM_PACE_KB_MAX 16
#define TD_GEMM_PACE_KB_DEFAULT 3

/* Operand element types understood by the kernels (fp8 e4m3 with per-tensor
 * scales is planned as value 2: same tile, k32 instructions, a scale in the
 * epilogue). */
#define TD_GEMM_DT_BF16 0
#define TD_GEMM_DT_F16 1

/* Layout of B. */
#define TD_GEMM_B_NK 0
#define TD_GEMM_B_KN 1

/* GATHER's row granularity for a tile of BM rows: a_rows must be a multiple
 * of it. BM itself, except 256, whose two 128-row halves are loaded apart and
 * may lie in two sources (so parts of 128 rows, M = 1024 on 8 ranks, can run
 * 256-row tiles). */
#define TD__GEMM_GATHER_ROWS(bm) ((bm) > 128 ? 128 : (bm))

/* Slots of the diagnostic record written by a timed-out wait. */
#define TD_GEMM_DIAG_FLAG 0     /* 1 once a wait timed out */
#define TD_GEMM_DIAG_SIGNAL 1   /* index of the signal in wait_signals */
#define TD_GEMM_DIAG_OBSERVED 2 /* value read at the deadline */
#define TD_GEMM_DIAG_EXPECTED 3 /* wait_value */
#define TD_GEMM_DIAG_ROW 4      /* first row of the tile that waited */
#define TD_GEMM_DIAG_WORDS 5

/* Most tensor maps in one GATHER / KGATHER table: KGATHER's A and B of every
 * source and BCAST's C of every destination. */
#define TD_GEMM_MAP_TABLE_MAX (2 * TD_GEMM_MAX_SOURCES + TD_GEMM_MAX_PEERS)
/* Words of td_gemm_map_cache.key: the launch's shape fields, then one per map's base. */
#define TD_GEMM_MAP_KEY_WORDS (16 + TD_GEMM_MAP_TABLE_MAX)

/** The host shadow of one device map table (td_gemm_hooks.map_cache): what
 * the launcher last uploaded into it, and the inputs it encoded them from
 * (each map's base and dimensions, its box, the hooks, the table's address).
 * A GATHER / KGATHER launch whose inputs equal the key skips the encodes and
 * the upload: a tensor map is a function of those inputs alone, and the table
 * still holds the maps (only launches through this cache write it, in stream
 * order). A failed encode, upload or launch clears `valid`, so the next launch
 * uploads again. Zeroed (calloc / memset) = empty. Owned by the caller, one
 * per table allocation: zero it when the table is freed (another may be
 * allocated at its address, holding anything) or written by other means, and
 * order the launches that share it on one stream (a reuse reads what an
 * earlier launch's upload wrote). Used by one thread at a time; ~19 KiB, so
 * keep it off the stack. */
typedef struct td_gemm_map_cache {
  int valid;
  int count;                                   /* maps in the table */
  long long key[TD_GEMM_MAP_KEY_WORDS];        /* zero past the words used */
  unsigned char maps[TD_GEMM_MAP_TABLE_MAX][TD_GEMM_MAP_BYTES]; /* what the table holds */
  long long hits, uploads;                     /* launches that skipped the upload, and that uploaded */
} td_gemm_map_cache;

/* Passed by value into every GEMM kernel; fields of unused hooks are ignored. */
typedef struct td_gemm_hooks {
  const td__gemm_u64 *wait_signals; /* WAIT: device pointer (local or peer memory) */
  long long wait_rows;         /* WAIT: A rows covered by one signal, >= 1 */
  td__gemm_u64 wait_value;          /* WAIT: wait until signal >= this (the epoch) */
  td__gemm_u64 timeout_ns;          /* WAIT: deadline per tile */
  td__gemm_u64 *raise_signals[TD_GEMM_MAX_PEERS]; /* RAISE: per destination peer */
  long long raise_rows;                      /* RAISE: rows covered by one signal */
  td__gemm_u64 raise_value;                       /* RAISE: added per finished tile */
  void *dst[TD_GEMM_MAX_PEERS]; /* PUSH: output base of each peer, [rows_per_peer, N]; BCAST, NSPLIT: [M, N] */
  long long rows_per_peer;      /* PUSH: rows owned by each peer, 1..2^31 - 1 (M is an int) */
  td__gemm_u64 *diag;                /* WAIT: TD_GEMM_DIAG_WORDS device words, zeroed by the host */
  unsigned scope;                    /* TD_GEMM_SCOPE_* bits; 0 (memset) = system scope */
  const void *a_maps;                /* GATHER, KGATHER: device array, one TD_GEMM_MAP_BYTES map per source */
  long long a_rows;                  /* GATHER: A rows per source (the last may hold fewer) */
  const void *b_maps;                /* KGATHER, NSPLIT: device array, one B map per source */
  long long k_src;                   /* KGATHER: K per source, a multiple of 64 */
  long long push_long_peers;         /* PUSH: peers owning rows_per_peer rows, the rest one fewer; 0 = all */
  int bcast_peers;                   /* BCAST: rows go to each of dst[0..bcast_peers), 1..TD_GEMM_MAX_PEERS */
  const void *c_maps;                /* BCAST: device array, one C map per destination (the launcher builds them) */
  int bcast_hint;                    /* BCAST: 0 = plain TMA stores; 1 = with an L2 evict-first policy, so the
                                      * n copies of the output leave L2 before the operands the next tiles read */
  int n_src;                         /* NSPLIT: column sources, 1..TD_GEMM_MAX_PEERS (B maps in b_maps, C in dst) */
  int bcast_defer;                   /* BCAST: 0 = a half-staged tile's second half is staged once the first
                                      * half's stores have read shared memory (inside the epilogue); 1 = it
                                      * waits in registers and is stored 8 k-blocks into the next tile's main
                                      * loop; 2 = paced: the tile's 2 x bcast_peers copies are issued one at a
                                      * time, one every bcast_pace_kb k-blocks of the next tile's main loop
                                      * (the second half staged after the first half's copies; a unit of fewer
                                      * k-blocks than that takes closes the gap to fit, down to one a k-block;
                                      * what still does not fit, its epilogue issues). Bits identical; no
                                      * effect on kernels that stage whole tiles */
  int bcast_pace_kb;                 /* BCAST paced (bcast_defer 2): k-blocks between two copies, 1..
                                      * TD_GEMM_PACE_KB_MAX; 0 (memset) = TD_GEMM_PACE_KB_DEFAULT */
  void *split_ws;                    /* KGATHER, GATHER: split-tail workspace (see below); NULL = no split */
  long long split_ws_bytes;          /* KGATHER, GATHER: its bytes; the launcher splits only what fits */
  int split_tail, split_k;           /* KGATHER, GATHER: set by the launcher (td__gemm_split_plan), not the caller */
  int split_waves;                   /* KGATHER, GATHER: 0 or 1 = split the last wave's tiles; 2 = or the last two
                                      * waves' where td__gemm_split_plan_waves's model says it pays */
  int map_fence;                     /* GATHER: 0 (memset) = each A map fenced to the tensormap proxy before the
                                      * first load of each tile that reads it; 1 = every source's A map (and
                                      * NSPLIT's B maps) fenced and its descriptor prefetched once, at the
                                      * start: measured slower by 3-10% at three shapes in both rounds and no
                                      * faster elsewhere (docs/perf.md, thirteenth session), kept to measure.
                                      * Bits identical */
  td_gemm_map_cache *map_cache;      /* GATHER, KGATHER: host shadow of a_maps' table (NULL = encode and upload
                                      * every launch, as without one); read by the launcher only */
} td_gemm_hooks;

#if !defined(__CUDACC_RTC__)
#include <stddef.h>

#include "tdist/status.h"
#include "tdist/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_gemm_arch {
  /* cuBLAS (cublasGemmEx, fp32 compute) as an engine of its own: no hooks, so
   * only for launches that wait and signal outside the kernel (stream and
   * event ordering, e.g. the fused operators of ranks sharing a GPU), where
   * a well-kept vendor GEMM beats ours whenever the tuner finds it faster.
   * The other fields of the configuration are ignored. */
  TD_GEMM_CUBLAS = 1,
  TD_GEMM_SM80 = 80, /* mma.sync + ldmatrix + cp.async: A100 and later */
  TD_GEMM_SM90 = 90, /* wgmma + TMA + warp specialisation: H100/H200 (sm_90a) */
} td_gemm_arch;

/* One tile configuration. For TD_GEMM_SM90: bm in {64,128,256}, bn a multiple
 * of 16 up to 256 (of 64 * cluster when B is [K,N]), bk = 64, stages 2..8,
 * cluster 1 or 2 (2: two CTAs on vertically adjacent tiles share B by TMA
 * multicast).
 * For TD_GEMM_SM80: bm, bn in {64,128}, bk = 32, stages 2..5. group_m is the
 * swizzle group: consecutive tiles walk group_m tile rows before the next
 * column, so that a wave of blocks shares A and B in L2. split_k > 1 divides
 * K over that many blocks (fp32 partial sums, then a reduction kernel); it is
 * refused together with hooks. */
typedef struct td_gemm_config {
  td_gemm_arch arch;
  int bm, bn, bk, stages, cluster, group_m, split_k;
} td_gemm_config;

typedef struct td_gemm_problem {
  int m, n, k;        /* M >= 0, N >= 0, K >= 1 */
  td_dtype dtype;     /* TD_BF16 or TD_F16 */
  int b_layout;       /* TD_GEMM_B_NK or TD_GEMM_B_KN */
  const void *a;      /* device, [M,K] */
  const void *b;      /* device, [N,K] or [K,N] */
  void *c;            /* device, [M,N]; ignored with the PUSH hook */
  void *workspace;    /* device, >= td__gemm_cuda_workspace_size() bytes when split_k > 1 */
} td_gemm_problem;

/** Runs C = A * B on `stream` (a cudaStream_t; NULL = default stream) with the
 * compiled kernel matching `config`, `hooks_flags` and the dtype/layout.
 * Asynchronous: returns after the launch. `hooks` may be NULL when
 * hooks_flags == 0; with hooks it is copied into the kernel's parameters.
 * Errors: TD_ERR_INVALID_ARG (NULL pointers, negative sizes, K == 0, bad
 * dtype, layout, flags or scope bits; TD_GEMM_HOOK_GATHER alone, which runs
 * only through td__gemm_cuda_run_gather), TD_ERR_SHAPE (K % 8 != 0, or N % 8 != 0 for [K,N]),
 * TD_ERR_UNSUPPORTED (no compiled kernel for that configuration -- the
 * message lists the ones compiled; or the GPU lacks the architecture; or
 * hooks with a TD_GEMM_CUBLAS configuration, which runs cuBLAS and has none),
 * TD_ERR_CUDA (launch or tensor-map failure). Thread-safe. */
td_status td__gemm_cuda_run(const td_gemm_problem *problem, const td_gemm_config *config,
                            unsigned hooks_flags, const td_gemm_hooks *hooks, void *stream);

/** td__gemm_cuda_run without hooks, its persistent grid sized for at most
 * `sms` multiprocessors (0 = all): for a GEMM that shares the GPU with
 * kernels that hold some SMs (the CUDA executor's persistent blocks), so no
 * block of it waits for a second wave. Errors: those of td__gemm_cuda_run,
 * TD_ERR_INVALID_ARG for sms < 0. Thread-safe. */
td_status td__gemm_cuda_run_sms(const td_gemm_problem *problem, const td_gemm_config *config, int sms,
                                void *stream);

/** Runs C = A * B where A's M rows come from `sources` separate row-major
 * matrices in place (TD_GEMM_HOOK_GATHER): a_src[s] holds rows
 * [s*src_rows, min(M, (s+1)*src_rows)) with row length K, so sources =
 * ceil(M / src_rows). problem->a is ignored (may be NULL); B, C, M, N, K,
 * dtype and layout as for td__gemm_cuda_run. Builds one tensor map per source
 * on the host and copies them into `map_buf` (device memory of at least
 * sources * TD_GEMM_MAP_BYTES bytes, 64-byte aligned, owned by the caller)
 * with cudaMemcpyAsync on `stream`, then launches the sm_90a kernel of
 * `config` compiled with the GATHER hook. The table is read by the kernel, so
 * the caller reuses map_buf only for later launches on the same stream (or
 * after this one finished). `tail` (NULL: none) lends the split tail its
 * workspace: tail->split_ws of tail->split_ws_bytes and tail->split_waves, as
 * for td__gemm_cuda_run_kgather's `out`, tail->map_fence (0: each map
 * fenced before each tile; 1: once at the start) and tail->map_cache (NULL,
 * or map_buf's host shadow: the encodes and upload are skipped while the
 * inputs are unchanged); its other fields are not read.
 * `sms` > 0 sizes the persistent grid (and the split plan) for that many
 * multiprocessors, 0 for all: ranks sharing one GPU that launch at once each
 * take their share, so that every rank's last wave can be split. Asynchronous.
 * Errors: those of td__gemm_cuda_run; TD_ERR_INVALID_ARG (NULL a_src entry,
 * map_buf or B/C, src_rows < 1, sources != ceil(M / src_rows) or above
 * TD_GEMM_MAX_SOURCES, a misaligned map_buf, sms < 0, a misaligned
 * tail->split_ws, negative split_ws_bytes, split_waves outside 0..2,
 * map_fence outside 0..1),
 * TD_ERR_SHAPE (src_rows not a multiple of the configuration's BM),
 * TD_ERR_UNSUPPORTED (a cuBLAS or sm_80 configuration, or no GATHER kernel
 * compiled for it: the message lists those compiled). Thread-safe.
 * Zero-copy AllGather + GEMM for ranks that share one GPU. */
td_status td__gemm_cuda_run_gather(const td_gemm_problem *problem, const td_gemm_config *config,
                                   const void *const *a_src, int sources, long long src_rows,
                                   void *map_buf, const td_gemm_hooks *tail, int sms, void *stream);

/** td__gemm_cuda_run_gather over `col_srcs` column sources at once
 * (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT): C_j = A * B_j for every j in
 * 0..col_srcs, where A is gathered in place as above (a_src, sources,
 * src_rows), b_src[j] is a row-major [K, N] matrix and c_dst[j] a row-major
 * [M, N] output (N = problem->n, the columns of ONE source). problem->a,
 * ->b and ->c are ignored (may be NULL); B's layout must be TD_GEMM_B_KN.
 * One launch: the tiles of every source share the persistent grid, so
 * col_srcs GEMMs of M x N run as one of M x (col_srcs * N) with no tile
 * crossing a source. map_buf: device memory of at least (sources + col_srcs)
 * * TD_GEMM_MAP_BYTES bytes, 64-byte aligned (A maps, then B maps), reused
 * as for td__gemm_cuda_run_gather; `tail` as there (the split tail over
 * every source's tiles). Asynchronous. Errors: those of
 * td__gemm_cuda_run_gather; TD_ERR_INVALID_ARG (NULL b_src or c_dst or an
 * entry of them, col_srcs outside 1..TD_GEMM_MAX_PEERS, B not [K,N]).
 * Thread-safe. AllGather + GEMM of ranks sharing one GPU as one launch for
 * every rank (the ranks' B and C are the column sources). */
td_status td__gemm_cuda_run_gather_cols(const td_gemm_problem *problem, const td_gemm_config *config,
                                        const void *const *a_src, int sources, long long src_rows,
                                        const void *const *b_src, void *const *c_dst, int col_srcs,
                                        void *map_buf, const td_gemm_hooks *tail, void *stream);

/** Runs C = sum over s of A_s * B_s (TD_GEMM_HOOK_KGATHER): a_src[s] is a
 * row-major [M, k_src] matrix (its rows k_src elements apart), b_src[s] a
 * row-major [k_src, N] matrix, all read in place; K = problem->k must equal
 * sources * k_src. problem->a and problem->b are ignored; C, M, N, dtype as
 * for td__gemm_cuda_run; B's layout must be TD_GEMM_B_KN. Builds 2 x sources
 * tensor maps (and one per BCAST destination) on the host and copies them
 * into `map_buf` (device, at least (2 * sources + b) * TD_GEMM_MAP_BYTES
 * bytes, b = out->bcast_peers with BCAST and 0 otherwise, 64-byte aligned) on
 * `stream`, then launches.
 * `route` picks where the rows go: 0 (C; `out` may be NULL),
 * TD_GEMM_HOOK_PUSH (row r to its owner's buffer out->dst[peer], split by
 * out->rows_per_peer and out->push_long_peers; problem->c ignored) or
 * TD_GEMM_HOOK_BCAST (every row to each of out->dst[0..out->bcast_peers),
 * out->bcast_hint 0 or 1, out->bcast_defer 0..2 and out->bcast_pace_kb 0..TD_GEMM_PACE_KB_MAX as in
 * td_gemm_hooks). With any route, a non-NULL
 * out->split_ws of out->split_ws_bytes lets the launch split its last
 * wave's tiles along K (the split tail above; 16-byte aligned, its counters
 * zero before the first use; NULL: no split), or its last two waves' with
 * out->split_waves = 2 (td__gemm_split_plan_waves), and out->map_cache (NULL,
 * or map_buf's host shadow, as for td__gemm_cuda_run_gather; `out` may be NULL
 * only with route 0). Only those fields of `out` are read. Asynchronous. Errors: those of
 * td__gemm_cuda_run; TD_ERR_INVALID_ARG (NULL tables, entries or map_buf,
 * a misaligned split_ws or negative split_ws_bytes, split_waves outside 0..2,
 * sources outside 1..TD_GEMM_MAX_SOURCES, K != sources * k_src, a misaligned
 * map_buf, B not [K,N], route not one of the three, `out` NULL with a route,
 * a NULL dst the rows need, rows_per_peer outside 1..2^31 - 1, a split that
 * leaves rows without an owner or needs more than TD_GEMM_MAX_PEERS,
 * bcast_peers outside 1..TD_GEMM_MAX_PEERS, bcast_hint not 0 or 1, bcast_defer not 0..2, bcast_pace_kb
 * outside 0..TD_GEMM_PACE_KB_MAX), TD_ERR_SHAPE (k_src not a
 * multiple of 64),
 * TD_ERR_UNSUPPORTED (not an sm_90a configuration compiled with KGATHER and
 * that route). Thread-safe. */
td_status td__gemm_cuda_run_kgather(const td_gemm_problem *problem, const td_gemm_config *config,
                                    const void *const *a_src, const void *const *b_src, int sources,
                                    long long k_src, void *map_buf, unsigned route, const td_gemm_hooks *out,
                                    void *stream);

/** The split tail of a KGATHER or GATHER launch (see "Split tail" above): `units`
 * tiles (>= 1) on a persistent grid of `slots` blocks (>= 1), `nk` k-blocks
 * of 64 per tile, a workspace of `ws_bytes` and partial tiles of
 * `tile_bytes` (BM * BN * 4). Sets *tail (tiles split, the last ones) and
 * *split (slices per tile, 2..TD_GEMM_SPLIT_MAX, each of at least
 * TD_GEMM_SPLIT_MIN_KB k-blocks), or *tail = 0 and *split = 1 when nothing
 * is split: the last wave is full, its tiles are too many to split onto the
 * idle blocks (split * tail <= slots), K is too short, or the workspace too
 * small. Pure; thread-safe. */
void td__gemm_split_plan(long long units, int slots, int nk, long long ws_bytes, long long tile_bytes, int *tail,
                         int *split);

/** td__gemm_split_plan with `waves` = 2: where the last wave holds more
 * than half the blocks' tiles (nothing to split onto), or where it pays
 * more, the tiles of the last full wave and the last wave together (rem +
 * slots of them) are split into 2..TD_GEMM_SPLIT_MAX slices run over as
 * many rounds of the grid as they need: each block then runs several
 * slices, of several tiles. It takes the plan of least modelled time (tile
 * times: full waves, rounds / slices, plus 0.01 per slice for the fix-up;
 * e.g. 1664 tiles on 132 blocks, 12 waves and 80 tiles: 212 tiles in 3
 * slices, 5 rounds, 12.7 against 13 tile times), within the workspace and
 * the counters. `waves` = 1 (or anything but 2) is td__gemm_split_plan.
 * Pure; thread-safe. */
void td__gemm_split_plan_waves(long long units, int slots, int nk, long long ws_bytes, long long tile_bytes, int waves,
                               int *tail, int *split);

/** Whether this build compiled a kernel variant of `config` (sm_90a) for
 * (dtype, b_layout, hooks): variant 1 is BCAST's deferred second half
 * (td_gemm_hooks.bcast_defer 1 or 2; only tiles staged half at a time have one).
 * 1 or 0; a NULL config or another variant number gives 0. Pure table
 * lookup, no CUDA call; thread-safe. */
int td__gemm_cuda_has_variant(const td_gemm_config *config, td_dtype dtype, int b_layout, unsigned hooks,
                              int variant);

/** The sm_90a configurations compiled with exactly the hook flags `hooks`
 * for (dtype, b_layout), as td__gemm_cuda_configs lists the hook-free ones:
 * writes up to `cap` (out may be NULL when cap is 0), returns the total. */
int td__gemm_cuda_configs_hooked(td_dtype dtype, int b_layout, unsigned hooks, td_gemm_config *out, int cap);

/** Runs C = A * B with cuBLAS (cublasGemmEx, fp32 accumulation) on `stream`:
 * what td__gemm_cuda_run does for a TD_GEMM_CUBLAS configuration. The layouts
 * and the K % 8 rule are those of the tiles, so either engine can serve a
 * problem. Uses one cuBLAS handle per thread and device, created on first use
 * and destroyed when the thread exits. Errors: TD_ERR_CUDA (handle creation
 * or the GEMM failed), TD_ERR_INVALID_ARG. Thread-safe. */
td_status td__gemm_cublas_run(const td_gemm_problem *problem, void *stream);

/** Names a configuration for reports: "cuBLAS", or e.g. "sm90 128x256x64 s4 c1 g8". */
void td__gemm_config_name(const td_gemm_config *config, char *buf, size_t cap);

/** Workspace bytes a problem needs under `config` (0 unless split_k > 1). */
size_t td__gemm_cuda_workspace_size(const td_gemm_problem *problem, const td_gemm_config *config);

/** The configurations compiled into this build for (arch, dtype, b_layout)
 * without hooks: writes up to `cap` of them to out (may be NULL when cap is 0)
 * and returns how many there are in total. Used by `tdist tune gemm`. */
int td__gemm_cuda_configs(td_gemm_arch arch, td_dtype dtype, int b_layout, td_gemm_config *out,
                          int cap);

/** A good configuration for the shape on `arch`, by rule of thumb (the tuner's
 * cache refines it). Never fails: returns a compiled configuration. */
td_gemm_config td__gemm_cuda_default_config(td_gemm_arch arch, int m, int n, int k);

/** The number of blocks td__gemm_cuda_run would launch for this problem and
 * hook-free configuration; -1 when no such kernel is compiled. For reports. */
int td__gemm_cuda_grid(const td_gemm_problem *problem, const td_gemm_config *config);

/** Reads a finished kernel's diagnostic record (hooks.diag, device memory) and
 * turns a timed-out wait into TD_ERR_TIMEOUT with a message naming the signal,
 * the expected and observed values and the tile's first row; TD_OK otherwise.
 * Synchronises with the device. */
td_status td__gemm_cuda_check_diag(const td__gemm_u64 *diag);

/* ---- tuning (gemm_sm90_tune.c) ---- */

/** Called after each configuration is timed: index of count, the mean time of
 * one launch in ms and TFLOP/s (0 when it failed: `status` says why; the
 * thread's last error has the message). */
typedef void (*td_gemm_tune_progress)(void *user, int index, int count, const td_gemm_config *cfg,
                                      double ms, double tflops, td_status status);

/** Times every configuration compiled for (arch, dtype, layout), and cuBLAS
 * as one more candidate (TD_GEMM_CUBLAS), on an M x N x K
 * problem with random data (device memory allocated and freed here): 3
 * warm-up launches, then the mean of `iters` back-to-back launches. Writes the
 * fastest to *best and its rate to *best_tflops. Errors: TD_ERR_INVALID_ARG
 * (sizes or iters < 1, NULL outputs), TD_ERR_UNSUPPORTED (nothing compiled or
 * nothing ran), TD_ERR_CUDA, TD_ERR_NO_MEMORY. Not thread-safe with other
 * GPU work timed at the same time. */
td_status td__gemm_tune(td_gemm_arch arch, td_dtype dtype, int layout, int m, int n, int k,
                        int iters, td_gemm_tune_progress progress, void *user,
                        td_gemm_config *best, double *best_tflops);

/** The tuning cache file: $TD_CACHE_DIR/gemm-tune.json, else
 * ~/.cache/tdist/gemm-tune.json; creates the directory. TD_ERR_INVALID_ARG
 * when neither variable is set or the path is too long, TD_ERR_SYSTEM when
 * the directory cannot be made. */
td_status td__gemm_tune_cache_path(char *buf, size_t cap);

/** The shape class a tuned entry stands for: each size rounded up to a power
 * of two (at least 64), written "m8192_n4096_k8192". */
void td__gemm_shape_class(int m, int n, int k, char *buf, size_t cap);

/** Stores cfg as the best for (gpu name, dtype, layout, shape class of M,N,K),
 * replacing an older entry; the file is replaced atomically (temp + rename).
 * Errors: those of td__gemm_tune_cache_path, TD_ERR_SYSTEM on write failure. */
td_status td__gemm_tune_store(const char *gpu, td_dtype dtype, int layout, int m, int n, int k,
                              const td_gemm_config *cfg, double tflops);

/** Reads the entry for (gpu, dtype, layout, shape class of M,N,K) into *out.
 * TD_ERR_NOT_FOUND (message names the key and file) when there is none; an
 * unreadable file counts as empty. */
td_status td__gemm_tune_lookup(const char *gpu, td_dtype dtype, int layout, int m, int n, int k,
                               td_gemm_config *out);

#ifdef __cplusplus
}
#endif
#endif /* !__CUDACC_RTC__ */
#endif
