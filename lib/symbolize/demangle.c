/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Demangling: C++ (Itanium ABI) through libiberty's cp-demangle (the code
 * behind libstdc++'s __cxa_demangle) in its streaming form, bounded, Rust
 * legacy names (_ZN...17h<hash>E) by our own decoder, which drops the hash
 * and decodes the $..$ escapes. Rust v0 (_R...) is left mangled.
 *
 * C++ names are then shortened the way go tool pprof shows them by default
 * (github.com/ianlancetaylor/demangle with NoParams + NoTemplateParams, as
 * its symbolizer asks): no return type, no parameter list or qualifiers
 * (const, volatile, &, &&) of the function itself, no clone suffix, and no
 * template arguments anywhere; ABI tags, lambdas, "(anonymous namespace)"
 * and the parameters of a local name's enclosing function stay, and special
 * names (thunks, transaction clones) keep their function's parameters:
 *   unsigned long mix::heavy_b<mix::Payload>(mix::Payload, unsigned int)
 *   -> mix::heavy_b
 *   rocksdb::Version::GetColumnFamilyMetaData(...) const
 *   -> rocksdb::Version::GetColumnFamilyMetaData
 * tests/unit/data/symbolize/cxx-names.tsv holds real names from Debian's
 * C++ libraries with what go tool pprof (go1.19.8) showed for each; newer
 * pprof releases also drop a local name's enclosing parameters.
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

/*
 * Copies full to out without template argument lists, at any depth (go's
 * NoTemplateParams drops them everywhere, in kept parameter lists too).
 * Operator names that contain '<', '>' or parentheses are copied whole, and
 * the space libiberty puts between "operator<" and its template arguments
 * goes with them. Returns the length written (never more than full's).
 */
static size_t drop_templates(const char *full, char *out)
{
	size_t o = 0;

	for (const char *p = full; *p;) {
		if (at_operator(full, p)) {
			size_t k = p[8] == ' ' ? 9 : 8;
			k += operator_len(p + k);
			memcpy(out + o, p, k);
			o += k;
			p += k;
			continue;
		}
		if (*p != '<') {
			out[o++] = *p++;
			continue;
		}
		/* a balanced <...>: '<' and '>' inside parentheses are
		 * expressions or balanced anyway, operator names are skipped */
		int angle = 0, paren = 0;
		while (*p) {
			if (at_operator(full, p)) {
				p += p[8] == ' ' ? 9 : 8;
				p += operator_len(p);
				continue;
			}
			if (*p == '(')
				paren++;
			else if (*p == ')' && paren)
				paren--;
			else if (!paren && *p == '<')
				angle++;
			else if (!paren && *p == '>' && --angle == 0) {
				p++;
				break;
			}
			p++;
		}
		if (o && out[o - 1] == ' ')
			o--; /* "operator< <int>" */
	}
	out[o] = '\0';
	return o;
}

/* Index of the '(' matching the ')' at s[end], or -1. */
static ssize_t open_paren(const char *s, size_t end)
{
	int d = 0;

	for (size_t i = end + 1; i-- > 0;) {
		if (s[i] == ')')
			d++;
		else if (s[i] == '(' && --d == 0)
			return (ssize_t)i;
	}
	return -1;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t l = strlen(suffix);
	return n >= l && memcmp(s + n - l, suffix, l) == 0;
}

/* Qualifiers libiberty prints after a parameter list. */
static const char *const quals[] = {
	" const", " volatile", " restrict", " &&", " &", " noexcept", " transaction_safe",
};

/* At s: one of quals, then the end of that word. */
static bool qual_at(const char *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(quals); i++) {
		size_t l = strlen(quals[i]);
		if (strncmp(s, quals[i], l) == 0 && !is_ident(s[l]) && s[l] != '&')
			return true;
	}
	return false;
}

/* Drops " [clone .cold]", " [clone .constprop.0]"... from the end of s. */
static size_t drop_clones(char *s, size_t n)
{
	while (n > 0 && s[n - 1] == ']') {
		char *c = NULL;
		for (char *q = strstr(s, " [clone "); q && q < s + n; q = strstr(q + 1, " [clone "))
			c = q;
		if (!c)
			break;
		n = (size_t)(c - s);
	}
	s[n] = '\0';
	return n;
}

/*
 * Cuts s (length n) to the function's name plus what precedes it: the
 * member function's qualifiers, its parameter list, and a declarator group
 * around the name ("void (*f(int))(long)": a function
 * returning a function pointer). Returns the new length.
 */
static size_t drop_params(char *s, size_t n)
{
	for (;;) {
		bool again = true;
		ssize_t o;

		while (again) {
			again = false;
			for (size_t i = 0; i < ARRAY_SIZE(quals); i++) {
				if (ends_with(s, n, quals[i])) {
					n -= strlen(quals[i]);
					again = true;
				}
			}
		}
		if (n > 0 && s[n - 1] == ')' && (o = open_paren(s, n - 1)) > 0)
			n = (size_t)o;
		/* "ret (*name(params))(fn params)": the name is inside the group */
		if (n > 0 && s[n - 1] == ')' && (o = open_paren(s, n - 1)) >= 0 &&
		    (s[o + 1] == '*' || s[o + 1] == '&')) {
			size_t k = (size_t)o + 1;
			while (s[k] == '*' || s[k] == '&')
				k++;
			n -= 1 + k; /* the group's ')' and what precedes its content */
			memmove(s, s + k, n);
			continue;
		}
		s[n] = '\0';
		return n;
	}
}

/*
 * Where the name starts: after the last space at the top level that ends a
 * return type. Not such a space: one inside an operator's name ("operator
 * new", "operator unsigned long", from "operator" to the '(' of a local
 * name's enclosing parameters), and one after ')' (the enclosing function's
 * qualifiers in "f(int) const::{lambda()#1}").
 */
static size_t name_start(const char *s)
{
	size_t start = 0;
	int depth = 0;
	bool in_op = false;

	for (size_t i = 0; s[i];) {
		char c = s[i];
		if (!depth && at_operator(s, s + i)) {
			i += s[i + 8] == ' ' ? 9 : 8;
			i += operator_len(s + i);
			in_op = true;
			continue;
		}
		if (c == '(' || c == '[' || c == '{') {
			if (c == '(')
				in_op = false;
			depth++;
		} else if ((c == ')' || c == ']' || c == '}') && depth) {
			depth--;
		} else if (c == ' ' && !depth && !in_op &&
			   !(i > 0 && s[i - 1] == ')' && qual_at(s + i))) {
			start = i + 1;
		}
		i++;
	}
	return start;
}

/*
 * libiberty's prefixes for special names. go's demangler prints the
 * function inside them whole (its NoParams applies to the outer name only),
 * so only the template arguments go.
 */
static const char *const special_prefixes[] = {
	"non-virtual thunk to ",
	"virtual thunk to ",
	"covariant return thunk to ",
	"transaction clone for ",
	"non-transaction clone for ",
	"hidden alias for ",
	"TLS init function for ",
	"TLS wrapper function for ",
	"guard variable for ",
	"construction vtable for ",
	"vtable for ",
	"VTT for ",
	"typeinfo for ",
	"typeinfo name for ",
	"typeinfo fn for ",
	"reference temporary #",
};

/*
 * The short form of a name demangled by libiberty (params: printed with
 * DMGL_PARAMS). Returns a new string, full itself if nothing is left.
 */
static char *cxx_shorten(const char *full, bool params)
{
	size_t n = strlen(full), st;
	char *out = malloc(n + 1);

	if (!out)
		return NULL;
	n = drop_clones(out, drop_templates(full, out));
	for (size_t i = 0; i < ARRAY_SIZE(special_prefixes); i++)
		if (strncmp(out, special_prefixes[i], strlen(special_prefixes[i])) == 0)
			return out;
	if (params)
		n = drop_params(out, n);
	st = name_start(out);
	memmove(out, out + st, n - st + 1);
	n -= st;
	while (n > 0 && out[n - 1] == ' ')
		out[--n] = '\0';
	if (!n) {
		free(out);
		return strdup(full);
	}
	return out;
}

char *pp_cxx_short_name(const char *full)
{
	return cxx_shorten(full, true);
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
	bool params = true;
	int r;

	if (!k.buf)
		return NULL;
	/* __cxa_demangle's options; then without the parameters */
	r = cxx_demangle(name, DMGL_PARAMS | DMGL_TYPES, &k);
	if (r == -E2BIG) {
		refused++;
		params = false;
		r = cxx_demangle(name, DMGL_TYPES, &k);
	}
	if (r == 1) {
		sh = cxx_shorten(k.buf, params);
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
	const char *at = strncmp(name, "_Z", 2) == 0 ? strchr(name, '@') : NULL;
	if (at) {
		/* A PLT stub ("<symbol>@plt") or a versioned name: the symbol's
		 * name, as go tool pprof's demangler shows it (suffix dropped). */
		char *sym = strndup(name, (size_t)(at - name));
		char *r = sym ? pp_demangle(sym) : NULL;

		free(sym);
		return r;
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
