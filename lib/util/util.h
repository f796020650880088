/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small helpers shared by every module: cleanup attributes, a bounded
 * growable buffer, clocks and checked number parsing. Nothing here logs.
 */
#ifndef PODPROF_UTIL_H
#define PODPROF_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PP_MAX(a, b) ((a) > (b) ? (a) : (b))

static inline void pp_freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(pp_freep)

static inline void pp_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
#define _cleanup_close_ _cleanup_(pp_closep)

/*
 * A growable byte buffer. `max` (0 = unlimited) caps its size: appends past
 * it fail with -E2BIG and leave the buffer as it was. data is always
 * NUL-terminated when len > 0 (the NUL is not counted).
 */
struct pp_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
};

int pp_buf_reserve(struct pp_buf *b, size_t extra);
int pp_buf_append(struct pp_buf *b, const void *data, size_t n);
int pp_buf_puts(struct pp_buf *b, const char *s);
int pp_buf_printf(struct pp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if none. */
size_t pp_utf8_len(const unsigned char *s, size_t n);
/*
 * Appends text from a target (a name, a path) so that it stays one field
 * of one line: control characters as \n, \r, \t or \xNN, invalid UTF-8 as
 * \xNN; quoted: backslash and double quote escaped too.
 */
void pp_buf_put_text(struct pp_buf *b, const char *v, bool quoted);
int pp_buf_vprintf(struct pp_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
void pp_buf_reset(struct pp_buf *b);
/* Hands the data to the caller (who frees it) and empties the buffer. */
char *pp_buf_steal(struct pp_buf *b, size_t *ret_len);
void pp_buf_free(struct pp_buf *b);

/*
 * A growable array: makes room for at least `need` elements of `elem`
 * bytes in the array *arrp points to (arrp is the address of the array
 * pointer, e.g. &v), whose capacity is *cap elements. The capacity doubles,
 * starting at `first`. New elements are not initialised. 0, or -ENOMEM
 * (out of memory or size overflow) with the array and *cap unchanged.
 * Callers cap their own element counts.
 */
int pp_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

/*
 * Binary search in n elements of `elem` bytes sorted by a uint64_t key at
 * byte offset `off`: the number of leading elements whose key is <= key
 * (so the last one at or below key, if any, is at the result - 1).
 * PP_UPPER_BOUND(v, n, field, key) names the key by its field.
 */
static inline size_t pp_upper_bound_u64(const void *base, size_t n, size_t elem, size_t off,
					uint64_t key)
{
	const char *b = base;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (*(const uint64_t *)(const void *)(b + mid * elem + off) <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#define PP_UPPER_BOUND(v, n, field, key) \
	pp_upper_bound_u64((v), (n), sizeof(*(v)), offsetof(__typeof__(*(v)), field), (key))

/* Clocks, in nanoseconds. */
uint64_t pp_now_mono_ns(void);
uint64_t pp_now_real_ns(void);
/* CLOCK_REALTIME ms from now, as pthread_cond_timedwait wants it. */
struct timespec pp_realtime_in_ms(unsigned ms);

/*
 * Checked parsing: the whole string must be a number in [min, max].
 * Returns 0, -EINVAL (not a number) or -ERANGE. base as strtoull (0 = auto).
 */
int pp_parse_u64(const char *s, int base, uint64_t min, uint64_t max, uint64_t *ret);
int pp_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret);

/* Reads a whole file (at most max bytes, else -EFBIG). Caller frees *ret. */
int pp_read_file(const char *path, size_t max, char **ret, size_t *ret_len);
int pp_read_fd(int fd, size_t max, char **ret, size_t *ret_len);

/* 64-bit hash of bytes (FNV-1a style mixing, not cryptographic). */
uint64_t pp_hash_bytes(const void *data, size_t n, uint64_t seed);

#endif
