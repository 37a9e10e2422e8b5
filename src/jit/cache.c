/* SPDX-License-Identifier: Apache-2.0
 * The JIT disk cache (JIT layer): keys, the folder, and crash-safe entries.
 *
 * An entry is a fixed header followed by the compiled image. The header holds a
 * magic string, a format version, the key it was stored under, the image size
 * and a hash of the image; td__jit_cache_load checks all of them and the file
 * size, so a truncated, overwritten or misplaced entry is found, deleted and
 * rebuilt by the caller. Stores go through a temporary file in the same folder,
 * fsync and rename(2), which replaces the name atomically: a reader (another
 * process included) sees the old complete entry or the new complete one. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "jit/jit.h"
#include "tdist/config.h"

#define TD__JIT_MAGIC "TDJITIMG"
#define TD__JIT_FORMAT 1u

typedef struct td__jit_header {
  char magic[8];
  uint32_t format;
  uint32_t header_size;
  uint64_t payload_size;
  uint64_t payload_hash[2];
  char key[TD__JIT_KEY_CHARS + 8]; /* '\0'-padded */
} td__jit_header;

/* Two independent FNV-1a lanes with a final avalanche. Not cryptographic: the
 * cache guards against accidents (crashes, truncation, stale files), not
 * against someone who can already write to the user's cache folder. */
void td__jit_hash(uint64_t h[2], const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t a = h[0] ^ UINT64_C(0xcbf29ce484222325), b = h[1] ^ UINT64_C(0x84222325cbf29ce4);
  for (size_t i = 0; i < n; i++) {
    a = (a ^ p[i]) * UINT64_C(0x100000001b3);
    b = (b ^ p[i]) * UINT64_C(0x00000100000001b3) + UINT64_C(0x9e3779b97f4a7c15);
  }
  a ^= n;
  a ^= a >> 33;
  a *= UINT64_C(0xff51afd7ed558ccd);
  a ^= a >> 33;
  b ^= b >> 29;
  b *= UINT64_C(0xc4ceb9fe1a85ec53);
  b ^= b >> 32;
  h[0] = a ^ UINT64_C(0xcbf29ce484222325);
  h[1] = b ^ UINT64_C(0x84222325cbf29ce4);
}

void td__jit_image_free(td__jit_image *image) {
  if (!image)
    return;
  free(image->data);
  image->data = NULL;
  image->size = 0;
}

td_status td__jit_cache_dir(char *buf, size_t cap) {
  const char *dir = NULL;
  if (td_config_str("TD_CACHE_DIR", &dir) != TD_OK || !dir || !*dir)
    dir = NULL;
  int n;
  if (dir) {
    n = snprintf(buf, cap, "%s/jit", dir);
  } else {
    const char *home = getenv("HOME");
    if (!home || !*home)
      return td__error(TD_ERR_INVALID_ARG,
                       "JIT cache: neither TD_CACHE_DIR nor HOME is set; set TD_CACHE_DIR to a "
                       "writable folder");
    n = snprintf(buf, cap, "%s/.cache/tdist/jit", home);
  }
  if (n < 0 || (size_t)n >= cap)
    return td__error(TD_ERR_INVALID_ARG, "JIT cache: folder path longer than %zu bytes", cap - 1);
  return TD_OK;
}

void td__jit_cache_key(const char *source, const char *arch, const char *const *options, int nopts,
                       char key[TD__JIT_KEY_CHARS + 1]) {
  uint64_t h[2] = {0, 0};
  char version[32];
  snprintf(version, sizeof version, "nvrtc=%d format=%u", td__jit_nvrtc_version(), TD__JIT_FORMAT);
  /* Each part is hashed with its terminating '\0' so ("ab","c") != ("a","bc"). */
  td__jit_hash(h, source, strlen(source) + 1);
  td__jit_hash(h, arch, strlen(arch) + 1);
  td__jit_hash(h, version, strlen(version) + 1);
  for (int i = 0; i < nopts; i++)
    td__jit_hash(h, options[i], strlen(options[i]) + 1);
  snprintf(key, TD__JIT_KEY_CHARS + 1, "%016" PRIx64 "%016" PRIx64, h[0], h[1]);
}

static int td__entry_path(char *buf, size_t cap, const char *dir, const char *key) {
  int n = snprintf(buf, cap, "%s/%s.cubin", dir, key);
  return n > 0 && (size_t)n < cap;
}

td_status td__jit_cache_load(const char *dir, const char *key, td__jit_image *out, int *corrupt) {
  char path[4096];
  if (corrupt)
    *corrupt = 0;
  if (!dir || !key || !out || !td__entry_path(path, sizeof path, dir, key))
    return td__error(TD_ERR_INVALID_ARG, "JIT cache load: NULL argument or path too long");
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR)
      return TD_ERR_NOT_FOUND;
    return td__error(TD_ERR_SYSTEM, "JIT cache: cannot open %s: %s", path, strerror(errno));
  }
  td__jit_header hd;
  const char *fault = NULL;
  void *data = NULL;
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || fread(&hd, sizeof hd, 1, f) != 1)
    fault = "shorter than its header";
  else if (memcmp(hd.magic, TD__JIT_MAGIC, 8) != 0)
    fault = "bad magic";
  else if (hd.format != TD__JIT_FORMAT || hd.header_size != sizeof hd)
    fault = "other format version";
  else if (strncmp(hd.key, key, sizeof hd.key) != 0)
    fault = "stored under another key";
  else if ((uint64_t)st.st_size != sizeof hd + hd.payload_size || hd.payload_size == 0)
    fault = "size differs from its header";
  if (!fault) {
    data = malloc(hd.payload_size);
    if (!data) {
      fclose(f);
      return td__error(TD_ERR_NO_MEMORY, "JIT cache: no memory for a %" PRIu64 "-byte image",
                       hd.payload_size);
    }
    uint64_t h[2] = {0, 0};
    if (fread(data, 1, hd.payload_size, f) != hd.payload_size) {
      fault = "truncated payload";
    } else {
      td__jit_hash(h, data, hd.payload_size);
      if (h[0] != hd.payload_hash[0] || h[1] != hd.payload_hash[1])
        fault = "payload hash differs";
    }
  }
  fclose(f);
  if (fault) {
    /* Never trust it: remove so the caller's rebuild replaces it. */
    free(data);
    unlink(path);
    if (corrupt)
      *corrupt = 1;
    return TD_ERR_NOT_FOUND;
  }
  out->data = data;
  out->size = hd.payload_size;
  out->from_cache = 1;
  return TD_OK;
}

/* mkdir -p: creates every missing folder of `dir`. */
static int td__mkdirs(const char *dir) {
  char tmp[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof tmp)
    return -1;
  memcpy(tmp, dir, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

td_status td__jit_cache_store(const char *dir, const char *key, const void *data, size_t size) {
  char path[4096], tmp[4200];
  if (!dir || !key || !data || size == 0 || !td__entry_path(path, sizeof path, dir, key))
    return td__error(TD_ERR_INVALID_ARG, "JIT cache store: NULL or empty argument, or path too long");
  if (td__mkdirs(dir) != 0)
    return td__error(TD_ERR_SYSTEM, "JIT cache: cannot create folder %s: %s", dir, strerror(errno));
  /* Unique per process and thread, so concurrent writers never share a temp file. */
  static _Atomic unsigned long counter;
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lu", path, (long)getpid(), ++counter);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0)
    return td__error(TD_ERR_SYSTEM, "JIT cache: cannot create %s: %s", tmp, strerror(errno));
  td__jit_header hd;
  memset(&hd, 0, sizeof hd);
  memcpy(hd.magic, TD__JIT_MAGIC, 8);
  hd.format = TD__JIT_FORMAT;
  hd.header_size = sizeof hd;
  hd.payload_size = size;
  td__jit_hash(hd.payload_hash, data, size);
  snprintf(hd.key, sizeof hd.key, "%s", key);
  const char *parts[2] = {(const char *)&hd, data};
  size_t lens[2] = {sizeof hd, size};
  int err = 0;
  for (int i = 0; i < 2 && !err; i++) {
    size_t done = 0;
    while (done < lens[i]) {
      ssize_t w = write(fd, parts[i] + done, lens[i] - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        err = errno ? errno : EIO;
        break;
      }
      done += (size_t)w;
    }
  }
  if (!err && fsync(fd) != 0)
    err = errno;
  if (close(fd) != 0 && !err)
    err = errno;
  if (!err && rename(tmp, path) != 0)
    err = errno;
  if (err) {
    unlink(tmp);
    return td__error(TD_ERR_SYSTEM, "JIT cache: cannot write %s: %s", path, strerror(err));
  }
  return TD_OK;
}
