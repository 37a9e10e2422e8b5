/* SPDX-License-Identifier: Apache-2.0
 * Trace summaries (trace layer): per rank, the time spent in compute tasks
 * and in communication tasks (classes comm and copy_engine), and how much of
 * the communication was hidden under computation.
 *
 * Hidden communication: for each comm task, the length of its interval that
 * lies inside the union of all compute task intervals of the same rank,
 * summed. hidden_share = hidden / comm time: 1.0 means every communication
 * nanosecond had some compute task running beside it; 0 means none did. The
 * union is taken so two compute workers running at once do not count a comm
 * nanosecond twice. Also the accessors td_exec_trace_events/_summary. */
#include <stdlib.h>

#include "core/error.h"
#include "exec/backend.h"
#include "trace/trace.h"

typedef struct {
  int64_t s, e;
} td__span;

static int td__span_cmp(const void *x, const void *y) {
  const td__span *a = x, *b = y;
  return a->s < b->s ? -1 : a->s > b->s ? 1 : 0;
}

static int td__is_comm(td_worker_class c) { return c == TD_WORKER_COMM || c == TD_WORKER_COPY_ENGINE; }

void td__trace_summarize(const td_trace_event *ev, size_t n, int rank, td_trace_summary *out) {
  td_trace_summary s = {.rank = rank, .ntasks = (uint32_t)n};
  int64_t first = INT64_MAX, last = INT64_MIN;
  size_t ncomp = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t d = ev[i].end_ns - ev[i].start_ns;
    if (ev[i].start_ns < first)
      first = ev[i].start_ns;
    if (ev[i].end_ns > last)
      last = ev[i].end_ns;
    if (td__is_comm(ev[i].cls)) {
      s.comm_ns += d;
    } else {
      s.compute_ns += d;
      ncomp++;
    }
  }
  s.wall_ns = n ? last - first : 0;
  /* Union of compute intervals, sorted and merged. If the scratch cannot be
   * allocated the hidden share is reported as 0 rather than failing. */
  td__span *u = ncomp ? malloc(ncomp * sizeof *u) : NULL;
  size_t nu = 0;
  if (u) {
    for (size_t i = 0; i < n; i++)
      if (!td__is_comm(ev[i].cls))
        u[nu++] = (td__span){ev[i].start_ns, ev[i].end_ns};
    qsort(u, nu, sizeof *u, td__span_cmp);
    size_t m = 0;
    for (size_t i = 0; i < nu; i++) {
      if (m && u[i].s <= u[m - 1].e) {
        if (u[i].e > u[m - 1].e)
          u[m - 1].e = u[i].e;
      } else {
        u[m++] = u[i];
      }
    }
    nu = m;
    for (size_t i = 0; i < n; i++) {
      if (!td__is_comm(ev[i].cls))
        continue;
      /* binary search the first merged span ending after the comm start */
      size_t lo = 0, hi = nu;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (u[mid].e <= ev[i].start_ns)
          lo = mid + 1;
        else
          hi = mid;
      }
      for (size_t k = lo; k < nu && u[k].s < ev[i].end_ns; k++) {
        int64_t a = u[k].s > ev[i].start_ns ? u[k].s : ev[i].start_ns;
        int64_t b = u[k].e < ev[i].end_ns ? u[k].e : ev[i].end_ns;
        if (b > a)
          s.comm_hidden_ns += b - a;
      }
    }
    free(u);
  }
  s.hidden_share = s.comm_ns > 0 ? (double)s.comm_hidden_ns / (double)s.comm_ns : 0.0;
  *out = s;
}

static td_status td__need_trace(const td_exec *exec, const char *fn) {
  if (!exec)
    return td__error(TD_ERR_INVALID_ARG, "%s: exec is NULL", fn);
  if (!exec->opts.trace)
    return td__error(TD_ERR_STATE, "%s: rank %d: tracing is off; create the executor with opts.trace = 1", fn,
                     exec->rank);
  if (!exec->traced)
    return td__error(TD_ERR_STATE, "%s: rank %d: no run has been traced yet; call td_exec_run first", fn,
                     exec->rank);
  return TD_OK;
}

td_status td_exec_trace_events(const td_exec *exec, const td_trace_event **events, size_t *count) {
  TD_CHECK(td__need_trace(exec, "td_exec_trace_events"));
  if (!events || !count)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_trace_events: events and count must not be NULL");
  *events = exec->trace;
  *count = exec->ntrace;
  return TD_OK;
}

td_status td_exec_trace_summary(const td_exec *exec, td_trace_summary *out) {
  TD_CHECK(td__need_trace(exec, "td_exec_trace_summary"));
  if (!out)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_trace_summary: out is NULL");
  td__trace_summarize(exec->trace, exec->ntrace, exec->rank, out);
  return TD_OK;
}
