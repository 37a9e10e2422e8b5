/* SPDX-License-Identifier: Apache-2.0
 * Internal: the layout of td_plan (executor layer), shared by plan building
 * (schedule.c), validation (schedule_validate.c) and the text form
 * (schedule_text.c). */
#ifndef TD_EXEC_SCHEDULE_INTERNAL_H
#define TD_EXEC_SCHEDULE_INTERNAL_H

#include "tdist/schedule.h"

#define TD__SIGNAL_NAME_MAX 32

/* Growable arrays behind one rank's td_schedule. */
typedef struct td__sched_caps {
  uint32_t tasks, deps, waits, raises;
} td__sched_caps;

struct td_plan {
  int nranks;
  td_buffer_desc *bufs;
  int32_t nbufs, bufs_cap;
  char (*signal_names)[TD__SIGNAL_NAME_MAX];
  uint32_t nsignals, signals_cap;
  td_schedule *scheds; /* [nranks] */
  td__sched_caps *caps;
  uint64_t *totals; /* [nsignals * nranks] after validate: totals[s * nranks + r] */
  int validated;
  uint64_t generation; /* bumped by every change and validation (executors compare it) */
};

/** Human-readable names used in messages and in the text form. */
const char *td__task_kind_name(td_task_kind kind);
const char *td__worker_class_name(td_worker_class cls);
const char *td__buffer_kind_name(td_buffer_kind kind);
const char *td__ewise_op_name(td_ewise_op op);

/** A hash of everything that defines the plan (ranks, buffers, signals,
 * every rank's tasks with their deps, waits, raises and labels): equal plans
 * give equal values on every rank (td_exec_create compares them). */
uint64_t td__plan_fingerprint(const td_plan *plan);
/** The plan's change counter (see td_plan::generation). */
uint64_t td__plan_generation(const td_plan *plan);

/** Which views a task uses: bit 0 a, bit 1 b, bit 2 c (c is the one written). */
unsigned td__task_views_used(const td_task *t);

#endif
