/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure parts of the HTTP module: listen addresses, query strings (Go's
 * url.ParseQuery rules) and /symbol requests (Go's strconv.ParseUint(w, 0,
 * 64)); the profile kind names are in util/profkind.c. No I/O, no
 * logging; safe from any thread.
 */
#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

#include "http.h"

/* Decimal port, 0..65535, digits only. */
static int parse_port(const char *s, unsigned *ret)
{
	unsigned v = 0;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*ret = v;
	return 0;
}

int pp_http__parse_listen(const char *listen, char *host, size_t host_len, unsigned *port)
{
	const char *h, *colon;
	size_t hl;
	unsigned p;
	int r;

	if (!listen || !host || !host_len || !port)
		return -EINVAL;
	if (listen[0] == '[') {
		/* "[v6]:port" */
		const char *close = strchr(listen, ']');
		if (!close || close[1] != ':')
			return -EINVAL;
		h = listen + 1;
		hl = (size_t)(close - h);
		if (hl == 0 || memchr(h, '[', hl))
			return -EINVAL;
		colon = close + 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon)
			return -EINVAL;
		h = listen;
		hl = (size_t)(colon - listen);
		/* "::1:80" is ambiguous: IPv6 literals need brackets (as Go). */
		if (memchr(h, ':', hl) || memchr(h, '[', hl) || memchr(h, ']', hl))
			return -EINVAL;
	}
	r = parse_port(colon + 1, &p);
	if (r < 0)
		return r;
	if (hl + 1 > host_len)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < hl; i++)
		if ((unsigned char)h[i] <= ' ' || h[i] == '/' || h[i] == '\x7f')
			return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = p;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Go's QueryUnescape of s[0..len) into out (cap n, NUL-terminated):
 * '+' is a space, %XX a byte. -EINVAL bad escape, -E2BIG too long.
 */
static int query_unescape(const char *s, size_t len, char *out, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EINVAL;
			hi = hexval(s[i + 1]);
			lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (o + 1 >= n)
			return -E2BIG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

int pp_http__query_get(const char *query, const char *name, char *buf, size_t n)
{
	size_t name_len;
	char key[64];

	if (!query || !name || !buf || !n)
		return -EINVAL;
	name_len = strlen(name);
	/* query_unescape below writes up to name_len + 2 bytes (one more than name + NUL) */
	if (name_len + 2 > sizeof(key))
		return -EINVAL;

	for (const char *seg = query; *seg;) {
		const char *amp = strchr(seg, '&');
		size_t seg_len = amp ? (size_t)(amp - seg) : strlen(seg);
		const char *next = amp ? amp + 1 : seg + seg_len;
		const char *eq = memchr(seg, '=', seg_len);
		size_t klen = eq ? (size_t)(eq - seg) : seg_len;
		const char *v = eq ? eq + 1 : seg + seg_len;
		size_t vlen = eq ? seg_len - klen - 1 : 0;
		int r;

		/* Go 1.17+ rejects (skips) a pair with a ';' in it. */
		if (seg_len == 0 || memchr(seg, ';', seg_len)) {
			seg = next;
			continue;
		}
		/* A key that does not fit cannot be name; bad escapes skip the pair. */
		if (query_unescape(seg, klen, key, name_len + 2) < 0 || strcmp(key, name) != 0) {
			seg = next;
			continue;
		}
		r = query_unescape(v, vlen, buf, n);
		if (r == -EINVAL) {
			seg = next;
			continue;
		}
		if (r < 0)
			return r;
		return 1;
	}
	return 0;
}

/*
 * Go's underscoreOK: underscores only between digits (a base prefix counts
 * as a digit), never leading or trailing.
 */
static bool underscore_ok(const char *s, size_t len)
{
	char saw = '^';
	size_t i = 0;
	bool hex = false;

	if (len >= 2 && s[0] == '0') {
		char c = (char)(s[1] | 0x20);
		if (c == 'b' || c == 'o' || c == 'x') {
			i = 2;
			saw = '0';
			hex = c == 'x';
		}
	}
	for (; i < len; i++) {
		char c = s[i], lc = (char)(c | 0x20);

		if ((c >= '0' && c <= '9') || (hex && lc >= 'a' && lc <= 'f')) {
			saw = '0';
			continue;
		}
		if (c == '_') {
			if (saw != '0')
				return false;
			saw = '_';
			continue;
		}
		if (saw == '_')
			return false;
		saw = '!';
	}
	return saw != '_';
}

/* strconv.ParseUint(s, 0, 64). -EINVAL syntax, -ERANGE overflow. */
static int go_parse_uint0(const char *s0, size_t len0, uint64_t *ret)
{
	const char *s = s0;
	size_t len = len0;
	unsigned base = 10;
	bool underscores = false;
	uint64_t v = 0;

	if (len == 0)
		return -EINVAL;
	if (s[0] == '0') {
		char c = len >= 3 ? (char)(s[1] | 0x20) : 0;
		size_t skip = 2;

		if (c == 'b') {
			base = 2;
		} else if (c == 'o') {
			base = 8;
		} else if (c == 'x') {
			base = 16;
		} else {
			base = 8; /* a bare leading 0 means octal */
			skip = 1;
		}
		s += skip;
		len -= skip;
	}
	for (size_t i = 0; i < len; i++) {
		char c = s[i], lc = (char)(c | 0x20);
		unsigned d;

		if (c == '_') {
			underscores = true;
			continue;
		}
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (lc >= 'a' && lc <= 'z')
			d = (unsigned)(lc - 'a') + 10;
		else
			return -EINVAL;
		if (d >= base)
			return -EINVAL;
		if (__builtin_mul_overflow(v, (uint64_t)base, &v) ||
		    __builtin_add_overflow(v, (uint64_t)d, &v))
			return -ERANGE;
	}
	if (underscores && !underscore_ok(s0, len0))
		return -EINVAL;
	*ret = v;
	return 0;
}

#define SYMBOL_MAX_WORDS 100000

int pp_http__parse_symbol_request(const char *body, size_t len, uint64_t **ret, size_t *ret_n)
{
	uint64_t *v = NULL;
	size_t n = 0, cap = 0, words = 0;

	if ((!body && len) || !ret || !ret_n)
		return -EINVAL;
	for (size_t start = 0; start <= len && words < SYMBOL_MAX_WORDS; words++) {
		const char *plus = len > start ? memchr(body + start, '+', len - start) : NULL;
		size_t end = plus ? (size_t)(plus - body) : len;
		uint64_t pc;

		if (go_parse_uint0(body + start, end - start, &pc) == 0 && pc != 0) {
			if (pp_grow(&v, &cap, n + 1, sizeof(*v), 16) < 0) {
				free(v);
				return -ENOMEM;
			}
			v[n++] = pc;
		}
		if (!plus)
			break;
		start = end + 1;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* A Host header's port: empty or decimal. */
static bool port_ok(const char *s)
{
	unsigned p;

	return !*s || parse_port(s, &p) == 0;
}

int pp_http__host_name(const char *hdr, char *buf, size_t n)
{
	const char *h = hdr, *end;
	size_t hl;

	if (!hdr || !buf || !n)
		return -EINVAL;
	if (h[0] == '[') {
		/* "[v6]" or "[v6]:port"; a zone ("%25eth0") is dropped */
		const char *close = strchr(h, ']');

		if (!close || (close[1] && (close[1] != ':' || !port_ok(close + 2))))
			return -EINVAL;
		h++;
		end = close;
		for (const char *z = h; z < close; z++)
			if (*z == '%') {
				end = z;
				break;
			}
	} else {
		const char *colon = strchr(h, ':');

		if (colon && (strchr(colon + 1, ':') || !port_ok(colon + 1)))
			return -EINVAL; /* an IPv6 literal needs brackets */
		end = colon ? colon : h + strlen(h);
	}
	hl = (size_t)(end - h);
	if (hl && h[hl - 1] == '.' && hdr[0] != '[')
		hl--; /* "localhost." is "localhost" */
	if (!hl || h[hl - 1] == '.')
		return -EINVAL; /* empty, or "a.." */
	if (hl + 1 > n)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < hl; i++) {
		unsigned char c = (unsigned char)h[i];

		if (c <= ' ' || c >= 0x7f || c == '/' || c == '@' || c == '[' || c == ']' ||
		    c == '\\' || c == '%' || c == ',')
			return -EINVAL;
		buf[i] = (char)(c >= 'A' && c <= 'Z' ? c + 'a' - 'A' : c);
	}
	buf[hl] = '\0';
	if (hdr[0] == '[' && !pp_http__host_addr(buf, (unsigned char[16]){ 0 }))
		return -EINVAL; /* brackets hold an IPv6 address */
	return 0;
}

bool pp_http__host_addr(const char *host, unsigned char ret[16])
{
	struct in_addr a4;

	if (inet_pton(AF_INET6, host, ret) == 1)
		return true;
	if (inet_pton(AF_INET, host, &a4) != 1)
		return false;
	/* as an IPv4-mapped IPv6 address */
	memset(ret, 0, 10);
	ret[10] = ret[11] = 0xff;
	memcpy(ret + 12, &a4, 4);
	return true;
}

bool pp_http__host_is_loopback(const char *host)
{
	unsigned char a[16];
	size_t len = strlen(host);
	static const char suffix[] = ".localhost";

	if (strcmp(host, "localhost") == 0)
		return true;
	if (len > sizeof(suffix) - 1 && strcmp(host + len - (sizeof(suffix) - 1), suffix) == 0)
		return true;
	if (!pp_http__host_addr(host, a))
		return false;
	if (IN6_IS_ADDR_LOOPBACK((struct in6_addr *)a))
		return true;
	return IN6_IS_ADDR_V4MAPPED((struct in6_addr *)a) && a[12] == 127;
}

bool pp_http__host_listed(const char *list, const char *host)
{
	size_t hl = strlen(host);
	unsigned char ha[16], pa[16];
	bool is_addr = pp_http__host_addr(host, ha);

	while (list && *list) {
		const char *comma = strchr(list, ',');
		size_t pl = comma ? (size_t)(comma - list) : strlen(list);
		char pat[256], norm[256];

		/* each entry as pp_http__host_name normalizes a Host */
		while (pl && (*list == ' ' || *list == '\t')) {
			list++;
			pl--;
		}
		while (pl && (list[pl - 1] == ' ' || list[pl - 1] == '\t'))
			pl--;
		if (pl && pl < sizeof(pat)) {
			memcpy(pat, list, pl);
			pat[pl] = '\0';
			if (strcmp(pat, "*") == 0)
				return true;
			if (pat[0] == '*' && pat[1] == '.') {
				/* "*.example.com": a name below example.com, not itself */
				size_t sl = pl - 1;

				if (hl > sl && strcasecmp(host + hl - sl, pat + 1) == 0)
					return true;
			} else if (inet_pton(AF_INET6, pat, pa) == 1) {
				/* an IPv6 address without brackets, as a Host cannot hold it */
				if (is_addr && memcmp(ha, pa, 16) == 0)
					return true;
			} else if (pp_http__host_name(pat, norm, sizeof(norm)) == 0) {
				if (is_addr && pp_http__host_addr(norm, pa)) {
					if (memcmp(ha, pa, 16) == 0)
						return true;
				} else if (strcmp(norm, host) == 0) {
					return true;
				}
			}
		}
		list = comma ? comma + 1 : NULL;
	}
	return false;
}
