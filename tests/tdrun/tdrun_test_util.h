/* SPDX-License-Identifier: Apache-2.0
 * Support for the tdrun tests: run tdrun as a child with its stdout and
 * stderr captured, find the helper program, and check that processes and
 * /dev/shm entries are gone. Paths come from the environment ctest sets
 * (TD_TDRUN, TD_TEST_DIR). */
#ifndef TDRUN_TEST_UTIL_H
#define TDRUN_TEST_UTIL_H

#include <stddef.h>
#include <sys/types.h>

typedef struct tdt_result {
  int status;   /* wait status of tdrun */
  char *out;    /* everything tdrun wrote to stdout (NUL-terminated, malloc'd) */
  char *err;    /* everything tdrun wrote to stderr */
} tdt_result;

/* Path of tdrun and of the helper program (tdrun_helper). */
const char *tdt_tdrun(void);
const char *tdt_helper(void);

/* Starts argv (argv[0] is a path) with stdout/stderr captured; returns its pid
 * and the read ends in *out_fd / *err_fd. */
pid_t tdt_start(char *const argv[], int *out_fd, int *err_fd);
/* Reads both pipes to their end, waits for pid and fills *res. */
void tdt_finish(pid_t pid, int out_fd, int err_fd, tdt_result *res);
/* tdt_start + tdt_finish. */
void tdt_run(char *const argv[], tdt_result *res);
void tdt_result_free(tdt_result *res);

/* Starts `tdrun OPTS... tdrun_helper DIR SPECS...` (both lists NULL-ended). */
pid_t tdt_start_helper(const char *dir, const char *const *opts, const char *const *specs, int *out_fd, int *err_fd);
/* The same, run to the end. */
void tdt_run_helper(const char *dir, const char *const *opts, const char *const *specs, tdt_result *res);
/* Fails the current test if a rank (DIR/pid.R) or grandchild (DIR/gc.R) of
 * ranks 0..nranks-1 still runs; returns how many pids were checked. */
int tdt_expect_all_gone(const char *dir, int nranks);

/* Exit code tdrun returned; -1 when it did not exit normally. */
int tdt_exit_code(const tdt_result *res);

/* A fresh empty directory under /tmp (malloc'd path); removed with its files by tdt_rmdir. */
char *tdt_mkdtemp(void);
void tdt_rmdir(char *dir);

/* Waits until `count` files named prefix* exist in dir (helpers write them
 * when ready); returns 0, or -1 after 30 s. */
int tdt_wait_files(const char *dir, const char *prefix, int count);
/* Reads the pid written in dir/name; 0 when there is no such file. */
pid_t tdt_read_pid(const char *dir, const char *name);
/* Whether a process still runs (a zombie counts as ended). */
int tdt_pid_alive(pid_t pid);
/* Waits up to 5 s for pid to end; returns whether it is still alive after. */
int tdt_pid_alive_after_wait(pid_t pid);
/* Reads the whole of dir/name (malloc'd, NUL-terminated) or NULL. */
char *tdt_read_file(const char *dir, const char *name);
/* Number of /dev/shm entries whose name starts with "tdist-<job_id>". */
int tdt_count_job_shm(const char *job_id);
/* Number of lines of text (a final line without newline counts). */
int tdt_count_lines(const char *text);

#endif
