/* SPDX-License-Identifier: Apache-2.0
 * Launcher compatibility: one tdist program (launch_check: world from the
 * environment, symmetric memory, put+signal exchange, finalize) runs under
 * tdrun with 1, 2, 3, 4 and 8 ranks, under a stand-in for torchrun that sets
 * torchrun's variables, and under Open MPI's mpirun (skipped without it).
 * Every rank must report success and no shared memory may be left. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdrun/tdrun_test_util.h"

static char launch_check[4096], fake_torchrun[4096];

/* Checks that `out` has the success line of every rank of n (each once),
 * prefixed "[R] " when prefixed is set, and nothing else; when job is not
 * NULL, copies the job id printed by rank 0 into it. */
static void expect_all_ok(const char *out, int n, int prefixed, const char *transport, char *job, size_t job_size) {
  for (int r = 0; r < n; r++) {
    char want[128];
    snprintf(want, sizeof want, "launch_check: rank %d of %d ok (transport ", r, n);
    char line[160];
    if (prefixed)
      snprintf(line, sizeof line, "[%d] %s", r, want);
    else
      snprintf(line, sizeof line, "%s", want);
    const char *hit = strstr(out, line);
    if (!hit)
      fprintf(stderr, "no '%s' in output:\n%s\n", line, out);
    assert_non_null(hit);
    assert_null(strstr(hit + 1, line)); /* once only */
    const char *t = hit + strlen(line);
    if (transport)
      assert_int_equal(strncmp(t, transport, strlen(transport)), 0);
    if (r == 0 && job) {
      const char *j = strstr(t, ", job ");
      assert_non_null(j);
      j += 6;
      size_t len = strcspn(j, ")");
      assert_true(len < job_size);
      memcpy(job, j, len);
      job[len] = '\0';
    }
  }
  assert_int_equal(tdt_count_lines(out), n);
}

static void test_under_tdrun(void **state) {
  (void)state;
  const int counts[] = {1, 2, 3, 4, 8};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    char n[16];
    snprintf(n, sizeof n, "%d", counts[i]);
    char *argv[] = {(char *)tdt_tdrun(), "--timeout", "90", "-n", n, launch_check, n, NULL};
    tdt_result res;
    tdt_run(argv, &res);
    if (tdt_exit_code(&res) != 0)
      fprintf(stderr, "tdrun -n %s launch_check failed:\n%s\n%s\n", n, res.out, res.err);
    assert_int_equal(tdt_exit_code(&res), 0);
    char job[128];
    expect_all_ok(res.out, counts[i], 1, counts[i] > 1 ? "shm" : NULL, job, sizeof job);
    assert_int_equal(tdt_count_job_shm(job), 0);
    tdt_result_free(&res);
  }
}

static void test_under_torchrun_variables(void **state) {
  (void)state;
  const int counts[] = {1, 2, 4};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    char n[16], port[16];
    snprintf(n, sizeof n, "%d", counts[i]);
    /* torchrun's default run id is "none": the port must tell jobs apart. */
    snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000) + (int)i);
    setenv("MASTER_PORT", port, 1);
    char *argv[] = {fake_torchrun, n, launch_check, n, NULL};
    tdt_result res;
    tdt_run(argv, &res);
    unsetenv("MASTER_PORT");
    if (tdt_exit_code(&res) != 0)
      fprintf(stderr, "fake_torchrun.sh %s launch_check failed:\n%s\n%s\n", n, res.out, res.err);
    assert_int_equal(tdt_exit_code(&res), 0);
    expect_all_ok(res.out, counts[i], 0, counts[i] > 1 ? "shm" : NULL, NULL, 0);
    char job[64];
    snprintf(job, sizeof job, "none-%s", port);
    assert_int_equal(tdt_count_job_shm(job), 0);
    tdt_result_free(&res);
  }
}

static void test_under_mpirun(void **state) {
  (void)state;
  if (access("/usr/bin/mpirun", X_OK) != 0 && access("/usr/local/bin/mpirun", X_OK) != 0) {
    fprintf(stderr, "mpirun not found: skipping the Open MPI launch\n");
    skip();
  }
  const char *mpirun = access("/usr/bin/mpirun", X_OK) == 0 ? "/usr/bin/mpirun" : "/usr/local/bin/mpirun";
  const int counts[] = {1, 2, 4};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    char n[16];
    snprintf(n, sizeof n, "%d", counts[i]);
    char *argv[] = {(char *)mpirun, "--allow-run-as-root", "--oversubscribe", "-n", n, launch_check, n, NULL};
    tdt_result res;
    tdt_run(argv, &res);
    if (tdt_exit_code(&res) != 0)
      fprintf(stderr, "mpirun -n %s launch_check failed:\n%s\n%s\n", n, res.out, res.err);
    assert_int_equal(tdt_exit_code(&res), 0);
    expect_all_ok(res.out, counts[i], 0, counts[i] > 1 ? "shm" : NULL, NULL, 0);
    tdt_result_free(&res);
  }
}

int main(void) {
  /* The launchers, not this process's environment, must say who is who. */
  const char *vars[] = {"TD_RANK", "TD_WORLD_SIZE", "TD_LOCAL_RANK", "TD_LOCAL_WORLD_SIZE", "TD_JOB_ID",
                        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
                        "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
  /* A broken exchange fails in seconds instead of the 60 s default. */
  setenv("TD_TIMEOUT_MS", "30000", 0);
  const char *tests_dir = getenv("TD_TEST_DIR"), *source_dir = getenv("TD_SOURCE_DIR");
  if (!tests_dir || !source_dir) {
    fprintf(stderr, "TD_TEST_DIR and TD_SOURCE_DIR must be set (run through ctest)\n");
    return 1;
  }
  snprintf(launch_check, sizeof launch_check, "%s/launch_check", tests_dir);
  snprintf(fake_torchrun, sizeof fake_torchrun, "%s/tests/tdrun/fake_torchrun.sh", source_dir);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_under_tdrun),
      cmocka_unit_test(test_under_torchrun_variables),
      cmocka_unit_test(test_under_mpirun),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
