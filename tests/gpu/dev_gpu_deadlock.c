/* SPDX-License-Identifier: Apache-2.0
 * The deliberate deadlock (label gpu): rank 0's block 1 waits for a signal
 * nobody raises while the other blocks of all ranks wait too. The device
 * deadline passes, the first wait records its diagnostic in host-visible
 * memory and traps; the host gets TD_ERR_TIMEOUT with a message naming rank,
 * block, thread, the signal's heap offset, the comparison, expected and
 * observed values, and saying the CUDA context is lost. A trap ends the
 * process's CUDA context, so each world size runs in a forked child that
 * reports back through a pipe; the parent never touches CUDA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/dev_kernels.h"

/* Child: returns the status; writes "<status> <message>" to fd. */
static void child(int n, int fd) {
  td_cuda_local_opts o;
  td_cuda_local_opts_init(&o);
  o.nranks = n;
  o.heap_size = 1u << 20;
  o.timeout_ms = 250;
  td_cuda_local *cl = NULL;
  td_status st = td_cuda_local_create(&o, &cl);
  if (st == TD_OK)
    st = gdev_stuck(cl, 2, NULL);
  char buf[2048];
  int len = snprintf(buf, sizeof buf, "%d %s", (int)st, td_last_error());
  if (write(fd, buf, (size_t)(len < (int)sizeof buf ? len : (int)sizeof buf - 1)) < 0)
    _exit(3);
  _exit(0); /* no destroy: the context is gone */
}

static void test_deadlock_diagnostic(void **state) {
  static const int sizes[] = {2, 4, 8};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      child(sizes[i], fds[1]);
    }
    close(fds[1]);
    char buf[2048];
    ssize_t got = 0, k;
    while (got < (ssize_t)sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - (size_t)got)) > 0)
      got += k;
    buf[got > 0 ? got : 0] = '\0';
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    print_message("%d ranks: %s\n", sizes[i], buf);
    int st = -1, off = 0;
    assert_true(sscanf(buf, "%d %n", &st, &off) >= 1);
    assert_int_equal(st, TD_ERR_TIMEOUT);
    const char *msg = buf + off;
    assert_non_null(strstr(msg, "rank 0 (block 1, thread 0): device wait timed out after"));
    assert_non_null(strstr(msg, "on the signal at heap offset 0x"));
    assert_non_null(strstr(msg, "of rank 0: needed value ge 7, observed 3"));
    assert_non_null(strstr(msg, "the CUDA context is lost"));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_deadlock_diagnostic)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
