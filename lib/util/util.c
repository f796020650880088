/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int pp_buf_reserve(struct pp_buf *b, size_t extra)
{
	size_t need;

	if (__builtin_add_overflow(b->len, extra + 1, &need))
		return -E2BIG;
	if (b->max && need > b->max + 1)
		return -E2BIG;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int pp_grow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t nc = *cap ? *cap : (first ? first : 1);
	size_t bytes;
	void *p;

	if (need <= *cap)
		return 0;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return -ENOMEM;
		nc *= 2;
	}
	if (__builtin_mul_overflow(nc, elem, &bytes))
		return -ENOMEM;
	memcpy(&p, arrp, sizeof(p));
	p = realloc(p, bytes);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = nc;
	return 0;
}

int pp_buf_append(struct pp_buf *b, const void *data, size_t n)
{
	int r = pp_buf_reserve(b, n);
	if (r < 0)
		return r;
	if (n)
		memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int pp_buf_puts(struct pp_buf *b, const char *s)
{
	return pp_buf_append(b, s, strlen(s));
}

int pp_buf_vprintf(struct pp_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return -EINVAL;
	int r = pp_buf_reserve(b, (size_t)n);
	if (r < 0)
		return r;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int pp_buf_printf(struct pp_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = pp_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

void pp_buf_reset(struct pp_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

char *pp_buf_steal(struct pp_buf *b, size_t *ret_len)
{
	char *p = b->data;
	if (ret_len)
		*ret_len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void pp_buf_free(struct pp_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pp_now_mono_ns(void)
{
	return now_ns(CLOCK_MONOTONIC);
}

uint64_t pp_now_real_ns(void)
{
	return now_ns(CLOCK_REALTIME);
}

struct timespec pp_realtime_in_ms(unsigned ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

int pp_parse_u64(const char *s, int base, uint64_t min, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int pp_parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
	char *end;
	long long v;

	if (!s || !*s || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int pp_read_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	struct pp_buf b = { .max = max };
	char chunk[8192];

	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			pp_buf_free(&b);
			return e;
		}
		if (n == 0)
			break;
		int r = pp_buf_append(&b, chunk, (size_t)n);
		if (r < 0) {
			pp_buf_free(&b);
			return r == -E2BIG ? -EFBIG : r;
		}
	}
	if (pp_buf_reserve(&b, 0) < 0) {
		pp_buf_free(&b);
		return -ENOMEM;
	}
	b.data[b.len] = '\0';
	*ret = pp_buf_steal(&b, ret_len);
	return 0;
}

int pp_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return pp_read_fd(fd, max, ret, ret_len);
}

uint64_t pp_hash_bytes(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if s starts none. */
size_t pp_utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0], cp, min;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
		min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
		min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/*
 * Text from a target (thread and process names, paths, function names) in
 * a text dump, one line per entry whatever it holds: control characters
 * written as \n, \r, \t or \xNN, bytes that are not valid UTF-8 as \xNN;
 * quoted: also backslash and double quote escaped, for a "quoted" field.
 */
void pp_buf_put_text(struct pp_buf *o, const char *v, bool quoted)
{
	const unsigned char *p = (const unsigned char *)v;
	size_t n = strlen(v);

	while (n) {
		size_t l = pp_utf8_len(p, n);

		if (!l || *p < 0x20 || *p == 0x7f) {
			l = 1;
			if (*p == '\n')
				pp_buf_puts(o, "\\n");
			else if (*p == '\r')
				pp_buf_puts(o, "\\r");
			else if (*p == '\t')
				pp_buf_puts(o, "\\t");
			else
				pp_buf_printf(o, "\\x%02x", *p);
		} else if (quoted && (*p == '\\' || *p == '"')) {
			pp_buf_printf(o, "\\%c", *p);
		} else {
			pp_buf_append(o, p, l);
		}
		p += l;
		n -= l;
	}
}
