/* SPDX-License-Identifier: Apache-2.0
 * The kinds of `tdist bench` (tools layer). Each kind lives in its own
 * bench_<kind>.c and is listed in cmd_bench.c's table; adding a kind is one
 * file plus one table line. A kind's entry point gets argv[0] = its name and
 * returns the process exit status (0 ok, 1 failure, 2 usage error). */
#ifndef TD_TOOLS_BENCH_H
#define TD_TOOLS_BENCH_H

#include <stddef.h>

typedef struct td_bench_kind {
  const char *name;    /* "coll", "exec", "gemm", "ag_gemm", ... */
  const char *summary; /* one line for `tdist bench --help` */
  int (*main)(int argc, char **argv);
} td_bench_kind;

/* bench_coll.c: host collectives vs Open MPI (table, JSON). */
int td_bench_coll(int argc, char **argv);
/* bench_exec.c: CPU executor (GEMM tiles) vs one multi-threaded OpenBLAS call. */
int td_bench_exec(int argc, char **argv);
/* bench_ops.c: tensor-parallel operators (ops.h) vs the sequential baseline (cpu or cuda). */
int td_bench_ag_gemm(int argc, char **argv);
int td_bench_gemm_rs(int argc, char **argv);
int td_bench_gemm_ar(int argc, char **argv);
int td_bench_all_reduce(int argc, char **argv);

/* Helpers shared by kinds (cmd_bench.c). */
/** Parses a byte size: a whole number with an optional K, M or G suffix
 * (powers of 1024, either case), then an optional B. Returns 0 on success;
 * -1 on a malformed value, -2 on one too large for size_t (nothing written). */
int td_bench_parse_bytes(const char *text, size_t *out);

/** Reads `text`, the value of option `opt` given to `cmd` (e.g. "tdist bench
 * coll", "--max"), as a byte size (td_bench_parse_bytes) of at most `max`
 * bytes. `list` is the whole option value when text is one item of it (else
 * NULL); `why_max` (or NULL) says where the maximum comes from. Returns 0
 * with *out set, or prints to stderr "CMD: OPT TEXT: WHAT; give a whole
 * number of bytes with an optional unit K, M or G ..., at most MAX bytes
 * (..G)" (WHAT: an unknown unit, or not a byte size) or "CMD: OPT TEXT is
 * too large: at most MAX bytes (..G): WHY_MAX" and returns -1 (callers exit
 * with status 2). */
int td_bench_bytes_arg(const char *cmd, const char *opt, const char *text, const char *list, size_t max,
                       const char *why_max, size_t *out);

#endif
