/* SPDX-License-Identifier: Apache-2.0
 * Core services: byte counts for messages (format.h). */
#include "core/format.h"

#include <stdio.h>

void td__format_bytes(double b, char *buf, size_t cap) {
  if (b >= 1073741824.0)
    snprintf(buf, cap, "%.1f GiB", b / 1073741824.0);
  else if (b >= 1048576.0)
    snprintf(buf, cap, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024.0)
    snprintf(buf, cap, "%.1f KiB", b / 1024.0);
  else
    snprintf(buf, cap, "%.0f bytes", b);
}
