/* SPDX-License-Identifier: Apache-2.0
 * Core services: numbers as the library's and the tools' messages print
 * them. Internal (td__), shared by the compiler's run checks and the
 * benchmark's fit checks so that both say sizes the same way. */
#ifndef TD_CORE_FORMAT_H
#define TD_CORE_FORMAT_H

#include <stddef.h>

/** Writes `bytes` as "<x.y> KiB", "MiB", "GiB" or "TiB" (powers of 1024; the
 * largest unit whose printed value is at least 1.0), or "<n> bytes" ("1 byte")
 * below 1 KiB, into buf (cap bytes, NUL-terminated). Thread-safe. */
void td__format_bytes(double bytes, char *buf, size_t cap);

#endif
