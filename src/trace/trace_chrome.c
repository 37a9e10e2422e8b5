/* SPDX-License-Identifier: Apache-2.0
 * Chrome trace JSON (trace layer): td_exec_trace_write gathers every rank's
 * events of the last run onto team rank 0 through the symmetric heap, and
 * rank 0 writes one file that Perfetto and chrome://tracing open: one
 * process per rank (pid = rank, named "rank R"), one thread per worker (tid
 * = worker id, named "compute N" / "comm N"), one complete ("X") event per
 * task named by its label, with the task index, kind and class as args.
 * Timestamps are microseconds since the earliest task start of any rank;
 * all ranks read CLOCK_MONOTONIC of one host, so they share a time axis.
 * The JSON is built with cJSON; labels are cleaned to valid UTF-8 first
 * (invalid or cut sequences become '?'), as JSON text must be UTF-8. */
#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/backend.h"
#include "exec/schedule_internal.h"
#include "tdist/rma.h"
#include "tdist/symm.h"
#include "trace/trace.h"

static cJSON *td__meta(const char *what, int pid, int tid, const char *name) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddStringToObject(m, "name", what);
  cJSON_AddStringToObject(m, "ph", "M");
  cJSON_AddNumberToObject(m, "pid", pid);
  cJSON_AddNumberToObject(m, "tid", tid);
  cJSON *args = cJSON_AddObjectToObject(m, "args");
  cJSON_AddStringToObject(args, "name", name);
  return m;
}

/* Copies `in` (at most cap - 1 bytes read) to out as valid UTF-8: each
 * invalid or cut sequence becomes '?', so the JSON is always valid. */
static void td__utf8_clean(const char *in, size_t cap, char *out, size_t outcap) {
  const unsigned char *p = (const unsigned char *)in;
  size_t n = strnlen(in, cap), o = 0;
  for (size_t i = 0; i < n && o + 5 < outcap;) {
    unsigned c = p[i];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    int ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; k++)
      ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len > 1) { /* no overlong forms, surrogates or values past U+10FFFF */
      unsigned v = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
      for (size_t k = 1; k < len; k++)
        v = (v << 6) | (p[i + k] & 0x3f);
      ok = (len == 2 && v >= 0x80) || (len == 3 && v >= 0x800 && (v < 0xd800 || v > 0xdfff)) ||
           (len == 4 && v >= 0x10000 && v <= 0x10ffff);
    }
    if (!ok) {
      out[o++] = '?';
      i++;
      continue;
    }
    memcpy(out + o, p + i, len);
    o += len, i += len;
  }
  out[o] = 0;
}

td_status td__trace_write_chrome(const td_plan *plan, const td__trace_rank *ranks, int nranks,
                                 const char *path) {
  int64_t t0 = INT64_MAX;
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < ranks[r].count; i++)
      if (ranks[r].events[i].start_ns < t0)
        t0 = ranks[r].events[i].start_ns;
  cJSON *root = cJSON_CreateObject();
  cJSON *list = root ? cJSON_AddArrayToObject(root, "traceEvents") : NULL;
  if (!list) {
    cJSON_Delete(root);
    return td__error(TD_ERR_NO_MEMORY, "td_exec_trace_write: out of memory building the trace");
  }
  cJSON_AddStringToObject(root, "displayTimeUnit", "ns");
  char name[48];
  for (int r = 0; r < nranks; r++) {
    snprintf(name, sizeof name, "rank %d", r);
    cJSON_AddItemToArray(list, td__meta("process_name", r, 0, name));
    const td_schedule *s = td_plan_schedule(plan, r);
    int named[2048] = {0}; /* worker ids named so far (<= 1024 per class) */
    for (size_t i = 0; i < ranks[r].count; i++) {
      const td_trace_event *ev = &ranks[r].events[i];
      if (ev->worker >= 0 && ev->worker < 2048 && !named[ev->worker]) {
        named[ev->worker] = 1;
        snprintf(name, sizeof name, "%s %d", ev->cls == TD_WORKER_COMPUTE ? "compute" : "comm", ev->worker);
        cJSON_AddItemToArray(list, td__meta("thread_name", r, ev->worker, name));
      }
      char label[sizeof s->tasks[0].label + 8] = "?";
      if (s && ev->task < s->ntasks)
        td__utf8_clean(s->tasks[ev->task].label, sizeof s->tasks[0].label, label, sizeof label);
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "name", label[0] ? label : td__task_kind_name(ev->kind));
      cJSON_AddStringToObject(x, "cat", td__worker_class_name(ev->cls));
      cJSON_AddStringToObject(x, "ph", "X");
      cJSON_AddNumberToObject(x, "ts", (double)(ev->start_ns - t0) / 1e3);
      cJSON_AddNumberToObject(x, "dur", (double)(ev->end_ns - ev->start_ns) / 1e3);
      cJSON_AddNumberToObject(x, "pid", r);
      cJSON_AddNumberToObject(x, "tid", ev->worker);
      cJSON *args = cJSON_AddObjectToObject(x, "args");
      cJSON_AddNumberToObject(args, "task", ev->task);
      cJSON_AddStringToObject(args, "kind", td__task_kind_name(ev->kind));
      cJSON_AddStringToObject(args, "class", td__worker_class_name(ev->cls));
      cJSON_AddItemToArray(list, x);
    }
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text)
    return td__error(TD_ERR_NO_MEMORY, "td_exec_trace_write: out of memory printing the trace");
  FILE *f = fopen(path, "w");
  int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (f && fclose(f) != 0)
    ok = 0;
  free(text);
  if (!ok)
    return td__error(TD_ERR_SYSTEM, "td_exec_trace_write: cannot write trace file '%s'", path);
  return TD_OK;
}

td_status td_exec_trace_write(td_exec *exec, const char *path) {
  if (!exec)
    return td__error(TD_ERR_INVALID_ARG, "td_exec_trace_write: exec is NULL");
  td_team *team = exec->team;
  int n = exec->nranks, me = exec->rank;
  /* Argument and state errors are exchanged, never returned alone: a rank
   * that skipped the collective would leave its peers waiting. */
  td_status mine = TD_OK;
  if (me == 0 && !path)
    mine = td__error(TD_ERR_INVALID_ARG, "td_exec_trace_write: path is NULL on team rank 0");
  else if (!exec->opts.trace || !exec->traced)
    mine = td__error(TD_ERR_STATE, "td_exec_trace_write: rank %d has no trace of its last run (tracing off or "
                     "no run yet); every rank needs opts.trace = 1 and a run", me);
  char why[1024];
  snprintf(why, sizeof why, "%s", mine != TD_OK ? td_last_error() : "");
  td__agree_result res;
  td_status ast = td__agree_round(exec->agree, TD__AGREE_TRACE, mine, why, 0, exec->opts.timeout_ms, &res);
  if (ast == TD_ERR_PEER_FAILED && res.bad_rank >= 0 && res.status != TD_OK) {
    snprintf(why, sizeof why, "%s", td_last_error());
    return td__error(res.status, "%s", why); /* every rank returns the failing rank's status */
  }
  if (ast != TD_OK)
    return ast;
  uint64_t mine_count = exec->ntrace;
  uint64_t *counts = NULL;
  TD_CHECK(td_symm_alloc(team, (size_t)n * sizeof *counts, 64, (void **)&counts));
  td_status st = TD_OK;
  for (int p = 0; st == TD_OK && p < n; p++)
    st = td_putmem(team, &counts[me], &mine_count, sizeof mine_count, p);
  if (st == TD_OK)
    st = td_team_barrier(team);
  uint64_t most = 0;
  for (int p = 0; st == TD_OK && p < n; p++)
    if (counts[p] > most)
      most = counts[p];
  td_trace_event *block = NULL;
  if (st == TD_OK)
    st = td_symm_alloc(team, (size_t)(most ? most : 1) * sizeof *block, 64, (void **)&block);
  td_status wst = TD_OK; /* rank 0's file write */
  char wmsg[1024] = "";
  if (st == TD_OK && block) {
    if (exec->ntrace)
      memcpy(block, exec->trace, exec->ntrace * sizeof *block);
    st = td_team_barrier(team);
    if (st == TD_OK && me == 0) {
      td__trace_rank *ranks = calloc((size_t)n, sizeof *ranks);
      if (!ranks) {
        wst = td__error(TD_ERR_NO_MEMORY, "td_exec_trace_write: out of memory");
      } else {
        for (int p = 0; p < n; p++) {
          ranks[p].events = td_symm_ptr(team, block, p);
          ranks[p].count = (size_t)counts[p];
        }
        wst = td__trace_write_chrome(exec->plan, ranks, n, path);
        free(ranks);
      }
      if (wst != TD_OK)
        snprintf(wmsg, sizeof wmsg, "%s", td_last_error());
    }
    /* The free is collective and starts with a barrier, so no rank frees its
     * block while rank 0 still reads it. */
    td_status fs = td_symm_free(team, block);
    if (st == TD_OK)
      st = fs;
  }
  td_status fs = td_symm_free(team, counts);
  if (st == TD_OK)
    st = fs;
  if (st != TD_OK)
    return st;
  /* Rank 0's file result goes to every rank: all return its error. */
  st = td__agree_round(exec->agree, TD__AGREE_TRACE_FILE, wst, wmsg, 0, exec->opts.timeout_ms, &res);
  if (st == TD_ERR_PEER_FAILED && res.bad_rank == 0 && me != 0) {
    snprintf(wmsg, sizeof wmsg, "%s", td_last_error());
    return td__error(res.status, "%s", wmsg); /* e.g. TD_ERR_SYSTEM, naming rank 0 and the file */
  }
  return st;
}
