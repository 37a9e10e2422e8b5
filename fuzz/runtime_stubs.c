/* SPDX-License-Identifier: Apache-2.0
 * The one runtime symbol the plan code (src/exec/schedule*.c) uses, for the
 * fuzz build, which compiles the compiler without the runtime layers. */
#include "tdist/rma.h"

const char *td_cmp_name(td_cmp cmp) {
  static const char *const names[] = {"eq", "ne", "gt", "ge", "lt", "le"};
  return (unsigned)cmp < 6 ? names[cmp] : "invalid";
}
