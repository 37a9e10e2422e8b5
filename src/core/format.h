/* SPDX-License-Identifier: Apache-2.0
 * Core services: numbers as the library's and the tools' messages print
 * them. Internal (td__), shared by the compiler's run checks and the
 * benchmark's fit checks so that both say sizes the same way. */
#ifndef TD_CORE_FORMAT_H
#define TD_CORE_FORMAT_H

#include <stddef.h>

/** Writes `bytes` as "<x.y> GiB", "MiB" or "KiB" (the largest unit not above
 * the value; powers of 1024), or "<n> bytes" below 1 KiB, into buf (cap
 * bytes, NUL-terminated). Thread-safe. */
void td__format_bytes(double bytes, char *buf, size_t cap);

#endif
