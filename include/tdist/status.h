/* SPDX-License-Identifier: Apache-2.0
 * Status codes, their strings, and the thread-local last-error message.
 *
 * Every public tdist function that can fail returns td_status. Codes are
 * grouped by what the caller must do: fix the call (1-19), retry smaller or
 * later (20-29), tear the team down (30-39), or accept that it is unsupported
 * or report a bug (40-49). The first code that detects a problem writes a
 * message for the calling thread, readable with td_last_error(); the library
 * never prints and never aborts. */
#ifndef TDIST_STATUS_H
#define TDIST_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description) -- the one list the enum and td_strerror() come from. */
#define TD_STATUS_LIST(X)                                                                       \
  X(TD_OK, 0, "success")                                                                        \
  /* fix the call */                                                                            \
  X(TD_ERR_INVALID_ARG, 1, "invalid argument")                                                  \
  X(TD_ERR_MISMATCH, 2, "collective call arguments differ across ranks")                        \
  X(TD_ERR_NOT_FOUND, 3, "object not found")                                                    \
  X(TD_ERR_STATE, 4, "object used in the wrong state")                                          \
  X(TD_ERR_PARSE, 5, "program text has an error")                                               \
  X(TD_ERR_SHAPE, 6, "tensor shapes or layouts are inconsistent")                               \
  X(TD_ERR_SCHEDULE, 7, "schedule is invalid")                                                  \
  X(TD_ERR_CHECK_FAILED, 8, "result differs from the reference")                                \
  /* retry smaller or later */                                                                  \
  X(TD_ERR_NO_MEMORY, 20, "out of host or device memory")                                       \
  X(TD_ERR_HEAP_EXHAUSTED, 21, "symmetric heap exhausted (raise TD_SYMM_HEAP_SIZE)")            \
  X(TD_ERR_BUSY, 22, "resource busy")                                                           \
  /* tear the team down */                                                                      \
  X(TD_ERR_TIMEOUT, 30, "wait timed out (deadline TD_TIMEOUT_MS passed)")                       \
  X(TD_ERR_PEER_FAILED, 31, "a peer rank failed or left")                                       \
  X(TD_ERR_SYSTEM, 32, "operating-system call failed")                                          \
  X(TD_ERR_CUDA, 33, "CUDA call failed")                                                        \
  X(TD_ERR_NCCL, 34, "NCCL call failed")                                                        \
  /* unsupported or internal */                                                                 \
  X(TD_ERR_UNSUPPORTED, 40, "not supported by this build, backend or transport")                \
  X(TD_ERR_INTERNAL, 41, "internal error (a tdist bug; please report it)")

typedef enum td_status {
#define TD__STATUS_ENUM(name, value, text) name = value,
  TD_STATUS_LIST(TD__STATUS_ENUM)
#undef TD__STATUS_ENUM
} td_status;

/** Name-free description of a status ("wait timed out ..."). Never NULL; unknown
 * values give "unknown status". Thread-safe. */
const char *td_strerror(td_status status);

/** The enum's identifier as text ("TD_ERR_TIMEOUT"). Never NULL. Thread-safe. */
const char *td_status_name(td_status status);

/** The calling thread's last error message: what went wrong, where, and what to
 * do. Empty string when no error has been recorded. Valid until the calling
 * thread's next tdist call. Thread-safe (thread-local). */
const char *td_last_error(void);

/** Forget the calling thread's last error message. */
void td_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
