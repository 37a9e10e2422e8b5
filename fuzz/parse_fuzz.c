/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the `.td` parser and, for programs that parse and have
 * small dims, the whole compiler (lowering, plan validation, the explain
 * simulator). Any crash, sanitizer report or leak is a bug: the parser must
 * reject every malformed input with a status and a message. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tdist/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  td_program *p = NULL;
  if (td_program_parse((const char *)data, size, "fuzz.td", &p) != TD_OK)
    return 0;
  int small = 1;
  for (int i = 0; i < td_program_ndims(p); i++)
    if (td_program_dim_value(p, i) > 48)
      small = 0;
  for (td_value v = 0; v < td_program_nvalues(p) && small; v++) {
    int64_t r, c;
    td_program_value_shape(p, v, &r, &c);
    if (r > 48 || c > 48)
      small = 0;
  }
  if (small && td_program_nvalues(p) <= 24) {
    static const td_perf_model model = {5e-6, 4e9, 2e10, 5e9, 3e-6, 2, 1e-8};
    td_compile_opts co;
    td_compile_opts_init(&co);
    co.nranks = 1 + (int)(size % 5);
    co.overlap = (int)(size / 5 % 2);
    co.chunks_per_rank = 1 + (int)(size / 10 % 3);
    co.tile_rows = 1 + (int64_t)(size / 30 % 8);
    co.model = &model;
    td_compiled *c = NULL;
    if (td_program_compile(p, &co, &c) == TD_OK) {
      td_prediction pr;
      td_compiled_predict(c, &pr);
      td_compiled_destroy(c);
    }
  }
  td_program_destroy(p);
  return 0;
}
