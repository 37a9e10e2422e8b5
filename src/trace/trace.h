/* SPDX-License-Identifier: Apache-2.0
 * Internal: executor traces (trace layer, beside the executor): the
 * per-rank summary and the Chrome trace JSON writer that td_exec_trace_*
 * use. Events come from any backend as td_trace_event (exec.h). */
#ifndef TD_TRACE_TRACE_H
#define TD_TRACE_TRACE_H

#include <stddef.h>
#include <stdio.h>

#include "tdist/exec.h"

/** Summarises one rank's events (any order) into *out; see td_trace_summary. */
void td__trace_summarize(const td_trace_event *events, size_t count, int rank, td_trace_summary *out);

/** One rank's events for the JSON writer. */
typedef struct td__trace_rank {
  const td_trace_event *events;
  size_t count;
} td__trace_rank;

/** Writes the events of `nranks` ranks of `plan` as Chrome trace JSON to
 * `path` (pid = rank, tid = worker, ts/dur in microseconds from the earliest
 * start). Errors: TD_ERR_SYSTEM (cannot write the file), TD_ERR_NO_MEMORY. */
td_status td__trace_write_chrome(const td_plan *plan, const td__trace_rank *ranks, int nranks,
                                 const char *path);

#endif
