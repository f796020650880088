/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lib/http against a real libmicrohttpd server on 127.0.0.1 (port 0) and a
 * raw-socket HTTP/1.1 client. The profile provider is a small test source
 * whose render returns deterministic bytes and records every call.
 *
 * No assertion depends on wall-clock durations: concurrency and early
 * release are checked by the order of events (a short request answers while
 * a window is still open; an abandoned window is released without ever
 * being rendered).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "http/http.h"

#define MAX_WINDOW 10

/* ---- test source ---- */

struct tsrc {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int begins[PP_PROFILE__COUNT];
	int renders[PP_PROFILE__COUNT];
	int releases[PP_PROFILE__COUNT];
	void *begin_base[PP_PROFILE__COUNT];
	void *render_base[PP_PROFILE__COUNT];
	int render_debug[PP_PROFILE__COUNT];
	int live_bases;
	int render_err;
	bool unhealthy;
	bool hold_renders; /* renders wait until it is cleared */
};

static struct tsrc T = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void tsrc_reset(void)
{
	pthread_mutex_lock(&T.mu);
	memset(T.begins, 0, sizeof(T.begins));
	memset(T.renders, 0, sizeof(T.renders));
	memset(T.releases, 0, sizeof(T.releases));
	memset(T.render_base, 0, sizeof(T.render_base));
	memset(T.begin_base, 0, sizeof(T.begin_base));
	memset(T.render_debug, 0, sizeof(T.render_debug));
	T.render_err = 0;
	T.unhealthy = false;
	pthread_mutex_unlock(&T.mu);
}

static int t_begin(void *ctx, enum pp_profile_kind kind, void **ret_base)
{
	int *base = malloc(sizeof(*base));

	if (!base)
		return -ENOMEM;
	*base = (int)kind;
	pthread_mutex_lock(&T.mu);
	T.begins[kind]++;
	T.begin_base[kind] = base;
	T.live_bases++;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	*ret_base = base;
	return 0;
}

/* The bytes render produces: binary (NUL, 0x8b) and a readable part. */
static size_t expected_body(enum pp_profile_kind kind, bool delta, int debug, char *out, size_t n)
{
	int len = snprintf(out, n, "\x1f\x8b%c%s|%s|debug=%d", 0, pp_profile_kind__name(kind),
			   delta ? "delta" : "abs", debug);
	return (size_t)len;
}

static int t_render(void *ctx, enum pp_profile_kind kind, void *base, int debug, struct pp_buf *out)
{
	char tmp[128];
	size_t len;
	int err;

	pthread_mutex_lock(&T.mu);
	T.renders[kind]++;
	T.render_base[kind] = base;
	T.render_debug[kind] = debug;
	err = T.render_err;
	pthread_cond_broadcast(&T.cv);
	while (T.hold_renders)
		pthread_cond_wait(&T.cv, &T.mu);
	pthread_mutex_unlock(&T.mu);
	if (base)
		assert_int_equal(*(int *)base, (int)kind);
	if (err)
		return err;
	len = expected_body(kind, base != NULL, debug, tmp, sizeof(tmp));
	return pp_buf_append(out, tmp, len);
}

static void t_release(void *ctx, enum pp_profile_kind kind, void *base)
{
	assert_non_null(base);
	assert_int_equal(*(int *)base, (int)kind);
	free(base);
	pthread_mutex_lock(&T.mu);
	T.releases[kind]++;
	T.live_bases--;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
}

static long t_count(void *ctx, enum pp_profile_kind kind)
{
	if (kind == PP_PROFILE_THREADCREATE)
		return -1;
	return 10L * kind + 1;
}

static const char cmdline_bytes[] = "/usr/bin/app\0--port\0"
				    "8080";

static int t_cmdline(void *ctx, struct pp_buf *out)
{
	return pp_buf_append(out, cmdline_bytes, sizeof(cmdline_bytes) - 1);
}

static int t_symbol(void *ctx, uint64_t addr, struct pp_buf *out)
{
	if (addr == 0x1000)
		return pp_buf_puts(out, "main");
	if (addr == 0x2000)
		return pp_buf_puts(out, "ns::f<int>(long)");
	return -ENOENT;
}

static int t_metrics(void *ctx, struct pp_buf *out)
{
	return pp_buf_puts(out, "# TYPE podprof_test_metric gauge\npodprof_test_metric 42\n");
}

static bool t_healthy(void *ctx, struct pp_buf *msg)
{
	bool bad;

	pthread_mutex_lock(&T.mu);
	bad = T.unhealthy;
	pthread_mutex_unlock(&T.mu);
	pp_buf_puts(msg, bad ? "no target process" : "ok");
	return !bad;
}

static const struct pp_http_source tsource = {
	.ctx = &T,
	.begin = t_begin,
	.render = t_render,
	.release = t_release,
	.count = t_count,
	.cmdline = t_cmdline,
	.symbol = t_symbol,
	.metrics = t_metrics,
	.healthy = t_healthy,
};

static int get_count(int *arr, int kind)
{
	int v;

	pthread_mutex_lock(&T.mu);
	v = arr[kind];
	pthread_mutex_unlock(&T.mu);
	return v;
}

/* Wait (bounded by a generous safety net) until arr[kind] >= want. */
static bool wait_count(int *arr, int kind, int want, int max_seconds)
{
	struct timespec dl;
	bool ok = true;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += max_seconds;
	pthread_mutex_lock(&T.mu);
	while (arr[kind] < want && ok)
		ok = pthread_cond_timedwait(&T.cv, &T.mu, &dl) == 0;
	ok = arr[kind] >= want;
	pthread_mutex_unlock(&T.mu);
	return ok;
}

/* ---- raw HTTP client ---- */

struct resp {
	int status;
	char *head; /* status line + headers, NUL-terminated */
	char *body;
	size_t body_len;
};

static void resp_free(struct resp *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static int connect_to(int family, unsigned port)
{
	struct timeval tv = { .tv_sec = 30 };
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (family == AF_INET6) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6,
					  .sin6_port = htons(port),
					  .sin6_addr = IN6ADDR_LOOPBACK_INIT };
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto fail;
	} else {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			goto fail;
	}
	return fd;
fail : {
	int e = errno;
	close(fd);
	return -e;
}
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads until EOF and splits the response. -1 if nothing came back. */
static int read_resp(int fd, struct resp *r)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	char *sep;

	memset(r, 0, sizeof(*r));
	assert_non_null(buf);
	for (;;) {
		ssize_t n;

		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		n = recv(fd, buf + len, cap - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	sep = memmem(buf, len, "\r\n\r\n", 4);
	if (!sep) {
		free(buf);
		return -1;
	}
	r->head = strndup(buf, (size_t)(sep - buf) + 2);
	r->body_len = len - (size_t)(sep + 4 - buf);
	r->body = malloc(r->body_len + 1);
	memcpy(r->body, sep + 4, r->body_len);
	r->body[r->body_len] = '\0';
	r->status = atoi(r->head + 9);
	free(buf);
	return 0;
}

static int do_raw(unsigned port, const char *req, size_t len, struct resp *r)
{
	int fd = connect_to(AF_INET, port), ret;

	assert_true(fd >= 0);
	assert_int_equal(send_all(fd, req, len), 0);
	ret = read_resp(fd, r);
	close(fd);
	return ret;
}

static void do_req(unsigned port, const char *method, const char *target, const char *headers,
		   const char *body, struct resp *r)
{
	char req[8192];
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s\r\n%s",
			 method, target, headers ? headers : "", body ? "" : "", body ? body : "");

	assert_true(n > 0 && (size_t)n < sizeof(req));
	assert_int_equal(do_raw(port, req, (size_t)n, r), 0);
}

static void get(unsigned port, const char *target, struct resp *r)
{
	do_req(port, "GET", target, NULL, NULL, r);
}

/* Value of header name, or NULL. Returned pointer into a static buffer. */
static const char *header(const struct resp *r, const char *name)
{
	static char val[512];
	size_t nl = strlen(name);

	for (const char *p = strstr(r->head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2, *end = strstr(line, "\r\n");
		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			while (*v == ' ')
				v++;
			snprintf(val, sizeof(val), "%.*s", (int)(end - v), v);
			return val;
		}
	}
	return NULL;
}

static void assert_header(const struct resp *r, const char *name, const char *want)
{
	const char *v = header(r, name);

	if (!v)
		fail_msg("missing header %s in:\n%s", name, r->head);
	if (strcmp(v, want) != 0)
		fail_msg("header %s: '%s', want '%s'", name, v, want);
}

static void assert_no_header(const struct resp *r, const char *name)
{
	if (header(r, name))
		fail_msg("unexpected header %s: %s", name, header(r, name));
}

static void assert_go_error(const struct resp *r, int status, const char *msg)
{
	char want[256];

	if (r->status != status)
		fail_msg("status %d, want %d (body %s)", r->status, status, r->body);
	snprintf(want, sizeof(want), "%s\n", msg);
	assert_string_equal(r->body, want);
	assert_header(r, "Content-Type", "text/plain; charset=utf-8");
	assert_header(r, "X-Go-Pprof", "1");
	assert_header(r, "X-Content-Type-Options", "nosniff");
	assert_no_header(r, "Content-Disposition");
	assert_no_header(r, "Content-Encoding");
}

/* ---- fixtures ---- */

struct fx {
	struct pp_http_server *s;
	unsigned port;
};

static struct pp_http_server *start(const char *token, unsigned max_conn, unsigned max_req)
{
	struct pp_http_opts o = {
		.listen = "127.0.0.1:0",
		.max_connections = max_conn,
		.max_request_bytes = max_req,
		.timeout_seconds = 30,
		.max_window_seconds = MAX_WINDOW,
		.token = token,
		.index_title = "app <b>&\"x\"",
	};
	struct pp_http_server *s = pp_http_server__start(&o, &tsource);

	if (!s)
		fail_msg("start: %s", strerror(errno));
	assert_true(pp_http_server__port(s) > 0);
	return s;
}

static int setup(void **state)
{
	static struct fx f;

	tsrc_reset();
	f.s = start(NULL, 16, 4096);
	f.port = pp_http_server__port(f.s);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	pp_http_server__stop(f->s);
	pthread_mutex_lock(&T.mu);
	assert_int_equal(T.live_bases, 0);
	pthread_mutex_unlock(&T.mu);
	return 0;
}

/* ---- tests ---- */

static void test_redirect(void **state)
{
	struct fx *f = *state;
	struct resp r;

	get(f->port, "/debug/pprof", &r);
	assert_int_equal(r.status, 301);
	assert_header(&r, "Location", "/debug/pprof/");
	resp_free(&r);
	get(f->port, "/debug/pprof?a=1", &r);
	assert_int_equal(r.status, 301);
	assert_header(&r, "Location", "/debug/pprof/?a=1");
	resp_free(&r);
}

static void test_index(void **state)
{
	static const char *const order[] = { "allocs", "block",	  "cmdline", "goroutine",   "heap",
					     "mutex",  "profile", "symbol",  "threadcreate" };
	struct fx *f = *state;
	const char *prev;
	struct resp r;
	char tmp[128];

	get(f->port, "/debug/pprof/", &r);
	assert_int_equal(r.status, 200);
	assert_header(&r, "Content-Type", "text/html; charset=utf-8");
	assert_header(&r, "X-Content-Type-Options", "nosniff");
	/* sorted links with ?debug=1 */
	prev = r.body;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const char *p;
		snprintf(tmp, sizeof(tmp), "<a href='%s?debug=1'>%s</a>", order[i], order[i]);
		p = strstr(r.body, tmp);
		if (!p || p < prev)
			fail_msg("link %s missing or out of order", order[i]);
		prev = p;
	}
	assert_null(strstr(r.body, "trace?debug=1"));
	/* counts from source->count: heap = 11, allocs = 21, threadcreate unknown */
	assert_non_null(strstr(r.body, "<td>11</td><td><a href='heap?debug=1'>"));
	assert_non_null(strstr(r.body, "<td>21</td><td><a href='allocs?debug=1'>"));
	assert_non_null(strstr(r.body, "<td>1</td><td><a href='profile?debug=1'>"));
	assert_non_null(strstr(r.body, "<td></td><td><a href='threadcreate?debug=1'>"));
	assert_non_null(strstr(r.body, "<td></td><td><a href='cmdline?debug=1'>"));
	/* the title is escaped, never raw */
	assert_non_null(strstr(r.body, "app &lt;b&gt;&amp;&#34;x&#34;"));
	assert_null(strstr(r.body, "<b>&"));
	/* what podprof collects */
	assert_non_null(strstr(r.body, "goroutine: </div> stack dump of every thread of the "
				       "target"));
	assert_non_null(strstr(r.body, "perf_event cpu-clock, DWARF-unwound"));
	assert_non_null(strstr(r.body, "a sampling agent podprof loads into the target's process"));
	assert_non_null(strstr(r.body, "eBPF uprobes on its allocator where the agent cannot"));
	assert_non_null(strstr(r.body, "futexes"));
	assert_non_null(strstr(r.body, "stacks that created the target's threads"));
	resp_free(&r);
}

static void check_abs(unsigned port, const char *target, enum pp_profile_kind kind, int debug)
{
	char want[128], disp[96];
	size_t n = expected_body(kind, false, debug, want, sizeof(want));
	int before = get_count(T.renders, kind);
	struct resp r;

	get(port, target, &r);
	if (r.status != 200)
		fail_msg("%s: %d %s", target, r.status, r.body);
	assert_int_equal(r.body_len, n);
	assert_memory_equal(r.body, want, n);
	assert_int_equal(get_count(T.renders, kind), before + 1);
	assert_int_equal(get_count(T.render_debug, kind), debug);
	assert_null(T.render_base[kind]);
	assert_header(&r, "X-Content-Type-Options", "nosniff");
	assert_no_header(&r, "Content-Encoding");
	assert_no_header(&r, "X-Go-Pprof");
	if (debug) {
		assert_header(&r, "Content-Type", "text/plain; charset=utf-8");
		assert_no_header(&r, "Content-Disposition");
	} else {
		snprintf(disp, sizeof(disp), "attachment; filename=\"%s\"",
			 pp_profile_kind__name(kind));
		assert_header(&r, "Content-Type", "application/octet-stream");
		assert_header(&r, "Content-Disposition", disp);
	}
	resp_free(&r);
}

static void test_profiles_absolute(void **state)
{
	struct fx *f = *state;
	char target[128];

	for (int k = 1; k < PP_PROFILE__COUNT; k++) {
		const char *name = pp_profile_kind__name((enum pp_profile_kind)k);

		snprintf(target, sizeof(target), "/debug/pprof/%s", name);
		check_abs(f->port, target, (enum pp_profile_kind)k, 0);
		snprintf(target, sizeof(target), "/debug/pprof/%s?debug=1", name);
		check_abs(f->port, target, (enum pp_profile_kind)k, 1);
		snprintf(target, sizeof(target), "/debug/pprof/%s?gc=1&debug=2", name);
		check_abs(f->port, target, (enum pp_profile_kind)k, 2);
	}
	/* debug: bad = 0, first value wins, percent-decoded, negative = text */
	check_abs(f->port, "/debug/pprof/heap?debug=x", PP_PROFILE_HEAP, 0);
	check_abs(f->port, "/debug/pprof/heap?debug=0x1", PP_PROFILE_HEAP, 0);
	check_abs(f->port, "/debug/pprof/heap?debug=1&debug=0", PP_PROFILE_HEAP, 1);
	check_abs(f->port, "/debug/pprof/heap?debug=0&debug=1", PP_PROFILE_HEAP, 0);
	check_abs(f->port, "/debug/pprof/heap?%64ebug=%31", PP_PROFILE_HEAP, 1);
	check_abs(f->port, "/debug/pprof/heap?debug=-1", PP_PROFILE_HEAP, 1);
	check_abs(f->port, "/debug/pprof/goroutine?debug=7", PP_PROFILE_GOROUTINE, 2);
	/* an empty seconds is no delta */
	check_abs(f->port, "/debug/pprof/heap?seconds=", PP_PROFILE_HEAP, 0);
	/* the path is percent-decoded too */
	check_abs(f->port, "/debug/pprof/%68eap", PP_PROFILE_HEAP, 0);
	for (int k = 0; k < PP_PROFILE__COUNT; k++)
		assert_int_equal(get_count(T.begins, k), 0);
}

static void test_errors_in_go_order(void **state)
{
	static const struct {
		const char *target;
		int status;
		const char *msg;
	} cases[] = {
		/* 1: seconds not a positive integer */
		{ "/debug/pprof/heap?seconds=abc", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/allocs?seconds=0", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/block?seconds=-5", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/mutex?seconds=1.5", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/goroutine?seconds=0x5", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/heap?seconds=99999999999999999999999", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/heap?seconds=abc&debug=1", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		{ "/debug/pprof/heap?seconds=abc&seconds=1", 400,
		  "invalid value for \"seconds\" - must be a positive integer" },
		/* 3: over the window limit (before the debug check) */
		{ "/debug/pprof/heap?seconds=11", 400,
		  "profile duration exceeds server's WriteTimeout" },
		{ "/debug/pprof/threadcreate?seconds=11&debug=1", 400,
		  "profile duration exceeds server's WriteTimeout" },
		/* 4: debug with seconds */
		{ "/debug/pprof/heap?seconds=1&debug=1", 400,
		  "seconds and debug params are incompatible" },
		{ "/debug/pprof/heap?debug=2&seconds=10", 400,
		  "seconds and debug params are incompatible" },
		{ "/debug/pprof/heap?seconds=%31&debug=%32", 400,
		  "seconds and debug params are incompatible" },
		/* CPU: bad seconds means 30, which is over this server's limit of 10 */
		{ "/debug/pprof/profile", 400, "profile duration exceeds server's WriteTimeout" },
		{ "/debug/pprof/profile?seconds=abc", 400,
		  "profile duration exceeds server's WriteTimeout" },
		{ "/debug/pprof/profile?seconds=0", 400,
		  "profile duration exceeds server's WriteTimeout" },
		{ "/debug/pprof/profile?seconds=-3", 400,
		  "profile duration exceeds server's WriteTimeout" },
		{ "/debug/pprof/profile?seconds=11", 400,
		  "profile duration exceeds server's WriteTimeout" },
		/* unknown names, trace */
		{ "/debug/pprof/nope", 404, "Unknown profile" },
		{ "/debug/pprof/heap/", 404, "Unknown profile" },
		{ "/debug/pprof/Heap", 404, "Unknown profile" },
		{ "/debug/pprof/trace", 501, "trace is not supported for native processes" },
		{ "/debug/pprof/trace?seconds=1", 501,
		  "trace is not supported for native processes" },
	};
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resp r;

		get(f->port, cases[i].target, &r);
		if (r.status != cases[i].status)
			fail_msg("%s: status %d want %d", cases[i].target, r.status,
				 cases[i].status);
		assert_go_error(&r, cases[i].status, cases[i].msg);
		resp_free(&r);
	}
	for (int k = 0; k < PP_PROFILE__COUNT; k++) {
		assert_int_equal(get_count(T.begins, k), 0);
		assert_int_equal(get_count(T.renders, k), 0);
	}
}

static void test_render_errors(void **state)
{
	struct fx *f = *state;
	struct resp r;

	pthread_mutex_lock(&T.mu);
	T.render_err = -EAGAIN;
	pthread_mutex_unlock(&T.mu);
	get(f->port, "/debug/pprof/mutex", &r);
	assert_go_error(&r, 503, strerror(EAGAIN));
	resp_free(&r);
	pthread_mutex_lock(&T.mu);
	T.render_err = -EIO;
	pthread_mutex_unlock(&T.mu);
	get(f->port, "/debug/pprof/heap?debug=1", &r);
	assert_go_error(&r, 500, strerror(EIO));
	resp_free(&r);
}

static void test_delta_and_cpu(void **state)
{
	struct fx *f = *state;
	char want[128];
	size_t n;
	struct resp r;

	/* percent-encoded key, first value wins over a bad second one */
	get(f->port, "/debug/pprof/heap?%73econds=1&seconds=abc&gc=1", &r);
	assert_int_equal(r.status, 200);
	n = expected_body(PP_PROFILE_HEAP, true, 0, want, sizeof(want));
	assert_int_equal(r.body_len, n);
	assert_memory_equal(r.body, want, n);
	assert_header(&r, "Content-Type", "application/octet-stream");
	assert_header(&r, "Content-Disposition", "attachment; filename=\"heap-delta\"");
	assert_header(&r, "X-Content-Type-Options", "nosniff");
	assert_no_header(&r, "Content-Encoding");
	assert_int_equal(get_count(T.begins, PP_PROFILE_HEAP), 1);
	assert_int_equal(get_count(T.renders, PP_PROFILE_HEAP), 1);
	assert_int_equal(get_count(T.releases, PP_PROFILE_HEAP), 1);
	/* render got the base begin returned (freed since, compare pointers only) */
	assert_ptr_equal(T.render_base[PP_PROFILE_HEAP], T.begin_base[PP_PROFILE_HEAP]);
	assert_int_equal(get_count(T.render_debug, PP_PROFILE_HEAP), 0);
	resp_free(&r);

	get(f->port, "/debug/pprof/profile?seconds=1&seconds=50&debug=1", &r);
	assert_int_equal(r.status, 200);
	n = expected_body(PP_PROFILE_CPU, true, 0, want, sizeof(want));
	assert_int_equal(r.body_len, n);
	assert_memory_equal(r.body, want, n);
	assert_header(&r, "Content-Type", "application/octet-stream");
	assert_header(&r, "Content-Disposition", "attachment; filename=\"profile\"");
	assert_no_header(&r, "Content-Encoding");
	assert_int_equal(get_count(T.begins, PP_PROFILE_CPU), 1);
	assert_int_equal(get_count(T.releases, PP_PROFILE_CPU), 1);
	assert_ptr_equal(T.render_base[PP_PROFILE_CPU], T.begin_base[PP_PROFILE_CPU]);
	resp_free(&r);
}

static void test_cmdline(void **state)
{
	struct fx *f = *state;
	struct resp r;

	get(f->port, "/debug/pprof/cmdline", &r);
	assert_int_equal(r.status, 200);
	assert_header(&r, "Content-Type", "text/plain; charset=utf-8");
	assert_int_equal(r.body_len, sizeof(cmdline_bytes) - 1);
	assert_memory_equal(r.body, cmdline_bytes, sizeof(cmdline_bytes) - 1);
	resp_free(&r);
}

static void test_symbol(void **state)
{
	/* 4096, 010000 and 0b1000000000000 are 0x1000 too */
	static const char want[] = "num_symbols: 1\n0x1000 main\n0x2000 ns::f<int>(long)\n"
				   "0x1000 main\n0x1000 main\n0x1000 main\n0x1000 main\n";
	static const char words[] = "0x1000+0x2000+0x3000+0x1000+bogus+0+4096+010000+"
				    "0b1000000000000";
	struct fx *f = *state;
	char target[256], len_hdr[64];
	struct resp r;

	snprintf(target, sizeof(target), "/debug/pprof/symbol?%s", words);
	get(f->port, target, &r);
	assert_int_equal(r.status, 200);
	assert_header(&r, "Content-Type", "text/plain; charset=utf-8");
	assert_string_equal(r.body, want);
	resp_free(&r);

	snprintf(len_hdr, sizeof(len_hdr), "Content-Length: %zu\r\n", strlen(words));
	do_req(f->port, "POST", "/debug/pprof/symbol", len_hdr, words, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, want);
	resp_free(&r);

	/* POST reads the body, not the query */
	do_req(f->port, "POST", "/debug/pprof/symbol?0x1000", "Content-Length: 6\r\n", "0x2000",
	       &r);
	assert_string_equal(r.body, "num_symbols: 1\n0x2000 ns::f<int>(long)\n");
	resp_free(&r);

	get(f->port, "/debug/pprof/symbol", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "num_symbols: 1\n");
	resp_free(&r);

	get(f->port, "/debug/pprof/symbol?0x3000+junk", &r);
	assert_string_equal(r.body, "num_symbols: 1\n");
	resp_free(&r);

	do_req(f->port, "POST", "/debug/pprof/symbol", "Content-Length: 0\r\n", "", &r);
	assert_string_equal(r.body, "num_symbols: 1\n");
	resp_free(&r);
}

static void test_healthz_and_404(void **state)
{
	struct fx *f = *state;
	struct resp r;

	get(f->port, "/healthz", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok\n");
	assert_header(&r, "Content-Type", "text/plain; charset=utf-8");
	resp_free(&r);

	pthread_mutex_lock(&T.mu);
	T.unhealthy = true;
	pthread_mutex_unlock(&T.mu);
	get(f->port, "/healthz", &r);
	assert_int_equal(r.status, 503);
	assert_string_equal(r.body, "no target process\n");
	resp_free(&r);

	get(f->port, "/", &r);
	assert_int_equal(r.status, 404);
	assert_header(&r, "Content-Type", "text/plain; charset=utf-8");
	assert_no_header(&r, "X-Go-Pprof");
	resp_free(&r);
	get(f->port, "/debug/pprofx", &r);
	assert_int_equal(r.status, 404);
	assert_no_header(&r, "X-Go-Pprof");
	resp_free(&r);
}

static void test_metrics(void **state)
{
	struct fx *f = *state;
	struct resp r;

	for (int i = 0; i < 3; i++) {
		get(f->port, "/healthz", &r);
		resp_free(&r);
	}
	get(f->port, "/no/such/path", &r);
	resp_free(&r);
	get(f->port, "/other/path", &r);
	resp_free(&r);
	get(f->port, "/debug/pprof/zzz", &r);
	resp_free(&r);
	get(f->port, "/debug/pprof/heap?seconds=x", &r);
	resp_free(&r);

	get(f->port, "/metrics", &r);
	assert_int_equal(r.status, 200);
	assert_header(&r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	assert_non_null(strstr(r.body, "# TYPE podprof_http_requests_total counter\n"));
	assert_non_null(strstr(r.body, "podprof_http_requests_total{path=\"/"
				       "healthz\",code=\"200\"} 3\n"));
	/* unknown paths collapse into one label value each */
	assert_non_null(strstr(r.body, "podprof_http_requests_total{path=\"other\",code=\"404\"} "
				       "2\n"));
	assert_non_null(strstr(r.body, "podprof_http_requests_total{path=\"/debug/pprof/"
				       "unknown\",code=\"404\"} 1\n"));
	assert_non_null(strstr(r.body, "podprof_http_requests_total{path=\"/debug/pprof/"
				       "heap\",code=\"400\"} 1\n"));
	assert_null(strstr(r.body, "/no/such/path"));
	assert_non_null(strstr(r.body, "podprof_http_connections_rejected_total 0\n"));
	/* this request itself is in flight */
	assert_non_null(strstr(r.body, "podprof_http_in_flight 1\n"));
	/* the source's lines come last */
	assert_non_null(strstr(r.body, "\npodprof_test_metric 42\n"));
	assert_true(strstr(r.body, "podprof_test_metric") > strstr(r.body, "podprof_http_in_"
									   "flight"));
	resp_free(&r);
}

static void test_413(void **state)
{
	struct fx *f = *state; /* max_request_bytes = 4096 */
	char *big = malloc(8001), hdr[64];
	struct resp r;
	size_t reqlen;
	char *req;

	assert_non_null(big);
	memset(big, '1', 8000);
	big[8000] = '\0';
	snprintf(hdr, sizeof(hdr), "Content-Length: %d\r\n", 8000);
	do_req(f->port, "POST", "/debug/pprof/symbol", hdr, big, &r);
	assert_go_error(&r, 413, "request body too large");
	resp_free(&r);

	/* chunked: no length up front, refused once it grows past the cap */
	req = malloc(9000);
	assert_non_null(req);
	reqlen = (size_t)snprintf(req, 9000,
				  "POST /debug/pprof/symbol HTTP/1.1\r\nHost: "
				  "127.0.0.1\r\nConnection: "
				  "close\r\nTransfer-Encoding: "
				  "chunked\r\n\r\n1f40\r\n%s\r\n0\r\n\r\n",
				  big);
	assert_int_equal(do_raw(f->port, req, reqlen, &r), 0);
	assert_go_error(&r, 413, "request body too large");
	resp_free(&r);
	free(req);

	/* headers over the connection's memory: refused by libmicrohttpd, nothing leaks */
	req = malloc(80000);
	assert_non_null(req);
	memset(big, 'a', 8000);
	reqlen = (size_t)snprintf(req, 80000,
				  "GET /debug/pprof/heap HTTP/1.1\r\nHost: 127.0.0.1\r\n");
	for (int i = 0; i < 8; i++)
		reqlen += (size_t)snprintf(req + reqlen, 80000 - reqlen, "X-Pad%d: %s\r\n", i, big);
	reqlen += (size_t)snprintf(req + reqlen, 80000 - reqlen, "\r\n");
	if (do_raw(f->port, req, reqlen, &r) == 0) {
		assert_true(r.status == 431 || r.status == 413 || r.status == 400);
		resp_free(&r);
	}
	free(req);
	assert_int_equal(get_count(T.renders, PP_PROFILE_HEAP), 0);

	/* under the cap is fine */
	do_req(f->port, "POST", "/debug/pprof/symbol", "Content-Length: 13\r\n", "0x1000+0x2000",
	       &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	free(big);
}

struct bg {
	unsigned port;
	const char *target;
	struct resp r;
	int got;
	bool done;
};

static void *bg_get(void *arg)
{
	struct bg *b = arg;
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
			 b->target);
	int fd = connect_to(AF_INET, b->port);

	if (fd >= 0 && send_all(fd, req, (size_t)n) == 0)
		b->got = read_resp(fd, &b->r);
	else
		b->got = -1;
	if (fd >= 0)
		close(fd);
	__atomic_store_n(&b->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_window_does_not_block(void **state)
{
	struct fx *f = *state;
	struct bg a = { .port = f->port, .target = "/debug/pprof/profile?seconds=3" };
	struct bg b = { .port = f->port, .target = "/debug/pprof/profile?seconds=3" };
	pthread_t ta, tb;
	struct resp r;

	assert_int_equal(pthread_create(&ta, NULL, bg_get, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, bg_get, &b), 0);
	/* both windows are open (overlapping CPU windows are served) */
	assert_true(wait_count(T.begins, PP_PROFILE_CPU, 2, 20));

	get(f->port, "/healthz", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	get(f->port, "/debug/pprof/heap", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	get(f->port, "/debug/pprof/goroutine?debug=2", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	/* ...and all of that answered while the windows were still open */
	assert_false(__atomic_load_n(&a.done, __ATOMIC_SEQ_CST));
	assert_false(__atomic_load_n(&b.done, __ATOMIC_SEQ_CST));
	assert_int_equal(get_count(T.renders, PP_PROFILE_CPU), 0);

	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(a.got, 0);
	assert_int_equal(b.got, 0);
	assert_int_equal(a.r.status, 200);
	assert_int_equal(b.r.status, 200);
	assert_int_equal(get_count(T.renders, PP_PROFILE_CPU), 2);
	assert_int_equal(get_count(T.releases, PP_PROFILE_CPU), 2);
	resp_free(&a.r);
	resp_free(&b.r);
}

/* Every render worker busy: /healthz, /metrics, the index and cmdline still answer. */
static void test_cheap_requests_never_queue_behind_renders(void **state)
{
	struct fx *f = *state;
	struct bg b[6];
	pthread_t t[6];
	struct resp r;
	static const char *const cheap[] = { "/healthz", "/metrics", "/debug/pprof/",
					     "/debug/pprof/cmdline" };

	pthread_mutex_lock(&T.mu);
	T.hold_renders = true;
	pthread_mutex_unlock(&T.mu);
	for (int i = 0; i < 6; i++) {
		b[i] = (struct bg){ .port = f->port, .target = "/debug/pprof/heap" };
		assert_int_equal(pthread_create(&t[i], NULL, bg_get, &b[i]), 0);
	}
	/* the 4 default workers are all inside a render, 2 requests queued */
	assert_true(wait_count(T.renders, PP_PROFILE_HEAP, 4, 20));
	for (size_t i = 0; i < ARRAY_SIZE(cheap); i++) {
		get(f->port, cheap[i], &r);
		assert_int_equal(r.status, 200);
		resp_free(&r);
	}
	/* ...answered while no render had finished */
	assert_int_equal(get_count(T.renders, PP_PROFILE_HEAP), 4);
	for (int i = 0; i < 6; i++)
		assert_false(__atomic_load_n(&b[i].done, __ATOMIC_SEQ_CST));
	pthread_mutex_lock(&T.mu);
	T.hold_renders = false;
	pthread_cond_broadcast(&T.cv);
	pthread_mutex_unlock(&T.mu);
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(b[i].got, 0);
		assert_int_equal(b[i].r.status, 200);
		resp_free(&b[i].r);
	}
	assert_int_equal(get_count(T.renders, PP_PROFILE_HEAP), 6);
}

static void test_client_disconnect_releases(void **state)
{
	static const char *const targets[] = { "/debug/pprof/profile?seconds=10", "/debug/pprof/"
										  "allocs?seconds="
										  "10" };
	static const enum pp_profile_kind kinds[] = { PP_PROFILE_CPU, PP_PROFILE_ALLOCS };
	struct fx *f = *state;
	struct resp r;

	for (int i = 0; i < 2; i++) {
		char req[256];
		int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
				 targets[i]);
		int fd = connect_to(AF_INET, f->port);

		assert_true(fd >= 0);
		assert_int_equal(send_all(fd, req, (size_t)n), 0);
		assert_true(wait_count(T.begins, kinds[i], 1, 20));
		close(fd);
		/*
		 * Released while the 10 s window is still open: the safety net of
		 * wait_count (8 s) is below the window, and the window was never
		 * rendered, so release came from the disconnect, not the window end.
		 */
		assert_true(wait_count(T.releases, kinds[i], 1, 8));
		assert_int_equal(get_count(T.renders, kinds[i]), 0);
	}
	get(f->port, "/metrics", &r);
	assert_non_null(strstr(r.body, "podprof_http_windows_aborted_total 2\n"));
	resp_free(&r);
}

static void test_stop_during_window(void **state)
{
	struct pp_http_server *s = start(NULL, 8, 4096);
	struct bg a = { .port = pp_http_server__port(s),
			.target = "/debug/pprof/block?seconds=10" };
	pthread_t ta;

	tsrc_reset();
	assert_int_equal(pthread_create(&ta, NULL, bg_get, &a), 0);
	assert_true(wait_count(T.begins, PP_PROFILE_BLOCK, 1, 20));
	pp_http_server__stop(s);
	/* stop returned with the window released and never rendered */
	assert_int_equal(get_count(T.releases, PP_PROFILE_BLOCK), 1);
	assert_int_equal(get_count(T.renders, PP_PROFILE_BLOCK), 0);
	pthread_join(ta, NULL);
	assert_int_not_equal(a.got, 0); /* no response: the connection was dropped */
	assert_false(a.r.status == 200);
	resp_free(&a.r);
}

/* A window longer than the idle timeout still gets its answer. */
static void test_window_longer_than_idle_timeout(void **state)
{
	struct pp_http_opts o = { .listen = "127.0.0.1:0",
				  .max_connections = 4,
				  .max_request_bytes = 4096,
				  .timeout_seconds = 1,
				  .max_window_seconds = 5 };
	struct pp_http_server *s;
	struct resp r;

	tsrc_reset();
	s = pp_http_server__start(&o, &tsource);
	assert_non_null(s);
	get(pp_http_server__port(s), "/debug/pprof/mutex?seconds=3", &r);
	assert_int_equal(r.status, 200);
	assert_header(&r, "Content-Disposition", "attachment; filename=\"mutex-delta\"");
	resp_free(&r);
	pp_http_server__stop(s);
}

static void test_token(void **state)
{
	struct pp_http_server *s = start("s3cr3t-token", 8, 4096);
	unsigned port = pp_http_server__port(s);
	static const struct {
		const char *path, *auth;
		int status;
	} cases[] = {
		{ "/debug/pprof/heap", NULL, 401 },
		{ "/debug/pprof/heap", "Authorization: Bearer wrong\r\n", 401 },
		{ "/debug/pprof/heap", "Authorization: Bearer s3cr3t-toke\r\n", 401 },
		{ "/debug/pprof/heap", "Authorization: Bearer s3cr3t-tokenX\r\n", 401 },
		{ "/debug/pprof/heap", "Authorization: Basic czNjcjN0LXRva2Vu\r\n", 401 },
		{ "/debug/pprof/heap", "Authorization: s3cr3t-token\r\n", 401 },
		{ "/debug/pprof/heap", "Authorization: Bearer s3cr3t-token\r\n", 200 },
		{ "/debug/pprof/heap", "Authorization: bearer s3cr3t-token\r\n", 200 },
		{ "/debug/pprof/", NULL, 401 },
		{ "/debug/pprof", NULL, 401 },
		{ "/debug/pprof/nope", NULL, 401 },
		{ "/metrics", NULL, 401 },
		{ "/metrics", "Authorization: Bearer s3cr3t-token\r\n", 200 },
		{ "/debug/pprof/symbol?0x1000", NULL, 401 },
		{ "/healthz", NULL, 200 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct resp r;

		do_req(port, "GET", cases[i].path, cases[i].auth, NULL, &r);
		if (r.status != cases[i].status)
			fail_msg("%s [%s]: %d want %d", cases[i].path, cases[i].auth, r.status,
				 cases[i].status);
		if (r.status == 401) {
			assert_go_error(&r, 401, "Unauthorized");
			assert_header(&r, "WWW-Authenticate", "Bearer");
		}
		resp_free(&r);
	}
	pp_http_server__stop(s);
}

/*
 * At max_connections a new connection closes the one that has waited
 * longest for its headers; when every connection is busy with a request it
 * is closed at accept instead.
 */
static void test_connection_limit(void **state)
{
	struct pp_http_server *s = start(NULL, 2, 4096);
	unsigned port = pp_http_server__port(s);
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: "
				  "close\r\n\r\n";
	struct bg a = { .port = port, .target = "/debug/pprof/profile?seconds=2" };
	struct bg b = { .port = port, .target = "/debug/pprof/profile?seconds=2" };
	pthread_t ta, tb;
	struct resp r;
	int c1, c2, c3, c4;

	tsrc_reset();
	c1 = connect_to(AF_INET, port);
	usleep(100000);
	c2 = connect_to(AF_INET, port);
	usleep(100000);
	c3 = connect_to(AF_INET, port);
	assert_true(c1 >= 0 && c2 >= 0 && c3 >= 0);
	/* the third is served; the first, the oldest waiting for headers, closed */
	assert_int_equal(send_all(c3, req, sizeof(req) - 1), 0);
	assert_int_equal(read_resp(c3, &r), 0);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	assert_int_equal(read_resp(c1, &r), -1);
	assert_int_equal(send_all(c2, req, sizeof(req) - 1), 0);
	assert_int_equal(read_resp(c2, &r), 0);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	close(c1);
	close(c2);
	close(c3);
	usleep(200000);

	/* two windows hold both slots: nothing to evict, the next one is closed */
	assert_int_equal(pthread_create(&ta, NULL, bg_get, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, bg_get, &b), 0);
	assert_true(wait_count(T.begins, PP_PROFILE_CPU, 2, 20));
	c4 = connect_to(AF_INET, port);
	assert_true(c4 >= 0);
	assert_int_equal(send_all(c4, req, sizeof(req) - 1), 0);
	assert_int_equal(read_resp(c4, &r), -1);
	close(c4);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(a.r.status, 200);
	assert_int_equal(b.r.status, 200);
	resp_free(&a.r);
	resp_free(&b.r);
	usleep(200000);

	get(port, "/metrics", &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "podprof_http_refused_total{reason=\"evicted\"} 1\n"));
	assert_non_null(strstr(r.body, "podprof_http_connections_rejected_total 1\n"));
	assert_non_null(strstr(r.body, "podprof_http_refused_total{reason=\"max_connections\"} "
				       "1\n"));
	resp_free(&r);
	pp_http_server__stop(s);
}

static void test_listen_addresses(void **state)
{
	struct pp_http_opts o = { .max_connections = 4,
				  .max_request_bytes = 4096,
				  .timeout_seconds = 5,
				  .max_window_seconds = 5 };
	struct pp_http_server *s, *s2;
	char listen[64];
	struct resp r;
	int fd;

	/* ":port" serves every address, IPv4 and IPv6 */
	o.listen = ":0";
	s = pp_http_server__start(&o, &tsource);
	assert_non_null(s);
	get(pp_http_server__port(s), "/healthz", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	fd = connect_to(AF_INET6, pp_http_server__port(s));
	if (fd >= 0) { /* IPv6 may be disabled in the sandbox */
		static const char q[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: "
					"close\r\n\r\n";
		assert_int_equal(send_all(fd, q, sizeof(q) - 1), 0);
		assert_int_equal(read_resp(fd, &r), 0);
		assert_int_equal(r.status, 200);
		resp_free(&r);
		close(fd);
	}

	/* the same port again: EADDRINUSE */
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", pp_http_server__port(s));
	o.listen = listen;
	errno = 0;
	s2 = pp_http_server__start(&o, &tsource);
	assert_null(s2);
	assert_int_equal(errno, EADDRINUSE);
	pp_http_server__stop(s);

	/* [::1]:0 */
	o.listen = "[::1]:0";
	s = pp_http_server__start(&o, &tsource);
	if (s) {
		fd = connect_to(AF_INET6, pp_http_server__port(s));
		assert_true(fd >= 0);
		close(fd);
		/* not on IPv4 */
		fd = connect_to(AF_INET, pp_http_server__port(s));
		assert_true(fd < 0);
		pp_http_server__stop(s);
	}

	/* 127.0.0.1:0 is not reachable through ::1 */
	o.listen = "127.0.0.1:0";
	s = pp_http_server__start(&o, &tsource);
	assert_non_null(s);
	fd = connect_to(AF_INET6, pp_http_server__port(s));
	assert_true(fd < 0);
	pp_http_server__stop(s);

	/* bad addresses */
	static const char *const bad[] = { "127.0.0.1", "1.2.3.4.5:0", "127.0.0.1:70000", "::1:0",
					   "[::1:0" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.listen = bad[i];
		errno = 0;
		assert_null(pp_http_server__start(&o, &tsource));
		assert_int_equal(errno, EINVAL);
	}
	pp_http_server__stop(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_redirect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_profiles_absolute, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_in_go_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_render_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delta_and_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cmdline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbol, setup, teardown),
		cmocka_unit_test_setup_teardown(test_healthz_and_404, setup, teardown),
		cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_413, setup, teardown),
		cmocka_unit_test_setup_teardown(test_window_does_not_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_disconnect_releases, setup, teardown),
		cmocka_unit_test(test_stop_during_window),
		cmocka_unit_test(test_window_longer_than_idle_timeout),
		cmocka_unit_test(test_token),
		cmocka_unit_test_setup_teardown(test_cheap_requests_never_queue_behind_renders,
						setup, teardown),
		cmocka_unit_test(test_connection_limit),
		cmocka_unit_test(test_listen_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
