/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Consumer of a BPF ring buffer map (BPF_MAP_TYPE_RINGBUF) that maps the
 * data pages once. libbpf's ring_buffer maps them twice (so a record that
 * wraps reads contiguously), and the kernel maps every page at mmap time:
 * a 16 MiB ring then shows as 32 MiB of the sidecar's RSS. Here a record
 * that wraps is copied into a bounce buffer instead. Same callback
 * contract as libbpf's ring_buffer (data valid during the call; a negative
 * return stops consumption and is returned).
 *
 * Not thread-safe: one consumer thread per ring. No locks taken.
 */
#ifndef PP_UTIL_RINGBUF_H
#define PP_UTIL_RINGBUF_H

#include <stddef.h>

struct pp_ringbuf;

typedef int (*pp_ringbuf_fn)(void *ctx, void *data, size_t size);

/* map_fd: a BPF_MAP_TYPE_RINGBUF map of size bytes (its max_entries, a
 * power-of-2 multiple of the page size). NULL with errno set. */
struct pp_ringbuf *pp_ringbuf__new(int map_fd, size_t size, pp_ringbuf_fn fn, void *ctx);
/* An fd that polls readable when the kernel signals new data (for epoll). */
int pp_ringbuf__epoll_fd(const struct pp_ringbuf *rb);
/* Delivers every committed record; the number delivered, or the callback's
 * negative return. */
int pp_ringbuf__consume(struct pp_ringbuf *rb);
/* Waits up to timeout_ms for a wakeup, then consumes; records or -errno. */
int pp_ringbuf__poll(struct pp_ringbuf *rb, int timeout_ms);
void pp_ringbuf__free(struct pp_ringbuf *rb);

#endif
