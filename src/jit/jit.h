/* SPDX-License-Identifier: Apache-2.0
 * Internal: just-in-time compilation of generated CUDA C through NVRTC, with an
 * on-disk cache of the compiled images (JIT layer, used by the CUDA executor).
 *
 * The CUDA executor generates one CUDA C text per plan specialisation (tile
 * sizes, dtypes and task kinds as compile-time constants). td__jit_get turns it
 * into a loadable image (a cubin for the named architecture): from the cache
 * when an intact entry exists, else compiled by NVRTC and stored.
 *
 * Cache layout: $TD_CACHE_DIR (default ~/.cache/tdist) / jit / <key>.cubin, key =
 * 128-bit hash of (source text, architecture, NVRTC version, options). Entries
 * are written to a temporary file, flushed and renamed, so a crash leaves
 * either the old entry or the new one, never half of one. Each entry carries a
 * header (magic, format version, key, payload size and payload hash); an entry
 * whose header, size or hash does not check is removed and rebuilt, never
 * trusted.
 *
 * Thread-safety: every function may be called from several threads and
 * processes at once; concurrent stores of one key race harmlessly (last rename
 * wins; both images are identical). */
#ifndef TD_JIT_JIT_H
#define TD_JIT_JIT_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/status.h"

#define TD__JIT_KEY_CHARS 32 /* hex digits of a cache key; buffers take one more for '\0' */

/** A compiled image. `data` is malloc'ed; free it with td__jit_image_free. */
typedef struct td__jit_image {
  void *data;
  size_t size;
  int from_cache; /* 1 when read from the disk cache, 0 when compiled now */
} td__jit_image;

void td__jit_image_free(td__jit_image *image);

/** 128-bit hash of `n` bytes continuing from state h[2] (start with h = {0, 0}). */
void td__jit_hash(uint64_t h[2], const void *data, size_t n);

/** The cache folder into `buf` (cap bytes): TD_CACHE_DIR or $HOME/.cache/tdist,
 * followed by "/jit". Does not create it. Errors: TD_ERR_INVALID_ARG (buffer too
 * small, or neither TD_CACHE_DIR nor HOME set: message says to set TD_CACHE_DIR). */
td_status td__jit_cache_dir(char *buf, size_t cap);

/** The key of (source, arch, options) for the running NVRTC version, as 32 hex
 * digits plus '\0'. `options` may be NULL when nopts is 0. */
void td__jit_cache_key(const char *source, const char *arch, const char *const *options, int nopts,
                       char key[TD__JIT_KEY_CHARS + 1]);

/** Reads entry `key` of folder `dir`. TD_OK with *out filled when intact;
 * TD_ERR_NOT_FOUND when absent; when present but corrupt (bad magic, version,
 * key, size or payload hash) the entry is deleted, *corrupt set to 1 (if non-NULL)
 * and TD_ERR_NOT_FOUND returned. Errors: TD_ERR_NO_MEMORY, TD_ERR_SYSTEM (read
 * failed for another reason than absence). */
td_status td__jit_cache_load(const char *dir, const char *key, td__jit_image *out, int *corrupt);

/** Writes entry `key` atomically (temporary file in `dir`, fsync, rename),
 * creating `dir` and its parents if needed. Errors: TD_ERR_SYSTEM (message
 * names the path and the system error). */
td_status td__jit_cache_store(const char *dir, const char *key, const void *data, size_t size);

/** The NVRTC version as major*1000 + minor*10 (e.g. 13000); 0 when unavailable. */
int td__jit_nvrtc_version(void);

/** Compiles `source` (CUDA C; `name` appears in messages) for `arch`
 * ("sm_80", "sm_90a", ...) into a cubin. Errors: TD_ERR_INVALID_ARG (NULL
 * source/arch, arch not of the form sm_NN[a]), TD_ERR_CUDA (NVRTC refused the
 * options or the source: the message holds the start of NVRTC's log),
 * TD_ERR_NO_MEMORY. *out written only on success. */
td_status td__jit_compile(const char *source, const char *name, const char *arch,
                          const char *const *options, int nopts, td__jit_image *out);

/** Load-or-compile: looks the key up in the cache folder (td__jit_cache_dir),
 * compiles on a miss or a corrupt entry and stores the result. A cache folder
 * that cannot be written is not an error (the image is still returned).
 * Errors: as td__jit_compile and td__jit_cache_dir. */
td_status td__jit_get(const char *source, const char *name, const char *arch,
                      const char *const *options, int nopts, td__jit_image *out);

#endif
