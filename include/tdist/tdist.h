/* SPDX-License-Identifier: Apache-2.0
 * tdist: overlapping computation with communication for distributed AI
 * workloads. The umbrella header: include this one. */
#ifndef TDIST_TDIST_H
#define TDIST_TDIST_H

#include "tdist/version.h"
#include "tdist/status.h"
#include "tdist/types.h"
#include "tdist/config.h"
#include "tdist/world.h"
#include "tdist/symm.h"
#include "tdist/rma.h"
#include "tdist/coll.h"
#include "tdist/schedule.h"
#include "tdist/exec.h"
#include "tdist/program.h"
#include "tdist/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The library's version string ("0.1.0"), which may differ from TD_VERSION_STRING
 * when an application runs against a newer shared library. */
const char *td_version(void);

#ifdef __cplusplus
}
#endif
#endif
