/* SPDX-License-Identifier: Apache-2.0
 * GEMM tile tuning (tiles layer, cuda backend): times every compiled
 * configuration on one shape and keeps the best per (GPU, dtype, B layout,
 * shape class) in a JSON file in the cache directory ($TD_CACHE_DIR, else
 * ~/.cache/tdist), which `tdist tune gemm` writes and the launchers' callers
 * (compiler, `tdist run`) read through td__gemm_tune_lookup.
 *
 * The cache file is small and rewritten whole: read, replace or add the
 * entry, write to a temporary file in the same directory, rename over the
 * old one, so a reader never sees half a file. A file that does not parse is
 * treated as empty and replaced. */
#include <cjson/cJSON.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "gemm.h"

static unsigned td__bucket(int v) {
  unsigned b = 64;
  while (b < (unsigned)v && b < (1u << 30))
    b <<= 1;
  return b;
}

void td__gemm_shape_class(int m, int n, int k, char *buf, size_t cap) {
  snprintf(buf, cap, "m%u_n%u_k%u", td__bucket(m), td__bucket(n), td__bucket(k));
}

td_status td__gemm_tune_cache_path(char *buf, size_t cap) {
  const char *dir = getenv("TD_CACHE_DIR");
  char tmp[4096];
  if (!dir || !*dir) {
    const char *home = getenv("HOME");
    if (!home || !*home)
      return td__error(TD_ERR_INVALID_ARG,
                       "gemm tune: neither TD_CACHE_DIR nor HOME is set; set TD_CACHE_DIR");
    snprintf(tmp, sizeof tmp, "%s/.cache/tdist", home);
    dir = tmp;
  }
  /* mkdir -p */
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
    return td__error(TD_ERR_INVALID_ARG, "gemm tune: cache directory path is too long");
  for (char *p = path + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return td__error(TD_ERR_SYSTEM, "gemm tune: cannot create %s: %s", path, strerror(errno));
    *p = '/';
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST)
    return td__error(TD_ERR_SYSTEM, "gemm tune: cannot create cache directory %s: %s", path,
                     strerror(errno));
  if (snprintf(buf, cap, "%s/gemm-tune.json", path) >= (int)cap)
    return td__error(TD_ERR_INVALID_ARG, "gemm tune: cache file path is too long");
  return TD_OK;
}

static void td__key(char *buf, size_t cap, const char *gpu, td_dtype dtype, int layout, int m, int n,
                    int k) {
  char cls[64];
  td__gemm_shape_class(m, n, k, cls, sizeof cls);
  snprintf(buf, cap, "%s|%s|%s|%s", gpu, td_dtype_name(dtype), layout == TD_GEMM_B_KN ? "kn" : "nk",
           cls);
}

/* The cache's entries array (a new empty document when absent or unreadable). */
static cJSON *td__load(const char *path) {
  FILE *f = fopen(path, "rb");
  cJSON *doc = NULL;
  if (f) {
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (len > 0 && len < (16 << 20)) {
      char *text = malloc((size_t)len + 1);
      if (text && fread(text, 1, (size_t)len, f) == (size_t)len) {
        text[len] = 0;
        doc = cJSON_Parse(text);
      }
      free(text);
    }
    fclose(f);
  }
  if (!doc || !cJSON_IsArray(cJSON_GetObjectItem(doc, "entries"))) {
    cJSON_Delete(doc);
    doc = cJSON_CreateObject();
    cJSON_AddNumberToObject(doc, "version", 1);
    cJSON_AddArrayToObject(doc, "entries");
  }
  return doc;
}

td_status td__gemm_tune_store(const char *gpu, td_dtype dtype, int layout, int m, int n, int k,
                              const td_gemm_config *cfg, double tflops) {
  if (!gpu || !cfg)
    return td__error(TD_ERR_INVALID_ARG, "gemm tune: gpu name and config must not be NULL");
  char path[4200], tmp[4300], key[512];
  TD_CHECK(td__gemm_tune_cache_path(path, sizeof path));
  td__key(key, sizeof key, gpu, dtype, layout, m, n, k);
  cJSON *doc = td__load(path), *entries = cJSON_GetObjectItem(doc, "entries");
  int n_entries = cJSON_GetArraySize(entries);
  for (int i = n_entries - 1; i >= 0; i--) {
    cJSON *key_item = cJSON_GetObjectItem(cJSON_GetArrayItem(entries, i), "key");
    if (cJSON_IsString(key_item) && !strcmp(key_item->valuestring, key))
      cJSON_DeleteItemFromArray(entries, i);
  }
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "key", key);
  cJSON_AddNumberToObject(e, "m", m);
  cJSON_AddNumberToObject(e, "n", n);
  cJSON_AddNumberToObject(e, "k", k);
  cJSON_AddNumberToObject(e, "arch", cfg->arch);
  cJSON_AddNumberToObject(e, "bm", cfg->bm);
  cJSON_AddNumberToObject(e, "bn", cfg->bn);
  cJSON_AddNumberToObject(e, "bk", cfg->bk);
  cJSON_AddNumberToObject(e, "stages", cfg->stages);
  cJSON_AddNumberToObject(e, "cluster", cfg->cluster);
  cJSON_AddNumberToObject(e, "group_m", cfg->group_m);
  cJSON_AddNumberToObject(e, "split_k", cfg->split_k);
  cJSON_AddNumberToObject(e, "tflops", tflops);
  cJSON_AddItemToArray(entries, e);
  char *text = cJSON_Print(doc);
  cJSON_Delete(doc);
  if (!text)
    return td__error(TD_ERR_NO_MEMORY, "gemm tune: out of memory writing the cache");
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    free(text);
    return td__error(TD_ERR_SYSTEM, "gemm tune: cannot write %s: %s", tmp, strerror(errno));
  }
  size_t len = strlen(text);
  int ok = fwrite(text, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  free(text);
  if (!ok || rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return td__error(TD_ERR_SYSTEM, "gemm tune: cannot replace %s: %s", path, strerror(err));
  }
  return TD_OK;
}

td_status td__gemm_tune_lookup(const char *gpu, td_dtype dtype, int layout, int m, int n, int k,
                               td_gemm_config *out) {
  if (!gpu || !out)
    return td__error(TD_ERR_INVALID_ARG, "gemm tune: gpu name and output must not be NULL");
  char path[4200], key[512];
  TD_CHECK(td__gemm_tune_cache_path(path, sizeof path));
  td__key(key, sizeof key, gpu, dtype, layout, m, n, k);
  cJSON *doc = td__load(path), *entries = cJSON_GetObjectItem(doc, "entries"), *e;
  int found = 0;
  cJSON_ArrayForEach(e, entries) {
    cJSON *key_item = cJSON_GetObjectItem(e, "key");
    if (!cJSON_IsString(key_item) || strcmp(key_item->valuestring, key))
      continue;
    const char *names[] = {"arch", "bm", "bn", "bk", "stages", "cluster", "group_m", "split_k"};
    int v[8];
    int ok = 1;
    for (int i = 0; i < 8; i++) {
      cJSON *x = cJSON_GetObjectItem(e, names[i]);
      ok = ok && cJSON_IsNumber(x);
      v[i] = ok ? x->valueint : 0;
    }
    if (!ok)
      continue;
    td_gemm_config c = {(td_gemm_arch)v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    *out = c;
    found = 1;
  }
  cJSON_Delete(doc);
  if (!found)
    return td__error(TD_ERR_NOT_FOUND, "gemm tune: no entry for %s in %s (run `tdist tune gemm`)",
                     key, path);
  return TD_OK;
}

/* ---- the search ---- */

static td_status td__cuda(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return TD_OK;
  return td__error(TD_ERR_CUDA, "gemm tune: %s failed: %s", what, cudaGetErrorString(err));
}

static void td__fill(uint16_t *p, size_t count, td_dtype dtype, uint64_t seed) {
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (size_t i = 0; i < count; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)((x >> 40) & 0xffffff) / 8388608.0f - 1.0f;
    p[i] = dtype == TD_BF16 ? td_f32_to_bf16(v) : td_f32_to_f16(v);
  }
}

td_status td__gemm_tune(td_gemm_arch arch, td_dtype dtype, int layout, int m, int n, int k,
                        int iters, td_gemm_tune_progress progress, void *user,
                        td_gemm_config *best, double *best_tflops) {
  if (m < 1 || n < 1 || k < 1 || iters < 1 || !best || !best_tflops)
    return td__error(TD_ERR_INVALID_ARG,
                     "gemm tune: M=%d N=%d K=%d iters=%d: sizes and iters must be >= 1 and the "
                     "outputs not NULL",
                     m, n, k, iters);
  td_gemm_config cfgs[128];
  int count = td__gemm_cuda_configs(arch, dtype, layout, cfgs, 128);
  if (count > 128)
    count = 128;
  if (count == 0)
    return td__error(TD_ERR_UNSUPPORTED, "gemm tune: no sm_%d kernels compiled for %s", (int)arch,
                     td_dtype_name(dtype));
  if (count == 128)
    count = 127;
  /* cuBLAS competes too: where it wins, hook-free launches take it */
  cfgs[count++] = (td_gemm_config){TD_GEMM_CUBLAS, 0, 0, 0, 0, 1, 0, 1};
  size_t na = (size_t)m * k, nb = (size_t)n * k, nc = (size_t)m * n;
  uint16_t *host = malloc((na > nb ? na : nb) * 2);
  void *a = NULL, *b = NULL, *c = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  td_status st = host ? TD_OK : td__error(TD_ERR_NO_MEMORY, "gemm tune: out of host memory");
  if (st == TD_OK)
    st = td__cuda(cudaMalloc(&a, na * 2), "cudaMalloc(A)");
  if (st == TD_OK)
    st = td__cuda(cudaMalloc(&b, nb * 2), "cudaMalloc(B)");
  if (st == TD_OK)
    st = td__cuda(cudaMalloc(&c, nc * 2), "cudaMalloc(C)");
  if (st == TD_OK) {
    td__fill(host, na, dtype, 1);
    st = td__cuda(cudaMemcpy(a, host, na * 2, cudaMemcpyHostToDevice), "copy A");
  }
  if (st == TD_OK) {
    td__fill(host, nb, dtype, 2);
    st = td__cuda(cudaMemcpy(b, host, nb * 2, cudaMemcpyHostToDevice), "copy B");
  }
  if (st == TD_OK)
    st = td__cuda(cudaEventCreate(&e0), "cudaEventCreate");
  if (st == TD_OK)
    st = td__cuda(cudaEventCreate(&e1), "cudaEventCreate");
  double top = 0;
  for (int i = 0; st == TD_OK && i < count; i++) {
    td_gemm_problem p = {m, n, k, dtype, layout, a, b, c, NULL};
    td_status rs = TD_OK;
    double ms = 0;
    for (int w = 0; w < 3 && rs == TD_OK; w++) /* warm-up: module load, caches */
      rs = td__gemm_cuda_run(&p, &cfgs[i], 0, NULL, NULL);
    if (rs == TD_OK)
      rs = td__cuda(cudaDeviceSynchronize(), "warm-up");
    if (rs == TD_OK) {
      cudaEventRecord(e0, NULL);
      for (int r = 0; r < iters && rs == TD_OK; r++)
        rs = td__gemm_cuda_run(&p, &cfgs[i], 0, NULL, NULL);
      cudaEventRecord(e1, NULL);
      if (rs == TD_OK)
        rs = td__cuda(cudaEventSynchronize(e1), "timing");
      float t = 0;
      if (rs == TD_OK)
        rs = td__cuda(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
      ms = t / iters;
    }
    double tf = rs == TD_OK && ms > 0 ? 2.0 * m * n * (double)k / ms / 1e9 : 0;
    if (progress)
      progress(user, i, count, &cfgs[i], ms, tf, rs);
    if (rs == TD_ERR_CUDA)
      st = rs; /* a failed launch can leave the context broken: stop */
    else if (rs == TD_OK && tf > top) {
      top = tf;
      *best = cfgs[i];
    }
  }
  if (st == TD_OK && top == 0)
    st = td__error(TD_ERR_UNSUPPORTED, "gemm tune: no configuration ran for M=%d N=%d K=%d", m, n, k);
  if (st == TD_OK)
    *best_tflops = top;
  if (e0)
    cudaEventDestroy(e0);
  if (e1)
    cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  free(host);
  return st;
}
