/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BPF ring buffer consumer with the data pages mapped once (see ringbuf.h).
 *
 * Layout (kernel/bpf/ringbuf.c): at map offset 0 the consumer position
 * page (the only writable one), then the producer position page, then the
 * data pages. Each record starts with an 8-byte header (length with the
 * busy and discard bits, page offset), is 8-byte aligned, and may run past
 * the end of the data area into its start.
 */
#include "ringbuf.h"

#include <errno.h>
#include <linux/bpf.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct pp_ringbuf {
	int fd;
	size_t page, size, mask;
	unsigned long *consumer_pos; /* mapped rw, one page */
	void *prod_map; /* producer page + data, mapped read-only */
	const unsigned long *producer_pos;
	const uint8_t *data;
	uint8_t *bounce; /* a wrapping record, copied */
	size_t bounce_cap;
	pp_ringbuf_fn fn;
	void *ctx;
};

struct pp_ringbuf *pp_ringbuf__new(int map_fd, size_t size, pp_ringbuf_fn fn, void *ctx)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct pp_ringbuf *rb;
	void *p;

	if (map_fd < 0 || !fn || pg <= 0 || size < (size_t)pg || (size & (size - 1))) {
		errno = EINVAL;
		return NULL;
	}
	rb = calloc(1, sizeof(*rb));
	if (!rb)
		return NULL;
	rb->fd = map_fd;
	rb->page = (size_t)pg;
	rb->size = size;
	rb->mask = size - 1;
	rb->fn = fn;
	rb->ctx = ctx;
	p = mmap(NULL, rb->page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	rb->consumer_pos = p;
	p = mmap(NULL, rb->page + size, PROT_READ, MAP_SHARED, map_fd, (off_t)rb->page);
	if (p == MAP_FAILED)
		goto fail;
	rb->prod_map = p;
	rb->producer_pos = p;
	rb->data = (const uint8_t *)p + rb->page;
	return rb;
fail : {
	int e = errno;
	pp_ringbuf__free(rb);
	errno = e;
	return NULL;
}
}

int pp_ringbuf__epoll_fd(const struct pp_ringbuf *rb)
{
	return rb ? rb->fd : -EINVAL;
}

static size_t rec_span(uint32_t len)
{
	len &= ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
	return ((size_t)len + BPF_RINGBUF_HDR_SZ + 7) & ~(size_t)7;
}

int pp_ringbuf__consume(struct pp_ringbuf *rb)
{
	unsigned long cons, prod;
	int n = 0;

	if (!rb)
		return -EINVAL;
	cons = __atomic_load_n(rb->consumer_pos, __ATOMIC_ACQUIRE);
	for (;;) {
		bool got = false;
		prod = __atomic_load_n(rb->producer_pos, __ATOMIC_ACQUIRE);
		while (cons < prod) {
			size_t off = cons & rb->mask;
			const uint32_t *hdr = (const uint32_t *)(rb->data + off);
			uint32_t len = __atomic_load_n(hdr, __ATOMIC_ACQUIRE);
			if (len & BPF_RINGBUF_BUSY_BIT)
				return n;
			got = true;
			cons += rec_span(len);
			if (!(len & BPF_RINGBUF_DISCARD_BIT) && len <= rb->size) {
				size_t start = (off + BPF_RINGBUF_HDR_SZ) & rb->mask;
				void *rec = (void *)(rb->data + start);
				if (start + len > rb->size) { /* wraps: copy the two parts */
					size_t first = rb->size - start;
					if (rb->bounce_cap < len) {
						uint8_t *b = realloc(rb->bounce, len);
						if (!b) {
							__atomic_store_n(rb->consumer_pos, cons,
									 __ATOMIC_RELEASE);
							return -ENOMEM;
						}
						rb->bounce = b;
						rb->bounce_cap = len;
					}
					memcpy(rb->bounce, rb->data + start, first);
					memcpy(rb->bounce + first, rb->data, len - first);
					rec = rb->bounce;
				}
				int r = rb->fn(rb->ctx, rec, len);
				if (r < 0) {
					__atomic_store_n(rb->consumer_pos, cons, __ATOMIC_RELEASE);
					return r;
				}
				if (n < INT32_MAX)
					n++;
			}
			__atomic_store_n(rb->consumer_pos, cons, __ATOMIC_RELEASE);
		}
		if (!got)
			return n;
	}
}

int pp_ringbuf__poll(struct pp_ringbuf *rb, int timeout_ms)
{
	struct pollfd p;

	if (!rb)
		return -EINVAL;
	p.fd = rb->fd;
	p.events = POLLIN;
	if (poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	return pp_ringbuf__consume(rb);
}

void pp_ringbuf__free(struct pp_ringbuf *rb)
{
	if (!rb)
		return;
	if (rb->consumer_pos)
		munmap(rb->consumer_pos, rb->page);
	if (rb->prod_map)
		munmap(rb->prod_map, rb->page + rb->size);
	free(rb->bounce);
	free(rb);
}
