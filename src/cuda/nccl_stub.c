/* SPDX-License-Identifier: Apache-2.0
 * The `nccl` transport in builds without NCCL >= 2.28 (primitives layer,
 * transports): every call says so, as a `none` transport documents the
 * contract (tdist/device/nccl.h). */
#include "core/error.h"
#include "tdist/device/nccl.h"

static td_status td__nccl_missing(const char *who) {
  return td__error(TD_ERR_UNSUPPORTED,
                   "%s: tdist was built without NCCL >= 2.28 (symmetric windows and the device "
                   "API); install it or set TD_NCCL_HOME and rebuild",
                   who);
}

td_status td_nccl_create(td_team *team, int device, size_t heap_size, int timeout_ms,
                         td_nccl **out) {
  (void)team, (void)device, (void)heap_size, (void)timeout_ms, (void)out;
  return td__nccl_missing("td_nccl_create");
}
td_status td_nccl_destroy(td_nccl *nc) {
  (void)nc;
  return TD_OK;
}
td_status td_nccl_alloc(td_nccl *nc, size_t bytes, size_t align, size_t *offset) {
  (void)nc, (void)bytes, (void)align, (void)offset;
  return td__nccl_missing("td_nccl_alloc");
}
void *td_nccl_ptr(const td_nccl *nc, size_t offset) {
  (void)nc, (void)offset;
  return NULL;
}
td_status td_nccl_ctx(const td_nccl *nc, td_dev_ctx *out) {
  (void)nc, (void)out;
  return td__nccl_missing("td_nccl_ctx");
}
const td_dev_diagnostic *td_nccl_diagnostic(const td_nccl *nc) {
  (void)nc;
  return NULL;
}
