/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench KIND [OPTIONS]`: dispatches to one benchmark kind (tools
 * layer). Kinds are listed in the table below, each implemented in its own
 * bench_<kind>.c (see bench.h); `tdist bench --help` lists them. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"

static const td_bench_kind td__bench_kinds[] = {
    {"coll", "host collectives (all_gather, reduce_scatter, all_reduce, all_to_all) vs Open MPI", td_bench_coll},
    {"exec", "CPU executor: N independent GEMM tiles vs one multi-threaded OpenBLAS sgemm", td_bench_exec},
    {"ag_gemm", "AllGather+GEMM operator (ops.h) vs sequential all-gather then GEMM", td_bench_ag_gemm},
    {"gemm_rs", "GEMM+ReduceScatter operator vs sequential GEMM then reduce-scatter", td_bench_gemm_rs},
    {"gemm_ar", "GEMM+AllReduce operator vs sequential GEMM then all-reduce", td_bench_gemm_ar},
    {"all_reduce", "low-latency all-reduce operator (one-shot, two-shot) vs the collective", td_bench_all_reduce},
};
enum { TD__NKINDS = sizeof td__bench_kinds / sizeof td__bench_kinds[0] };

static void td__bench_usage(FILE *out) {
  fprintf(out, "usage: tdist bench KIND [OPTIONS]\n\nkinds:\n");
  for (int i = 0; i < TD__NKINDS; i++)
    fprintf(out, "  %-10s %s\n", td__bench_kinds[i].name, td__bench_kinds[i].summary);
  fprintf(out, "\n`tdist bench KIND --help` describes a kind's options.\n");
}

int td_bench_parse_bytes(const char *text, size_t *out) {
  if (!text || !isdigit((unsigned char)text[0]))
    return -1;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno)
    return -1;
  unsigned shift = 0;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end || (shift && v > (~0ull >> shift)))
    return -1;
  *out = (size_t)(v << shift);
  return 0;
}

int td_cmd_bench(int argc, char **argv) {
  if (argc < 2) {
    td__bench_usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    td__bench_usage(stdout);
    return 0;
  }
  for (int i = 0; i < TD__NKINDS; i++)
    if (!strcmp(argv[1], td__bench_kinds[i].name))
      return td__bench_kinds[i].main(argc - 1, argv + 1);
  fprintf(stderr, "tdist bench: unknown kind '%s'\n", argv[1]);
  td__bench_usage(stderr);
  return 2;
}
