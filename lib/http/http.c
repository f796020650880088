/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The /debug/pprof server on libmicrohttpd. Behaviour per PPROF-COMPAT.md §1.
 *
 * Threading model: MHD_USE_THREAD_PER_CONNECTION with an internal listening
 * thread. A CPU window or a delta holds its request for up to
 * max_window_seconds; with one thread per connection such a request simply
 * blocks its own thread while every other connection (/healthz, /heap)
 * keeps its own, so long windows never delay short requests and we need no
 * timer thread nor suspend/resume state machine. The thread count is bounded
 * by max_connections, which we enforce in the accept policy so that each
 * rejection is counted. While a window waits, the connection thread polls
 * the client socket for POLLRDHUP/POLLHUP and an eventfd that stop() fires,
 * so a client that goes away or a stopping server frees the work at once.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <time.h>

#include <microhttpd.h>

#include "http.h"
#include "ui.h"
#include "util/log.h"

#define DEFAULT_MAX_CONNECTIONS 64
#define DEFAULT_MAX_REQUEST_BYTES 65536
#define DEFAULT_TIMEOUT_SECONDS 30
#define DEFAULT_MAX_WINDOW_SECONDS 300
#define DEFAULT_CPU_SECONDS 30
/* Largest body we build in memory (rendered profile, /metrics, /symbol). */
#define MAX_BODY_BYTES (512u << 20)
#define MAX_SYMBOL_NAME_BYTES 4096
#define MAX_HEALTH_MSG_BYTES 1024

/* Routes, also the low-cardinality path label of the request counter. */
enum route {
	R_REDIRECT,
	R_INDEX,
	R_KIND_FIRST,
	R_KIND_LAST = R_KIND_FIRST + PP_PROFILE__COUNT - 1,
	R_CMDLINE,
	R_SYMBOL,
	R_TRACE,
	R_UNKNOWN_PROFILE,
	R_HEALTHZ,
	R_METRICS,
	R_UI,
	R_OTHER,
	R__COUNT
};

static const unsigned status_codes[] = { 200, 301, 400, 401, 404, 413, 500, 501, 503 };
#define N_CODES (ARRAY_SIZE(status_codes) + 1) /* last slot: any other code */

struct pp_http_server {
	struct MHD_Daemon *d;
	struct pp_http_source src;
	char *token;
	size_t token_len;
	char *title;
	unsigned port;
	unsigned max_connections;
	unsigned max_request_bytes;
	unsigned max_window_seconds;
	unsigned timeout_seconds;
	int stop_fd; /* eventfd, readable once stop() began */
	atomic_bool stopping;
	atomic_uint open_connections;
	atomic_ulong rejected;
	atomic_long in_flight;
	atomic_ulong windows_aborted;
	atomic_ulong requests[R__COUNT][N_CODES];
};

/* Per request, created by the URI log callback so we see the raw query. */
struct req {
	char *uri;
	struct pp_buf body;
	bool started;
	bool too_large;
	bool in_flight;
};

/* What one handler invocation works with. */
struct call {
	struct pp_http_server *s;
	struct MHD_Connection *c;
	enum route route;
	const char *query; /* raw, never NULL */
	const char *url; /* path, never NULL */
};

static const char *route_label(enum route r)
{
	static const char *const labels[R__COUNT] = {
		[R_REDIRECT] = "/debug/pprof",
		[R_INDEX] = "/debug/pprof/",
		[R_KIND_FIRST + PP_PROFILE_CPU] = "/debug/pprof/profile",
		[R_KIND_FIRST + PP_PROFILE_HEAP] = "/debug/pprof/heap",
		[R_KIND_FIRST + PP_PROFILE_ALLOCS] = "/debug/pprof/allocs",
		[R_KIND_FIRST + PP_PROFILE_GOROUTINE] = "/debug/pprof/goroutine",
		[R_KIND_FIRST + PP_PROFILE_THREADCREATE] = "/debug/pprof/threadcreate",
		[R_KIND_FIRST + PP_PROFILE_BLOCK] = "/debug/pprof/block",
		[R_KIND_FIRST + PP_PROFILE_MUTEX] = "/debug/pprof/mutex",
		[R_CMDLINE] = "/debug/pprof/cmdline",
		[R_SYMBOL] = "/debug/pprof/symbol",
		[R_TRACE] = "/debug/pprof/trace",
		[R_UNKNOWN_PROFILE] = "/debug/pprof/unknown",
		[R_HEALTHZ] = "/healthz",
		[R_METRICS] = "/metrics",
		[R_UI] = "/debug/pprof/ui/",
		[R_OTHER] = "other",
	};
	_Static_assert(PP_PROFILE__COUNT == 7, "route labels cover every profile kind");

	return labels[r];
}

static enum route route_of(const char *url)
{
	static const char prefix[] = "/debug/pprof/";
	const char *name;
	int k;

	if (!url)
		return R_OTHER;
	if (strcmp(url, "/healthz") == 0)
		return R_HEALTHZ;
	if (strcmp(url, "/metrics") == 0)
		return R_METRICS;
	if (strcmp(url, "/debug/pprof") == 0)
		return R_REDIRECT;
	if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
		return R_OTHER;
	name = url + sizeof(prefix) - 1;
	if (!*name)
		return R_INDEX;
	if (strcmp(name, "ui") == 0 || strncmp(name, "ui/", 3) == 0)
		return R_UI;
	if (strcmp(name, "cmdline") == 0)
		return R_CMDLINE;
	if (strcmp(name, "symbol") == 0)
		return R_SYMBOL;
	if (strcmp(name, "trace") == 0)
		return R_TRACE;
	k = pp_profile_kind__from_name(name);
	if (k >= 0)
		return (enum route)(R_KIND_FIRST + k);
	return R_UNKNOWN_PROFILE;
}

static void count_request(struct pp_http_server *s, enum route r, unsigned code)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(status_codes); i++)
		if (status_codes[i] == code)
			break;
	atomic_fetch_add_explicit(&s->requests[r][i], 1, memory_order_relaxed);
}

/*
 * Queue a response. Takes ownership of data (malloc'd, or NULL when len is
 * 0). ctype NULL = no Content-Type. extra: NULL-terminated name/value pairs.
 */
static enum MHD_Result send_owned(struct call *x, unsigned code, const char *ctype, char *data,
				  size_t len, const char *const *extra)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (len)
		resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
	else
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		if (len)
			free(data);
		return MHD_NO;
	}
	if (!len)
		free(data);
	if (ctype)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	for (; extra && extra[0]; extra += 2)
		MHD_add_response_header(resp, extra[0], extra[1]);
	ret = MHD_queue_response(x->c, code, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		count_request(x->s, x->route, code);
	return ret;
}

static enum MHD_Result send_buf(struct call *x, unsigned code, const char *ctype, struct pp_buf *b,
				const char *const *extra)
{
	size_t len;
	char *data = pp_buf_steal(b, &len);

	return send_owned(x, code, ctype, data, len, extra);
}

/* Go's serveError: text/plain, X-Go-Pprof: 1, body = msg + "\n". */
static enum MHD_Result send_error_hdrs(struct call *x, unsigned code, const char *msg,
				       const char *const *extra)
{
	static const char *const go_pprof[] = { "X-Go-Pprof", "1", NULL };
	const char *hdrs[8];
	size_t n = 0, len = strlen(msg);
	char *data = malloc(len + 2);

	if (!data)
		return MHD_NO;
	memcpy(data, msg, len);
	data[len] = '\n';
	data[len + 1] = '\0';
	hdrs[n++] = go_pprof[0];
	hdrs[n++] = go_pprof[1];
	for (; extra && extra[0] && n + 3 <= ARRAY_SIZE(hdrs); extra += 2) {
		hdrs[n++] = extra[0];
		hdrs[n++] = extra[1];
	}
	hdrs[n] = NULL;
	return send_owned(x, code, "text/plain; charset=utf-8", data, len + 1, hdrs);
}

static enum MHD_Result send_error(struct call *x, unsigned code, const char *msg)
{
	return send_error_hdrs(x, code, msg, NULL);
}

static enum MHD_Result send_errno(struct call *x, int err)
{
	char tmp[128];
	const char *msg = strerror_r(err < 0 ? -err : err, tmp, sizeof(tmp));

	return send_error(x, err == -EAGAIN ? 503 : 500, msg);
}

static enum MHD_Result send_text(struct call *x, unsigned code, const char *ctype, const char *text)
{
	char *data = strdup(text);

	if (!data)
		return MHD_NO;
	return send_owned(x, code, ctype, data, strlen(text), NULL);
}

/* Go's strconv.Atoi: optional sign, decimal digits, int range. */
static int go_atoi(const char *s, long long *ret)
{
	bool neg = false;
	unsigned long long v = 0;

	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (unsigned long long)INT64_MAX / 10)
			return -ERANGE;
		v = v * 10 + (unsigned)(*s - '0');
		if (v > (unsigned long long)INT64_MAX)
			return -ERANGE;
	}
	*ret = neg ? -(long long)v : (long long)v;
	return 0;
}

/* debug=N as Go reads it: Atoi, anything bad is 0. */
static long long query_debug(const char *query)
{
	char v[32];
	long long d = 0;

	if (pp_http__query_get(query, "debug", v, sizeof(v)) != 1 || go_atoi(v, &d) < 0)
		return 0;
	return d;
}

/*
 * Wait out a window of secs seconds. 0 = elapsed, -ECONNRESET = the client
 * went away, -ESHUTDOWN = the server is stopping.
 */
static int wait_window(struct call *x, unsigned secs)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(x->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	int fd = ci ? ci->connect_fd : -1;
	uint64_t end = pp_now_mono_ns() + (uint64_t)secs * 1000000000ull;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fd, .events = POLLRDHUP },
			{ .fd = x->s->stop_fd, .events = POLLIN },
		};
		uint64_t now = pp_now_mono_ns();
		int ms;

		if (atomic_load(&x->s->stopping))
			return -ESHUTDOWN;
		if (now >= end)
			return 0;
		/* Round up so we never spin on a sub-millisecond remainder. */
		ms = (int)PP_MIN((end - now + 999999) / 1000000, 1000);
		if (poll(p, 2, ms) < 0 && errno != EINTR) {
			/* Cannot poll (should not happen): sleep in small steps. */
			struct timespec ts = { 0, 50 * 1000000L };
			nanosleep(&ts, NULL);
			continue;
		}
		if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
			return -ECONNRESET;
	}
}

/* 500 "Could not enable CPU profiling: ..." when the source says kind's collector is refused. */
static bool refuse_unavailable(struct call *x, enum pp_profile_kind kind, enum MHD_Result *ret)
{
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf why = { .max = 4096 };
	struct pp_buf msg = { .max = 8192 };

	if (!src->available || src->available(src->ctx, kind, &why))
		return false;
	int r = pp_buf_printf(&msg, "Could not enable %s profiling: %s",
			      kind == PP_PROFILE_CPU ? "CPU" : pp_profile_kind__name(kind),
			      why.data ? why.data : "collector unavailable");
	*ret = r < 0 ? send_errno(x, -ENOMEM) : send_error(x, 500, msg.data);
	pp_buf_free(&why);
	pp_buf_free(&msg);
	return true;
}

/* A CPU window or a delta: begin, wait, render against the base, release. */
static enum MHD_Result serve_window(struct call *x, enum pp_profile_kind kind, unsigned secs,
				    const char *filename)
{
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf out = { .max = MAX_BODY_BYTES };
	char disp[96];
	const char *hdrs[] = { "Content-Disposition", disp, NULL };
	void *base = NULL;
	enum MHD_Result refused;
	int r;

	if (!src->begin || !src->render)
		return send_errno(x, -EOPNOTSUPP);
	if (refuse_unavailable(x, kind, &refused))
		return refused;
	r = src->begin(src->ctx, kind, &base);
	if (r < 0)
		return send_errno(x, r);
	/* The connection is silent during the window: never let it count as idle. */
	MHD_set_connection_option(x->c, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned int)(secs + x->s->timeout_seconds));
	r = wait_window(x, secs);
	if (r < 0) {
		pp_dbg("http: %s window of %us abandoned: %s", pp_profile_kind__name(kind), secs,
		       r == -ESHUTDOWN ? "server stopping" : "client went away");
		atomic_fetch_add(&x->s->windows_aborted, 1);
		if (src->release)
			src->release(src->ctx, kind, base);
		return MHD_NO;
	}
	r = src->render(src->ctx, kind, base, 0, &out);
	if (src->release)
		src->release(src->ctx, kind, base);
	if (r < 0) {
		pp_buf_free(&out);
		return send_errno(x, r);
	}
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s\"", filename);
	return send_buf(x, 200, "application/octet-stream", &out, hdrs);
}

/* Every kind served here supports delta mode; kept as Go's check 2. */
static bool supports_delta(enum pp_profile_kind kind)
{
	return kind != PP_PROFILE_CPU && (unsigned)kind < PP_PROFILE__COUNT;
}

static enum MHD_Result serve_kind(struct call *x, enum pp_profile_kind kind)
{
	const struct pp_http_source *src = &x->s->src;
	const char *name = pp_profile_kind__name(kind);
	char v[32];
	long long sec = 0, debug;
	int r = pp_http__query_get(x->query, "seconds", v, sizeof(v));
	bool present = (r == 1 && v[0]) || r == -E2BIG;
	bool valid = r == 1 && go_atoi(v, &sec) == 0 && sec > 0;
	struct pp_buf out = { .max = MAX_BODY_BYTES };
	char disp[96];

	if (kind == PP_PROFILE_CPU) {
		if (!valid)
			sec = DEFAULT_CPU_SECONDS;
		if (sec > (long long)x->s->max_window_seconds)
			return send_error(x, 400, "profile duration exceeds server's WriteTimeout");
		return serve_window(x, kind, (unsigned)sec, "profile");
	}
	debug = query_debug(x->query);
	if (present) {
		if (!valid)
			return send_error(x, 400,
					  "invalid value for \"seconds\" - must be a positive "
					  "integer");
		if (!supports_delta(kind))
			return send_error(x, 400,
					  "\"seconds\" parameter is not supported for this profile "
					  "type");
		if (sec > (long long)x->s->max_window_seconds)
			return send_error(x, 400, "profile duration exceeds server's WriteTimeout");
		if (debug != 0)
			return send_error(x, 400, "seconds and debug params are incompatible");
		snprintf(disp, sizeof(disp), "%s-delta", name);
		return serve_window(x, kind, (unsigned)sec, disp);
	}

	if (!src->render)
		return send_errno(x, -EOPNOTSUPP);
	{
		enum MHD_Result refused;
		if (refuse_unavailable(x, kind, &refused))
			return refused;
	}
	/* Go treats any non-zero debug as text; our renderers know 0, 1 and 2. */
	if (debug < 0)
		debug = 1;
	if (debug > 2)
		debug = 2;
	r = src->render(src->ctx, kind, NULL, (int)debug, &out);
	if (r < 0) {
		pp_buf_free(&out);
		return send_errno(x, r);
	}
	if (debug)
		return send_buf(x, 200, "text/plain; charset=utf-8", &out, NULL);
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s\"", name);
	{
		const char *hdrs[] = { "Content-Disposition", disp, NULL };
		return send_buf(x, 200, "application/octet-stream", &out, hdrs);
	}
}

static int html_escape(struct pp_buf *b, const char *s)
{
	int r = 0;

	for (; *s && r == 0; s++) {
		switch (*s) {
		case '<':
			r = pp_buf_puts(b, "&lt;");
			break;
		case '>':
			r = pp_buf_puts(b, "&gt;");
			break;
		case '&':
			r = pp_buf_puts(b, "&amp;");
			break;
		case '"':
			r = pp_buf_puts(b, "&#34;");
			break;
		case '\'':
			r = pp_buf_puts(b, "&#39;");
			break;
		default:
			r = pp_buf_append(b, s, 1);
		}
	}
	return r;
}

struct index_entry {
	const char *name;
	int kind; /* -1: no count */
	const char *desc;
};

/* Sorted by name, as Go's index. trace is left out: nothing to serve. */
static const struct index_entry index_entries[] = {
	{ "allocs", PP_PROFILE_ALLOCS,
	  "sampled allocations from eBPF uprobes on the target's allocator, cumulative since "
	  "podprof started; shows alloc_space by default" },
	{ "block", PP_PROFILE_BLOCK, "time threads spent off-CPU in blocking syscalls" },
	{ "cmdline", -1, "the target's command line, arguments separated by NUL bytes" },
	{ "goroutine", PP_PROFILE_GOROUTINE,
	  "stack dump of every thread of the target (debug=2: full dump with thread names and "
	  "states)" },
	{ "heap", PP_PROFILE_HEAP,
	  "sampled live allocations from eBPF uprobes on the target's allocator" },
	{ "mutex", PP_PROFILE_MUTEX, "time threads spent waiting on futexes (contended locks)" },
	{ "profile", PP_PROFILE_CPU,
	  "CPU profile of the target's threads (perf_event cpu-clock, DWARF-unwound); "
	  "?seconds=N sets the window, the file arrives when it ends" },
	{ "symbol", -1,
	  "maps program counters (0x...+0x..., GET query or POST body) to function "
	  "names" },
	{ "threadcreate", PP_PROFILE_THREADCREATE, "stacks that created the target's threads" },
};

static enum MHD_Result serve_index(struct call *x)
{
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf b = { .max = 1 << 20 };
	const char *title = x->s->title;
	int r = 0;

	r |= pp_buf_puts(&b, "<html>\n<head>\n<title>/debug/pprof/");
	if (title) {
		r |= pp_buf_puts(&b, " - ");
		r |= html_escape(&b, title);
	}
	r |= pp_buf_puts(&b, "</title>\n<style>\n.profile-name{display:inline-block; width:6rem;}\n"
			     "</style>\n</head>\n<body>\n/debug/pprof/<br>\n");
	if (title) {
		r |= pp_buf_puts(&b, "podprof for ");
		r |= html_escape(&b, title);
		r |= pp_buf_puts(&b, "<br>\n");
	}
	r |= pp_buf_puts(&b, "<br>\nTypes of profiles available:\n<table>\n"
			     "<thead><td>Count</td><td>Profile</td></thead>\n");
	for (size_t i = 0; i < ARRAY_SIZE(index_entries); i++) {
		const struct index_entry *e = &index_entries[i];
		long n = -1;

		if (e->kind >= 0 && src->count)
			n = src->count(src->ctx, (enum pp_profile_kind)e->kind);
		r |= pp_buf_puts(&b, "<tr><td>");
		if (n >= 0)
			r |= pp_buf_printf(&b, "%ld", n);
		r |= pp_buf_printf(&b, "</td><td><a href='%s?debug=1'>%s</a>", e->name, e->name);
		if (e->kind >= 0 && src->available) {
			struct pp_buf why = { .max = 4096 };
			if (!src->available(src->ctx, (enum pp_profile_kind)e->kind, &why)) {
				r |= pp_buf_puts(&b, " <b>unavailable</b>: ");
				r |= html_escape(&b, why.data ? why.data : "");
			}
			pp_buf_free(&why);
		}
		r |= pp_buf_puts(&b, "</td>");
		if (e->kind >= 0)
			r |= pp_buf_printf(&b, "<td><a href='ui/?profile=%s'>flame graph</a></td>",
					   e->name);
		r |= pp_buf_puts(&b, "</tr>\n");
	}
	r |= pp_buf_puts(&b, "</table>\n<a href=\"goroutine?debug=2\">full thread stack dump</a>\n"
			     "<br>\n<a href=\"ui/\">flame graphs, top tables and diffs in the "
			     "browser</a>\n"
			     "<br>\n<p>\nProfile Descriptions:\n<ul>\n");
	for (size_t i = 0; i < ARRAY_SIZE(index_entries); i++)
		r |= pp_buf_printf(&b, "<li><div class=profile-name>%s: </div> %s</li>\n",
				   index_entries[i].name, index_entries[i].desc);
	r |= pp_buf_puts(&b, "</ul>\n</p>\n");
	if (src->collectors) {
		struct pp_http_collector cs[8];
		size_t nc = src->collectors(src->ctx, cs, ARRAY_SIZE(cs));
		r |= pp_buf_puts(&b, "<p>\nCollectors:\n<table>\n<thead><td>Collector</td>"
				     "<td>Profiles</td><td>State</td><td>Reason</td></thead>\n");
		for (size_t i = 0; i < nc && i < ARRAY_SIZE(cs); i++) {
			r |= pp_buf_puts(&b, "<tr><td>");
			r |= html_escape(&b, cs[i].name);
			r |= pp_buf_puts(&b, "</td><td>");
			r |= html_escape(&b, cs[i].profiles);
			r |= pp_buf_puts(&b, "</td><td>");
			r |= html_escape(&b, cs[i].state);
			r |= pp_buf_puts(&b, "</td><td>");
			r |= html_escape(&b, cs[i].reason);
			r |= pp_buf_puts(&b, "</td></tr>\n");
		}
		r |= pp_buf_puts(&b, "</table>\n</p>\n");
	}
	r |= pp_buf_puts(&b, "</body>\n</html>\n");
	if (r) {
		pp_buf_free(&b);
		return send_errno(x, -ENOMEM);
	}
	return send_buf(x, 200, "text/html; charset=utf-8", &b, NULL);
}

static enum MHD_Result serve_cmdline(struct call *x)
{
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf b = { .max = MAX_BODY_BYTES };
	int r = src->cmdline ? src->cmdline(src->ctx, &b) : 0;

	if (r < 0) {
		pp_buf_free(&b);
		return send_errno(x, r);
	}
	return send_buf(x, 200, "text/plain; charset=utf-8", &b, NULL);
}

static enum MHD_Result serve_symbol(struct call *x, struct req *rq, const char *method)
{
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf b = { .max = MAX_BODY_BYTES };
	struct pp_buf name = { .max = MAX_SYMBOL_NAME_BYTES };
	_cleanup_free_ uint64_t *pcs = NULL;
	size_t n = 0;
	int r;

	if (strcmp(method, MHD_HTTP_METHOD_POST) == 0)
		r = pp_http__parse_symbol_request(rq->body.data ? rq->body.data : "", rq->body.len,
						  &pcs, &n);
	else
		r = pp_http__parse_symbol_request(x->query, strlen(x->query), &pcs, &n);
	if (r < 0)
		return send_errno(x, r);
	r = pp_buf_puts(&b, "num_symbols: 1\n");
	for (size_t i = 0; i < n && r == 0 && src->symbol; i++) {
		size_t mark = b.len;

		pp_buf_reset(&name);
		if (src->symbol(src->ctx, pcs[i], &name) < 0 || !name.len)
			continue;
		/* One line per address: a newline in a name would split it. */
		for (size_t j = 0; j < name.len; j++)
			if (name.data[j] == '\n' || name.data[j] == '\r')
				name.data[j] = ' ';
		if (pp_buf_printf(&b, "%#" PRIx64 " %s\n", pcs[i], name.data) < 0) {
			b.len = mark; /* output cap reached: stop at a whole line */
			if (b.data)
				b.data[b.len] = '\0';
			break;
		}
	}
	pp_buf_free(&name);
	if (r < 0) {
		pp_buf_free(&b);
		return send_errno(x, r);
	}
	return send_buf(x, 200, "text/plain; charset=utf-8", &b, NULL);
}

static enum MHD_Result serve_healthz(struct call *x)
{
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf msg = { .max = MAX_HEALTH_MSG_BYTES };
	bool ok = src->healthy ? src->healthy(src->ctx, &msg) : true;
	enum MHD_Result ret;

	if (ok) {
		ret = send_text(x, 200, "text/plain; charset=utf-8", "ok\n");
	} else {
		if (!msg.len || msg.data[msg.len - 1] != '\n') {
			if (!msg.len)
				pp_buf_puts(&msg, "unhealthy");
			pp_buf_puts(&msg, "\n");
		}
		ret = send_buf(x, 503, "text/plain; charset=utf-8", &msg, NULL);
	}
	pp_buf_free(&msg);
	return ret;
}

static const char *code_label(size_t i, char *tmp, size_t n)
{
	if (i >= ARRAY_SIZE(status_codes))
		return "other";
	snprintf(tmp, n, "%u", status_codes[i]);
	return tmp;
}

static enum MHD_Result serve_metrics(struct call *x)
{
	struct pp_http_server *s = x->s;
	const struct pp_http_source *src = &s->src;
	struct pp_buf b = { .max = MAX_BODY_BYTES };
	char tmp[16];
	int r = 0;

	r |= pp_buf_puts(&b, "# HELP podprof_http_requests_total HTTP requests answered by "
			     "podprof, by path and status code.\n"
			     "# TYPE podprof_http_requests_total counter\n");
	for (int rt = 0; rt < R__COUNT; rt++)
		for (size_t i = 0; i < N_CODES; i++) {
			unsigned long v =
				atomic_load_explicit(&s->requests[rt][i], memory_order_relaxed);
			if (v)
				r |= pp_buf_printf(&b,
						   "podprof_http_requests_total{path=\"%s\",code="
						   "\"%s\"} %lu\n",
						   route_label((enum route)rt),
						   code_label(i, tmp, sizeof(tmp)), v);
		}
	r |= pp_buf_printf(&b,
			   "# HELP podprof_http_connections_rejected_total Connections closed at "
			   "accept because max_connections were open.\n"
			   "# TYPE podprof_http_connections_rejected_total counter\n"
			   "podprof_http_connections_rejected_total %lu\n"
			   "# HELP podprof_http_connections_open HTTP connections open now.\n"
			   "# TYPE podprof_http_connections_open gauge\n"
			   "podprof_http_connections_open %u\n"
			   "# HELP podprof_http_in_flight HTTP requests being answered now.\n"
			   "# TYPE podprof_http_in_flight gauge\n"
			   "podprof_http_in_flight %ld\n"
			   "# HELP podprof_http_windows_aborted_total Profile windows abandoned "
			   "because the client went away or the server stopped.\n"
			   "# TYPE podprof_http_windows_aborted_total counter\n"
			   "podprof_http_windows_aborted_total %lu\n",
			   atomic_load(&s->rejected), atomic_load(&s->open_connections),
			   atomic_load(&s->in_flight), atomic_load(&s->windows_aborted));
	if (r) {
		pp_buf_free(&b);
		return send_errno(x, -ENOMEM);
	}
	if (src->metrics) {
		r = src->metrics(src->ctx, &b);
		if (r < 0) {
			pp_buf_free(&b);
			return send_errno(x, r);
		}
	}
	return send_buf(x, 200, "text/plain; version=0.0.4; charset=utf-8", &b, NULL);
}

static enum MHD_Result serve_redirect(struct call *x)
{
	static const char body[] = "<a href=\"/debug/pprof/\">Moved Permanently</a>.\n\n";
	struct pp_buf loc = { .max = 1 << 20 };
	const char *hdrs[] = { "Location", NULL, NULL };
	enum MHD_Result ret;
	char *data;

	/* Keep the query, as Go's ServeMux does. */
	if (pp_buf_puts(&loc, "/debug/pprof/") < 0 ||
	    (x->query[0] && pp_buf_printf(&loc, "?%s", x->query) < 0)) {
		pp_buf_free(&loc);
		return send_errno(x, -ENOMEM);
	}
	hdrs[1] = loc.data;
	data = strdup(body);
	if (!data) {
		pp_buf_free(&loc);
		return MHD_NO;
	}
	ret = send_owned(x, 301, "text/html; charset=utf-8", data, strlen(body), hdrs);
	pp_buf_free(&loc);
	return ret;
}

/* /debug/pprof/ui/<asset>: the embedded page, gzip as stored when the client takes it. */
static enum MHD_Result serve_ui(struct call *x)
{
	static const char csp[] = "default-src 'none'; script-src 'self'; connect-src 'self'; "
				  "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
				  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
	const char *hdrs[] = { "Content-Security-Policy",
			       csp,
			       "Cache-Control",
			       "no-cache",
			       "Vary",
			       "Accept-Encoding",
			       "Content-Encoding",
			       "gzip",
			       NULL };
	const char *name = x->url + sizeof("/debug/pprof/ui") - 1;
	const struct pp_ui_asset *a;
	char *data;
	int r;

	if (!*name) {
		/* The page's relative links need the slash: redirect, keeping the query. */
		struct pp_buf loc = { .max = 1 << 20 };
		const char *lh[] = { "Location", NULL, NULL };
		enum MHD_Result ret;

		if (pp_buf_puts(&loc, "/debug/pprof/ui/") < 0 ||
		    (x->query[0] && pp_buf_printf(&loc, "?%s", x->query) < 0)) {
			pp_buf_free(&loc);
			return send_errno(x, -ENOMEM);
		}
		lh[1] = loc.data;
		ret = send_owned(x, 301, NULL, NULL, 0, lh);
		pp_buf_free(&loc);
		return ret;
	}
	a = pp_ui__find(name + 1);
	if (!a)
		return send_text(x, 404, "text/plain; charset=utf-8", "404 page not found\n");
	if (pp_ui__accepts_gzip(MHD_lookup_connection_value(x->c, MHD_HEADER_KIND,
							    MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
		data = malloc(a->gz_len);
		if (!data)
			return send_errno(x, -ENOMEM);
		memcpy(data, a->gz, a->gz_len);
		return send_owned(x, 200, a->ctype, data, a->gz_len, hdrs);
	}
	r = pp_ui__inflate(a, &data);
	if (r)
		return send_errno(x, r);
	hdrs[6] = NULL; /* no Content-Encoding */
	return send_owned(x, 200, a->ctype, data, a->len, hdrs);
}

/* "Authorization: Bearer <token>", scheme case-insensitive, constant-time on the token. */
static bool authorized(struct pp_http_server *s, struct MHD_Connection *c)
{
	const char *h =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *p;
	size_t plen;
	unsigned char diff;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	p = h + 7;
	while (*p == ' ')
		p++;
	plen = strlen(p);
	while (plen && (p[plen - 1] == ' ' || p[plen - 1] == '\t'))
		plen--;
	diff = plen != s->token_len;
	for (size_t i = 0; i < s->token_len; i++)
		diff |= (unsigned char)s->token[i] ^ (unsigned char)(i < plen ? p[i] : 0);
	return diff == 0;
}

static enum MHD_Result dispatch(struct call *x, struct req *rq, const char *method)
{
	switch (x->route) {
	case R_REDIRECT:
		return serve_redirect(x);
	case R_INDEX:
		return serve_index(x);
	case R_CMDLINE:
		return serve_cmdline(x);
	case R_SYMBOL:
		return serve_symbol(x, rq, method);
	case R_TRACE:
		return send_error(x, 501, "trace is not supported for native processes");
	case R_UNKNOWN_PROFILE:
		return send_error(x, 404, "Unknown profile");
	case R_HEALTHZ:
		return serve_healthz(x);
	case R_METRICS:
		return serve_metrics(x);
	case R_UI:
		return serve_ui(x);
	case R_OTHER:
		return send_text(x, 404, "text/plain; charset=utf-8", "404 page not found\n");
	default:
		if (x->route >= R_KIND_FIRST && x->route <= R_KIND_LAST)
			return serve_kind(x, (enum pp_profile_kind)(x->route - R_KIND_FIRST));
		return send_text(x, 404, "text/plain; charset=utf-8", "404 page not found\n");
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct pp_http_server *s = cls;
	struct req *rq = *con_cls;
	struct call x = {
		.s = s, .c = c, .route = route_of(url), .query = "", .url = url ? url : ""
	};

	if (!rq) {
		/* The URI log callback could not allocate: no raw query then. */
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		*con_cls = rq;
	}
	if (rq->uri) {
		const char *q = strchr(rq->uri, '?');
		if (q)
			x.query = q + 1;
	}

	if (!rq->started) {
		const char *cl;
		uint64_t len;

		rq->started = true;
		rq->in_flight = true;
		atomic_fetch_add(&s->in_flight, 1);
		rq->body.max = s->max_request_bytes;
		/*
		 * Headers are complete: refuse before reading any body. The UI's
		 * static files hold no data (its requests for profiles send the token).
		 */
		if (s->token && x.route != R_HEALTHZ && x.route != R_UI && !authorized(s, c)) {
			static const char *const www[] = { "WWW-Authenticate", "Bearer", NULL };
			return send_error_hdrs(&x, 401, "Unauthorized", www);
		}
		cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && pp_parse_u64(cl, 10, 0, UINT64_MAX, &len) == 0 &&
		    len > s->max_request_bytes)
			return send_error(&x, 413, "request body too large");
		return MHD_YES;
	}
	if (*upload_data_size) {
		/* Chunked bodies have no length up front: drop the excess, 413 at the end. */
		if (!rq->too_large && pp_buf_append(&rq->body, upload_data, *upload_data_size) < 0)
			rq->too_large = true;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->too_large)
		return send_error(&x, 413, "request body too large");
	return dispatch(&x, rq, method);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct req *rq = calloc(1, sizeof(*rq));

	if (!rq)
		return NULL;
	rq->uri = strdup(uri ? uri : "");
	if (!rq->uri) {
		free(rq);
		return NULL;
	}
	return rq;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct pp_http_server *s = cls;
	struct req *rq = *con_cls;

	if (!rq)
		return;
	if (rq->in_flight)
		atomic_fetch_sub(&s->in_flight, 1);
	pp_buf_free(&rq->body);
	free(rq->uri);
	free(rq);
	*con_cls = NULL;
}

/*
 * The accept policy and the STARTED notification both run in the listening
 * thread, one connection after the other, so open_connections is exact when
 * the policy reads it.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct pp_http_server *s = cls;

	if (atomic_load(&s->open_connections) >= s->max_connections) {
		atomic_fetch_add(&s->rejected, 1);
		return MHD_NO;
	}
	return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct pp_http_server *s = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		atomic_fetch_add(&s->open_connections, 1);
	else if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
		atomic_fetch_sub(&s->open_connections, 1);
}

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	if (!pp_log_enabled(PP_LOG_DEBUG))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	pp_dbg("http: libmicrohttpd: %s", msg);
}

static int bind_one(int family, const struct sockaddr *sa, socklen_t len, bool dual_stack)
{
	int one = 1, fd, r;

	fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6) {
		int v6only = !dual_stack;
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	}
	if (bind(fd, sa, len) < 0 || listen(fd, 128) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Listening socket for host ("" = every address, IPv6 dual stack if possible). */
static int open_listener(const char *host, unsigned port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char portstr[8];
	int fd = -EINVAL;

	if (!*host) {
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
					   .sin6_addr = in6addr_any,
					   .sin6_port = htons((uint16_t)port) };
		struct sockaddr_in a4 = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_ANY),
					  .sin_port = htons((uint16_t)port) };

		fd = bind_one(AF_INET6, (struct sockaddr *)&a6, sizeof(a6), true);
		if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL)
			fd = bind_one(AF_INET, (struct sockaddr *)&a4, sizeof(a4), false);
		return fd;
	}
	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &res) != 0 || !res)
		return -EINVAL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int r = bind_one(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false);
		if (r >= 0 || fd == -EINVAL)
			fd = r;
		if (r >= 0)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

static void server_free(struct pp_http_server *s)
{
	if (!s)
		return;
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	if (s->token) {
		explicit_bzero(s->token, s->token_len);
		free(s->token);
	}
	free(s->title);
	free(s);
}

struct pp_http_server *pp_http_server__start(const struct pp_http_opts *opts,
					     const struct pp_http_source *src)
{
	struct pp_http_server *s;
	char host[256];
	unsigned port;
	size_t pool;
	int r, fd, mhd_fd;

	if (!opts || !src) {
		errno = EINVAL;
		return NULL;
	}
	r = pp_http__parse_listen(opts->listen ? opts->listen : "127.0.0.1:6060", host,
				  sizeof(host), &port);
	if (r < 0) {
		errno = -r == ENAMETOOLONG ? EINVAL : -r;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->stop_fd = -1;
	s->src = *src;
	s->max_connections = opts->max_connections ? opts->max_connections
						   : DEFAULT_MAX_CONNECTIONS;
	s->max_request_bytes = opts->max_request_bytes ? opts->max_request_bytes
						       : DEFAULT_MAX_REQUEST_BYTES;
	s->max_window_seconds = opts->max_window_seconds ? opts->max_window_seconds
							 : DEFAULT_MAX_WINDOW_SECONDS;
	s->timeout_seconds = opts->timeout_seconds ? opts->timeout_seconds
						   : DEFAULT_TIMEOUT_SECONDS;
	if (opts->token && *opts->token) {
		s->token = strdup(opts->token);
		s->token_len = strlen(opts->token);
	}
	if (opts->index_title)
		s->title = strdup(opts->index_title);
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if ((opts->token && *opts->token && !s->token) || (opts->index_title && !s->title) ||
	    s->stop_fd < 0) {
		r = s->stop_fd < 0 ? errno : ENOMEM;
		server_free(s);
		errno = r;
		return NULL;
	}

	fd = open_listener(host, port);
	if (fd < 0) {
		server_free(s);
		errno = -fd;
		return NULL;
	}
	s->port = bound_port(fd);
	/*
	 * MHD owns the listening socket from here and closes it in stop. On a
	 * failed start it may or may not have closed it, so it gets a duplicate
	 * and we always close ours.
	 */
	mhd_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (mhd_fd < 0) {
		r = errno;
		close(fd);
		server_free(s);
		errno = r;
		return NULL;
	}
	/* Headers, the query string and response headers live in this pool. */
	pool = (size_t)s->max_request_bytes + 16384;
	if (pool < 32768)
		pool = 32768;
	/*
	 * on_accept enforces max_connections and counts rejections; MHD's own
	 * limit is one above so it never refuses (uncounted) first, e.g. in the
	 * moment between our CLOSED notification and MHD's own bookkeeping.
	 */
	s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					MHD_USE_POLL | MHD_USE_ERROR_LOG,
				0, on_accept, s, on_request, s, MHD_OPTION_LISTEN_SOCKET,
				(MHD_socket)mhd_fd, MHD_OPTION_CONNECTION_LIMIT,
				(unsigned int)(s->max_connections + 1),
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)s->timeout_seconds,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED,
				on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
	close(fd);
	if (!s->d) {
		pp_dbg("http: MHD_start_daemon failed for %s:%u", host, port);
		server_free(s);
		errno = EIO;
		return NULL;
	}
	return s;
}

unsigned pp_http_server__port(const struct pp_http_server *s)
{
	return s ? s->port : 0;
}

void pp_http_server__stop(struct pp_http_server *s)
{
	uint64_t one = 1;

	if (!s)
		return;
	atomic_store(&s->stopping, true);
	/* Wakes every window waiting in poll(); the fd stays readable. */
	if (write(s->stop_fd, &one, sizeof(one)) < 0)
		pp_dbg("http: eventfd write: %s", strerror(errno));
	MHD_stop_daemon(s->d);
	server_free(s);
}
