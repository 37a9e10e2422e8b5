/* SPDX-License-Identifier: Apache-2.0
 * `tdist bench KIND [OPTIONS]`: dispatches to one benchmark kind (tools
 * layer). Kinds are listed in the table below, each implemented in its own
 * bench_<kind>.c (see bench.h); `tdist bench --help` lists them. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli_common.h"
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
  unsigned shift = 0;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b')
    end++;
  if (*end)
    return -1;
  if (errno || v > (~0ull >> shift) || (v << shift) > (unsigned long long)SIZE_MAX)
    return -2;
  *out = (size_t)(v << shift);
  return 0;
}

/* "512G" when max is a whole number of GiB, else "511.97G". */
static void td__bench_gib(size_t max, char *buf, size_t cap) {
  if (max % ((size_t)1 << 30) == 0)
    snprintf(buf, cap, "%zuG", max >> 30);
  else
    snprintf(buf, cap, "%.2fG", (double)max / (double)((size_t)1 << 30));
}

int td_bench_bytes_arg(const char *cmd, const char *opt, const char *text, const char *list, size_t max,
                       const char *why_max, size_t *out) {
  size_t v = 0;
  int rc = td_bench_parse_bytes(text, &v);
  if (rc == 0 && v <= max) {
    *out = v;
    return 0;
  }
  char where[320] = "", gib[32], bytes[48] = "";
  if (list && strcmp(list, text))
    snprintf(where, sizeof where, " (in '%.300s')", list);
  td__bench_gib(max, gib, sizeof gib);
  if (rc == 0 || rc == -2) { /* well formed, too large */
    if (rc == 0 && text[strspn(text, "0123456789")]) /* a unit: say the bytes too */
      snprintf(bytes, sizeof bytes, " (%zu bytes)", v);
    fprintf(stderr, "%s: %s %s%s%s is too large: at most %zu bytes (%s)%s%s\n", cmd, opt, text, bytes, where, max,
            gib, why_max ? ": " : "", why_max ? why_max : "");
    return -1;
  }
  /* not a byte size: a unit we do not take, or not a number at all */
  const char *p = text;
  while (isdigit((unsigned char)*p))
    p++;
  char what[64];
  if (p != text && isalpha((unsigned char)*p))
    snprintf(what, sizeof what, "unit '%.16s' is not one of K, M, G", p);
  else
    snprintf(what, sizeof what, "not a byte size");
  fprintf(stderr, "%s: %s %s%s: %s; give a whole number of bytes with an optional unit K, M or G (powers of "
          "1024, an optional B after it: e.g. 8, 64K, 256M, 1G), at most %zu bytes (%s)\n", cmd, opt, text, where,
          what, max, gib);
  return -1;
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
  char names[256] = "", hint[128];
  for (int i = 0; i < TD__NKINDS; i++)
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s,", td__bench_kinds[i].name);
  fprintf(stderr, "tdist bench: unknown kind '%s'%s\n", argv[1], td_cli_hint(argv[1], names, hint, sizeof hint));
  td__bench_usage(stderr);
  return 2;
}
