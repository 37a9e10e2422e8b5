/* SPDX-License-Identifier: Apache-2.0
 * Internal: the tile configuration a TD_GEMM_QUEUE task carries in the high
 * bits of td_task.op (executor layer, shared by the compiler that packs it,
 * td_plan_validate that checks it and the cuda executor that launches it).
 *
 * Bits, counted from TD_GEMM_CFG_SHIFT (8):
 *   0-1   block rows: 1 = 64, 2 = 128, 3 = 256 (0 = no configuration: the
 *         backend picks its default; then every other field is 0 too)
 *   2-6   block cols / 16: 1..16 (16..256)
 *   7-10  pipeline stages: 2..8
 *   11-12 cluster: 1 or 2
 *   13-17 swizzle group (group_m): 1..31
 *   18    architecture: 0 = sm_90 (bk 64), 1 = sm_80 (bk 32)
 * Bits 27-31 (op bits 26 and up of the field) stay 0. split_k is always 1: a
 * queue GEMM writes its output once. */
#ifndef TD_EXEC_GEMM_QUEUE_CFG_H
#define TD_EXEC_GEMM_QUEUE_CFG_H

#include <stdint.h>

#include "tdist/status.h"

/** A GEMM tile configuration as the plan stores it (mirrors td_gemm_config of
 * src/tile/cuda/gemm.h without depending on it: this layer builds without CUDA). */
typedef struct td__gemm_qcfg {
  int arch; /* 90 or 80 */
  int bm, bn, bk, stages, cluster, group_m;
} td__gemm_qcfg;

/** Packs cfg into the op bits above TD_GEMM_CFG_SHIFT (returned already
 * shifted, to be OR-ed with TD_GEMM_QUEUE and the other flags). Returns 0
 * when cfg cannot be represented (then the backend default applies). */
uint32_t td__gemm_qcfg_pack(const td__gemm_qcfg *cfg);

/** Unpacks the configuration of op into *out. Returns 1 when op carries one,
 * 0 when its field is 0 (backend default; *out untouched), -1 when the field
 * is malformed (a value outside the ranges above; *out untouched). */
int td__gemm_qcfg_unpack(uint32_t op, td__gemm_qcfg *out);

/** "bm128 bn256 s4 c2 g8 sm90" into buf, for explain and messages. */
void td__gemm_qcfg_format(const td__gemm_qcfg *cfg, char *buf, size_t size);

#endif
