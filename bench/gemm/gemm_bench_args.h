/* SPDX-License-Identifier: Apache-2.0
 * gemm_bench's command line (bench layer): every option parsed and checked
 * before the GPU is touched, in plain C so that a CPU test can call it
 * (tests/tools/test_gemm_bench_args.c). See gemm_bench_args.c. */
#ifndef TD_BENCH_GEMM_BENCH_ARGS_H
#define TD_BENCH_GEMM_BENCH_ARGS_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GB_MAX_SHAPES = 64, GB_MAX_VARIANTS = 32, GB_MAX_DIM = 1 << 20, GB_MAX_COUNT = 1000000, GB_MAX_STREAMS = 16 };

/** The --hook-modes names, in the order of gb_args.modes' bits: `both` is the
 * wait + raise pair that --hooks always measures; the rest are extra. */
extern const char *const gb_mode_names[];
enum { GB_MODE_COUNT = 6 };

typedef struct gb_args {
  const char *configs;            /* --configs: "all" or BMxBNxS / sm80 items (syntax checked) */
  const char *json;               /* --json FILE or NULL; its directory checked writable */
  int shapes[GB_MAX_SHAPES][3];   /* --shapes, M N K each 1..GB_MAX_DIM */
  int nshapes;
  int variants[GB_MAX_VARIANTS];  /* --hook-variants, each one of the compiled XV numbers */
  int nvariants;
  unsigned modes;                 /* bit i: gb_mode_names[i] was named in --hook-modes */
  int iters, stamps;              /* --iters (default 50), --stamps (0: off) */
  int streams;                    /* --streams: GEMMs at once, one per stream (default 1) */
  int layout_kn;                  /* --layout kn (default nk) */
  int with_hooks;                 /* --hooks, or any hook option given */
  int help;                       /* --help / -h: print the usage, exit 0 */
} gb_args;

/** Parses argv[1..argc-1] (options as `--opt VALUE` or `--opt=VALUE`, each at
 * most once) into *out. `xv` / `nxv`: the measurement variants compiled into
 * this binary, against which --hook-variants is checked. Returns 0 and fills
 * *out on success (out->help set for --help); on a bad option returns 2 and
 * writes one line to err (cap bytes) naming the option, the value and what
 * it allows; *out is then unspecified. Touches no GPU; the only system call
 * is access()/stat() on --json's path. Thread-safe (no state). */
int gb_parse_args(int argc, char **argv, const int *xv, int nxv, gb_args *out, char *err, size_t cap);

/** Prints the usage (every option and what it allows) to f. */
void gb_usage(FILE *f, const char *prog);

#ifdef __cplusplus
}
#endif
#endif
