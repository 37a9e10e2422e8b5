/* SPDX-License-Identifier: Apache-2.0
 * tdrun output relay: reads each rank's stdout and stderr pipes and writes
 * whole lines, prefixed "[RANK] ", to tdrun's own stdout and stderr.
 *
 * tdrun is the only writer of its stdout and stderr, and it writes only whole
 * lines, so lines of different ranks never mix mid-line. A rank's partial
 * line waits in its buffer until the newline arrives, or until the rank's
 * pipe closes (then it is written with a newline added). Lines longer than
 * TDRUN_MAX_LINE are cut into pieces, each prefixed, so memory stays bounded. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdrun.h"

/* Set once writing to an output failed (reader gone): from then on the
 * ranks' pipes of that stream are closed (see tdrun__relay_read). */
static int tdrun__out_broken[2];

static void tdrun__write_all(int is_err, const char *p, size_t len) {
  int fd = is_err ? STDERR_FILENO : STDOUT_FILENO;
  while (len > 0 && !tdrun__out_broken[is_err]) {
    ssize_t w = write(fd, p, len);
    if (w > 0) {
      p += w;
      len -= (size_t)w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && errno == EAGAIN) {
      /* Our stdout was handed to us non-blocking: wait until it drains. */
      struct pollfd pfd = {.fd = fd, .events = POLLOUT};
      poll(&pfd, 1, 100);
    } else {
      tdrun__out_broken[is_err] = 1;
    }
  }
}

/* Output assembly: all complete lines of one read go out in one write. */
typedef struct tdrun_out {
  char *data;
  size_t len, cap;
} tdrun_out;

static int tdrun__out_append(tdrun_out *o, const char *p, size_t len) {
  if (len == 0)
    return 0; /* no prefix: nothing to add (and o->data may still be NULL) */
  if (o->len + len > o->cap) {
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + len)
      cap *= 2;
    char *d = realloc(o->data, cap);
    if (!d)
      return -1;
    o->data = d;
    o->cap = cap;
  }
  memcpy(o->data + o->len, p, len);
  o->len += len;
  return 0;
}

static void tdrun__emit_line(tdrun_out *o, int is_err, int rank, int prefix, const char *line, size_t len) {
  char pre[24];
  int n = prefix ? snprintf(pre, sizeof pre, "[%d] ", rank) : 0;
  if (tdrun__out_append(o, pre, (size_t)n) != 0 || tdrun__out_append(o, line, len) != 0 ||
      tdrun__out_append(o, "\n", 1) != 0) {
    /* Out of memory: fall back to writing this line directly. */
    tdrun__write_all(is_err, o->data, o->len);
    o->len = 0;
    tdrun__write_all(is_err, pre, (size_t)n);
    tdrun__write_all(is_err, line, len);
    tdrun__write_all(is_err, "\n", 1);
  }
}

/* Moves every complete line out of *buf into o; keeps the partial tail. */
static void tdrun__take_lines(char *buf, size_t *len, tdrun_out *o, int is_err, int rank, int prefix) {
  size_t start = 0;
  for (;;) {
    char *nl = memchr(buf + start, '\n', *len - start);
    if (!nl)
      break;
    size_t end = (size_t)(nl - buf);
    tdrun__emit_line(o, is_err, rank, prefix, buf + start, end - start);
    start = end + 1;
  }
  if (*len - start >= TDRUN_MAX_LINE) {
    tdrun__emit_line(o, is_err, rank, prefix, buf + start, *len - start);
    start = *len;
  }
  memmove(buf, buf + start, *len - start);
  *len -= start;
}

int tdrun__relay_read(tdrun_rank *r, int rank, int is_err, int prefix) {
  int *fd = is_err ? &r->err_fd : &r->out_fd;
  char **buf = is_err ? &r->err_buf : &r->out_buf;
  size_t *len = is_err ? &r->err_len : &r->out_len;
  size_t *cap = is_err ? &r->err_cap : &r->out_cap;
  if (*fd < 0)
    return 1;
  if (tdrun__out_broken[is_err]) {
    /* Nobody reads tdrun's output any more: close the rank's pipe too, so
     * the rank gets SIGPIPE on its next write, as in a shell pipeline. */
    close(*fd);
    *fd = -1;
    return 1;
  }
  tdrun_out o = {0};
  int eof = 0, more = 0;
  /* A few reads per call at most, so one chatty rank cannot starve the others. */
  for (int reads = 0; reads < 4; reads++) {
    if (*cap - *len < 65536) {
      size_t ncap = *cap ? *cap * 2 : 65536;
      while (ncap - *len < 65536)
        ncap *= 2;
      char *nb = realloc(*buf, ncap);
      if (!nb)
        break; /* try again on the next poll round */
      *buf = nb;
      *cap = ncap;
    }
    ssize_t got = read(*fd, *buf + *len, *cap - *len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0 && errno == EAGAIN)
      break;
    if (got <= 0) {
      eof = 1;
      break;
    }
    *len += (size_t)got;
    tdrun__take_lines(*buf, len, &o, is_err, rank, prefix);
    more = reads == 3; /* stopped by the cap, not by an empty pipe */
  }
  tdrun__write_all(is_err, o.data, o.len);
  free(o.data);
  /* Buffers that grew for one long line shrink back once it is written. */
  if (*len == 0 && *cap > 4 * 65536) {
    free(*buf);
    *buf = NULL;
    *cap = 0;
  }
  if (eof) {
    close(*fd);
    *fd = -1;
    return 1;
  }
  return more ? 2 : 0;
}

void tdrun__relay_flush(tdrun_rank *r, int rank, int prefix) {
  for (int is_err = 0; is_err < 2; is_err++) {
    char **buf = is_err ? &r->err_buf : &r->out_buf;
    size_t *len = is_err ? &r->err_len : &r->out_len;
    if (*len > 0) {
      tdrun_out o = {0};
      tdrun__emit_line(&o, is_err, rank, prefix, *buf, *len);
      tdrun__write_all(is_err, o.data, o.len);
      free(o.data);
    }
    free(*buf);
    *buf = NULL;
    *len = 0;
    if (is_err) {
      r->err_cap = 0;
      if (r->err_fd >= 0)
        close(r->err_fd);
      r->err_fd = -1;
    } else {
      r->out_cap = 0;
      if (r->out_fd >= 0)
        close(r->out_fd);
      r->out_fd = -1;
    }
  }
}
