/* SPDX-License-Identifier: Apache-2.0
 * Packing of a queue GEMM's tile configuration into td_task.op (executor
 * layer). The layout is written down in gemm_queue_cfg.h; the plan keeps it in
 * op so the text form, the validator and every copy of a plan carry it
 * without a new field in td_task (whose layout is public). */
#include <stddef.h>
#include <stdio.h>

#include "exec/gemm_queue_cfg.h"
#include "tdist/schedule.h"

uint32_t td__gemm_qcfg_pack(const td__gemm_qcfg *c) {
  uint32_t bm = c->bm == 64 ? 1u : c->bm == 128 ? 2u : c->bm == 256 ? 3u : 0u;
  if (!bm || c->bn < 16 || c->bn > 256 || c->bn % 16 || c->stages < 2 || c->stages > 8 || c->cluster < 1 ||
      c->cluster > 2 || c->group_m < 1 || c->group_m > 31 || (c->arch != 90 && c->arch != 80))
    return 0;
  uint32_t f = bm | (uint32_t)(c->bn / 16) << 2 | (uint32_t)c->stages << 7 | (uint32_t)c->cluster << 11 |
               (uint32_t)c->group_m << 13 | (c->arch == 80 ? 1u : 0u) << 18;
  return f << TD_GEMM_CFG_SHIFT;
}

int td__gemm_qcfg_unpack(uint32_t op, td__gemm_qcfg *out) {
  const uint32_t f = op >> TD_GEMM_CFG_SHIFT;
  if (f == 0)
    return 0;
  const uint32_t bm = f & 3u, bn16 = (f >> 2) & 31u, stages = (f >> 7) & 15u, cluster = (f >> 11) & 3u,
                 group = (f >> 13) & 31u, sm80 = (f >> 18) & 1u;
  if (!bm || bn16 < 1 || bn16 > 16 || stages < 2 || stages > 8 || cluster < 1 || cluster > 2 || group < 1 ||
      (f >> 19) != 0)
    return -1;
  td__gemm_qcfg c = {
      .arch = sm80 ? 80 : 90,
      .bm = 32 << bm,
      .bn = (int)bn16 * 16,
      .bk = sm80 ? 32 : 64,
      .stages = (int)stages,
      .cluster = (int)cluster,
      .group_m = (int)group,
  };
  *out = c;
  return 1;
}

void td__gemm_qcfg_format(const td__gemm_qcfg *c, char *buf, size_t size) {
  snprintf(buf, size, "bm%d bn%d s%d c%d g%d sm%d", c->bm, c->bn, c->stages, c->cluster, c->group_m, c->arch);
}
