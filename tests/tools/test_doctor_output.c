/* SPDX-License-Identifier: Apache-2.0
 * `tdist doctor` with stdout and stderr on one pipe (2>&1): no line is split
 * by the other stream (stdout is line-buffered and flushed before stderr);
 * TD_CUDA_TARGET_NAME without TD_CUDA_TARGET_SM is reported as ignored; a
 * misspelt TD_OPS_* knob, which every other command refuses, is a problem
 * (exit 1) and not only a listed name; and a /dev/shm/tdist-* object whose
 * creator pid is dead is listed with its remedy (a live one is not). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_test_util.h"
#include "transport/transport.h"

static char out[1 << 17];

/* The line of out that starts with `prefix`, or NULL. */
static const char *line_starting(const char *prefix, char *line, size_t cap) {
  for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, prefix, strlen(prefix))) {
      size_t n = strcspn(p, "\n");
      snprintf(line, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
      return line;
    }
  return NULL;
}

static void test_lines_not_split(void **state) {
  (void)state;
  /* two bad values: their messages go to stderr while the table is on stdout */
  int rc = run("doctor", out, sizeof out); /* warm: the no-problem case exits 0 */
  assert_int_equal(rc, 0);
  setenv("TD_OPS_FUSED_AR", "bogus", 1);
  setenv("TD_OPS_FUSED_AG_GEMMS", "9", 1);
  rc = run("doctor", out, sizeof out);
  unsetenv("TD_OPS_FUSED_AR");
  unsetenv("TD_OPS_FUSED_AG_GEMMS");
  assert_int_equal(rc, 1);
  char line[1024];
  assert_non_null(line_starting("TD_OPS_FUSED_AR ", line, sizeof line));
  assert_non_null(strstr(line, "(set)"));
  assert_non_null(strstr(line, "value=bogus")); /* the whole variable line, nothing inside it */
  assert_null(strstr(line, "is not allowed"));
  assert_non_null(line_starting("TD_OPS_FUSED_AR='bogus' is not allowed; allowed: auto,two-shot,all-push", line,
                                sizeof line));
  assert_non_null(line_starting("TD_OPS_FUSED_AG_GEMMS='9' is not allowed; allowed: 0,1,3,8", line, sizeof line));
  assert_non_null(line_starting("doctor: 2 problems in the configuration", line, sizeof line));
}

static void test_target_name_alone(void **state) {
  (void)state;
  setenv("TD_CUDA_TARGET_NAME", "NVIDIA H200", 1);
  int rc = run("doctor", out, sizeof out);
  assert_int_equal(rc, 0); /* a note, not a malformed value */
  assert_non_null(strstr(out, "note: TD_CUDA_TARGET_NAME='NVIDIA H200' is ignored"));
  assert_non_null(strstr(out, "TD_CUDA_TARGET_SM is not set"));
  setenv("TD_CUDA_TARGET_SM", "90", 1);
  rc = run("doctor", out, sizeof out);
  assert_int_equal(rc, 0);
  assert_null(strstr(out, "is ignored"));
  unsetenv("TD_CUDA_TARGET_SM");
  unsetenv("TD_CUDA_TARGET_NAME");
}

/* TD_OPS_FUSED_BCAST_HAFL: `tdist run` and the operators refuse it (exit 2), so doctor, asked what is wrong,
 * must not exit 0; a typo outside TD_OPS_ (read by nobody, refused by nobody) stays a listed name only, and an
 * empty value reads as unset there as everywhere. */
static void test_ops_typo_is_a_problem(void **state) {
  (void)state;
  setenv("TD_OPS_FUSED_BCAST_HAFL", "pace", 1);
  int rc = run("doctor", out, sizeof out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(out, "TD_OPS_FUSED_BCAST_HAFL (not a tdist variable; did you mean "
                              "TD_OPS_FUSED_BCAST_HALF?)")); /* HALF 1 edit away (a swap), HINT and PACE 3 */
  char line[1024];
  assert_non_null(line_starting("1 unknown TD_OPS_* variable (listed above): the operators and tdist's other "
                                "commands refuse to start while it is set", line, sizeof line));
  assert_non_null(line_starting("doctor: 1 problem in the configuration", line, sizeof line));
  char args[1024]; /* what doctor warns of */
  const char *src = getenv("TD_SOURCE_DIR");
  snprintf(args, sizeof args, "run '%s/examples/tp_mlp.td' --ranks 2", src ? src : ".");
  rc = run(args, out, sizeof out);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "TD_OPS_FUSED_BCAST_HAFL is not a tdist variable"));
  setenv("TD_OPS_FUSED_BCAST_HALF", "PACE", 1); /* a bad value beside it: two problems */
  rc = run("doctor", out, sizeof out);
  unsetenv("TD_OPS_FUSED_BCAST_HALF");
  assert_int_equal(rc, 1);
  assert_non_null(line_starting("TD_OPS_FUSED_BCAST_HALF='PACE' is not allowed; allowed: wait,defer,pace", line,
                                sizeof line));
  assert_non_null(line_starting("doctor: 2 problems in the configuration", line, sizeof line));
  setenv("TD_OPS_FUSED_BCAST_HAFL", "", 1);
  rc = run("doctor", out, sizeof out);
  assert_int_equal(rc, 0);
  unsetenv("TD_OPS_FUSED_BCAST_HAFL");
  setenv("TD_TIMEOUT_MSS", "5", 1);
  rc = run("doctor", out, sizeof out);
  unsetenv("TD_TIMEOUT_MSS");
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "TD_TIMEOUT_MSS (not a tdist variable; did you mean TD_TIMEOUT_MS?)"));
  assert_null(strstr(out, "unknown TD_OPS_*"));
}

/* Makes /dev/shm/<name> holding a finished region header whose creator is `pid`. */
static void make_region(const char *name, int32_t pid) {
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 65536), 0);
  td__region_header *h = mmap(NULL, sizeof *h, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(h != MAP_FAILED);
  h->creator_pid = pid;
  h->world_size = 2;
  atomic_store_explicit(&h->magic, TD__REGION_MAGIC, memory_order_release);
  munmap(h, sizeof *h);
  close(fd);
}

static void test_stale_shm_listed(void **state) {
  (void)state;
  pid_t child = fork(); /* a pid that is surely dead once reaped */
  assert_true(child >= 0);
  if (child == 0)
    _exit(0);
  assert_int_equal(waitpid(child, NULL, 0), child);
  char dead[64], live[64], needle[256];
  snprintf(dead, sizeof dead, "/tdist-doctortest-dead-%ld", (long)getpid());
  snprintf(live, sizeof live, "/tdist-doctortest-live-%ld", (long)getpid());
  shm_unlink(dead);
  shm_unlink(live);
  make_region(dead, (int32_t)child);
  make_region(live, (int32_t)getpid());
  int rc = run("doctor", out, sizeof out);
  shm_unlink(dead);
  shm_unlink(live);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "stale shared memory (its creator is gone; no tdist job uses it):"));
  snprintf(needle, sizeof needle, "/dev/shm%s  0.1 MiB, creator pid %ld is gone: remove it with rm /dev/shm%s", dead,
           (long)child, dead);
  if (!strstr(out, needle))
    fprintf(stderr, "expected '%s' in:\n%s\n", needle, out);
  assert_non_null(strstr(out, needle));
  assert_null(strstr(out, live + 1)); /* its creator (this test) is alive */
}

int main(void) {
  const char *bin = getenv("TD_BIN_DIR");
  snprintf(tdist_bin, sizeof tdist_bin, "%s/tdist", bin ? bin : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lines_not_split),
      cmocka_unit_test(test_target_name_alone),
      cmocka_unit_test(test_ops_typo_is_a_problem),
      cmocka_unit_test(test_stale_shm_listed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
