/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Demangling: C++ (Itanium ABI) through libstdc++'s __cxa_demangle, Rust
 * legacy names (_ZN...17h<hash>E) by our own decoder, which drops the hash
 * and decodes the $..$ escapes. Rust v0 (_R...) is left mangled.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize.h"
#include "util/util.h"

/* libstdc++ (cp-demangle); declared here to keep this file C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define DEMANGLE_MAX_INPUT 4096 /* longer names stay mangled (bounds the demangler's recursion) */

static bool is_hex_hash(const char *p, size_t n)
{
	if (n != 17 || p[0] != 'h')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!isxdigit((unsigned char)p[i]))
			return false;
	return true;
}

struct rust_esc {
	const char *from;
	char to;
};

static const struct rust_esc rust_escapes[] = {
	{ "$SP$", '@' }, { "$BP$", '*' }, { "$RF$", '&' }, { "$LT$", '<' },
	{ "$GT$", '>' }, { "$LP$", '(' }, { "$RP$", ')' }, { "$C$", ',' },
};

/* Appends one legacy Rust identifier with its escapes decoded. */
static int rust_ident(struct pp_buf *b, const char *p, size_t n)
{
	size_t i = 0;
	if (n >= 2 && p[0] == '_' && p[1] == '$')
		i = 1; /* "_$" is how an identifier starting with '$' is written */
	while (i < n) {
		if (p[i] == '.' && i + 1 < n && p[i + 1] == '.') {
			if (pp_buf_puts(b, "::") < 0)
				return -ENOMEM;
			i += 2;
			continue;
		}
		if (p[i] == '$') {
			bool done = false;
			for (size_t k = 0; k < ARRAY_SIZE(rust_escapes); k++) {
				size_t l = strlen(rust_escapes[k].from);
				if (l <= n - i && memcmp(p + i, rust_escapes[k].from, l) == 0) {
					if (pp_buf_append(b, &rust_escapes[k].to, 1) < 0)
						return -ENOMEM;
					i += l;
					done = true;
					break;
				}
			}
			if (!done && i + 1 < n && p[i + 1] == 'u') {
				/* $uXX$: a code point in hex (ASCII only here) */
				size_t j = i + 2;
				unsigned v = 0;
				while (j < n && j < i + 8 && isxdigit((unsigned char)p[j])) {
					char c = p[j];
					v = v * 16 + (unsigned)(isdigit((unsigned char)c)
									? c - '0'
									: (tolower(c) - 'a' + 10));
					j++;
				}
				if (j < n && p[j] == '$' && j > i + 2 && v >= 0x20 && v < 0x7f) {
					char c = (char)v;
					if (pp_buf_append(b, &c, 1) < 0)
						return -ENOMEM;
					i = j + 1;
					done = true;
				}
			}
			if (done)
				continue;
		}
		if (pp_buf_append(b, p + i, 1) < 0)
			return -ENOMEM;
		i++;
	}
	return 0;
}

/* Returns the demangled name, NULL if name is not a legacy Rust symbol. */
static char *rust_legacy(const char *name)
{
	const char *p = name + 3; /* after _ZN */
	struct pp_buf b = { .max = DEMANGLE_MAX_INPUT * 2 };
	bool first = true, hashed = false;

	while (*p && *p != 'E') {
		uint64_t len = 0;
		if (!isdigit((unsigned char)*p))
			goto fail;
		while (isdigit((unsigned char)*p)) {
			len = len * 10 + (uint64_t)(*p - '0');
			if (len > DEMANGLE_MAX_INPUT)
				goto fail;
			p++;
		}
		if (len == 0 || strnlen(p, len) < len)
			goto fail;
		if (p[len] == 'E' && is_hex_hash(p, len)) {
			hashed = true;
			p += len;
			break;
		}
		if (!first && pp_buf_puts(&b, "::") < 0)
			goto fail;
		if (rust_ident(&b, p, len) < 0)
			goto fail;
		first = false;
		p += len;
	}
	/* The hash must be the last component, and something may follow only as ".llvm.N" etc. */
	if (!hashed || *p != 'E' || first)
		goto fail;
	return pp_buf_steal(&b, NULL);
fail:
	pp_buf_free(&b);
	return NULL;
}

char *pp_demangle(const char *name)
{
	if (!name || strnlen(name, DEMANGLE_MAX_INPUT + 1) > DEMANGLE_MAX_INPUT)
		return NULL;
	if (strncmp(name, "_ZN", 3) == 0) {
		char *r = rust_legacy(name);
		if (r)
			return r;
	}
	if (strncmp(name, "_Z", 2) == 0) {
		int status = -1;
		char *r = __cxa_demangle(name, NULL, NULL, &status);
		if (status == 0 && r)
			return r;
		free(r);
	}
	/* Rust v0 (_R...) and everything else: not demangled. */
	return NULL;
}
