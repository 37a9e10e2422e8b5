/* SPDX-License-Identifier: Apache-2.0
 * NVRTC compilation of generated CUDA C into cubins, and the load-or-compile
 * entry point over the disk cache (JIT layer).
 *
 * NVRTC needs no GPU and no driver, so CI compiles every generated source for
 * sm_80 and sm_90a on machines without one. Generated sources include no
 * headers: they are self-contained CUDA C (see src/tile/cuda/), so NVRTC's
 * missing host headers never matter. */
#include <ctype.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "jit/jit.h"

#define TD__JIT_MAX_OPTIONS 32

int td__jit_nvrtc_version(void) {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return 0;
  return major * 1000 + minor * 10;
}

/* "sm_" then two or three digits, optionally one of 'a'/'f' (arch-specific features). */
static int td__arch_ok(const char *arch) {
  if (strncmp(arch, "sm_", 3) != 0)
    return 0;
  const char *p = arch + 3;
  int digits = 0;
  while (isdigit((unsigned char)*p)) {
    p++;
    digits++;
  }
  if (digits < 2 || digits > 3)
    return 0;
  if (*p == 'a' || *p == 'f')
    p++;
  return *p == '\0';
}

td_status td__jit_compile(const char *source, const char *name, const char *arch,
                          const char *const *options, int nopts, td__jit_image *out) {
  if (!source || !arch || !out || nopts < 0 || (nopts > 0 && !options))
    return td__error(TD_ERR_INVALID_ARG, "JIT compile: NULL source, arch or output");
  if (!td__arch_ok(arch))
    return td__error(TD_ERR_INVALID_ARG,
                     "JIT compile: architecture '%s' is not of the form sm_NN or sm_NNa (e.g. sm_80, "
                     "sm_90a)",
                     arch);
  if (nopts > TD__JIT_MAX_OPTIONS - 4)
    return td__error(TD_ERR_INVALID_ARG, "JIT compile: %d options, at most %d allowed", nopts,
                     TD__JIT_MAX_OPTIONS - 4);
  if (!name)
    name = "tdist_jit.cu";
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  const char *opts[TD__JIT_MAX_OPTIONS];
  int n = 0;
  opts[n++] = archopt;
  opts[n++] = "--std=c++17";
  opts[n++] = "-lineinfo";
  for (int i = 0; i < nopts; i++)
    opts[n++] = options[i];

  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS)
    return td__error(TD_ERR_CUDA, "JIT compile of %s: nvrtcCreateProgram failed: %s", name,
                     nvrtcGetErrorString(r));
  r = nvrtcCompileProgram(prog, n, opts);
  if (r != NVRTC_SUCCESS) {
    size_t logsize = 0;
    char log[1536] = "";
    if (nvrtcGetProgramLogSize(prog, &logsize) == NVRTC_SUCCESS && logsize > 1) {
      char *full = malloc(logsize);
      if (full && nvrtcGetProgramLog(prog, full) == NVRTC_SUCCESS)
        snprintf(log, sizeof log, "%s", full);
      free(full);
    }
    nvrtcDestroyProgram(&prog);
    return td__error(TD_ERR_CUDA, "JIT compile of %s for %s failed (%s); NVRTC log: %s", name, arch,
                     nvrtcGetErrorString(r), log);
  }
  size_t size = 0;
  r = nvrtcGetCUBINSize(prog, &size);
  void *data = (r == NVRTC_SUCCESS && size > 0) ? malloc(size) : NULL;
  if (!data) {
    nvrtcDestroyProgram(&prog);
    if (r != NVRTC_SUCCESS || size == 0)
      return td__error(TD_ERR_CUDA, "JIT compile of %s for %s: no cubin (%s)", name, arch,
                       nvrtcGetErrorString(r));
    return td__error(TD_ERR_NO_MEMORY, "JIT compile of %s: no memory for a %zu-byte cubin", name, size);
  }
  r = nvrtcGetCUBIN(prog, data);
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) {
    free(data);
    return td__error(TD_ERR_CUDA, "JIT compile of %s: nvrtcGetCUBIN failed: %s", name,
                     nvrtcGetErrorString(r));
  }
  out->data = data;
  out->size = size;
  out->from_cache = 0;
  return TD_OK;
}

td_status td__jit_get(const char *source, const char *name, const char *arch,
                      const char *const *options, int nopts, td__jit_image *out) {
  if (!source || !arch || !out)
    return td__error(TD_ERR_INVALID_ARG, "JIT: NULL source, arch or output");
  char dir[4096], key[TD__JIT_KEY_CHARS + 1];
  TD_CHECK(td__jit_cache_dir(dir, sizeof dir));
  td__jit_cache_key(source, arch, options, nopts, key);
  td_status st = td__jit_cache_load(dir, key, out, NULL);
  if (st == TD_OK)
    return TD_OK;
  if (st != TD_ERR_NOT_FOUND)
    td_clear_error(); /* an unreadable cache only costs a compile */
  TD_CHECK(td__jit_compile(source, name, arch, options, nopts, out));
  /* A read-only or full cache folder must not fail the launch: keep the image. */
  if (td__jit_cache_store(dir, key, out->data, out->size) != TD_OK)
    td_clear_error();
  return TD_OK;
}
