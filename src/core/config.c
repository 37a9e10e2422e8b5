/* SPDX-License-Identifier: Apache-2.0
 * The one table of tdist's environment variables (core layer). Parsing, error
 * messages and `tdist doctor` all read this table, so a variable documented
 * here is a variable that works. Add a row to add a variable. */
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <inttypes.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/suggest.h"
#include "tdist/config.h"

typedef enum { TD__CFG_INT, TD__CFG_BYTES, TD__CFG_STR } td__cfg_type;

typedef struct {
  const char *name;
  td__cfg_type type;
  const char *def; /* default as text; NULL = unset */
  int64_t min, max;
  const char *allowed; /* comma-separated allowed values (strings, or integers of an int variable), or NULL = any */
  const char *desc;
  /* strings with a grammar rather than a list: NULL, or returns NULL when
   * `text` is valid and else what is allowed (for the message) */
  const char *(*check)(const char *text);
} td__cfg_var;

/* A run of 1-3 digits (no sign, no space: sscanf's %d would take both, and
 * overflow past INT_MAX) at *p, as a value in 1..lim; advances *p. */
static int td__tile_num(const char **p, int lim) {
  int v = 0, digits = 0;
  while (**p >= '0' && **p <= '9' && digits < 4)
    v = v * 10 + (*(*p)++ - '0'), digits++;
  return digits >= 1 && digits <= 3 && v >= 1 && v <= lim ? v : 0;
}

static const char *td__check_fused_tile(const char *text) {
  if (!strcmp(text, "cublas") || !strcmp(text, "tiles"))
    return NULL;
  const char *p = text;
  int ok = td__tile_num(&p, 256) && *p++ == 'x' && td__tile_num(&p, 256);
  if (ok && *p == 'c')
    p++, ok = td__tile_num(&p, 2);
  if (ok && !*p)
    return NULL;
  return "cublas, tiles, BMxBN or BMxBNcC with BM, BN in 1..256 and C 1 or 2, digits only (e.g. 128x256c2)";
}

static const td__cfg_var td__vars[] = {
    {"TD_TIMEOUT_MS", TD__CFG_INT, "60000", 1, INT32_MAX, NULL,
     "deadline of every wait, host and device, in milliseconds", NULL},
    {"TD_SYMM_HEAP_SIZE", TD__CFG_BYTES, "256M", 4096, INT64_C(1) << 40, NULL,
     "symmetric heap per rank in bytes (K/M/G suffixes)", NULL},
    {"TD_RUN_HOST_MEMORY", TD__CFG_BYTES, NULL, 1, INT64_C(1) << 50, NULL,
     "host memory td_program_run / tdist run (and tdist bench's operator kinds on cpu, and bench exec) check a run "
     "against, bytes "
     "(K/M/G suffixes), in place of the "
     "machine's physical memory (a larger value turns the check into one against it); default: physical "
     "memory as sysconf reports it (cgroup limits not included)", NULL},
    {"TD_TRANSPORT", TD__CFG_STR, NULL, 0, 0, "local,shm", "host transport; default: shm for launched processes", NULL},
    {"TD_COLL_SINGLE_COPY", TD__CFG_INT, "1", 0, 1, NULL,
     "host collectives: 1 = peers read an ordinary (non-symmetric) src in place (memcpy, or process_vm_readv "
     "between processes) when allowed; 0 = stage it through symmetric scratch (two copies)", NULL},
    {"TD_ATTACH_TIMEOUT_MS", TD__CFG_INT, NULL, 1, INT32_MAX, NULL,
     "deadline of start-up (all ranks attaching to the job's shared memory), in milliseconds; default: the "
     "larger of TD_TIMEOUT_MS and 60000", NULL},
    {"TD_RANK", TD__CFG_INT, NULL, 0, 4095, NULL, "this process's rank (set by tdrun)", NULL},
    {"TD_WORLD_SIZE", TD__CFG_INT, NULL, 1, 4096, NULL, "number of ranks (set by tdrun)", NULL},
    {"TD_LOCAL_RANK", TD__CFG_INT, NULL, 0, 4095, NULL, "rank among this host's ranks (set by tdrun)", NULL},
    {"TD_LOCAL_WORLD_SIZE", TD__CFG_INT, NULL, 1, 4096, NULL, "ranks on this host (set by tdrun)", NULL},
    {"TD_JOB_ID", TD__CFG_STR, NULL, 0, 0, NULL, "job identifier naming shared memory (set by tdrun)", NULL},
    {"TD_LAUNCHER", TD__CFG_STR, NULL, 0, 0, NULL, "which launcher set the rank variables (set by tdrun)", NULL},
    {"TD_GIT_REV", TD__CFG_STR, NULL, 0, 0, NULL,
     "revision recorded by `tdist bench --json` when the tree has no .git (set by the GPU scripts)", NULL},
    {"TD_CACHE_DIR", TD__CFG_STR, NULL, 0, 0, NULL, "JIT kernel and tuning cache (default ~/.cache/tdist)", NULL},
    {"TD_CPU_COMPUTE_WORKERS", TD__CFG_INT, "0", 0, 1024, NULL,
     "CPU executor compute workers per rank (0 = from cores and ranks)", NULL},
    {"TD_CPU_COMM_WORKERS", TD__CFG_INT, "0", 0, 1024, NULL,
     "CPU executor communication workers per rank (0 = from cores and ranks)", NULL},
    {"TD_CUDA_DEVICE", TD__CFG_INT, NULL, 0, 1024, NULL, "CUDA device of this rank (default: local rank modulo device count)", NULL},
    {"TD_CUDA_NO_COPY_ENGINE", TD__CFG_INT, "0", 0, 1, NULL,
     "1: the CUDA executor copies copy-engine tasks on SMs instead of its copy-engine stream", NULL},
    {"TD_CUDA_GEMM_QUEUE", TD__CFG_INT, "1", 0, 1, NULL,
     "1: cuda plans run whole GEMMs as Hopper GEMM kernels on the executor's kernel queue (sm_90 with "
     "tdist_gemm_cuda linked); 0: fine tiles on the persistent kernel", NULL},
    {"TD_CUDA_TARGET_SM", TD__CFG_INT, NULL, 75, 121, "75,80,86,87,88,89,90,100,103,110,120,121",
     "compute capability x 10 the compiler plans cuda for instead of the visible GPU (e.g. 90), for explain "
     "without a GPU; one of the SM versions CUDA 13 builds for", NULL},
    {"TD_CUDA_TARGET_NAME", TD__CFG_STR, NULL, 0, 0, NULL,
     "with TD_CUDA_TARGET_SM: the GPU name whose tuning-cache entries the compiler uses (e.g. NVIDIA H200)", NULL},
    {"TD_OPS_FUSED", TD__CFG_INT, "1", 0, 1, NULL,
     "0: AUTO never picks the fused cuda variant of the operators (ops.h); 1: it does where it applies", NULL},
    {"TD_OPS_FUSED_TILE", TD__CFG_STR, NULL, 0, 0, NULL,
     "fused operators' GEMM launches: cublas, tiles (our tiles, by shape), or a compiled tile BMxBN / BMxBNcC; "
     "default: the tuning cache's entry, else cuBLAS", td__check_fused_tile},
    {"TD_OPS_FUSED_AG_GEMMS", TD__CFG_INT, "0", 0, 8, "0,1,3,8",
     "fused ag_gemm: GEMMs per call, 1 (all rows), 3 (own, after, before) or 8 (one per rank); 0 = by shape", NULL},
    {"TD_OPS_FUSED_AG", TD__CFG_STR, "auto", 0, 0, "auto,copy,direct,batched,batched-one,gather,gather-one,gather-share",
     "fused ag_gemm: copy (gather the peers' A rows, then GEMM), direct (a GEMM per rank reading its A in place, "
     "no copy; for ranks sharing one GPU), batched (direct as one cuBLAS batched launch when the parts are "
     "equal) or batched-one (rank 0's one cuBLAS batched launch of ranks x ranks GEMMs for every rank, equal parts "
     "on one shared GPU; across GPUs, with TD_OPS_FUSED_TILE naming a tile or with unequal parts it runs as "
     "batched, or direct where that cannot run) or gather (one launch of our tile reading every rank's A in place, for equal parts of a multiple "
     "of 128 rows in bf16 on one shared GPU with a tile compiled for it, each rank its own launch; where it cannot "
     "run: batched, else direct) or gather-one (the same as rank 0's one launch for every rank, each rank's B "
     "and C a column source, its last wave split as TD_OPS_FUSED_TAIL says) or gather-share (each rank's launch "
     "on its share of the SMs, SMs / ranks, its last wave split: the ranks' launches run at once); batched, batched-one, direct, gather, gather-one and gather-share are for ranks sharing one GPU: across GPUs they read the peers' A over "
     "the links (direct), slower than copy there; auto = on one shared GPU with at most 8 ranks: batched-one on equal parts of >= 512 rows whose B rows are whole 128-byte lines (unless TD_OPS_FUSED_TILE names a tile or asks for ours, or TD_OPS_FUSED_AG_GEMMS is set), else on equal parts of a multiple of 128 rows gather-one on 256x128 tiles (measured faster; in clusters of 2 on parts of >= 256 rows; 128x256 in clusters of 2 at K >= 8192 on parts of 128 rows and K >= 12288 on parts of 256 where a rank's columns are whole 256-column tiles), unless TD_OPS_FUSED_TILE names a tile; "
     "else gather where it can run (256-row tiles only where named), except parts "
     "of >= 512 rows whose B rows are not whole 128-byte lines, which take batched (direct for unequal parts) "
     "like any part of >= 512 rows, unless TD_OPS_FUSED_AG_GEMMS is set; else copy",
     NULL},
    {"TD_OPS_FUSED_AR", TD__CFG_STR, "auto", 0, 0, "auto,two-shot,all-push,kgather",
     "fused gemm_ar: two-shot (reduce-scatter, then all-gather of the reduced rows; above 1 MiB of output), "
     "all-push (every rank pushes each row block of its partial to every peer as it is computed, then reduces all "
     "rows locally: n - 1 times the bytes, no all-gather) or, for ranks sharing one GPU, kgather (one launch of our "
     "tile over every rank's A and B in place computes every row over the whole K and stores it into every rank's "
     "output: no partials; bf16, K / ranks a multiple of 64, a KGATHER tile TD_OPS_FUSED_TILE allows; elsewhere "
     "auto's choice); auto = kgather on one shared GPU where it can run and the output has at least as many "
     "128x256 tiles as the GPU has SMs (unless TD_OPS_FUSED_RS asks for pull or push), else all-push for 2 ranks "
     "on 2 GPUs and M > 4096, else two-shot (one-shot up to 1 MiB of output)",
     NULL},
    {"TD_OPS_FUSED_BCAST_HINT", TD__CFG_STR, "none", 0, 0, "none,evict_first",
     "fused gemm_ar kgather: the L2 policy of the TMA stores that put every row into each rank's output: none, or "
     "evict_first (the copies leave L2 before the operands the next tiles read); a measurement knob: evict_first "
     "measured no faster on the H200 (docs/perf.md), so none stays the default", NULL},
    {"TD_OPS_FUSED_BCAST_HALF", TD__CFG_STR, "pace", 0, 0, "wait,defer,pace",
     "fused gemm_ar kgather, 128x256 tiles (staged half at a time): wait (the second half is staged once the first "
     "half's stores have read shared memory, inside the epilogue), defer (it waits in registers and is stored 8 "
     "k-blocks into the next tile's main loop, so no epilogue waits on a whole wave's stores) or pace (every copy "
     "of the tile issued one at a time over the next tile's main loop, so a wave's blocks do not store at once; the "
     "default: faster than wait in 23 of 24 measured pairs, by 5-9%, docs/perf.md); the same bytes", NULL},
    {"TD_OPS_FUSED_BCAST_PACE", TD__CFG_INT, "3", 1, 16, NULL,
     "fused gemm_ar kgather with TD_OPS_FUSED_BCAST_HALF=pace: k-blocks of the next tile's main loop between two "
     "of a tile's paced copies (a tile of fewer k-blocks than its copies need at that pace, such as a split "
     "slice, closes the gap to fit them); a measurement knob, 1..16", NULL},
    {"TD_OPS_FUSED_MAP_FENCE", TD__CFG_STR, "tile", 0, 0, "tile,start",
     "fused ag_gemm gather (each rank's launch, gather-one, gather-share): where the launch makes each rank's A "
     "tensor map visible to TMA: tile (fenced before each tile's first load) or start (every map fenced and its "
     "descriptor prefetched once, when the launch begins; measured slower at three shapes, docs/perf.md); a "
     "measurement knob, the results are the same bits", NULL},
    {"TD_OPS_FUSED_MAP_CACHE", TD__CFG_INT, "1", 0, 1, NULL,
     "fused ag_gemm gather and gemm_rs / gemm_ar kgather: 1 = a call whose operands (addresses) are the previous "
     "call's reuses the tensor maps already in the launch's device table (no encodes, no upload); 0 = every call "
     "encodes and uploads them; a measurement knob, the results are the same bits", NULL},
    {"TD_OPS_FUSED_PROFILE", TD__CFG_INT, "0", 0, 1, NULL,
     "1: each fused operator prints, when destroyed, one line per rank on stderr with the median host time (us) "
     "of its calls' phases (operand-check exchange, launcher, enqueue, middle exchange, finish), on rank 0 of a "
     "one-launch schedule the GPU time (us, CUDA events) from the call's start to the launch and of the launch, "
     "and how often the tensor maps were reused; a measurement aid", NULL},
    {"TD_OPS_FUSED_TAIL", TD__CFG_STR, "split", 0, 0, "split,split2,none",
     "fused gemm_rs / gemm_ar kgather and ag_gemm gather-one / gather-share: split (the launch's last, partial wave of tiles runs each tile as up to 8 "
     "K-slices on the idle SMs, the last slice to finish adding the others' fp32 partials; measured), split2 (as "
     "split, or the last full wave's tiles and the last wave's together over several rounds where a model says "
     "that pays, e.g. a last wave of more than half the SMs; its workspace can reach ~250 MiB; measured slower than "
     "split where it makes 5 slices and no faster at 3, docs/perf.md) or none (every tile whole)", NULL},
    {"TD_OPS_FUSED_RS", TD__CFG_STR, "auto", 0, 0, "auto,pull,push,kgather",
     "fused gemm_rs / gemm_ar: pull (each rank reduces its rows from the peers' whole partials), push (row blocks "
     "pushed to their owner as each is computed) or, for gemm_rs of ranks sharing one GPU, kgather (one launch of "
     "our tile over every rank's A and B in place computes every row over the whole K and stores it at its owner: "
     "no partials; bf16, K / ranks a multiple of 64, a KGATHER tile TD_OPS_FUSED_TILE allows; elsewhere auto's "
     "choice); auto = kgather on one shared GPU where it can run and the output has at least as many 128x256 "
     "tiles as the GPU has SMs, else push when some peer is on another GPU, else pull", NULL},
};
enum { TD__NVARS = sizeof td__vars / sizeof td__vars[0] };

/* TD_* names that tdist's own tests, benchmarks and scripts set or read: the
 * harness's (ctest sets TD_BIN_DIR & co. for every test), the test programs'
 * knobs, and scripts/'s parameters (TD_ITERS=50 scripts/gpu-verify.sh puts
 * TD_ITERS in the environment of every tdist the script runs). Not
 * configuration of the library, so doctor does not list them with the table;
 * known, so not called misspelt (td_config_unknown, td_config_warn_unknown).
 * tests/tools/test_cli_env_warning.c checks that every name the scripts use
 * is here or in the table. */
static const char *const td__tool_names[] = {
    /* ctest's environment and the test programs' knobs */
    "TD_BIN_DIR", "TD_TDRUN", "TD_TEST_DIR", "TD_SOURCE_DIR", "TD_UPDATE_GOLDEN", "TD_TEST_SEED", "TD_TEST_COUNT",
    "TD_TEST_DUMP", "TD_TEST_TIMEOUT", "TD_GPU_TEST_FILTER", "TD_GPU_TEST_VERBOSE", "TD_GPU_TESTS",
    "TD_EXPECT_COPY_ENGINE", "TD_SEED",
    /* bench/'s baselines */
    "TD_MPI_GELU",
    /* scripts/'s parameters */
    "TD_AGSB_M", "TD_BENCH_TIMEOUT", "TD_EXECGEMM_BUILD", "TD_FINAL_BIN", "TD_FINAL_BUILD", "TD_FMG_RANKS",
    "TD_FUSEDMG_BUILD", "TD_FUSEDMG_SRC", "TD_GATHER_COMPARE", "TD_GATHER_LANES", "TD_GATHER_MG_OPS",
    "TD_GATHER_NO_MULTI", "TD_GATHER_TOTAL", "TD_GEMM_CONFIGS", "TD_GEMM_SHAPES", "TD_GPU_BIN", "TD_GPU_BUILD",
    "TD_ITERS", "TD_M", "TD_MG_AR_ITERS", "TD_MG_BIN", "TD_MG_BUDGET", "TD_MG_BUILD", "TD_MG_ITERS", "TD_MG_RANKS",
    "TD_MG_TORCH_ITERS", "TD_MG_VARIANTS", "TD_MG_WORK", "TD_MODELS", "TD_NCCL_HOME", "TD_OPS", "TD_OPS7_BUILD",
    "TD_OPS7_DEST", "TD_RANKS", "TD_REST_MODELS", "TD_RUN_TIMEOUT", "TD_SHARED_M", "TD_SHARED_MODELS",
    "TD_SKIP_BENCH", "TD_SKIP_GEMM", "TD_TORCH_ITERS", "TD_TORCH_TIMEOUT", "TD_VARIANTS", "TD_VERIFY_TILES",
    "TD_WARMUP", "TD_X2_TOTAL", "TD_FINAL_W3", "TD_W3_BIN",
};

/* Whether `name` is one tdist knows: a variable of the table, or one of its tools' names. */
static int td__known(const char *name) {
  for (int i = 0; i < TD__NVARS; i++)
    if (!strcmp(td__vars[i].name, name))
      return 1;
  for (size_t i = 0; i < sizeof td__tool_names / sizeof td__tool_names[0]; i++)
    if (!strcmp(td__tool_names[i], name))
      return 1;
  return 0;
}

static const td__cfg_var *td__find(const char *name) {
  for (int i = 0; i < TD__NVARS; i++)
    if (name && strcmp(td__vars[i].name, name) == 0)
      return &td__vars[i];
  return NULL;
}

static td_status td__parse_int(const td__cfg_var *v, const char *text, int64_t *out) {
  errno = 0;
  char *end = NULL;
  /* strtoll skips leading spaces but we refuse trailing ones: refuse both. */
  if (!((*text >= '0' && *text <= '9') || (*text == '-' && text[1] >= '0' && text[1] <= '9')))
    goto bad;
  long long x = strtoll(text, &end, 10);
  int64_t mult = 1;
  if (end == text)
    goto bad;
  if (errno == ERANGE)
    goto range; /* digits too many for any integer: out of range, not malformed */
  if (v->type == TD__CFG_BYTES && *end) {
    switch (*end) {
    case 'k': case 'K': mult = INT64_C(1) << 10; break;
    case 'm': case 'M': mult = INT64_C(1) << 20; break;
    case 'g': case 'G': mult = INT64_C(1) << 30; break;
    default: goto bad;
    }
    end++;
    /* "G", "GB" or "GiB", all powers of 1024; nothing else after the letter
     * (so "1GBB" and "1Gi" are malformed, not 1 GiB). */
    if (end[0] == 'i' && end[1] == 'B')
      end += 2;
    else if (*end == 'B')
      end++;
  }
  if (*end)
    goto bad;
  if (x < 0 || (mult > 1 && x > INT64_MAX / mult))
    goto range;
  x *= mult;
  if (x < v->min || x > v->max)
    goto range;
  if (v->allowed) { /* an integer from a list: "0,1,3,8" */
    for (const char *p = v->allowed; *p;) {
      char *e = NULL;
      long long a = strtoll(p, &e, 10);
      if (e == p)
        break;
      if (a == x) {
        *out = x;
        return TD_OK;
      }
      p = *e == ',' ? e + 1 : e;
    }
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not allowed; allowed: %s", v->name, text, v->allowed);
  }
  *out = x;
  return TD_OK;
bad:
  if (v->type == TD__CFG_BYTES)
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not a byte count (digits with an optional K, M or G suffix, "
                     "also written KB or KiB: powers of 1024; no spaces)", v->name, text);
  /* what is allowed, as a value out of range is told it */
  if (v->allowed)
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not a decimal integer (digits only, no spaces); allowed: %s",
                     v->name, text, v->allowed);
  return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not a decimal integer (digits only, no spaces); allowed %" PRId64
                   " to %" PRId64, v->name, text, v->min, v->max);
range:
  if (v->allowed) /* a list, not every number between its ends: quote the list */
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not allowed; allowed: %s", v->name, text, v->allowed);
  return td__error(TD_ERR_INVALID_ARG, "%s='%s' is out of range; allowed %" PRId64 " to %" PRId64, v->name,
                   text, v->min, v->max);
}

td_status td_config_int(const char *name, int64_t *out) {
  const td__cfg_var *v = td__find(name);
  if (!v || v->type == TD__CFG_STR)
    return td__error(TD_ERR_NOT_FOUND, "'%s' is not an integer variable of the configuration table",
                     name ? name : "(null)");
  const char *text = getenv(v->name);
  if (!text || !*text)
    text = v->def;
  if (!text)
    return td__error(TD_ERR_NOT_FOUND, "%s is not set and has no default", v->name);
  return td__parse_int(v, text, out);
}

td_status td_config_str(const char *name, const char **out) {
  const td__cfg_var *v = td__find(name);
  if (!v || v->type != TD__CFG_STR)
    return td__error(TD_ERR_NOT_FOUND, "'%s' is not a string variable of the configuration table",
                     name ? name : "(null)");
  const char *text = getenv(v->name);
  if (!text || !*text)
    text = v->def;
  if (text && v->allowed) {
    size_t n = strlen(text);
    const char *p = v->allowed;
    int ok = 0;
    while (*p) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      if (len == n && strncmp(p, text, n) == 0)
        ok = 1;
      p += len + (comma ? 1 : 0);
    }
    if (!ok) {
      char near[160];
      if (td__suggest(text, v->allowed, NULL, near, sizeof near))
        return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not allowed; allowed: %s (did you mean %s?)", v->name,
                         text, v->allowed, near);
      return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not allowed; allowed: %s", v->name, text, v->allowed);
    }
  }
  const char *allowed = text && *text && v->check ? v->check(text) : NULL;
  if (allowed)
    return td__error(TD_ERR_INVALID_ARG, "%s='%s' is not allowed; allowed: %s", v->name, text, allowed);
  *out = text;
  return TD_OK;
}

void td_config_dump(FILE *out) {
  for (int i = 0; i < TD__NVARS; i++) {
    const char *env = getenv(td__vars[i].name);
    /* An empty value reads as unset everywhere (the default applies): say so, not "(set)". */
    int empty = env && !*env;
    fprintf(out, "%-24s %-10s default=%-8s %s%s%s\n    %s\n", td__vars[i].name,
            empty ? "(empty)" : env ? "(set)" : "(unset)", td__vars[i].def ? td__vars[i].def : "-",
            empty ? "value='' (empty: treated as unset, the default applies)" : env ? "value=" : "",
            env && !empty ? env : "", "", td__vars[i].desc);
  }
}

extern char **environ;

/* The "did you mean" of an unknown name: the table names within one edit of
 * the closest (and within 3), closest first, at most 3 ("TD_OPS_FUSED_TALE":
 * TILE at 1 edit, TAIL at 2; naming only the closest would point at the
 * wrong one). Empty when none. */
static void td__suggest_names(const char *name, char *buf, size_t cap) {
  size_t used = 0, shown = 0, best = 4;
  buf[0] = 0;
  for (int i = 0; i < TD__NVARS; i++) {
    size_t d = td__edit_distance(name, td__vars[i].name);
    if (d < best)
      best = d;
  }
  for (size_t d = best; d < 4 && d <= best + 1 && shown < 3; d++)
    for (int i = 0; i < TD__NVARS && shown < 3; i++)
      if (td__edit_distance(name, td__vars[i].name) == d) {
        int w = snprintf(buf + used, cap - used, "%s%s", shown ? " or " : "", td__vars[i].name);
        if (w < 0 || (size_t)w >= cap - used)
          return;
        used += (size_t)w, shown++;
      }
}

/* The unknown TD_* names of the environment starting with `prefix`, as td_config_unknown. */
static int td__unknown(FILE *out, const char *prefix) {
  int count = 0;
  const size_t pl = strlen(prefix);
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    if (len < 4 || strncmp(*e, "TD_", 3) != 0 || len > 63 || len < pl || strncmp(*e, prefix, pl) != 0)
      continue;
    char name[64];
    memcpy(name, *e, len);
    name[len] = 0;
    if (td__known(name))
      continue;
    count++;
    if (out) {
      char near[200];
      td__suggest_names(name, near, sizeof near);
      if (near[0])
        fprintf(out, "%s (not a tdist variable; did you mean %s?)\n", name, near);
      else
        fprintf(out, "%s (not a tdist variable)\n", name);
    }
  }
  return count;
}

int td_config_unknown(FILE *out) { return td__unknown(out, "TD_"); }

int td_config_warn_unknown(FILE *out, const char *who) {
  static atomic_int warned;
  if (!out || atomic_exchange(&warned, 1))
    return 0;
  int count = 0;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    /* an empty value reads as unset everywhere: a misspelt name holding nothing changes nothing */
    if (len < 4 || len > 63 || strncmp(*e, "TD_", 3) != 0 || !eq || !eq[1])
      continue;
    char name[64], near[200];
    memcpy(name, *e, len);
    name[len] = 0;
    if (td__known(name))
      continue;
    td__suggest_names(name, near, sizeof near);
    fprintf(out, "%s%swarning: %s is not a tdist variable and is ignored%s%s%s (`tdist doctor` lists them)\n",
            who ? who : "", who ? ": " : "", name, near[0] ? "; did you mean " : "", near, near[0] ? "?" : "");
    count++;
  }
  return count;
}

/* The names under `prefix` (longer than "TD_"), set to a non-empty value, that the table does not have; the
 * first one into first[64]. One rule for td_config_check_prefix, which refuses them, and td_config_unknown_set,
 * which doctor counts them with (an empty value reads as unset, so it is no typo in use). */
static int td__unknown_set(const char *prefix, char *first) {
  const size_t n = strlen(prefix);
  int count = 0;
  for (char **e = environ; n > 3 && e && *e; e++) {
    const char *eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    if (len < n || len > 63 || strncmp(*e, prefix, n) != 0 || (eq && !eq[1]))
      continue;
    char name[64];
    memcpy(name, *e, len);
    name[len] = 0;
    if (td__known(name))
      continue;
    if (!count++)
      memcpy(first, name, len + 1);
  }
  return count;
}

int td_config_unknown_set(const char *prefix) {
  char first[64];
  return prefix ? td__unknown_set(prefix, first) : 0;
}

td_status td_config_check_prefix(const char *prefix) {
  if (!prefix)
    return td__error(TD_ERR_INVALID_ARG, "td_config_check_prefix: prefix is NULL");
  const size_t n = strlen(prefix);
  /* a name under the prefix that is not in the table is a typo of one that is (the prefix is ours) */
  char typo[64], near[200];
  if (td__unknown_set(prefix, typo)) {
    td__suggest_names(typo, near, sizeof near);
    return td__error(TD_ERR_INVALID_ARG, "%s is not a tdist variable%s%s%s (`tdist doctor` lists them)", typo,
                     near[0] ? "; did you mean " : "", near, near[0] ? "?" : "");
  }
  for (int i = 0; i < TD__NVARS; i++) {
    const char *name = td__vars[i].name, *sv = NULL, *set = getenv(name);
    if (strncmp(name, prefix, n) != 0 || !set || !*set)
      continue;
    int64_t iv = 0;
    TD_CHECK(td__vars[i].type == TD__CFG_STR ? td_config_str(name, &sv) : td_config_int(name, &iv));
  }
  return TD_OK;
}

int td_config_check_all(FILE *out) {
  int bad = 0;
  for (int i = 0; i < TD__NVARS; i++) {
    const char *name = td__vars[i].name, *sv = NULL;
    const char *set = getenv(name);
    if (!set || !*set)
      continue; /* defaults are checked by the table's own tests */
    int64_t iv = 0;
    td_status st = td__vars[i].type == TD__CFG_STR ? td_config_str(name, &sv) : td_config_int(name, &iv);
    if (st != TD_OK) {
      bad++;
      if (out)
        fprintf(out, "%s\n", td_last_error());
    }
  }
  return bad;
}
