/* SPDX-License-Identifier: Apache-2.0
 * Core services: byte counts for messages (format.h). */
#include "core/format.h"

#include <stdio.h>

void td__format_bytes(double b, char *buf, size_t cap) {
  /* the unit is chosen on the value as printed (one decimal), so 1048575
   * bytes read "1.0 MiB", not "1024.0 KiB" */
  static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1023.95) {
    snprintf(buf, cap, "%.0f byte%s", b, b >= 0.5 && b < 1.5 ? "" : "s");
    return;
  }
  int u = 0;
  double v = b / 1024.0;
  while (v >= 1023.95 && u < 3)
    v /= 1024.0, u++;
  snprintf(buf, cap, "%.1f %s", v, unit[u]);
}
