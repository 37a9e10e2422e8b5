/* SPDX-License-Identifier: Apache-2.0
 * Chrome traces are valid UTF-8 whatever the task labels hold: invalid
 * bytes (\xff \xfe), a sequence cut by the end of the label (\xc3) or by
 * the 24-byte label limit become '?', valid multi-byte characters stay. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_harness.h"

typedef struct tr_case {
  td_plan *plan;
  char path[64];
} tr_case;

static td_status rank_fn(td_world *w, int rank, void *arg) {
  tr_case *c = arg;
  td_exec_opts o;
  td_exec_opts_init(&o);
  o.trace = 1;
  td_exec *ex = NULL;
  EX_OK(td_exec_create(c->plan, td_world_team(w), &o, &ex));
  EX_OK(td_exec_run(ex));
  EX_OK(td_exec_trace_write(ex, rank == 0 ? c->path : NULL));
  return td_exec_destroy(ex);
}

/* Strict UTF-8 check of the whole file (no overlongs, surrogates, cuts). */
static int valid_utf8(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned c = p[i];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || i + len > n)
      return 0;
    unsigned v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < len; k++) {
      if ((p[i + k] & 0xc0) != 0x80)
        return 0;
      v = (v << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 2 && v < 0x80) || (len == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
        (len == 4 && (v < 0x10000 || v > 0x10ffff)))
      return 0;
    i += len;
  }
  return 1;
}

static void test_labels_become_valid_utf8(void **state) {
  (void)state;
  const char *text = "tdist-plan 1\nranks 2\nsignal 0 \"s\"\n"
                     "task 0 0 nop compute op 0 alpha 0x1p+0 a -1 -1 0 0 0 0 b -1 -1 0 0 0 0 c -1 -1 0 0 0 0 "
                     "deps 0 waits 0 raises 1 0 1 1 label \"\\xff\\xfe bad\"\n"
                     "task 1 0 nop comm op 0 alpha 0x1p+0 a -1 -1 0 0 0 0 b -1 -1 0 0 0 0 c -1 -1 0 0 0 0 "
                     "deps 0 waits 1 0 ge 1 raises 0 label \"\\xc3\"\n"
                     "task 1 1 nop comm op 0 alpha 0x1p+0 a -1 -1 0 0 0 0 b -1 -1 0 0 0 0 c -1 -1 0 0 0 0 "
                     "deps 0 waits 0 raises 0 label \"caf\\xc3\\xa9 ok\"\n";
  tr_case c;
  assert_int_equal(td_plan_parse(text, &c.plan), TD_OK);
  /* 22 ASCII bytes then a 2-byte character: the 24-byte label keeps its
   * first byte only. */
  td_task t = ex_task(TD_TASK_NOP, TD_WORKER_COMPUTE, 0, "");
  memset(t.label, 'a', 22);
  t.label[22] = (char)0xc3, t.label[23] = (char)0xa9;
  uint32_t idx;
  assert_int_equal(td_plan_add_task(c.plan, 0, &t, NULL, 0, NULL, 0, NULL, 0, &idx), TD_OK);
  assert_int_equal(td_plan_validate(c.plan), TD_OK);
  snprintf(c.path, sizeof c.path, "/tmp/td_trace_utf8_%d.json", (int)getpid());
  td_world_opts o = ex_world_opts(20000);
  td_status st = td_local_world_run(2, &o, rank_fn, &c);
  if (st != TD_OK)
    fail_msg("%s", td_last_error());
  FILE *f = fopen(c.path, "rb");
  assert_non_null(f);
  static unsigned char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  unlink(c.path);
  buf[n] = 0;
  assert_true(valid_utf8(buf, n));
  cJSON *root = cJSON_Parse((const char *)buf);
  assert_non_null(root);
  int seen = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph")), "X"))
      continue;
    seen += !strcmp(name, "?? bad") + !strcmp(name, "?") + !strcmp(name, "caf\xc3\xa9 ok") +
            !strcmp(name, "aaaaaaaaaaaaaaaaaaaaaa?");
  }
  assert_int_equal(seen, 4);
  cJSON_Delete(root);
  td_plan_destroy(c.plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_labels_become_valid_utf8)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
