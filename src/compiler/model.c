/* SPDX-License-Identifier: Apache-2.0
 * Compiler: the perf model. Alpha-beta for communication (a chunk put costs
 * alpha + bytes / beta), a roofline for compute (a GEMM tile costs
 * 2mnk / flops, an element-wise tile bytes / memory bandwidth), plus a fixed
 * executor cost per task. The constants come from `tdist calibrate`
 * ($TD_CACHE_DIR/calibration.json or ~/.cache/tdist/calibration.json); the
 * built-in defaults are conservative numbers for one core of a current x86
 * server, so nothing needs calibrating to work. From them the compiler picks
 * worker counts, chunks per rank, tile sizes and the one-shot all-reduce
 * threshold; explain uses them to predict a timeline. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler/compiler.h"
#include "core/error.h"
#include "core/file.h"
#ifdef TD_HAVE_CUDA_EXEC
#include "exec/cuda/gemm_target.h"
#endif

static void td__model_defaults(td_perf_model *m) {
  m->alpha_s = 5e-6;
  m->beta_bytes_s = 4e9;
  m->flops_s = 2e10;
  m->mem_bytes_s = 5e9;
  m->task_overhead_s = 3e-6;
  m->cores = 0;
  m->transcendental_s = 1e-8;
}

static int td__calib_path(char *path, size_t size, int make_dirs) {
  const char *dir = getenv("TD_CACHE_DIR");
  char buf[512];
  if (dir && *dir) {
    snprintf(buf, sizeof buf, "%s", dir);
  } else {
    const char *home = getenv("HOME");
    if (!home || !*home)
      return 0;
    snprintf(buf, sizeof buf, "%s/.cache", home);
    if (make_dirs)
      mkdir(buf, 0755);
    snprintf(buf, sizeof buf, "%s/.cache/tdist", home);
  }
  if (make_dirs)
    mkdir(buf, 0755);
  snprintf(path, size, "%s/calibration.json", buf);
  return 1;
}

int td__perf_model_path(char *path, size_t size) { return td__calib_path(path, size, 0); }

/* Sane ranges of the calibration constants: a value outside is a broken or
 * hand-edited file (a flops_s of 1e-300 made every predicted time infinite).
 * Wide enough for one CPU core up to a whole GPU. */
static const struct {
  const char *key;
  size_t off;
  double lo, hi;
} td__calib_keys[] = {
    {"alpha_s", offsetof(td_perf_model, alpha_s), 1e-9, 1.0},
    {"beta_bytes_s", offsetof(td_perf_model, beta_bytes_s), 1e3, 1e14},
    {"flops_s", offsetof(td_perf_model, flops_s), 1e3, 1e17},
    {"mem_bytes_s", offsetof(td_perf_model, mem_bytes_s), 1e3, 1e14},
    {"task_overhead_s", offsetof(td_perf_model, task_overhead_s), 1e-10, 1.0},
    {"transcendental_s", offsetof(td_perf_model, transcendental_s), 0.0, 1e-3},
};

/* The line (from 1) of the index-th key (from 0) of the top-level object in
 * the JSON text, in file order (cJSON keeps an object's members, duplicates
 * too, in that order); 0 when not found. Strings are skipped with their
 * escapes, so a key or value holding braces or quotes does not confuse it. */
static int td__json_key_line(const char *text, int index) {
  int line = 1, depth = 0, seen = 0;
  for (const char *p = text; *p; p++) {
    if (*p == '\n') {
      line++;
    } else if (*p == '{' || *p == '[') {
      depth++;
    } else if (*p == '}' || *p == ']') {
      depth--;
    } else if (*p == '"') {
      int at = line;
      for (p++; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1])
          p++;
        else if (*p == '\n')
          line++;
      }
      if (!*p)
        return 0;
      const char *q = p + 1;
      while (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')
        q++;
      if (depth == 1 && *q == ':' && seen++ == index)
        return at;
    }
  }
  return 0;
}

/* The keys a calibration file may hold: the constants of td__calib_keys and "cores". */
static int td__calib_key_known(const char *key) {
  if (!strcmp(key, "cores"))
    return 1;
  for (size_t i = 0; i < sizeof td__calib_keys / sizeof td__calib_keys[0]; i++)
    if (!strcmp(key, td__calib_keys[i].key))
      return 1;
  return 0;
}

/* Refuses a key the model does not have (a misspelt one, "flop_s", was
 * ignored and its default used without a word) or a key given twice (the
 * first one won), naming the key, the file and line and the allowed keys. */
static td_status td__calib_check_keys(const cJSON *j, const char *text, const char *path) {
  int index = 0;
  for (const cJSON *it = j->child; it; it = it->next, index++) {
    const char *key = it->string ? it->string : "";
    int twice = 0;
    for (const cJSON *e = j->child; e != it && !twice; e = e->next)
      twice = e->string && !strcmp(e->string, key);
    if (td__calib_key_known(key) && !twice)
      continue;
    char allowed[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < sizeof td__calib_keys / sizeof td__calib_keys[0]; i++)
      len += (size_t)snprintf(allowed + len, sizeof allowed - len, "%s, ", td__calib_keys[i].key);
    snprintf(allowed + len, sizeof allowed - len, "cores");
    int line = td__json_key_line(text, index);
    char where[640];
    if (line > 0)
      snprintf(where, sizeof where, "%s:%d", path, line);
    else
      snprintf(where, sizeof where, "%s", path);
    if (twice)
      return td__error(TD_ERR_INVALID_ARG, "calibration file %s: key '%s' given twice (the first one would win "
                       "without a word); give each key once; fix it, delete it or run `tdist calibrate`", where, key);
    return td__error(TD_ERR_INVALID_ARG, "calibration file %s: unknown key '%s'; allowed keys: %s; fix it, delete "
                     "it or run `tdist calibrate`", where, key, allowed);
  }
  return TD_OK;
}

/* Reads the calibration file into m (defaults first). strict: refuse a file
 * that does not parse, a key it does not know (or one given twice) or a value
 * out of range; else skip such keys and values. */
static td_status td__model_read(td_perf_model *m, int strict) {
  td__model_defaults(m);
  char path[600];
  if (!td__calib_path(path, sizeof path, 0))
    return TD_OK;
  FILE *f = fopen(path, "rb");
  if (!f) { /* no file: the defaults; one that exists but cannot be read is the user's to fix, not to ignore */
    if (errno == ENOENT || errno == ENOTDIR || !strict)
      return TD_OK;
    return td__error(TD_ERR_INVALID_ARG, "calibration file '%s' cannot be read: %s; fix its permissions, remove "
                     "it, or set TD_CACHE_DIR to another folder", path, strerror(errno));
  }
  /* fopen takes a directory and reading it gives nothing: say what it is, not "not a JSON object" */
  const char *kind = td__fd_not_a_file(fileno(f));
  if (kind) {
    fclose(f);
    return strict ? td__error(TD_ERR_INVALID_ARG, "calibration file '%s' is %s, expected a file; remove it, or "
                              "set TD_CACHE_DIR to another folder", path, kind)
                  : TD_OK;
  }
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, f);
  int more = fgetc(f) != EOF;
  fclose(f);
  text[n] = 0;
  cJSON *j = more ? NULL : cJSON_Parse(text);
  if (!j || !cJSON_IsObject(j)) {
    cJSON_Delete(j);
    return strict ? td__error(TD_ERR_INVALID_ARG, "calibration file '%s': %s; fix it, delete it or run "
                              "`tdist calibrate`", path, more ? "larger than 4 KiB" : "not a JSON object")
                  : TD_OK;
  }
  td_status st = strict ? td__calib_check_keys(j, text, path) : TD_OK;
  for (size_t i = 0; i < sizeof td__calib_keys / sizeof td__calib_keys[0] && st == TD_OK; i++) {
    cJSON *it = cJSON_GetObjectItemCaseSensitive(j, td__calib_keys[i].key);
    if (!it)
      continue;
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    double lo = td__calib_keys[i].lo, hi = td__calib_keys[i].hi;
    if (v >= lo && v <= hi) /* false for NaN */
      *(double *)((char *)m + td__calib_keys[i].off) = v;
    else if (strict) {
      char val[40] = "not a number";
      if (cJSON_IsNumber(it))
        snprintf(val, sizeof val, "%g", v);
      st = td__error(TD_ERR_INVALID_ARG, "calibration file '%s': %s is %s; allowed: a number in [%g, %g]; "
                     "fix it, delete it or run `tdist calibrate`", path, td__calib_keys[i].key, val, lo, hi);
    }
  }
  cJSON *cores = cJSON_GetObjectItemCaseSensitive(j, "cores");
  if (st == TD_OK && cores) {
    double v = cJSON_IsNumber(cores) ? cores->valuedouble : NAN;
    if (v >= 0 && v <= 1e5 && v == (double)(int)v) /* 0: detect */
      m->cores = (int)v;
    else if (strict) {
      char val[40] = "not a number";
      if (cJSON_IsNumber(cores))
        snprintf(val, sizeof val, "%g", v);
      st = td__error(TD_ERR_INVALID_ARG, "calibration file '%s': cores is %s; allowed: an integer in "
                     "[0, 100000] (0 = detect); fix it, delete it or run `tdist calibrate`", path, val);
    }
  }
  cJSON_Delete(j);
  if (st != TD_OK)
    td__model_defaults(m);
  return st;
}

void td_perf_model_load(td_perf_model *m) { (void)td__model_read(m, 0); }

td_status td_perf_model_load_checked(td_perf_model *m) {
  if (!m)
    return td__error(TD_ERR_INVALID_ARG, "td_perf_model_load_checked: model is NULL");
  td_perf_model tmp;
  TD_CHECK(td__model_read(&tmp, 1));
  *m = tmp;
  return TD_OK;
}

td_status td_perf_model_save(const td_perf_model *m, char *path_out, size_t path_size) {
  char path[600];
  if (!m)
    return td__error(TD_ERR_INVALID_ARG, "perf model save: model is NULL");
  if (!td__calib_path(path, sizeof path, 1))
    return td__error(TD_ERR_SYSTEM, "perf model save: neither TD_CACHE_DIR nor HOME is set");
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "alpha_s", m->alpha_s);
  cJSON_AddNumberToObject(j, "beta_bytes_s", m->beta_bytes_s);
  cJSON_AddNumberToObject(j, "flops_s", m->flops_s);
  cJSON_AddNumberToObject(j, "mem_bytes_s", m->mem_bytes_s);
  cJSON_AddNumberToObject(j, "task_overhead_s", m->task_overhead_s);
  cJSON_AddNumberToObject(j, "cores", m->cores);
  cJSON_AddNumberToObject(j, "transcendental_s", m->transcendental_s);
  const char *kind = td__path_not_a_file(path);
  if (kind) {
    cJSON_Delete(j);
    return td__error(TD_ERR_INVALID_ARG, "perf model save: calibration file '%s' is %s, expected a file; remove "
                     "it, or set TD_CACHE_DIR to another folder", path, kind);
  }
  char *text = cJSON_Print(j);
  cJSON_Delete(j);
  FILE *f = text ? fopen(path, "wb") : NULL;
  int ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0)
    ok = 0;
  free(text);
  if (!ok)
    return td__error(TD_ERR_SYSTEM, "perf model save: cannot write '%s': %s", path, strerror(errno));
  if (path_out)
    snprintf(path_out, path_size, "%s", path);
  return TD_OK;
}

static int64_t td__round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* cuda with the Hopper GEMM: each GEMM task is a whole row block (one per
 * gathered chunk for AG -> GEMM, one per destination rank for GEMM -> RS),
 * run as one kernel on the executor's kernel queue, and so is every other
 * compute task; one chunk per rank part unless asked. Only when the caller
 * left the tile sizes to the model (explicit tiles keep the fine-tile plan). */
static void td__model_gemm_queue(td__lower *L, int64_t max_rows) {
  memset(&L->gq, 0, sizeof L->gq);
  if (!L->o.backend_cuda)
    return;
  if (L->o.tile_rows || L->o.tile_cols) {
    snprintf(L->gq.why, sizeof L->gq.why, "tile sizes were given");
    return;
  }
#ifdef TD_HAVE_CUDA_EXEC
  td__cuda_gemm_target t;
  td__cuda_gemm_target_get(&t);
  snprintf(L->gq.gpu, sizeof L->gq.gpu, "%s", t.gpu);
  snprintf(L->gq.why, sizeof L->gq.why, "%s", t.why);
  if (!t.queue)
    return;
  L->gq.on = 1;
  /* One rank's part of the largest value: coarse, and never two parts in one (td__merge_blocks). */
  L->tile_rows = td__round_up((max_rows + L->n - 1) / L->n, 8);
  L->tile_cols = 0;
  if (!L->o.chunks_per_rank)
    L->chunks = 1;
  if (!L->o.compute_workers)
    L->compute_workers = 1;
#else
  (void)max_rows;
  snprintf(L->gq.why, sizeof L->gq.why, "this build has no CUDA executor");
#endif
}

void td__model_choose(td__lower *L) {
  const td_perf_model *m = &L->model;
  const td_program *p = L->p;
  int n = L->n;
  int cores = m->cores > 0 ? m->cores : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1)
    cores = 1;
  L->compute_workers = L->o.compute_workers ? L->o.compute_workers : (cores / n > 1 ? cores / n : 1);
  if (!L->o.compute_workers && L->compute_workers > 1024) /* td_exec_create's limit: more cores than it takes */
    L->compute_workers = 1024;
  L->comm_workers = L->o.comm_workers ? L->o.comm_workers : 1;
  /* Largest per-rank part moved by a collective, and the largest GEMM. */
  double part_bytes = 0, gemm_nk = 0;
  int64_t max_rows = 1;
  for (td_value v = 0; v < p->nvals; v++) {
    const td__val *V = &p->vals[v];
    int64_t R, C;
    td__val_shape(p, v, &R, &C);
    if (R > max_rows && V->op != TD_OP_INPUT && V->op != TD_OP_WEIGHT)
      max_rows = R;
    double bytes = (double)R * (double)C * (double)td_dtype_size(V->dtype) / n;
    if (V->op >= TD_OP_ALL_GATHER && V->op <= TD_OP_ALL_TO_ALL && bytes > part_bytes)
      part_bytes = bytes;
    if (V->op == TD_OP_MATMUL) {
      int64_t ar, ac;
      td__val_shape(p, V->in[0], &ar, &ac);
      double k = (V->flags & TD_MATMUL_TRANSPOSE_A) ? (double)ar : (double)ac;
      double nk = (double)C * k / (V->layout.kind == TD_LAYOUT_PARTIAL ? n : 1);
      if (V->layout.kind == TD_LAYOUT_SHARD && V->layout.dim == 1)
        nk /= n;
      if (nk > gemm_nk)
        gemm_nk = nk;
    }
  }
  /* Chunks: each piece long enough that alpha is under ~10% of its time. */
  double min_piece = 10.0 * m->alpha_s * m->beta_bytes_s;
  if (min_piece < 64.0 * 1024)
    min_piece = 64.0 * 1024;
  int chunks = (int)(part_bytes / min_piece);
  /* When moving a rank's part costs under 5% of the GEMM work on that part,
   * cutting it finer can hide almost nothing more, while every extra chunk
   * costs tasks and smaller GEMM tiles (on cpu each OpenBLAS call repacks its
   * B operand: 4 calls instead of 1 cost 5-15% more, docs/perf.md). Then one
   * chunk per rank, and GEMM tiles as large as a worker's share of the
   * rows: the compiler still starts on the local chunk and merges the rest. */
  double part_rows = (double)max_rows / n;
  double comm_s = m->alpha_s + part_bytes / m->beta_bytes_s, gemm_s = 2.0 * part_rows * gemm_nk / m->flops_s;
  int negligible = !L->o.backend_cuda && part_bytes > 0 && comm_s < 0.05 * gemm_s;
  if (negligible)
    chunks = 1;
  /* And with more threads than cores (ranks x (compute + comm workers)), a
   * comm worker has no core of its own: each of its tasks waits for a compute
   * worker's time slice (seen as 0.1-0.2 ms hand-offs at each collective on
   * the main job) while there is nothing worth hiding. Then every task runs on
   * the compute workers in schedule order (a topological order that every
   * rank emits alike, so single-queue execution cannot deadlock: a wait is
   * always on a raise that its peer emits earlier in the same collective). */
  L->one_queue = negligible && !L->o.comm_workers && n * (L->compute_workers + 1) > cores;
  if (L->one_queue)
    L->comm_workers = 0;
  L->chunks = L->o.chunks_per_rank ? L->o.chunks_per_rank : (chunks < 1 ? 1 : chunks > 4 ? 4 : chunks);
  /* Tile rows: at least ~20 task overheads of work per GEMM tile, and enough
   * tiles per chunk to keep every compute worker busy. */
  int64_t tr;
  if (L->o.tile_rows) {
    tr = L->o.tile_rows;
  } else if (negligible) {
    tr = td__round_up((max_rows + L->compute_workers - 1) / L->compute_workers, 8);
    if (tr > 4096)
      tr = 4096;
  } else {
    int64_t per_chunk = (max_rows + (int64_t)n * L->chunks - 1) / ((int64_t)n * L->chunks);
    tr = td__round_up((per_chunk + L->compute_workers - 1) / L->compute_workers, 8);
    int64_t floor_rows = gemm_nk > 0 ? (int64_t)(10.0 * m->task_overhead_s * m->flops_s / gemm_nk) : 8;
    if (tr < floor_rows)
      tr = td__round_up(floor_rows, 8);
    if (tr < 8)
      tr = 8;
    if (tr > 512)
      tr = 512;
  }
  L->tile_rows = tr;
  L->tile_cols = L->o.tile_cols;
  td__model_gemm_queue(L, max_rows);
  /* One-shot all-reduce while its one step of n-1 puts beats 2(n-1) steps. */
  if (L->o.one_shot_bytes >= 0) {
    L->one_shot_bytes = L->o.one_shot_bytes;
  } else if (n <= 2) {
    L->one_shot_bytes = 256 * 1024;
  } else {
    double ab = m->alpha_s * m->beta_bytes_s;
    L->one_shot_bytes = (int64_t)(ab * (2.0 * n - 3) / ((n - 1) * (1.0 - 2.0 / n)));
  }
}

double td__model_task_seconds(const td_perf_model *m, const td_plan *plan, const td_task *t) {
  const td_buffer_desc *c = t->c.buf >= 0 ? td_plan_buffer(plan, t->c.buf) : NULL;
  double es = c ? (double)td_dtype_size(c->dtype) : 4.0;
  double elems = (double)t->c.rows * (double)t->c.cols;
  double s = m->task_overhead_s;
  switch (t->kind) {
  case TD_TASK_GEMM: {
    double k = (t->op & TD_GEMM_TRANS_A) ? (double)t->a.rows : (double)t->a.cols;
    s += 2.0 * elems * k / m->flops_s;
    if (t->op & TD_GEMM_GELU) /* the fused epilogue */
      s += elems * m->transcendental_s;
    break;
  }
  case TD_TASK_COPY:
    if (t->c.peer != TD_PEER_SELF || t->a.peer != TD_PEER_SELF || t->raise_count)
      s += m->alpha_s + elems * es / m->beta_bytes_s;
    else
      s += 2.0 * elems * es / m->mem_bytes_s;
    break;
  case TD_TASK_EWISE:
    if (t->op == TD_EW_GELU || t->op == TD_EW_SILU)
      s += elems * m->transcendental_s;
    s += 3.0 * elems * es / m->mem_bytes_s;
    break;
  case TD_TASK_REDUCE:
  case TD_TASK_RMSNORM:
    s += 3.0 * elems * es / m->mem_bytes_s;
    break;
  default:
    break;
  }
  return s;
}
