/* SPDX-License-Identifier: Apache-2.0
 * Test helpers for the host collectives: deterministic random inputs that any
 * rank can regenerate for any other rank (so each rank computes the
 * single-rank reference itself, no data exchange), the reference reduction in
 * the documented order, and one check routine per collective that runs every
 * count, dtype, op and buffer kind on a team and returns a td_status with a
 * message naming the first wrong element. Check routines run on rank threads
 * (local worlds) or in rank processes (tdrun), so they never call cmocka. */
#ifndef TD_TESTS_COLL_CHECKS_H
#define TD_TESTS_COLL_CHECKS_H

#include <stddef.h>
#include <stdint.h>

#include "tdist/tdist.h"

/* The element counts every check covers; the last ("big", 1 MiB + 3) only for
 * a few dtypes, to keep 8 ranks on 2 cores fast. */
#define CU_BIG_COUNT ((size_t)(1u << 20) + 3)

typedef struct cu_opts {
  int big;        /* also run CU_BIG_COUNT */
  int all_dtypes; /* every dtype and op (else f32 sum, bf16 sum, i32 max) */
} cu_opts;

/** Element i of rank r's input for a call identified by seed, in dtype's
 * bytes (little-endian in the low bytes of the result). Never zero. Values
 * suit `op` (small magnitudes for prod so products stay finite/in range). */
uint64_t cu_value(td_dtype dt, td_red_op op, uint64_t seed, int rank, size_t i);
/** Writes count elements: buf[j] = cu_value(..., first + j). */
void cu_fill(void *buf, td_dtype dt, td_red_op op, uint64_t seed, int rank, size_t first,
             size_t count);
/** Reference reduction of element i over ranks 0..n-1 in that order. */
uint64_t cu_reduce_ref(td_dtype dt, td_red_op op, uint64_t seed, int n, size_t i);
/** Compares count elements of buf with expected values from `want(j)`; on the
 * first difference returns TD_ERR_CHECK_FAILED with a message naming what. */
td_status cu_expect(const char *what, const void *buf, td_dtype dt, size_t count,
                    uint64_t (*want)(const void *ctx, size_t j), const void *ctx);

/* Each runs its collective over `team` (a member's handle) for counts 0, 1,
 * 7, 4097 (and CU_BIG_COUNT when opts->big), the dtypes/ops opts selects, with
 * ordinary and symmetric buffers (and in-place forms where allowed). */
td_status cu_check_all_gather(td_team *team, const cu_opts *opts);
td_status cu_check_broadcast(td_team *team, const cu_opts *opts);
td_status cu_check_reduce_scatter(td_team *team, const cu_opts *opts);
td_status cu_check_all_reduce(td_team *team, const cu_opts *opts);
td_status cu_check_all_to_all(td_team *team, const cu_opts *opts);
td_status cu_check_all_to_allv(td_team *team, const cu_opts *opts);

#endif
