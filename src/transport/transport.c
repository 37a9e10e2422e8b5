/* SPDX-License-Identifier: Apache-2.0
 * The list of compiled transports (transport layer). Layers above look a
 * transport up by name once, at world creation, and then use only its table. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "transport/transport.h"

const td__transport *td__transport_find(const char *name) {
  static const td__transport *const all[] = {&td__transport_local, &td__transport_shm};
  for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->name, name) == 0)
      return all[i];
  return NULL;
}

void *td__map_aligned(size_t bytes, int fd) {
  /* Reserve one alignment more than needed, map over the aligned part, and
   * give the unused head and tail back. */
  size_t span = bytes + TD__REGION_ALIGN;
  char *raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED)
    return MAP_FAILED;
  char *aligned = (char *)(((uintptr_t)raw + TD__REGION_ALIGN - 1) & ~(uintptr_t)(TD__REGION_ALIGN - 1));
  int flags = MAP_FIXED | MAP_NORESERVE | (fd < 0 ? MAP_PRIVATE | MAP_ANONYMOUS : MAP_SHARED);
  void *p = mmap(aligned, bytes, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (p == MAP_FAILED) {
    munmap(raw, span);
    return MAP_FAILED;
  }
  if (aligned > raw)
    munmap(raw, (size_t)(aligned - raw));
  size_t tail = (size_t)(raw + span - (aligned + bytes));
  if (tail)
    munmap(aligned + bytes, tail);
  return p;
}
