/* SPDX-License-Identifier: Apache-2.0
 * `tdist tune gemm --M m --N n --K k [--dtype bf16|f16] [--layout nk|kn]
 *  [--arch 90|80] [--iters N] [--no-store]`: times every GEMM tile
 * configuration compiled into this build on one shape, one progress line per
 * configuration, and stores the fastest per (GPU, dtype, layout, shape class)
 * in the tuning cache ($TD_CACHE_DIR or ~/.cache/tdist, gemm-tune.json).
 * Needs the CUDA backend and a GPU; the search itself is td__gemm_tune. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "cli_options.h"
#include "commands.h"
#include "tdist/tdist.h"
#if defined(TD_HAVE_GEMM_CUDA)
#include <cuda_runtime_api.h>

#include "tile/cuda/gemm.h"
#endif

static void td__tune_usage(FILE *out) {
  fprintf(out,
          "usage: tdist tune gemm --M m --N n --K k [--dtype bf16|f16] [--layout nk|kn]\n"
          "                      [--arch 90|80] [--iters N] [--no-store]\n"
          "--M, --N, --K (or -M, -N, -K): 1..1048576; --iters: 1..100000 (default 20); --arch: 90\n"
          "(sm_90 kernels, the default) or 80; --dtype default bf16; --layout default nk; --opt=value\n"
          "is --opt value. --no-store: time only, leave the cache as it is.\n"
          "Times each compiled GEMM tile configuration on an M x N x K problem (B given as\n"
          "[N,K] with --layout nk, the default, or [K,N]) and stores the fastest for this GPU,\n"
          "dtype, layout and shape class in $TD_CACHE_DIR (default ~/.cache/tdist).\n");
}

#if defined(TD_HAVE_GEMM_CUDA)
static void td__tune_progress(void *user, int index, int count, const td_gemm_config *cfg,
                              double ms, double tflops, td_status st) {
  (void)user;
  char name[96];
  td__gemm_config_name(cfg, name, sizeof name);
  if (st == TD_OK)
    printf("[%2d/%2d] %-28s: %9.4f ms %7.1f TFLOP/s\n", index + 1, count, name, ms, tflops);
  else
    printf("[%2d/%2d] %-28s: failed: %s\n", index + 1, count, name, td_last_error());
  fflush(stdout);
}
#endif

static int td__tune_gemm(int argc, char **argv) {
  int m = 0, n = 0, k = 0, iters = 20, layout = 0, arch = 90, store = 1;
  const char *dtype_name = "bf16";
  const td_cli_options *table = &td_cli_options_tune_gemm; /* cli_options.c: the table --help is checked against */
  td_cli_seen seen = {0}; /* every option once, not the last one silently winning */
  for (int i = 1; i < argc; i++) {
    char nbuf[32];
    const char *a, *v;
    int inl; /* --opt=value: the same as --opt value, as in every subcommand (cli_common.h) */
    int known = td_cli_arg(argc, argv, i, table->valued, table->nvalued, nbuf, sizeof nbuf, &a, &v, &inl);
    /* -M, -N, -K: the short spellings of --M, --N, --K, one option each (counted once) */
    int shortdim = !inl && a[0] == '-' && a[1] && !a[2] && strchr("MNK", a[1]);
    char canon[8];
    snprintf(canon, sizeof canon, "--%c", shortdim ? a[1] : 0);
    const char *name = shortdim ? canon : a;
    int flag = !strcmp(a, "--no-store") || !strcmp(a, "--help") || !strcmp(a, "-h");
    if (inl && flag) {
      fprintf(stderr, "tdist tune gemm: option %s takes no value\n", a);
      return 2;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      td__tune_usage(stdout);
      return 0;
    }
    if (!known && !shortdim && !flag && a[0] != '-') { /* a word, not a misspelt option: say what tune gemm takes */
      td_cli_positional("tdist tune gemm", a, table->valued, table->nvalued, table->flags, table->nflags);
      return 2;
    }
    if (!known && !shortdim && !flag) {
      fprintf(stderr, "tdist tune gemm: unknown or incomplete option '%s' (see tdist tune gemm --help)\n", a);
      td__tune_usage(stderr);
      return 2;
    }
    if ((known || shortdim) && !v) {
      fprintf(stderr, "tdist tune gemm: option %s needs a value\n", a);
      return 2;
    }
    if (!td_cli_once("tdist tune gemm", &seen, name, NULL))
      return 2;
    i += (known || shortdim) && !inl;
    if (!strcmp(name, "--no-store")) {
      store = 0;
    } else if (!strcmp(name, "--M") || !strcmp(name, "--N") || !strcmp(name, "--K") || !strcmp(name, "--iters") ||
               !strcmp(name, "--arch")) {
      /* dims 1..1048576 (a GEMM the GPU holds); iters 1..100000; arch 90 or 80, checked below */
      long long x;
      int dim = strcmp(name, "--iters") && strcmp(name, "--arch");
      if (!td_cli_int("tdist tune gemm", a, v, dim ? 1 : !strcmp(name, "--iters") ? 1 : 0,
                      dim ? 1 << 20 : !strcmp(name, "--iters") ? 100000 : 1000, &x))
        return 2;
      if (!strcmp(name, "--M"))
        m = (int)x;
      else if (!strcmp(name, "--N"))
        n = (int)x;
      else if (!strcmp(name, "--K"))
        k = (int)x;
      else if (!strcmp(name, "--iters"))
        iters = (int)x;
      else
        arch = (int)x;
    } else if (!strcmp(name, "--dtype")) {
      dtype_name = v;
    } else if (!strcmp(name, "--layout")) {
      if (strcmp(v, "nk") && strcmp(v, "kn")) {
        fprintf(stderr, "tdist tune gemm: --layout must be nk or kn, not '%s'\n", v);
        return 2;
      }
      layout = !strcmp(v, "kn");
    }
  }
  if (m < 1 || n < 1 || k < 1 || iters < 1) {
    fprintf(stderr, "tdist tune gemm: --M, --N, --K (and --iters) must be given, each >= 1\n");
    td__tune_usage(stderr);
    return 2;
  }
  if (arch != 90 && arch != 80) {
    fprintf(stderr, "tdist tune gemm: --arch must be 90 or 80, not %d\n", arch);
    return 2;
  }
  td_dtype dtype;
  if (td_dtype_parse(dtype_name, &dtype) != TD_OK || (dtype != TD_BF16 && dtype != TD_F16)) {
    fprintf(stderr, "tdist tune gemm: --dtype must be bf16 or f16, not '%s'\n", dtype_name);
    return 2;
  }
#if defined(TD_HAVE_GEMM_CUDA)
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    fprintf(stderr, "tdist tune gemm: no usable GPU: the GEMM tiles are tuned on the GPU they run on\n");
    return 1;
  }
  printf("tuning %dx%dx%d %s, B as %s, on %s (sm_%d kernels, %d launches each)\n", m, n, k,
         dtype_name, layout ? "[K,N]" : "[N,K]", prop.name, arch, iters);
  td_gemm_config best;
  double tflops = 0;
  td_status st = td__gemm_tune(arch == 90 ? TD_GEMM_SM90 : TD_GEMM_SM80, dtype, layout, m, n, k,
                               iters, td__tune_progress, NULL, &best, &tflops);
  if (st != TD_OK) {
    fprintf(stderr, "tdist tune gemm: %s\n", td_last_error());
    return 1;
  }
  char cls[64];
  td__gemm_shape_class(m, n, k, cls, sizeof cls);
  char name[96];
  td__gemm_config_name(&best, name, sizeof name);
  printf("best: %s: %.1f TFLOP/s (shape class %s)\n", name, tflops, cls);
  if (store) {
    char path[4200];
    st = td__gemm_tune_store(prop.name, dtype, layout, m, n, k, &best, tflops);
    if (st == TD_OK)
      st = td__gemm_tune_cache_path(path, sizeof path);
    if (st != TD_OK) {
      fprintf(stderr, "tdist tune gemm: %s\n", td_last_error());
      return 1;
    }
    printf("stored in %s\n", path);
  }
  return 0;
#else
  (void)store;
  (void)layout;
  fprintf(stderr, "tdist tune gemm: this build has no CUDA GEMM tiles (configure with "
                  "-DTD_WITH_CUDA=ON on a machine with nvcc)\n");
  return 1;
#endif
}

int td_cmd_tune(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    td__tune_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "gemm"))
    return td__tune_gemm(argc - 1, argv + 1);
  fprintf(stderr, "tdist tune: unknown kind '%s' (known: gemm)\n", argv[1]);
  return 2;
}
