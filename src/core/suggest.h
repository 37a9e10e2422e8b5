/* SPDX-License-Identifier: Apache-2.0
 * Core services: the "did you mean" of a bad name or value. Internal (td__),
 * shared by the configuration table, the world's transport name and the
 * tools' option values, so that a near miss is answered the same way
 * everywhere. */
#ifndef TD_CORE_SUGGEST_H
#define TD_CORE_SUGGEST_H

#include <stddef.h>

/** The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of two neighbours: the optimal string alignment distance), case and
 * '-' / '_' not counted; 64 when either is longer than 63
 * characters. Thread-safe. */
size_t td__edit_distance(const char *a, const char *b);

/** The items of `allowed` (separated by commas, or by `sep`'s characters
 * when sep is not NULL) nearest to `text`, when near enough to be the one
 * meant: an edit distance (td__edit_distance) of at most max(1, len / 3)
 * characters of the longer of the two, and less than that length (so 'w'
 * is not near 'x'). Writes them quoted into buf (cap
 * bytes, NUL-terminated): "'shm'", or for a tie every item at that distance
 * in the list's order, at most 3: "'split' or 'split2'". Returns how many it
 * wrote (1..3); returns 0 and leaves buf "" when no item is that near, when
 * text equals an item, when text is empty or longer than 63 characters, or
 * when the answer does not fit in cap. Items longer than 63 characters are
 * never suggested. Thread-safe; allocates nothing. */
int td__suggest(const char *text, const char *allowed, const char *sep, char *buf, size_t cap);

#endif
