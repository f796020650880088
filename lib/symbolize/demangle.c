/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Demangling: C++ (Itanium ABI) through libiberty's cp-demangle (the code
 * behind libstdc++'s __cxa_demangle) in its streaming form, bounded, Rust
 * legacy names (_ZN...17h<hash>E) by our own decoder, which drops the hash
 * and decodes the $..$ escapes. Rust v0 (_R...) is left mangled.
 *
 * C++ names are then shortened the way go tool pprof shows them by default
 * (its demangler's NoParams + NoTemplateParams): no return type, no
 * parameter list, no template arguments, no ABI tags:
 *   unsigned long mix::heavy_b<mix::Payload>(mix::Payload, unsigned int)
 *   -> mix::heavy_b
 * Profiles carry the mangled name in system_name. pprof only demangles a
 * function whose name equals its system name, and Parca and Pyroscope show
 * the name as sent, so a long name sent by podprof would stay long in every
 * client; overloads and instantiations merge, as they do in go tool pprof.
 *
 * Names come from the target (symbol tables, perf maps) and substitutions
 * make a mangled name's printed size exponential in its length: 245 bytes
 * print as 54 MB. The demangler writes to a callback through a small
 * buffer of its own (its work arrays are on the stack), so the callback
 * counts the output and, past DEMANGLE_MAX_WORK bytes, longjmps out: the
 * work and the memory are bounded before anything is allocated. A name
 * over the budget is demangled again without its parameter list (which
 * the short form drops anyway); if that is over too, it stays mangled.
 * Short names over PP_DEMANGLE_MAX_OUTPUT stay mangled.
 */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbolize.h"
#include "util/util.h"

/*
 * libiberty/demangle.h (libiberty-dev) declares these; its libiberty.h
 * redefines ARRAY_SIZE, so only what this file uses is declared here.
 */
#define DMGL_PARAMS (1 << 0)
#define DMGL_TYPES (1 << 4)
extern int cplus_demangle_v3_callback(const char *mangled, int options,
				      void (*callback)(const char *, size_t, void *), void *opaque);

#define DEMANGLE_MAX_INPUT 4096 /* longer names stay mangled (bounds the demangler's recursion) */
#define DEMANGLE_MAX_WORK (64 << 10) /* printed bytes one demangling may produce */

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

static bool is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

/* At s: "operator" followed by a non-identifier character. */
static bool at_operator(const char *full, const char *s)
{
	return strncmp(s, "operator", 8) == 0 && !is_ident(s[8]) && (s == full || !is_ident(s[-1]));
}

/* Length of the operator symbol after "operator" (and an optional space). */
static size_t operator_len(const char *s)
{
	static const char *const ops[] = {
		"<<=", ">>=", "<=>", "->*", "()", "[]", "<<", ">>", "<=", ">=", "==", "!=", "&&",
		"||",  "++",  "--",  "->",  "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<",
		">",   "+",   "-",   "*",   "/",  "%",	"^",  "&",  "|",  "~",	"!",  "=",  ","
	};
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (strncmp(s, ops[i], strlen(ops[i])) == 0)
			return strlen(ops[i]);
	return 0; /* new, delete, a conversion operator, a literal suffix */
}

char *pp_cxx_short_name(const char *full)
{
	size_t n = strlen(full), o = 0, name_start = 0;
	char *out = malloc(n + 1);
	int paren = 0, brace = 0;
	size_t last_paren = (size_t)-1; /* where the last top-level '(' group began in out */
	const char *op = NULL;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		const char *p = full + i;
		if (at_operator(full, p)) {
			size_t k = 8, l;
			if (p[k] == ' ')
				k++;
			l = operator_len(p + k);
			op = p;
			memcpy(out + o, p, k + l);
			o += k + l;
			i += k + l;
			continue;
		}
		if (*p == '<' && !brace) {
			/* template arguments: skip the balanced group */
			int d = 0;
			size_t j = i;
			for (; j < n; j++) {
				if (full[j] == '<')
					d++;
				else if (full[j] == '>' && --d == 0)
					break;
			}
			i = j < n ? j + 1 : n;
			continue;
		}
		if (strncmp(p, "[abi:", 5) == 0) {
			const char *e = strchr(p, ']');
			i = e ? (size_t)(e - full) + 1 : n;
			continue;
		}
		if (*p == '{' || *p == '[')
			brace++;
		else if ((*p == '}' || *p == ']') && brace)
			brace--;
		if (!brace && *p == '(') {
			if (paren == 0 && strncmp(p, "(anonymous namespace)", 21) != 0)
				last_paren = o;
			paren++;
		} else if (!brace && *p == ')' && paren) {
			paren--;
		} else if (!brace && !paren && *p == ' ' && (!op || p < op)) {
			/* a space at the top level before the name: the return type ends */
			if (!(i + 1 < n && full[i + 1] == '['))
				name_start = o + 1;
			else
				last_paren = last_paren == (size_t)-1 ? o : last_paren;
		}
		out[o++] = *p;
		i++;
	}
	out[o] = '\0';
	/* the parameter list and what follows it (const, &, noexcept, [clone ...]) */
	if (last_paren != (size_t)-1 && last_paren > name_start)
		out[last_paren] = '\0';
	if (name_start)
		memmove(out, out + name_start, strlen(out + name_start) + 1);
	o = strlen(out);
	while (o > 0 && out[o - 1] == ' ')
		out[--o] = '\0';
	if (!out[0]) {
		free(out);
		return strdup(full);
	}
	return out;
}

struct sink {
	jmp_buf over;
	char *buf; /* DEMANGLE_MAX_WORK + 1 bytes */
	size_t len;
};

static void sink_put(const char *s, size_t n, void *opaque)
{
	struct sink *k = opaque;

	if (n > DEMANGLE_MAX_WORK - k->len)
		longjmp(k->over, 1); /* nothing on the way out owns heap memory */
	memcpy(k->buf + k->len, s, n);
	k->len += n;
}

/* 1 and the full name in k->buf, 0 not mangled, -E2BIG over the budget. */
static int cxx_demangle(const char *name, int options, struct sink *k)
{
	volatile int r = 0;

	k->len = 0;
	if (setjmp(k->over))
		return -E2BIG;
	r = cplus_demangle_v3_callback(name, options, sink_put, k);
	k->buf[k->len] = '\0';
	return r ? 1 : 0;
}

static _Atomic uint64_t refused;

uint64_t pp_demangle_bounded(void)
{
	return refused;
}

static char *cxx_short(const char *name)
{
	struct sink k = { .buf = malloc(DEMANGLE_MAX_WORK + 1) };
	char *sh = NULL;
	int r;

	if (!k.buf)
		return NULL;
	/* __cxa_demangle's options; then without the parameters */
	r = cxx_demangle(name, DMGL_PARAMS | DMGL_TYPES, &k);
	if (r == -E2BIG) {
		refused++;
		r = cxx_demangle(name, DMGL_TYPES, &k);
	}
	if (r == 1) {
		sh = pp_cxx_short_name(k.buf);
		if (sh && strlen(sh) > PP_DEMANGLE_MAX_OUTPUT) {
			free(sh);
			sh = NULL;
			refused++;
		}
	}
	free(k.buf);
	return sh;
}

char *pp_demangle(const char *name)
{
	if (!name)
		return NULL;
	if (strnlen(name, DEMANGLE_MAX_INPUT + 1) > DEMANGLE_MAX_INPUT) {
		if (strncmp(name, "_Z", 2) == 0)
			refused++;
		return NULL;
	}
	if (strncmp(name, "_ZN", 3) == 0) {
		char *r = rust_legacy(name);
		if (r)
			return r;
	}
	if (strncmp(name, "_Z", 2) == 0)
		return cxx_short(name);
	/* Rust v0 (_R...) and everything else: not demangled. */
	return NULL;
}
