/* SPDX-License-Identifier: Apache-2.0
 * Executor traces: the summary arithmetic (hidden communication = comm time
 * inside the union of compute intervals) against a brute-force count on
 * synthetic events; a traced run on 3 ranks (one event per task, sane
 * times, summary consistent with the events); the gathered Chrome trace JSON
 * (parsed back with cJSON: one X event per task of every rank, named by its
 * label, pid = rank); and the state errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "exec_harness.h"
#include "trace/trace.h"

static void test_summary_vs_brute_force(void **state) {
  (void)state;
  uint64_t r = 12345;
  for (int trial = 0; trial < 200; trial++) {
    td_trace_event ev[12];
    int n = 1 + trial % 12;
    for (int i = 0; i < n; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      int64_t s = (int64_t)((r >> 33) % 60), d = (int64_t)((r >> 20) % 25);
      ev[i] = (td_trace_event){1000 + s, 1000 + s + d, (uint32_t)i, i % 3,
                               (r >> 40) % 3 == 0 ? TD_WORKER_COMPUTE : (r >> 40) % 3 == 1 ? TD_WORKER_COMM
                                                                                            : TD_WORKER_COPY_ENGINE,
                               TD_TASK_NOP};
    }
    int64_t comp = 0, comm = 0, hidden = 0;
    for (int i = 0; i < n; i++) {
      int64_t d = ev[i].end_ns - ev[i].start_ns;
      if (ev[i].cls == TD_WORKER_COMPUTE) {
        comp += d;
        continue;
      }
      comm += d;
      for (int64_t t = ev[i].start_ns; t < ev[i].end_ns; t++) { /* each nanosecond [t, t+1) */
        int covered = 0;
        for (int k = 0; k < n && !covered; k++)
          covered = ev[k].cls == TD_WORKER_COMPUTE && ev[k].start_ns <= t && t + 1 <= ev[k].end_ns;
        hidden += covered;
      }
    }
    td_trace_summary s;
    td__trace_summarize(ev, (size_t)n, 4, &s);
    assert_int_equal(s.rank, 4);
    assert_int_equal(s.ntasks, n);
    assert_int_equal(s.compute_ns, comp);
    assert_int_equal(s.comm_ns, comm);
    assert_int_equal(s.comm_hidden_ns, hidden);
    assert_true(s.hidden_share == (comm ? (double)hidden / (double)comm : 0.0));
  }
}

enum { NR = 3, TILES = 4, DIM = 24 };

typedef struct {
  td_plan *plan;
  char path[256];
  int trace_on_rank1;
  td_status write_status[NR];
  char write_message[NR][512];
} trace_case;

/* Per rank: TILES GEMM tiles on compute workers, while the comm worker puts
 * each finished tile to the next rank. */
static td_plan *build(void) {
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(NR, &p), TD_OK);
  int32_t a = ex_buffer(p, "a", TD_BUF_LOCAL, TD_F32, DIM * TILES, DIM);
  int32_t w = ex_buffer(p, "w", TD_BUF_LOCAL, TD_F32, DIM, DIM);
  int32_t c = ex_buffer(p, "c", TD_BUF_LOCAL, TD_F32, DIM * TILES, DIM);
  int32_t recv = ex_buffer(p, "recv", TD_BUF_SYMM, TD_F32, DIM * TILES, DIM);
  for (int r = 0; r < NR; r++) {
    uint32_t idx;
    for (int t = 0; t < TILES; t++) {
      char label[24];
      snprintf(label, sizeof label, "gemm r%d t%d", r, t);
      td_task g = ex_task(TD_TASK_GEMM, TD_WORKER_COMPUTE, 0, label);
      g.a = ex_view(a, TD_PEER_SELF, t * DIM, 0, DIM, DIM);
      g.b = ex_view(w, TD_PEER_SELF, 0, 0, DIM, DIM);
      g.c = ex_view(c, TD_PEER_SELF, t * DIM, 0, DIM, DIM);
      assert_int_equal(td_plan_add_task(p, r, &g, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
    }
    for (int t = 0; t < TILES; t++) {
      char label[24];
      snprintf(label, sizeof label, "put r%d t%d", r, t);
      td_task put = ex_task(TD_TASK_COPY, t % 2 ? TD_WORKER_COPY_ENGINE : TD_WORKER_COMM, 0, label);
      put.a = ex_view(c, TD_PEER_SELF, t * DIM, 0, DIM, DIM);
      put.c = ex_view(recv, (r + 1) % NR, t * DIM, 0, DIM, DIM);
      uint32_t dep = (uint32_t)t;
      assert_int_equal(td_plan_add_task(p, r, &put, &dep, 1, NULL, 0, NULL, 0, &idx), TD_OK);
    }
  }
  assert_int_equal(td_plan_validate(p), TD_OK);
  return p;
}

static td_status rank_fn(td_world *w, int rank, void *arg) {
  trace_case *tc = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.trace = rank != 1 || tc->trace_on_rank1;
  o.compute_workers = 2;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(tc->plan, td_world_team(w), &o, &ex));
  for (int run = 0; run < 3; run++)
    EX_OK(td_exec_run(ex));
  if (o.trace) {
    const td_trace_event *ev;
    size_t n;
    EX_OK(td_exec_trace_events(ex, &ev, &n));
    EX_CHECK(n == 2 * TILES); /* the last run's events only */
    td_trace_summary s;
    EX_OK(td_exec_trace_summary(ex, &s));
    int64_t comp = 0, comm = 0;
    for (size_t i = 0; i < n; i++) {
      EX_CHECK(ev[i].start_ns <= ev[i].end_ns);
      EX_CHECK(ev[i].worker >= 0 && ev[i].worker < 3);
      EX_CHECK(ev[i].kind == (ev[i].task < TILES ? TD_TASK_GEMM : TD_TASK_COPY));
      *(ev[i].cls == TD_WORKER_COMPUTE ? &comp : &comm) += ev[i].end_ns - ev[i].start_ns;
    }
    EX_CHECK(s.rank == rank && s.ntasks == n && s.compute_ns == comp && s.comm_ns == comm);
    EX_CHECK(s.comm_hidden_ns >= 0 && s.comm_hidden_ns <= s.comm_ns);
    EX_CHECK(s.hidden_share >= 0.0 && s.hidden_share <= 1.0);
    EX_CHECK(s.wall_ns >= 0);
  }
  tc->write_status[rank] = td_exec_trace_write(ex, rank == 0 ? tc->path : NULL);
  snprintf(tc->write_message[rank], sizeof tc->write_message[rank], "%s", td_last_error());
  return td_exec_destroy(ex);
}

static void test_traced_run_and_chrome_json(void **state) {
  (void)state;
  trace_case tc = {build(), "", 1, {TD_OK}, {""}};
  snprintf(tc.path, sizeof tc.path, "/tmp/td_exec_trace_%d.json", (int)getpid());
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(NR, &o, rank_fn, &tc);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  for (int r = 0; r < NR; r++)
    if (tc.write_status[r] != TD_OK)
      fail_msg("rank %d trace write: %s", r, tc.write_message[r]);
  FILE *f = fopen(tc.path, "r");
  assert_non_null(f);
  char *text = calloc(1, 1 << 20);
  size_t len = fread(text, 1, (1 << 20) - 1, f);
  fclose(f);
  unlink(tc.path);
  assert_true(len > 0);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  cJSON *list = cJSON_GetObjectItem(root, "traceEvents");
  assert_true(cJSON_IsArray(list));
  int per_rank[NR] = {0}, names = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, list) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    int pid = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "pid"));
    assert_true(pid >= 0 && pid < NR);
    if (!strcmp(ph, "M")) {
      names++;
      continue;
    }
    assert_string_equal(ph, "X");
    int task = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "task"));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")),
                        td_plan_schedule(tc.plan, pid)->tasks[task].label);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "ts")) >= 0.0);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "dur")) >= 0.0);
    per_rank[pid]++;
  }
  for (int r = 0; r < NR; r++)
    assert_int_equal(per_rank[r], 2 * TILES);
  assert_true(names >= 2 * NR); /* a process name and at least one thread name per rank */
  cJSON_Delete(root);
  free(text);

  /* Tracing off on one rank: every rank gets TD_ERR_STATE naming it. */
  tc.trace_on_rank1 = 0;
  st = td_local_world_run(NR, &o, rank_fn, &tc);
  assert_int_equal(st, TD_OK);
  for (int r = 0; r < NR; r++) {
    assert_int_equal(tc.write_status[r], TD_ERR_STATE);
    assert_non_null(strstr(tc.write_message[r], "rank 1 has no trace of its last run"));
  }
  assert_int_equal(access(tc.path, F_OK), -1);
  td_plan_destroy(tc.plan);
}

static td_status errors_rank(td_world *w, int rank, void *arg) {
  trace_case *tc = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.trace = 1;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(tc->plan, td_world_team(w), &o, &ex));
  td_trace_summary s;
  EX_CHECK(td_exec_trace_summary(ex, &s) == TD_ERR_STATE);
  EX_CHECK(strstr(td_last_error(), "no run has been traced yet; call td_exec_run first") != NULL);
  EX_OK(td_exec_run(ex));
  EX_CHECK(td_exec_trace_summary(ex, NULL) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "out is NULL") != NULL);
  EX_CHECK(td_exec_trace_events(ex, NULL, NULL) == TD_ERR_INVALID_ARG);
  EX_CHECK(strstr(td_last_error(), "events and count must not be NULL") != NULL);
  /* Rank 0 cannot write into a missing folder: only rank 0 fails, with the path. */
  td_status st = td_exec_trace_write(ex, "/nonexistent-dir/trace.json");
  if (rank == 0) {
    EX_CHECK(st == TD_ERR_SYSTEM);
    EX_CHECK(strstr(td_last_error(), "cannot write trace file '/nonexistent-dir/trace.json'") != NULL);
    EX_CHECK(td_exec_trace_write(ex, NULL) == TD_ERR_INVALID_ARG);
    EX_CHECK(strstr(td_last_error(), "path is NULL on team rank 0") != NULL);
  } else {
    EX_OK(st);
  }
  return td_exec_destroy(ex);
}

static void test_trace_errors(void **state) {
  (void)state;
  trace_case tc = {NULL, "", 1, {TD_OK}, {""}};
  td_world_opts o = ex_world_opts(20000);
  /* One rank, so its NULL-path refusal (before any collective call) leaves
   * no peer waiting. */
  td_plan *p = NULL;
  assert_int_equal(td_plan_create(1, &p), TD_OK);
  uint32_t idx;
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "nop");
  assert_int_equal(td_plan_add_task(p, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  assert_int_equal(td_plan_validate(p), TD_OK);
  tc.plan = p;
  td_status st = td_local_world_run(1, &o, errors_rank, &tc);
  if (st != TD_OK)
    fail_msg("%s: %s", td_status_name(st), td_last_error());
  td_plan_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_summary_vs_brute_force),
      cmocka_unit_test(test_traced_run_and_chrome_json),
      cmocka_unit_test(test_trace_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
