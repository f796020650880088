/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podprof configuration.
 *
 * The YAML text is read with libyaml's event API into a small tree of our
 * own (aliases rejected, depth, node count, scalar length and input size
 * capped), then walked against one table of keys. The same table drives
 * pp_config__set(), the PODPROF_* variables and pp_config__dump(), so the
 * three can never disagree about a key's type, range or spelling.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#define CFG_MAX_BYTES (1u << 20) /* input size */
#define CFG_MAX_DEPTH 16 /* nested mappings/lists */
#define CFG_MAX_NODES 65536 /* scalars + containers in one document */
#define CFG_MAX_SCALAR 4096 /* bytes in one value */
#define CFG_MAX_TARGETS 1024 /* entries in targets: (and --pid) */
#define CFG_MAX_NAME 128 /* target name */
#define CFG_PID_MAX 4194304u /* PID_MAX_LIMIT on 64-bit */
#define CFG_COMM_LEN 15 /* TASK_COMM_LEN - 1 */
#define CFG_PATH_LEN 256 /* dotted key path in messages */
#define CFG_MSG_LEN 512

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define GIB (1024ull * 1024 * 1024)

_Static_assert(sizeof(enum pp_unwind_mode) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum pp_heap_policy) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum pp_log_level) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum pp_log_format) == sizeof(int), "enum stored as int");

/* ---------------------------------------------------------------- keys -- */

enum ktype {
	K_BOOL,
	K_UINT, /* unsigned */
	K_U64, /* uint64_t */
	K_DOUBLE,
	K_ENUM, /* stored as int */
	K_STR, /* optional string, "" or null = NULL */
	K_DIR, /* optional absolute directory path, "" or null = NULL */
	K_HOSTS, /* host names, comma-separated or a YAML list; stored joined by ","; none = NULL */
	K_LISTEN, /* main listen address, "0"/"" = disabled */
	K_TLISTEN, /* a target's listen address, null = main server */
	K_NAME, /* target name */
	K_PID, /* pid_t */
	K_COMM, /* fnmatch pattern on comm */
	K_EXE, /* fnmatch pattern on the exe path */
	K_REGEX, /* POSIX ERE */
	K_CONTAINER, /* fnmatch pattern on a container name */
	K_CONTAINER_ID, /* hex prefix of a container id */
};

struct enum_val {
	const char *name;
	int value;
	bool hidden; /* accepted alias, not listed in messages or dumped */
};

struct key_def {
	const char *key; /* dotted; for targets the field name */
	enum ktype type;
	size_t off;
	uint64_t min, max;
	unsigned align; /* K_UINT: value must be a multiple of this */
	bool sizes; /* accepts 512KiB, 64MiB, ... */
	double dmin, dmax;
	const struct enum_val *enums;
};

static const struct enum_val unwind_vals[] = {
	{ "dwarf", PP_UNWIND_DWARF, false },
	{ "frame-pointer", PP_UNWIND_FRAME_POINTER, false },
	{ "frame_pointer", PP_UNWIND_FRAME_POINTER, true },
	{ "fp", PP_UNWIND_FRAME_POINTER, true },
	{ NULL, 0, false },
};

static const struct enum_val heap_mode_vals[] = {
	{ "auto", PP_HEAP_MODE_AUTO, false },	    { "inject", PP_HEAP_MODE_INJECT, false },
	{ "uprobe", PP_HEAP_MODE_UPROBE, false },   { "off", PP_HEAP_MODE_OFF, false },
	{ "preload", PP_HEAP_MODE_PRELOAD, false }, { NULL, 0, false },
};

static const struct enum_val policy_vals[] = {
	{ "warn", PP_HEAP_POLICY_WARN, false },
	{ "pause", PP_HEAP_POLICY_PAUSE, false },
	{ "auto", PP_HEAP_POLICY_AUTO, false },
	{ NULL, 0, false },
};

static const struct enum_val level_vals[] = {
	{ "error", PP_LOG_ERROR, false }, { "warn", PP_LOG_WARN, false },
	{ "info", PP_LOG_INFO, false },	  { "debug", PP_LOG_DEBUG, false },
	{ "warning", PP_LOG_WARN, true }, { NULL, 0, false },
};

static const struct enum_val format_vals[] = {
	{ "text", PP_LOG_TEXT, false },
	{ "json", PP_LOG_JSON, false },
	{ NULL, 0, false },
};

#define OFF(f) offsetof(struct pp_config, f)
#define B(k, f)                                         \
	{                                               \
		.key = k, .type = K_BOOL, .off = OFF(f) \
	}
#define U(k, f, lo, hi)                                                       \
	{                                                                     \
		.key = k, .type = K_UINT, .off = OFF(f), .min = lo, .max = hi \
	}
#define E(k, f, v)                                                  \
	{                                                           \
		.key = k, .type = K_ENUM, .off = OFF(f), .enums = v \
	}

/* In dump order; keys of one section are contiguous. */
static const struct key_def config_keys[] = {
	{ .key = "listen", .type = K_LISTEN, .off = OFF(listen) },
	U("discovery.interval_ms", discovery.interval_ms, 100, 60000),
	B("discovery.include_self", discovery.include_self),
	B("cpu.enabled", cpu.enabled),
	U("cpu.frequency_hz", cpu.frequency_hz, 1, 10000),
	U("cpu.max_seconds", cpu.max_seconds, 1, 3600),
	{ .key = "cpu.stack_bytes",
	  .type = K_UINT,
	  .off = OFF(cpu.stack_bytes),
	  .min = 512,
	  .max = 65528,
	  .align = 8,
	  .sizes = true },
	B("cpu.always_on", cpu.always_on),
	E("cpu.unwind", cpu.unwind, unwind_vals),
	B("cpu.kernel_stacks", cpu.kernel_stacks),
	B("heap.enabled", heap.enabled),
	{ .key = "heap.sample_rate",
	  .type = K_U64,
	  .off = OFF(heap.sample_rate),
	  .min = 1,
	  .max = GIB,
	  .sizes = true },
	U("heap.max_live", heap.max_live, 16, 16777216),
	U("heap.ring_mib", heap.ring_mib, 0, 256),
	{ .key = "heap.budget_percent",
	  .type = K_DOUBLE,
	  .off = OFF(heap.budget_percent),
	  .dmin = 0.1,
	  .dmax = 100 },
	E("heap.over_budget", heap.over_budget, policy_vals),
	E("heap.mode", heap.mode, heap_mode_vals),
	{ .key = "heap.agent_dir", .type = K_DIR, .off = OFF(heap.agent_dir) },
	B("offcpu.enabled", offcpu.enabled),
	U("offcpu.min_block_us", offcpu.min_block_us, 0, 60000000),
	B("offcpu.always_on", offcpu.always_on),
	U("offcpu.linger_seconds", offcpu.linger_seconds, 0, 86400),
	B("threads.enabled", threads.enabled),
	U("threads.max_pause_ms", threads.max_pause_ms, 1, 10000),
	U("threads.min_interval_ms", threads.min_interval_ms, 0, 3600000),
	U("threads.dump_timeout_ms", threads.dump_timeout_ms, 10, 600000),
	U("http.max_connections", http.max_connections, 1, 10000),
	U("http.max_connections_per_client", http.max_connections_per_client, 1, 10000),
	{ .key = "http.max_request_bytes",
	  .type = K_UINT,
	  .off = OFF(http.max_request_bytes),
	  .min = 1024,
	  .max = 16777216,
	  .sizes = true },
	U("http.timeout_seconds", http.timeout_seconds, 1, 3600),
	U("http.header_timeout_seconds", http.header_timeout_seconds, 1, 3600),
	U("http.workers", http.workers, 1, 64),
	U("http.max_windows", http.max_windows, 1, 10000),
	U("http.max_windows_per_client", http.max_windows_per_client, 1, 10000),
	{ .key = "http.token_file", .type = K_STR, .off = OFF(http.token_file) },
	{ .key = "http.allowed_hosts", .type = K_HOSTS, .off = OFF(http.allowed_hosts) },
	U("limits.max_targets", limits.max_targets, 1, 65536),
	U("limits.max_stacks", limits.max_stacks, 1024, 10000000),
	{ .key = "limits.symbol_cache_bytes",
	  .type = K_U64,
	  .off = OFF(limits.symbol_cache_bytes),
	  .min = MIB,
	  .max = 64 * GIB,
	  .sizes = true },
	{ .key = "limits.max_window_bytes",
	  .type = K_U64,
	  .off = OFF(limits.max_window_bytes),
	  .min = MIB,
	  .max = 64 * GIB,
	  .sizes = true },
	U("limits.max_maps_entries", limits.max_maps_entries, 256, 1000000),
	{ .key = "limits.max_maps_bytes",
	  .type = K_UINT,
	  .off = OFF(limits.max_maps_bytes),
	  .min = 64 * KIB,
	  .max = 256 * MIB,
	  .sizes = true },
	U("limits.max_target_fds", limits.max_target_fds, 4, 65536),
	B("symbolizer.isolate", symbolizer.isolate),
	U("symbolizer.memory_mib", symbolizer.memory_mib, 16, 65536),
	U("symbolizer.cpu_seconds", symbolizer.cpu_seconds, 10, 31536000),
	U("symbolizer.timeout_ms", symbolizer.timeout_ms, 100, 600000),
	U("symbolizer.idle_seconds", symbolizer.idle_seconds, 0, 86400),
	U("symbolizer.helper_uid", symbolizer.helper_uid, 1, 4294967294u),
	E("log.level", log.level, level_vals),
	E("log.format", log.format, format_vals),
	U("log.memstats_interval_seconds", log.memstats_interval_seconds, 0, 86400),
};

#undef OFF
#define OFF(f) offsetof(struct pp_selector, f)

static const struct key_def target_keys[] = {
	{ .key = "name", .type = K_NAME, .off = OFF(name) },
	{ .key = "pid", .type = K_PID, .off = OFF(pid), .min = 1, .max = CFG_PID_MAX },
	{ .key = "comm", .type = K_COMM, .off = OFF(comm) },
	{ .key = "exe", .type = K_EXE, .off = OFF(exe) },
	{ .key = "cmdline", .type = K_REGEX, .off = OFF(cmdline) },
	{ .key = "container", .type = K_CONTAINER, .off = OFF(container) },
	{ .key = "container_id", .type = K_CONTAINER_ID, .off = OFF(container_id) },
	{ .key = "listen", .type = K_TLISTEN, .off = OFF(listen) },
};

#undef OFF
#undef B
#undef U
#undef E

static const char *const sections[] = { "discovery", "cpu",    "heap",	     "offcpu", "threads",
					"http",	     "limits", "symbolizer", "log" };

/* ------------------------------------------------------------ helpers -- */

static bool streq_ci(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

/* Length of the section prefix of a dotted key ("cpu" in "cpu.x"), 0 if none. */
static size_t section_len(const char *key)
{
	const char *dot = strchr(key, '.');
	return dot ? (size_t)(dot - key) : 0;
}

static bool in_section(const struct key_def *k, const char *sec)
{
	size_t n = section_len(k->key);
	if (!sec)
		return n == 0;
	return n == strlen(sec) && strncmp(k->key, sec, n) == 0;
}

static const char *leaf(const char *key)
{
	const char *dot = strchr(key, '.');
	return dot ? dot + 1 : key;
}

/* Quote a user value for a message: "...", escaped, truncated. */
static const char *quote(const char *s, char *buf, size_t len)
{
	size_t o = 0, i;

	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	buf[o++] = '"';
	for (i = 0; s[i] && o + 6 < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (i >= 64) {
			buf[o++] = '.';
			buf[o++] = '.';
			buf[o++] = '.';
			break;
		}
		if (ch == '"' || ch == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
		} else {
			buf[o++] = (char)ch;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* Case-insensitive edit distance, '-' and '_' equal; strings capped at 63. */
static unsigned edit_distance(const char *a, const char *b)
{
	unsigned d[64][64];
	size_t la = PP_MIN(strlen(a), (size_t)63), lb = PP_MIN(strlen(b), (size_t)63);

	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]),
			    cb = tolower((unsigned char)b[j - 1]);
			if (ca == '-')
				ca = '_';
			if (cb == '-')
				cb = '_';
			unsigned best = d[i - 1][j - 1] + (ca != cb);
			best = PP_MIN(best, d[i - 1][j] + 1);
			best = PP_MIN(best, d[i][j - 1] + 1);
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

/* Is `cand` close enough to `word` to suggest? Keeps the best so far. */
static void consider(const char *word, const char *cand, const char **best, unsigned *best_d)
{
	size_t len = strlen(word);
	unsigned limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
	unsigned dist = edit_distance(word, cand);

	/* also match "frequency" against "frequency_hz" */
	if (dist > limit && len >= 4 && strncasecmp(cand, word, len) == 0)
		dist = limit;
	if (dist <= limit && dist < *best_d) {
		*best = cand;
		*best_d = dist;
	}
}

static void fmt_size(uint64_t v, bool sizes, char *buf, size_t len)
{
	if (sizes && v >= GIB && v % GIB == 0)
		snprintf(buf, len, "%lluGiB", (unsigned long long)(v / GIB));
	else if (sizes && v >= MIB && v % MIB == 0)
		snprintf(buf, len, "%lluMiB", (unsigned long long)(v / MIB));
	else if (sizes && v >= KIB && v % KIB == 0)
		snprintf(buf, len, "%lluKiB", (unsigned long long)(v / KIB));
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void fmt_range(const struct key_def *k, char *buf, size_t len)
{
	char lo[24], hi[24];

	if (k->type == K_DOUBLE) {
		snprintf(buf, len, "%g..%g", k->dmin, k->dmax);
		return;
	}
	fmt_size(k->min, k->sizes, lo, sizeof(lo));
	fmt_size(k->max, k->sizes, hi, sizeof(hi));
	snprintf(buf, len, "%s..%s", lo, hi);
}

/* Shortest %g form that reads back as the same double. */
static void fmt_double(double v, char *buf, size_t len)
{
	for (int prec = 6; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

static void enum_list(const struct enum_val *ev, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (; ev->name; ev++) {
		if (ev->hidden)
			continue;
		int n = snprintf(buf + o, len - o, "%s%s", o ? ", " : "", ev->name);
		if (n < 0 || (size_t)n >= len - o)
			break;
		o += (size_t)n;
	}
}

static const char *enum_name(const struct enum_val *ev, int v)
{
	for (; ev->name; ev++)
		if (!ev->hidden && ev->value == v)
			return ev->name;
	return "?";
}

/* A value being applied: a scalar string, or a description of what it is. */
struct val {
	const char *s; /* NULL unless a non-null scalar */
	const char *what; /* "a mapping", "a list" or "nothing" when s is NULL */
};

static __attribute__((format(printf, 3, 4))) int msgf(char *msg, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int got(const struct val *v, char *buf, size_t len)
{
	if (v->s)
		quote(v->s, buf, len);
	else
		snprintf(buf, len, "%s", v->what);
	return 0;
}

static bool parse_bool(const char *s, bool *ret)
{
	static const char *const t[] = { "true", "yes", "on" }, *const f[] = { "false", "no",
									       "off" };

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		if (streq_ci(s, t[i])) {
			*ret = true;
			return true;
		}
		if (streq_ci(s, f[i])) {
			*ret = false;
			return true;
		}
	}
	return false;
}

static bool is_negative_int(const char *s)
{
	if (*s != '-' || !s[1])
		return false;
	for (s++; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/*
 * Number with an optional binary size suffix. Returns 0, -EINVAL (not a
 * number) or -ERANGE (overflow; the caller checks the key's range).
 */
static int parse_number(const char *s, bool sizes, uint64_t *ret)
{
	static const struct {
		const char *sfx;
		uint64_t mul;
	} sfx[] = {
		{ "b", 1 },	     { "k", KIB },	 { "ki", KIB },	      { "kib", KIB },
		{ "kb", KIB },	     { "m", MIB },	 { "mi", MIB },	      { "mib", MIB },
		{ "mb", MIB },	     { "g", GIB },	 { "gi", GIB },	      { "gib", GIB },
		{ "gb", GIB },	     { "t", GIB * KIB }, { "ti", GIB * KIB }, { "tib", GIB * KIB },
		{ "tb", GIB * KIB },
	};
	char digits[32];
	size_t n = 0;
	uint64_t v, mul = 1;
	int r;

	while (isdigit((unsigned char)s[n]))
		n++;
	if (n == 0 || n >= sizeof(digits))
		return n ? -ERANGE : -EINVAL;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (s[n]) {
		const char *p = s + n;
		bool found = false;
		if (!sizes)
			return -EINVAL;
		while (*p == ' ')
			p++;
		for (size_t i = 0; i < ARRAY_SIZE(sfx) && !found; i++) {
			if (streq_ci(p, sfx[i].sfx)) {
				mul = sfx[i].mul;
				found = true;
			}
		}
		if (!found)
			return -EINVAL;
	}
	r = pp_parse_u64(digits, 10, 0, UINT64_MAX, &v);
	if (r < 0)
		return r;
	if (__builtin_mul_overflow(v, mul, &v))
		return -ERANGE;
	*ret = v;
	return 0;
}

/* ------------------------------------------------------ listen addresses -- */

bool pp_config__listen_disabled(const char *addr)
{
	return !addr || !*addr || strcmp(addr, "0") == 0;
}

/*
 * Splits host and port; writes a message (without the value) on error.
 * host gets "" for ":port" and the bare address for "[v6]:port".
 */
static int split_listen(const char *s, char *host, size_t hostlen, uint16_t *ret_port, char *msg,
			size_t msglen)
{
	const char *h, *port;
	size_t hl;
	uint64_t p;
	int r;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		char v6[64];
		if (!close)
			return msgf(msg, msglen, "is missing \"]\" after the IPv6 address");
		h = s + 1;
		hl = (size_t)(close - h);
		if (close[1] != ':')
			return msgf(msg, msglen, "needs \":PORT\" after \"]\"");
		port = close + 2;
		if (hl == 0 || hl >= sizeof(v6))
			return msgf(msg, msglen, "has no IPv6 address between [ and ]");
		memcpy(v6, h, hl);
		v6[hl] = '\0';
		char *zone = strchr(v6, '%');
		if (zone)
			*zone = '\0';
		struct in6_addr a6;
		if (inet_pton(AF_INET6, v6, &a6) != 1)
			return msgf(msg, msglen, "has an invalid IPv6 address");
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon) {
			bool digits = *s != '\0';
			for (const char *q = s; *q; q++)
				digits = digits && isdigit((unsigned char)*q);
			if (digits)
				return msgf(msg, msglen,
					    "has no host part; write \":%s\" for every interface "
					    "or "
					    "\"127.0.0.1:%s\" for local only",
					    s, s);
			return msgf(msg, msglen,
				    "is missing \":PORT\" (expected host:port or :port)");
		}
		h = s;
		hl = (size_t)(colon - s);
		port = colon + 1;
		if (memchr(h, ':', hl))
			return msgf(msg, msglen,
				    "needs brackets around an IPv6 address, as in \"[::1]:6060\"");
		if (hl > 253)
			return msgf(msg, msglen, "has a host name longer than 253 characters");
		for (size_t i = 0; i < hl; i++) {
			unsigned char ch = (unsigned char)h[i];
			if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_')
				return msgf(msg, msglen,
					    "has a host name with characters other than letters, "
					    "digits, '-', '.' and '_'");
		}
	}
	/* Port 0 asks the kernel for a free port; podprof logs the one it got. */
	r = pp_parse_u64(port, 10, 0, 65535, &p);
	if (r == -ERANGE)
		return msgf(msg, msglen, "has port %.16s, out of range (0..65535)", port);
	if (r < 0)
		return msgf(msg, msglen, "has port \"%.16s\", not a number (0..65535)", port);
	if (hl >= hostlen)
		return msgf(msg, msglen, "has a host name that is too long");
	memcpy(host, h, hl);
	host[hl] = '\0';
	*ret_port = (uint16_t)p;
	return 0;
}

int pp_config__split_listen(const char *addr, char *host, size_t hostlen, uint16_t *ret_port)
{
	char msg[CFG_MSG_LEN], h[256];
	uint16_t port;

	if (pp_config__listen_disabled(addr))
		return -EINVAL;
	if (split_listen(addr, h, sizeof(h), &port, msg, sizeof(msg)) < 0)
		return -EINVAL;
	if (strlen(h) >= hostlen)
		return -ENAMETOOLONG;
	strcpy(host, h);
	*ret_port = port;
	return 0;
}

/* ---------------------------------------------------------- apply value -- */

static int set_string(char **field, const char *s)
{
	char *copy = NULL;

	if (s) {
		copy = strdup(s);
		if (!copy)
			return -ENOMEM;
	}
	free(*field);
	*field = copy;
	return 0;
}

/*
 * http.allowed_hosts: comma-separated entries, each a host name, an IPv4
 * address, an IPv6 address in brackets or not, "*.domain" or "*"; a port
 * is ignored as in a Host header. 0 or -EINVAL with the message.
 */
static int check_hosts(const char *s, char *msg, size_t msglen)
{
	const char *all = s;

	while (*s) {
		size_t n = strcspn(s, ","), b = 0, e = n;

		while (b < e && (s[b] == ' ' || s[b] == '\t'))
			b++;
		while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t'))
			e--;
		if (b == e)
			return msgf(msg, msglen, "empty host name in \"%.128s\"", all);
		for (size_t i = b; i < e; i++) {
			unsigned char ch = (unsigned char)s[i];
			bool star = ch == '*' && i == b && (e - b == 1 || s[i + 1] == '.');

			if (!isalnum(ch) && !strchr(".-_:[]%", ch) && !star)
				return msgf(msg, msglen,
					    "\"%.*s\" is not a host name, an address, \"*.domain\" "
					    "or \"*\"",
					    (int)PP_MIN(e - b, (size_t)128), s + b);
		}
		s += n;
		if (*s)
			s++;
	}
	return 0;
}

static bool is_glob_char(char ch)
{
	return ch == '*' || ch == '?' || ch == '[' || ch == '\\';
}

/*
 * Validates v for key k and stores it at base + k->off. On error returns
 * -EINVAL with msg set (the part after "KEY: ") and leaves base untouched,
 * or -ENOMEM.
 */

/*
 * glibc's regcomp is exponential in stacked or nested repetitions
 * ("p++++", "((p)+)+", "p{2}{2}{2}"): a 264-byte pattern took 23 GiB and
 * minutes. Refuse them, and long patterns, before compiling. Returns why,
 * or NULL when the pattern is acceptable.
 */
static const char *regex_too_costly(const char *re)
{
	bool group_has_rep[32] = { false };
	int depth = 0;
	bool prev_rep = false; /* the last token was a repetition operator */
	bool prev_close_rep = false; /* the last token was ')' closing a group with one */

	if (strlen(re) > 256)
		return "longer than 256 characters";
	for (const char *p = re; *p; p++) {
		bool rep = false;
		switch (*p) {
		case '\\':
			if (p[1])
				p++;
			break;
		case '[':
			/* Bracket expression: ']' first (or after '^') is literal. */
			p++;
			if (*p == '^')
				p++;
			if (*p == ']')
				p++;
			while (*p && *p != ']')
				p++;
			if (!*p)
				return NULL; /* regcomp reports the syntax error */
			break;
		case '(':
			if (depth >= (int)ARRAY_SIZE(group_has_rep) - 1)
				return "groups nested more than 30 deep";
			group_has_rep[++depth] = false;
			break;
		case ')':
			if (depth > 0) {
				bool had = group_has_rep[depth--];
				prev_close_rep = had;
				if (had)
					group_has_rep[depth] = true;
				prev_rep = false;
				continue;
			}
			break;
		case '*':
		case '+':
		case '?':
		case '{':
			rep = true;
			if (*p == '{') {
				while (*p && *p != '}')
					p++;
				if (!*p)
					return NULL;
			}
			break;
		default:
			break;
		}
		if (rep) {
			if (prev_rep)
				return "stacked repetitions (like \"a++\" or \"a{2}{2}\") make it "
				       "too costly to compile";
			if (prev_close_rep)
				return "a repeated group that itself contains a repetition (like "
				       "\"(a+)+\") is too costly to compile";
			group_has_rep[depth] = true;
		}
		prev_rep = rep;
		prev_close_rep = false;
	}
	return NULL;
}

static int apply_value(void *base, const struct key_def *k, const struct val *v, char *msg,
		       size_t msglen)
{
	char *field = (char *)base + k->off;
	char g[128], range[64], list[128];
	const char *s = v->s;

	got(v, g, sizeof(g));
	if (s && strlen(s) > CFG_MAX_SCALAR)
		return msgf(msg, msglen, "value is longer than %u bytes", CFG_MAX_SCALAR);

	switch (k->type) {
	case K_BOOL: {
		bool b;
		if (!s || !parse_bool(s, &b))
			return msgf(msg, msglen, "expected true or false, got %s", g);
		*(bool *)field = b;
		return 0;
	}
	case K_UINT:
	case K_U64:
	case K_PID: {
		uint64_t n;
		int r;
		fmt_range(k, range, sizeof(range));
		if (!s)
			return msgf(msg, msglen, "expected a number (%s), got %s", range, g);
		if (is_negative_int(s))
			return msgf(msg, msglen, "%s is out of range (%s)", s, range);
		r = parse_number(s, k->sizes, &n);
		if (r == -EINVAL) {
			if (k->sizes)
				return msgf(msg, msglen,
					    "expected a number (%s) or a size like 512KiB, got %s",
					    range, g);
			return msgf(msg, msglen, "expected a number (%s), got %s", range, g);
		}
		if (r < 0 || n < k->min || n > k->max)
			return msgf(msg, msglen, "%s is out of range (%s)", s, range);
		if (k->align && n % k->align)
			return msgf(msg, msglen, "%s is not a multiple of %u (%s)", s, k->align,
				    range);
		if (k->type == K_UINT)
			*(unsigned *)field = (unsigned)n;
		else if (k->type == K_U64)
			*(uint64_t *)field = n;
		else
			*(pid_t *)field = (pid_t)n;
		return 0;
	}
	case K_DOUBLE: {
		char *end;
		double d;
		fmt_range(k, range, sizeof(range));
		if (!s || !*s || isspace((unsigned char)*s))
			return msgf(msg, msglen, "expected a number (%s), got %s", range, g);
		errno = 0;
		d = strtod(s, &end);
		if (*end || !isfinite(d))
			return msgf(msg, msglen, "expected a number (%s), got %s", range, g);
		if (d < k->dmin || d > k->dmax)
			return msgf(msg, msglen, "%s is out of range (%s)", s, range);
		*(double *)field = d;
		return 0;
	}
	case K_ENUM:
		enum_list(k->enums, list, sizeof(list));
		if (!s)
			return msgf(msg, msglen, "expected one of: %s; got %s", list, g);
		for (const struct enum_val *ev = k->enums; ev->name; ev++) {
			if (streq_ci(s, ev->name)) {
				*(int *)field = ev->value;
				return 0;
			}
		}
		return msgf(msg, msglen, "%s is not one of: %s", g, list);
	case K_STR:
	case K_DIR:
		if (!v->s && strcmp(v->what, "nothing") != 0)
			return msgf(msg, msglen, "expected a string, got %s", g);
		if (k->type == K_DIR && s && *s && s[0] != '/')
			return msgf(msg, msglen, "expected an absolute directory path, got %s", g);
		return set_string((char **)field, s && *s ? s : NULL);
	case K_HOSTS:
		if (!v->s && strcmp(v->what, "nothing") != 0)
			return msgf(msg, msglen, "expected a list of host names, got %s", g);
		if (s && *s) {
			int bad = check_hosts(s, msg, msglen);
			if (bad)
				return bad;
		}
		return set_string((char **)field, s && *s ? s : NULL);
	case K_LISTEN:
	case K_TLISTEN: {
		char host[256];
		uint16_t port;
		if (k->type == K_TLISTEN && !v->s && strcmp(v->what, "nothing") == 0)
			return set_string((char **)field, NULL);
		if (!s)
			return msgf(msg, msglen,
				    "expected an address like \"127.0.0.1:6060\" or \":6060\", "
				    "got %s",
				    g);
		if (pp_config__listen_disabled(s)) {
			if (k->type == K_TLISTEN)
				return msgf(msg, msglen,
					    "%s is not allowed here; give host:port or :port, or "
					    "leave listen out to use the main server",
					    g);
			return set_string((char **)field, s);
		}
		if (split_listen(s, host, sizeof(host), &port, list, sizeof(list)) < 0)
			return msgf(msg, msglen, "%s %s", g, list);
		return set_string((char **)field, s);
	}
	case K_NAME:
		if (!v->s && strcmp(v->what, "nothing") == 0)
			return set_string((char **)field, NULL);
		if (!s)
			return msgf(msg, msglen, "expected a string, got %s", g);
		if (!*s || strlen(s) > CFG_MAX_NAME)
			return msgf(msg, msglen, "must be 1..%u characters long", CFG_MAX_NAME);
		for (const char *p = s; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return msgf(msg, msglen, "%s contains a control character", g);
		return set_string((char **)field, s);
	case K_COMM:
	case K_EXE:
		if (!v->s && strcmp(v->what, "nothing") == 0)
			return set_string((char **)field, NULL);
		if (!s)
			return msgf(msg, msglen, "expected a pattern like \"redis-*\", got %s", g);
		if (!*s)
			return msgf(msg, msglen,
				    "the pattern is empty (leave the key out instead)");
		if (k->type == K_COMM && strlen(s) > CFG_COMM_LEN) {
			bool literal = true;
			for (const char *p = s; *p; p++)
				literal = literal && !is_glob_char(*p);
			if (literal)
				return msgf(msg, msglen,
					    "%s can never match: the kernel cuts comm to %d "
					    "characters (write \"%.*s*\" or match exe instead)",
					    g, CFG_COMM_LEN, CFG_COMM_LEN, s);
		}
		if (k->type == K_EXE && !(s[0] == '/' || is_glob_char(s[0])))
			return msgf(msg, msglen,
				    "%s can never match: exe is an absolute path (write "
				    "\"*/%.64s\" "
				    "or \"/usr/bin/%.64s\")",
				    g, s, s);
		return set_string((char **)field, s);
	case K_CONTAINER:
		if (!v->s && strcmp(v->what, "nothing") == 0)
			return set_string((char **)field, NULL);
		if (!s || !*s)
			return msgf(msg, msglen, "expected a container name like \"app\", got %s",
				    g);
		if (strlen(s) > 253)
			return msgf(msg, msglen,
				    "%s is too long (container names have 63 characters)", g);
		for (const char *p = s; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
			      is_glob_char(*p)))
				return msgf(msg, msglen,
					    "%s can never match: container names have only a-z, "
					    "0-9 "
					    "and '-' (wildcards allowed)",
					    g);
		return set_string((char **)field, s);
	case K_CONTAINER_ID: {
		size_t n;
		if (!v->s && strcmp(v->what, "nothing") == 0)
			return set_string((char **)field, NULL);
		if (!s)
			return msgf(msg, msglen, "expected a container id, got %s", g);
		if (strncmp(s, "containerd://", 13) == 0)
			s += 13;
		else if (strncmp(s, "cri-o://", 8) == 0)
			s += 8;
		else if (strncmp(s, "docker://", 9) == 0)
			s += 9;
		n = strlen(s);
		if (n < 4 || n > 64)
			return msgf(msg, msglen, "%s: give 4..64 hex digits of the id", g);
		for (const char *p = s; *p; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
				return msgf(msg, msglen,
					    "%s is not a container id (lowercase hex digits)", g);
		return set_string((char **)field, s);
	}
	case K_REGEX: {
		regex_t re;
		int r;
		const char *why;
		if (!v->s && strcmp(v->what, "nothing") == 0)
			return set_string((char **)field, NULL);
		if (!s)
			return msgf(msg, msglen, "expected a regular expression, got %s", g);
		why = regex_too_costly(s);
		if (why)
			return msgf(msg, msglen, "%s is refused: %s", g, why);
		r = regcomp(&re, s, REG_EXTENDED | REG_NOSUB);
		if (r == REG_ESPACE)
			return -ENOMEM;
		if (r) {
			regerror(r, &re, list, sizeof(list));
			return msgf(msg, msglen,
				    "%s is not a valid extended regular expression: %s", g, list);
		}
		regfree(&re);
		return set_string((char **)field, s);
	}
	}
	return msgf(msg, msglen, "internal error: unknown key type");
}

/* ------------------------------------------------------------ the tree -- */

enum node_type { N_SCALAR, N_MAP, N_SEQ };

struct node {
	enum node_type type;
	int line; /* 1-based */
	bool null; /* plain "", "~" or "null" */
	char *str; /* scalar value (NUL-free) */
	struct node *parent;
	size_t index; /* position in parent->kids */
	struct node **kids; /* map: key, value, key, value, ... */
	size_t n, cap;
};

struct ctx {
	const char *name;
	const char *buf;
	size_t len;
	char *err;
	size_t errlen;
	size_t nodes;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

static void path_append(char *buf, size_t len, const char *s, size_t slen)
{
	size_t o = strlen(buf);

	for (size_t i = 0; i < slen && o + 1 < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	buf[o] = '\0';
}

/* Dotted path of a node: "cpu.frequency_hz", "targets[1].comm"; "" for the root. */
static void node_path(const struct node *n, char *buf, size_t len)
{
	const struct node *p = n->parent;

	if (!p) {
		buf[0] = '\0';
		return;
	}
	node_path(p, buf, len);
	if (p->type == N_SEQ) {
		char idx[32];
		snprintf(idx, sizeof(idx), "[%zu]", n->index);
		path_append(buf, len, idx, strlen(idx));
		return;
	}
	/* a value names itself by its key; a key by its own text */
	const struct node *key = n->index % 2 ? p->kids[n->index - 1] : n;
	if (buf[0])
		path_append(buf, len, ".", 1);
	if (key->type == N_SCALAR && key->str)
		path_append(buf, len, key->str, PP_MIN(strlen(key->str), (size_t)64));
	else
		path_append(buf, len, "?", 1);
}

static __attribute__((format(printf, 4, 5))) int fail(struct ctx *x, int line, const char *key,
						      const char *fmt, ...)
{
	char msg[CFG_MSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (x->errlen)
		snprintf(x->err, x->errlen, "%s:%d: %s: %s", x->name, line,
			 key && *key ? key : "top level", msg);
	return -EINVAL;
}

static __attribute__((format(printf, 3, 4))) int fail_at(struct ctx *x, const struct node *n,
							 const char *fmt, ...)
{
	char msg[CFG_MSG_LEN], path[CFG_PATH_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	node_path(n, path, sizeof(path));
	return fail(x, n->line, path, "%s", msg);
}

static int line_of_offset(const char *buf, size_t len, size_t off)
{
	int line = 1;

	for (size_t i = 0; i < off && i < len; i++)
		line += buf[i] == '\n';
	return line;
}

/* The last line that has any text (libyaml may point one past it at EOF). */
static int last_line(const char *buf, size_t len)
{
	int line = line_of_offset(buf, len, len);

	if (len && buf[len - 1] == '\n' && line > 1)
		line--;
	return line;
}

static int syntax_error(struct ctx *x, const yaml_parser_t *p)
{
	char ctxmsg[128] = "";
	int line;

	if (p->error == YAML_MEMORY_ERROR)
		return -ENOMEM;
	if (p->error == YAML_READER_ERROR)
		line = line_of_offset(x->buf, x->len, p->problem_offset);
	else
		line = (int)p->problem_mark.line + 1;
	line = PP_MIN(line, last_line(x->buf, x->len));
	if (p->error == YAML_SCANNER_ERROR && p->problem_mark.index < x->len &&
	    x->buf[p->problem_mark.index] == '\t')
		snprintf(ctxmsg, sizeof(ctxmsg), " (tabs can't indent YAML; use spaces)");
	else if (p->context)
		snprintf(ctxmsg, sizeof(ctxmsg), " (%s that started on line %d)", p->context,
			 PP_MIN((int)p->context_mark.line + 1, last_line(x->buf, x->len)));
	return fail(x, line, "syntax error", "%s%s", p->problem ? p->problem : "invalid YAML",
		    ctxmsg);
}

static int node_attach(struct node *parent, struct node *n)
{
	if (pp_grow(&parent->kids, &parent->cap, parent->n + 1, sizeof(*parent->kids), 8) < 0)
		return -ENOMEM;
	n->parent = parent;
	n->index = parent->n;
	parent->kids[parent->n++] = n;
	return 0;
}

static bool plain_null(const char *s)
{
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

/* One event: make a node for it if it is one (alias/scalar/start), attach it. */
static int on_node_event(struct ctx *x, const yaml_event_t *ev, struct node **stack, int *depth,
			 struct node **root)
{
	int line = (int)ev->start_mark.line + 1;
	struct node *n;
	int r;

	if (++x->nodes > CFG_MAX_NODES)
		return fail(x, line, "syntax error", "more than %u values in one file",
			    CFG_MAX_NODES);
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->line = line;
	n->type = ev->type == YAML_MAPPING_START_EVENT	  ? N_MAP
		  : ev->type == YAML_SEQUENCE_START_EVENT ? N_SEQ
							  : N_SCALAR;
	if (*depth == 0) {
		*root = n;
	} else {
		r = node_attach(stack[*depth - 1], n);
		if (r < 0) {
			free(n);
			return r;
		}
	}

	if (ev->type == YAML_ALIAS_EVENT)
		return fail_at(x, n, "YAML aliases (*%.32s) are not supported; write the value out",
			       (const char *)ev->data.alias.anchor);
	if (ev->type == YAML_SCALAR_EVENT) {
		size_t len = ev->data.scalar.length;
		const char *v = (const char *)ev->data.scalar.value;
		if (len > CFG_MAX_SCALAR)
			return fail_at(x, n, "value is longer than %u bytes", CFG_MAX_SCALAR);
		if (memchr(v, '\0', len))
			return fail_at(x, n, "value contains a NUL character");
		n->str = strndup(v, len);
		if (!n->str)
			return -ENOMEM;
		n->null = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && plain_null(n->str);
		return 0;
	}
	if (*depth >= CFG_MAX_DEPTH)
		return fail_at(x, n, "nested deeper than %d levels", CFG_MAX_DEPTH);
	stack[(*depth)++] = n;
	return 0;
}

static int build_tree(struct ctx *x, struct node **ret_root)
{
	struct node *stack[CFG_MAX_DEPTH];
	struct node *root = NULL;
	yaml_parser_t p;
	yaml_event_t ev;
	int depth = 0, docs = 0, r = 0;
	bool done = false;

	if (!yaml_parser_initialize(&p))
		return -ENOMEM;
	yaml_parser_set_input_string(&p, (const unsigned char *)x->buf, x->len);
	while (!done && r == 0) {
		if (!yaml_parser_parse(&p, &ev)) {
			r = syntax_error(x, &p);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				r = fail(x, (int)ev.start_mark.line + 1, "syntax error",
					 "only one YAML document is allowed");
			break;
		case YAML_ALIAS_EVENT:
		case YAML_SCALAR_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			r = on_node_event(x, &ev, stack, &depth, &root);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth > 0)
				depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (r < 0) {
		node_free(root);
		return r;
	}
	*ret_root = root;
	return 0;
}

/* ---------------------------------------------------------- the walk -- */

static const char *node_what(const struct node *n)
{
	return n->type == N_MAP ? "a mapping" : n->type == N_SEQ ? "a list" : "nothing";
}

static struct val node_val(const struct node *n)
{
	struct val v = { NULL, node_what(n) };
	if (n->type == N_SCALAR && !n->null)
		v.s = n->str;
	return v;
}

/* A list of scalars joined by ",", for K_HOSTS. NULL with *ret_bad set to the odd item. */
static char *join_list(const struct node *n, const struct node **ret_bad)
{
	struct pp_buf b = { .max = CFG_MAX_SCALAR };

	*ret_bad = NULL;
	for (size_t i = 0; i < n->n; i++) {
		const struct node *it = n->kids[i];

		if (it->type != N_SCALAR || it->null || !*it->str || strchr(it->str, ',') ||
		    (i && pp_buf_puts(&b, ",") < 0) || pp_buf_puts(&b, it->str) < 0) {
			*ret_bad = it;
			pp_buf_free(&b);
			return NULL;
		}
	}
	return b.data ? pp_buf_steal(&b, NULL) : strdup("");
}

static int apply_node(struct ctx *x, void *base, const struct key_def *k, const struct node *n)
{
	char msg[CFG_MSG_LEN];
	struct val v = node_val(n);
	_cleanup_free_ char *joined = NULL;
	int r;

	if (k->type == K_HOSTS && n->type == N_SEQ) {
		const struct node *bad;

		joined = join_list(n, &bad);
		if (!joined && bad)
			return fail_at(x, bad, "expected a host name");
		if (!joined)
			return -ENOMEM;
		v.s = joined;
	}
	r = apply_value(base, k, &v, msg, sizeof(msg));
	if (r == -EINVAL)
		return fail_at(x, n, "%s", msg);
	return r;
}

/* "valid keys: a, b, c" for the keys of one section / the targets table. */
static void key_list(const struct key_def *keys, size_t n, const char *sec, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (sec && !in_section(&keys[i], sec))
			continue;
		int w = snprintf(buf + o, len - o, "%s%s", o ? ", " : "", leaf(keys[i].key));
		if (w < 0 || (size_t)w >= len - o)
			break;
		o += (size_t)w;
	}
}

static int unknown_key(struct ctx *x, const struct node *key, const char *const *cands,
		       size_t ncands, const char *valid)
{
	const char *best = NULL;
	unsigned best_d = UINT32_MAX;

	for (size_t i = 0; i < ncands; i++)
		consider(key->str, cands[i], &best, &best_d);
	if (best)
		return fail_at(x, key, "unknown key (did you mean %s?)", best);
	return fail_at(x, key, "unknown key (valid keys: %s)", valid);
}

/* Common checks on a mapping's key; returns 0 when it is a usable scalar. */
static int check_key(struct ctx *x, const struct node *key)
{
	char path[CFG_PATH_LEN];

	if (key->type != N_SCALAR) {
		node_path(key->parent, path, sizeof(path));
		return fail(x, key->line, path, "keys must be plain words, got %s", node_what(key));
	}
	return 0;
}

static int dup_key(struct ctx *x, const struct node *key, int first_line)
{
	return fail_at(x, key, "duplicate key (first set on line %d)", first_line);
}

static int not_a_mapping(struct ctx *x, const struct node *m, const char *valid)
{
	struct val v = node_val(m);
	char g[128];

	got(&v, g, sizeof(g));
	return fail_at(x, m, "expected a mapping (%s), got %s", valid, g);
}

/*
 * Applies the entries of mapping m to base: each key must be one of `keys`
 * in section sec (NULL: the keys without a section), named by its leaf,
 * at most once. valid lists them for the messages.
 */
static int walk_keys(struct ctx *x, void *base, const struct key_def *keys, size_t nkeys,
		     const char *sec, const struct node *m, const char *valid)
{
	const char *cands[ARRAY_SIZE(config_keys)];
	int seen[ARRAY_SIZE(config_keys)] = { 0 };
	size_t nc = 0;
	int r;

	_Static_assert(ARRAY_SIZE(target_keys) <= ARRAY_SIZE(config_keys), "walk_keys arrays");
	if (nkeys > ARRAY_SIZE(config_keys))
		return -EINVAL;
	for (size_t i = 0; i < nkeys; i++)
		if (in_section(&keys[i], sec))
			cands[nc++] = leaf(keys[i].key);
	for (size_t i = 0; i + 1 < m->n; i += 2) {
		const struct node *key = m->kids[i], *val = m->kids[i + 1];
		size_t ki;
		if ((r = check_key(x, key)) < 0)
			return r;
		for (ki = 0; ki < nkeys; ki++)
			if (in_section(&keys[ki], sec) && strcmp(leaf(keys[ki].key), key->str) == 0)
				break;
		if (ki == nkeys)
			return unknown_key(x, key, cands, nc, valid);
		if (seen[ki])
			return dup_key(x, key, seen[ki]);
		seen[ki] = key->line;
		if ((r = apply_node(x, base, &keys[ki], val)) < 0)
			return r;
	}
	return 0;
}

static int walk_section(struct ctx *x, struct pp_config *c, const char *sec, const struct node *m)
{
	char valid[256];

	key_list(config_keys, ARRAY_SIZE(config_keys), sec, valid, sizeof(valid));

	if (m->type == N_SCALAR && m->null)
		return 0; /* "cpu:" with nothing: defaults */
	if (m->type != N_MAP) {
		bool b;
		char q[64];
		if (m->type == N_SCALAR && parse_bool(m->str, &b))
			return fail_at(x, m,
				       "expected a mapping, got %s (to turn it %s write "
				       "\"%s: {enabled: %s}\")",
				       quote(m->str, q, sizeof(q)), b ? "on" : "off", sec,
				       b ? "true" : "false");
		return not_a_mapping(x, m, valid);
	}
	return walk_keys(x, c, config_keys, ARRAY_SIZE(config_keys), sec, m, valid);
}

static void free_selector(struct pp_selector *s)
{
	free(s->name);
	free(s->comm);
	free(s->exe);
	free(s->cmdline);
	free(s->container);
	free(s->container_id);
	free(s->listen);
	memset(s, 0, sizeof(*s));
}

static int walk_target(struct ctx *x, struct pp_selector *t, size_t idx, const struct node *m)
{
	char valid[128];
	int r;

	key_list(target_keys, ARRAY_SIZE(target_keys), NULL, valid, sizeof(valid));
	t->line = m->line;
	if (m->type != N_MAP)
		return not_a_mapping(x, m, valid);
	if ((r = walk_keys(x, t, target_keys, ARRAY_SIZE(target_keys), NULL, m, valid)) < 0)
		return r;
	if (!t->name && asprintf(&t->name, "target-%zu", idx) < 0) {
		t->name = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* The value of key in mapping m, else m itself (for an error's line and path). */
static const struct node *map_value(const struct node *m, const char *key)
{
	if (m->type != N_MAP)
		return m;
	for (size_t i = 0; i + 1 < m->n; i += 2)
		if (m->kids[i]->type == N_SCALAR && m->kids[i]->str &&
		    strcmp(m->kids[i]->str, key) == 0)
			return m->kids[i + 1];
	return m;
}

static int walk_targets(struct ctx *x, struct pp_config *c, const struct node *seq)
{
	struct pp_selector *t;
	int r;

	if (seq->type == N_SCALAR && seq->null)
		return 0;
	if (seq->type != N_SEQ) {
		struct val v = node_val(seq);
		char g[128];
		got(&v, g, sizeof(g));
		return fail_at(x, seq, "expected a list, got %s", g);
	}
	if (seq->n > CFG_MAX_TARGETS)
		return fail_at(x, seq->kids[CFG_MAX_TARGETS], "more than %u targets",
			       CFG_MAX_TARGETS);
	if (seq->n == 0)
		return 0;
	t = calloc(seq->n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	size_t listeners = 0;
	for (size_t i = 0; i < seq->n; i++) {
		r = walk_target(x, &t[i], i, seq->kids[i]);
		for (size_t j = 0; r == 0 && j < i; j++) {
			if (strcmp(t[j].name, t[i].name) == 0)
				r = fail_at(x, seq->kids[i],
					    "name \"%.64s\" is already used by targets[%zu]",
					    t[i].name, j);
		}
		if (r == 0 && t[i].listen && ++listeners > PP_CONFIG_MAX_LISTENERS)
			r = fail_at(x, map_value(seq->kids[i], "listen"),
				    "more than %d targets have their own listen address (each is "
				    "a server of its own; at most %d): leave listen out of the "
				    "others to serve them on the main server",
				    PP_CONFIG_MAX_LISTENERS, PP_CONFIG_MAX_LISTENERS);
		if (r < 0) {
			for (size_t j = 0; j <= i; j++)
				free_selector(&t[j]);
			free(t);
			return r;
		}
	}
	c->targets = t;
	c->n_targets = seq->n;
	return 0;
}

static int walk_root(struct ctx *x, struct pp_config *c, const struct node *root)
{
	const char *cands[ARRAY_SIZE(sections) + 2];
	int seen[ARRAY_SIZE(sections) + 2] = { 0 };
	size_t nc = 0;
	int r;

	if (!root || (root->type == N_SCALAR && root->null))
		return 0; /* empty document: defaults */
	cands[nc++] = "listen";
	cands[nc++] = "targets";
	for (size_t i = 0; i < ARRAY_SIZE(sections); i++)
		cands[nc++] = sections[i];
	if (root->type != N_MAP) {
		struct val v = node_val(root);
		char g[128];
		got(&v, g, sizeof(g));
		return fail_at(x, root,
			       "expected a mapping of keys (listen, targets, cpu, ...), got %s", g);
	}
	for (size_t i = 0; i + 1 < root->n; i += 2) {
		const struct node *key = root->kids[i], *val = root->kids[i + 1];
		size_t ki;
		if ((r = check_key(x, key)) < 0)
			return r;
		for (ki = 0; ki < nc; ki++)
			if (strcmp(cands[ki], key->str) == 0)
				break;
		if (ki == nc) {
			for (size_t j = 0; j < ARRAY_SIZE(config_keys); j++) {
				size_t sl = section_len(config_keys[j].key);
				if (sl && strcmp(config_keys[j].key, key->str) == 0)
					return fail_at(x, key,
						       "unknown key (write it nested: \"%.*s:\" "
						       "and \"%s:\" indented under it)",
						       (int)sl, key->str, leaf(key->str));
			}
			return unknown_key(x, key, cands, nc,
					   "listen, targets, discovery, cpu, heap, offcpu, "
					   "threads, "
					   "http, limits, symbolizer, log");
		}
		if (seen[ki])
			return dup_key(x, key, seen[ki]);
		seen[ki] = key->line;
		if (ki == 0)
			r = apply_node(x, c, &config_keys[0], val);
		else if (ki == 1)
			r = walk_targets(x, c, val);
		else
			r = walk_section(x, c, cands[ki], val);
		if (r < 0)
			return r;
	}
	return 0;
}

/* -------------------------------------------------------------- public -- */

void pp_config__free(struct pp_config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_targets; i++)
		free_selector(&c->targets[i]);
	free(c->targets);
	free(c->source);
	free(c->listen);
	free(c->http.token_file);
	free(c->http.allowed_hosts);
	free(c->heap.agent_dir);
	free(c);
}

struct pp_config *pp_config__new_default(void)
{
	struct pp_config *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->source = strdup("<default>");
	c->listen = strdup("127.0.0.1:6060");
	if (!c->source || !c->listen) {
		pp_config__free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->discovery.interval_ms = 1000;
	c->discovery.include_self = false;
	c->cpu.enabled = true;
	c->cpu.frequency_hz = 99;
	c->cpu.max_seconds = 300;
	c->cpu.stack_bytes = 32768;
	c->cpu.always_on = false;
	c->cpu.unwind = PP_UNWIND_DWARF;
	c->cpu.kernel_stacks = true;
	c->heap.enabled = true;
	c->heap.sample_rate = 524288;
	c->heap.max_live = 65536;
	c->heap.ring_mib = 0; /* from the sample rate */
	c->heap.budget_percent = 5;
	c->heap.over_budget = PP_HEAP_POLICY_AUTO;
	c->heap.mode = PP_HEAP_MODE_AUTO;
	c->offcpu.enabled = true;
	c->offcpu.min_block_us = 0;
	c->offcpu.always_on = false;
	c->offcpu.linger_seconds = 300;
	c->threads.enabled = true;
	c->threads.max_pause_ms = 50;
	c->threads.min_interval_ms = 1000;
	c->threads.dump_timeout_ms = 2000;
	c->http.max_connections = 1024;
	c->http.max_connections_per_client = 64;
	c->http.header_timeout_seconds = 10;
	c->http.workers = 4;
	c->http.max_windows = 256;
	c->http.max_windows_per_client = 32;
	c->http.max_request_bytes = 65536;
	c->http.timeout_seconds = 30;
	c->http.token_file = NULL;
	c->http.allowed_hosts = NULL;
	c->limits.max_targets = 256;
	c->limits.max_stacks = 200000;
	c->limits.symbol_cache_bytes = 64 * MIB;
	c->limits.max_window_bytes = 64 * MIB;
	c->limits.max_maps_entries = 65536;
	c->limits.max_maps_bytes = 16 * MIB;
	c->limits.max_target_fds = 256;
	c->symbolizer.isolate = true;
	c->symbolizer.memory_mib = 192;
	c->symbolizer.cpu_seconds = 86400;
	c->symbolizer.timeout_ms = 30000;
	c->symbolizer.idle_seconds = 30;
	c->symbolizer.helper_uid = 65533; /* PP_SYMISO_HELPER_UID */
	c->log.level = PP_LOG_INFO;
	c->log.format = PP_LOG_TEXT;
	c->log.memstats_interval_seconds = 60;
	return c;
}

int pp_config__parse(const char *buf, size_t len, const char *name, struct pp_config **ret,
		     char *err, size_t errlen)
{
	struct ctx x = { .name = name ? name : "<config>",
			 .buf = buf,
			 .len = len,
			 .err = err,
			 .errlen = errlen };
	struct node *root = NULL;
	struct pp_config *c;
	int r;

	if (errlen)
		err[0] = '\0';
	if (!buf && len)
		return -EINVAL;
	if (len > CFG_MAX_BYTES)
		return fail(&x, 1, "file too large", "%zu bytes; the limit is 1 MiB (%u bytes)",
			    len, CFG_MAX_BYTES);
	c = pp_config__new_default();
	if (!c)
		return -ENOMEM;
	free(c->source);
	c->source = strdup(x.name);
	if (!c->source) {
		pp_config__free(c);
		return -ENOMEM;
	}
	r = build_tree(&x, &root);
	if (r == 0)
		r = walk_root(&x, c, root);
	node_free(root);
	if (r < 0) {
		if (r == -ENOMEM && errlen)
			snprintf(err, errlen, "%s: out of memory", x.name);
		pp_config__free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int pp_config__load_file(const char *path, struct pp_config **ret, char *err, size_t errlen)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	if (errlen)
		err[0] = '\0';
	r = pp_read_file(path, CFG_MAX_BYTES, &buf, &len);
	if (r == -EFBIG) {
		if (errlen)
			snprintf(err, errlen, "%s:1: file too large: the limit is 1 MiB (%u bytes)",
				 path, CFG_MAX_BYTES);
		return -EINVAL;
	}
	if (r < 0) {
		if (errlen)
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-r));
		return r;
	}
	return pp_config__parse(buf, len, path, ret, err, errlen);
}

static const struct key_def *find_key(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(config_keys); i++)
		if (strcmp(config_keys[i].key, key) == 0)
			return &config_keys[i];
	return NULL;
}

int pp_config__set(struct pp_config *c, const char *key, const char *value, const char *origin,
		   char *err, size_t errlen)
{
	const struct key_def *k;
	char msg[CFG_MSG_LEN];
	struct val v = { value, "nothing" };
	int r;

	if (errlen)
		err[0] = '\0';
	if (!origin)
		origin = "--set";
	if (!c || !key) {
		if (errlen)
			snprintf(err, errlen, "%s: missing key", origin);
		return -EINVAL;
	}
	k = find_key(key);
	if (!k) {
		const char *best = NULL;
		unsigned best_d = UINT32_MAX;
		if (strcmp(key, "targets") == 0 || strncmp(key, "targets.", 8) == 0 ||
		    strncmp(key, "targets[", 8) == 0) {
			snprintf(err, errlen,
				 "%s: %s: targets can only be set in the config file, with --pid "
				 "or with PODPROF_PID",
				 origin, key);
			return -EINVAL;
		}
		for (size_t i = 0; i < ARRAY_SIZE(sections); i++) {
			if (strcmp(key, sections[i]) == 0) {
				char valid[256];
				key_list(config_keys, ARRAY_SIZE(config_keys), key, valid,
					 sizeof(valid));
				snprintf(err, errlen,
					 "%s: %s: is a section; set one of its keys (%s)", origin,
					 key, valid);
				return -EINVAL;
			}
		}
		for (size_t i = 0; i < ARRAY_SIZE(config_keys); i++) {
			const char *before = best;
			consider(key, config_keys[i].key, &best, &best_d);
			/* "frequency_hz" alone suggests "cpu.frequency_hz" */
			consider(key, leaf(config_keys[i].key), &best, &best_d);
			if (best != before)
				best = config_keys[i].key;
		}
		if (best)
			snprintf(err, errlen, "%s: %.64s: unknown key (did you mean %s?)", origin,
				 key, best);
		else
			snprintf(err, errlen, "%s: %.64s: unknown key", origin, key);
		return -EINVAL;
	}
	r = apply_value(c, k, &v, msg, sizeof(msg));
	if (r == -EINVAL && errlen)
		snprintf(err, errlen, "%s: %s: %s", origin, k->key, msg);
	return r;
}

/* "cpu.frequency_hz" -> "PODPROF_CPU_FREQUENCY_HZ" */
static void env_name(const char *key, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "PODPROF_");

	for (; *key && o + 1 < len; key++)
		buf[o++] = *key == '.' ? '_' : (char)toupper((unsigned char)*key);
	buf[o] = '\0';
}

static int env_pids(struct pp_config *c, const char *var, const char *value, char *err,
		    size_t errlen)
{
	const char *p = value;

	while (*p) {
		char num[32], q[64];
		size_t n = strcspn(p, ",");
		size_t a = 0, b = n;
		uint64_t pid;
		while (a < b && isspace((unsigned char)p[a]))
			a++;
		while (b > a && isspace((unsigned char)p[b - 1]))
			b--;
		if (b > a) {
			snprintf(num, sizeof(num), "%.*s", (int)PP_MIN(b - a, sizeof(num) - 1),
				 p + a);
			if (b - a >= sizeof(num) ||
			    pp_parse_u64(num, 10, 1, CFG_PID_MAX, &pid) < 0) {
				snprintf(err, errlen,
					 "%s: %s is not a pid (expected comma-separated numbers "
					 "1..%u)",
					 var, quote(num, q, sizeof(q)), CFG_PID_MAX);
				return -EINVAL;
			}
			int r = pp_config__add_pid_target(c, (pid_t)pid);
			if (r == -E2BIG) {
				snprintf(err, errlen, "%s: more than %u targets", var,
					 CFG_MAX_TARGETS);
				return -EINVAL;
			}
			if (r < 0)
				return r;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

int pp_config__apply_env(struct pp_config *c, char *const *envp, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	if (!envp)
		return 0;
	for (char *const *e = envp; *e; e++) {
		const char *eq = strchr(*e, '='), *value;
		char var[96], ename[96];
		const struct key_def *k = NULL;
		const char *best = NULL;
		const struct key_def *best_k = NULL;
		unsigned best_d = UINT32_MAX;
		int r;

		if (strncmp(*e, "PODPROF_", 8) != 0 || !eq)
			continue;
		snprintf(var, sizeof(var), "%.*s", (int)PP_MIN((size_t)(eq - *e), sizeof(var) - 1),
			 *e);
		value = eq + 1;
		if (strcmp(var, "PODPROF_CONFIG") == 0)
			continue;
		if (!*value)
			continue; /* empty = unset, as for most tools */
		if (strcmp(var, "PODPROF_PID") == 0) {
			r = env_pids(c, var, value, err, errlen);
			if (r < 0)
				return r;
			continue;
		}
		for (size_t i = 0; i < ARRAY_SIZE(config_keys) && !k; i++) {
			env_name(config_keys[i].key, ename, sizeof(ename));
			const char *before = best;
			if (strcmp(ename, var) == 0)
				k = &config_keys[i];
			else
				consider(var + 8, ename + 8, &best, &best_d);
			if (best != before)
				best_k = &config_keys[i]; /* ename is reused: keep the key */
		}
		if (!k) {
			if (strncmp(var, "PODPROF_TARGETS", 15) == 0)
				snprintf(err, errlen,
					 "%s: targets can't be set from the environment (use "
					 "PODPROF_PID or the config file)",
					 var);
			else if (best_k) {
				env_name(best_k->key, ename, sizeof(ename));
				snprintf(err, errlen, "%s: unknown variable (did you mean %s?)",
					 var, ename);
			} else
				snprintf(err, errlen,
					 "%s: unknown variable (see the configuration reference "
					 "for "
					 "PODPROF_* names)",
					 var);
			return -EINVAL;
		}
		r = pp_config__set(c, k->key, value, var, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

int pp_config__add_pid_target(struct pp_config *c, pid_t pid)
{
	struct pp_selector *t;

	if (!c || pid <= 0)
		return -EINVAL;
	for (size_t i = 0; i < c->n_targets; i++) {
		const struct pp_selector *s = &c->targets[i];
		if (s->pid == pid && !s->comm && !s->exe && !s->cmdline && !s->listen &&
		    !s->container && !s->container_id)
			return 0;
	}
	if (c->n_targets >= CFG_MAX_TARGETS)
		return -E2BIG;
	t = realloc(c->targets, (c->n_targets + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	c->targets = t;
	t = &c->targets[c->n_targets];
	memset(t, 0, sizeof(*t));
	if (asprintf(&t->name, "pid-%d", (int)pid) < 0) {
		t->name = NULL;
		return -ENOMEM;
	}
	t->pid = pid;
	c->n_targets++;
	return 0;
}

/* ---------------------------------------------------------------- dump -- */

/*
 * Length and code point of the UTF-8 sequence at s, or 0 if it is not one
 * (libyaml hands over valid UTF-8; a string that is not is copied as it is).
 */
static int utf8_decode(const unsigned char *s, uint32_t *cp)
{
	int n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	uint32_t v;

	if (n == 0)
		return 0;
	v = s[0] & (0x3f >> (n - 1));
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	*cp = v;
	return n;
}

/*
 * A double-quoted YAML scalar that parses back to s. Besides the quote, the
 * backslash and the C0 controls, the code points YAML reads as line breaks
 * (NEL, LS, PS), the C1 controls, the byte order mark and the two
 * non-characters are escaped: written raw, a parser folds or refuses them.
 */
static int dump_string(struct pp_buf *out, const char *s)
{
	int r = pp_buf_puts(out, "\"");

	while (r == 0 && s && *s) {
		unsigned char ch = (unsigned char)*s;
		uint32_t cp;
		int n;

		if (ch == '"' || ch == '\\') {
			r = pp_buf_printf(out, "\\%c", ch);
		} else if (ch < 0x20 || ch == 0x7f) {
			r = pp_buf_printf(out, "\\x%02x", ch);
		} else if (ch >= 0x80 && (n = utf8_decode((const unsigned char *)s, &cp)) > 0) {
			if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
			    cp == 0xfeff || cp == 0xfffe || cp == 0xffff)
				r = pp_buf_printf(out, "\\u%04x", (unsigned)cp);
			else
				r = pp_buf_append(out, s, (size_t)n);
			s += n;
			continue;
		} else {
			r = pp_buf_append(out, s, 1);
		}
		s++;
	}
	if (r == 0)
		r = pp_buf_puts(out, "\"");
	return r;
}

static int dump_value(struct pp_buf *out, const void *base, const struct key_def *k)
{
	const char *field = (const char *)base + k->off;
	char tmp[64];

	switch (k->type) {
	case K_BOOL:
		return pp_buf_puts(out, *(const bool *)field ? "true" : "false");
	case K_UINT:
		fmt_size(*(const unsigned *)field, k->sizes, tmp, sizeof(tmp));
		return pp_buf_puts(out, tmp);
	case K_U64:
		fmt_size(*(const uint64_t *)field, k->sizes, tmp, sizeof(tmp));
		return pp_buf_puts(out, tmp);
	case K_PID:
		return pp_buf_printf(out, "%d", (int)*(const pid_t *)field);
	case K_DOUBLE:
		fmt_double(*(const double *)field, tmp, sizeof(tmp));
		return pp_buf_puts(out, tmp);
	case K_ENUM:
		return pp_buf_puts(out, enum_name(k->enums, *(const int *)field));
	default:
		return dump_string(out, *(char *const *)field);
	}
}

int pp_config__dump(const struct pp_config *c, struct pp_buf *out)
{
	const char *cur = NULL;
	size_t cur_len = 0;
	int r = 0;

	if (!c || !out)
		return -EINVAL;
	r = pp_buf_puts(out, "# podprof effective configuration, from ");
	for (const char *s = c->source ? c->source : "?"; r == 0 && *s; s++)
		r = pp_buf_append(out, (unsigned char)*s < 0x20 ? "?" : s, 1);
	if (r == 0)
		r = pp_buf_puts(out, "\n");

	for (size_t i = 0; r == 0 && i < ARRAY_SIZE(config_keys); i++) {
		const struct key_def *k = &config_keys[i];
		size_t sl = section_len(k->key);
		if (sl && (!cur || sl != cur_len || strncmp(cur, k->key, sl) != 0)) {
			cur = k->key;
			cur_len = sl;
			r = pp_buf_printf(out, "%.*s:\n", (int)sl, k->key);
		}
		if (r == 0)
			r = pp_buf_printf(out, "%s%s: ", sl ? "  " : "", leaf(k->key));
		if (r == 0)
			r = dump_value(out, c, k);
		if (r == 0)
			r = pp_buf_puts(out, "\n");
		if (r == 0 && i == 0) {
			/* targets right after listen */
			r = pp_buf_puts(out, c->n_targets ? "targets:\n" : "targets: []\n");
			for (size_t t = 0; r == 0 && t < c->n_targets; t++) {
				const struct pp_selector *s = &c->targets[t];
				bool first = true;
				for (size_t j = 0; r == 0 && j < ARRAY_SIZE(target_keys); j++) {
					const struct key_def *tk = &target_keys[j];
					const char *f = (const char *)s + tk->off;
					if (tk->type == K_PID ? *(const pid_t *)f == 0
							      : *(char *const *)f == NULL)
						continue;
					r = pp_buf_printf(out, "  %s %s: ", first ? "-" : " ",
							  tk->key);
					first = false;
					if (r == 0)
						r = dump_value(out, s, tk);
					if (r == 0)
						r = pp_buf_puts(out, "\n");
				}
				if (r == 0 && first)
					r = pp_buf_puts(out, "  - {}\n");
			}
		}
	}
	return r;
}
