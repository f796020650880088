/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The /debug/pprof server on libmicrohttpd. Behaviour per PPROF-COMPAT.md §1.
 *
 * Threading model: one MHD polling thread (epoll) does all socket I/O, so
 * an idle or slow connection costs a socket and a little memory, never a
 * thread. Requests that only read atomics (/healthz, redirects, errors, the
 * embedded page) are answered in that thread. Everything else is suspended
 * (MHD_suspend_connection) and handed to a pool: a "light" pool for
 * /metrics, the index and cmdline, a "symbol" pool for /symbol (a body of
 * thousands of addresses takes a while), a "heavy" pool (opts->workers)
 * for rendering profiles, so the cheap endpoints never queue behind a
 * render or a symbol lookup. A worker builds the response and resumes the
 * connection; the polling thread then queues it. A CPU window or a delta begins in a heavy
 * worker and then waits in the timer thread, holding no worker: the timer
 * thread watches the client socket (EPOLLRDHUP) and the window's end, and
 * at the end hands the render to the heavy pool. A client that goes away
 * or a stopping server releases the window at once.
 *
 * Connection limits: max_connections open at once (a new one then closes
 * the connection that has waited longest for its headers, or is closed at
 * accept when every connection is busy), max_connections_per_client from
 * one address (a new one closes that address's connection that has waited
 * longest for its headers; when all of them are busy with requests, the
 * next ones are answered 429 as soon as their headers are in, and beyond
 * twice the limit they are closed at accept), and a header
 * deadline: a request whose headers are
 * not complete header_timeout_seconds after its connection opened (or
 * after the idle timeout plus that, for a keep-alive connection's next
 * request) is closed by the timer thread (shutdown(2) on its socket; MHD
 * then closes it). Each refusal is counted per reason in /metrics and
 * reported to src->refused at most once per 10 s per reason.
 *
 * Window limits: at most max_windows windows (CPU or delta) begun and not
 * yet answered, max_windows_per_client of them from one address; beyond,
 * and when the source refuses a baseline for memory (-EAGAIN from begin),
 * 503 with the reason, Retry-After: 1 and Connection: close. A refused
 * window takes no baseline.
 *
 * Request checks, once the headers are in, before any body is read and
 * before the token: ambiguous framing (request smuggling) 400, a Host that
 * does not name this server (DNS rebinding) 421, a cross-site browser
 * request for data 403; each closes the connection and is counted as a
 * refusal. See host_known() for what names this server.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http.h"
#include "ui.h"
#include "util/log.h"

#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_MAX_PER_CLIENT 64
#define DEFAULT_HEADER_TIMEOUT_SECONDS 10
#define DEFAULT_WORKERS 4
#define MAX_WORKERS 64
#define LIGHT_WORKERS 2
#define SYMBOL_WORKERS 2
#define DEFAULT_MAX_WINDOWS 256
#define DEFAULT_MAX_WINDOWS_PER_CLIENT 32
/* Over the per-client limit but within twice it: answered 429 after this. */
#define OVER_LIMIT_HEADER_SECONDS 1
#define CLIENT_BUCKETS 256
/* Connections over max_connections while evicted ones are being closed. */
#define EVICT_HEADROOM 64
#define REFUSAL_LOG_INTERVAL_NS (10ull * 1000000000ull)
#define DEFAULT_MAX_REQUEST_BYTES 65536
#define DEFAULT_TIMEOUT_SECONDS 30
#define DEFAULT_MAX_WINDOW_SECONDS 300
#define DEFAULT_CPU_SECONDS 30
/* Largest body we build in memory (rendered profile, /metrics, /symbol). */
#define MAX_BODY_BYTES (512u << 20)
#define MAX_SYMBOL_NAME_BYTES 4096
#define MAX_HEALTH_MSG_BYTES 1024
/* The machine's own addresses kept for the Host check, and how often a miss re-reads them. */
#define OWN_ADDRS_MAX 4096
#define OWN_REFRESH_NS 1000000000ull

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

static const unsigned status_codes[] = {
	200, 301, 400, 401, 403, 404, 413, 421, 429, 500, 501, 503
};
#define N_CODES (ARRAY_SIZE(status_codes) + 1) /* last slot: any other code */

/* Why a connection or request was refused: the reason label in /metrics. */
enum refusal {
	REF_MAX_CONNECTIONS, /* closed at accept: max_connections open */
	REF_PER_CLIENT, /* answered 429: too many connections from the address */
	REF_PER_CLIENT_ACCEPT, /* closed at accept: twice the per-client limit */
	REF_HEADER_TIMEOUT, /* headers not complete in time: closed */
	REF_EVICTED, /* waiting for headers, closed to make room at max_connections */
	REF_HOST, /* answered 421: Host not allowed (DNS rebinding) */
	REF_CROSS_SITE, /* answered 403: a cross-site browser request for data */
	REF_FRAMING, /* answered 400: ambiguous body framing (request smuggling) */
	REF_PER_CLIENT_EVICTED, /* idle, closed to make room for its address's newest */
	REF_WINDOWS, /* answered 503: max_windows open */
	REF_WINDOWS_PER_CLIENT, /* answered 503: max_windows_per_client from the address */
	REF_WINDOW_BYTES, /* answered 503: the window baselines' memory cap (source -EAGAIN) */
	REF__COUNT
};

static const char *const refusal_names[REF__COUNT] = {
	[REF_MAX_CONNECTIONS] = "max_connections",
	[REF_PER_CLIENT] = "per_client",
	[REF_PER_CLIENT_ACCEPT] = "per_client_at_accept",
	[REF_HEADER_TIMEOUT] = "header_timeout",
	[REF_EVICTED] = "evicted",
	[REF_HOST] = "host",
	[REF_CROSS_SITE] = "cross_site",
	[REF_FRAMING] = "framing",
	[REF_PER_CLIENT_EVICTED] = "per_client_evicted",
	[REF_WINDOWS] = "max_windows",
	[REF_WINDOWS_PER_CLIENT] = "windows_per_client",
	[REF_WINDOW_BYTES] = "window_bytes",
};

/* Connections open from one address (polling thread only). */
struct client {
	struct client *next;
	unsigned char addr[16];
	unsigned char len;
	unsigned count;
	unsigned evicting; /* of count, closed by us and not yet gone */
	unsigned windows; /* profile windows open from the address, under win_lock */
};

/* One open connection, the MHD socket context. */
struct conn {
	struct conn *prev, *next; /* s->conns, under conn_lock */
	int fd;
	/* monotonic ns by which the current request's headers must be in; 0 = none */
	_Atomic uint64_t header_deadline;
	struct client *cl;
	bool over_limit; /* answered 429 */
	bool evicted; /* counted in cl->evicting (polling thread) */
};

struct job;

/* A fixed set of threads taking jobs in order. */
struct pool {
	struct pp_http_server *s;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;
	pthread_t threads[MAX_WORKERS];
	unsigned n; /* started */
	bool stop;
};

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
	unsigned max_per_client;
	unsigned header_timeout_seconds;
	unsigned max_windows, max_windows_per_client;
	char *allowed_hosts; /* opts->allowed_hosts; NULL = none */
	char listen_host[256]; /* normalized; "" = every address */
	pthread_mutex_t host_lock; /* own, n_own, hostname, own_at */
	unsigned char (*own)[16]; /* the machine's addresses (IPv4 as v4-mapped) */
	size_t n_own;
	char hostname[256]; /* gethostname(), lowercased */
	uint64_t own_at; /* last read, monotonic ns */
	int stop_fd; /* eventfd, readable once stop() began */
	int wake_fd; /* eventfd: a window was added, the timer recomputes its sleep */
	int epfd; /* the timer thread's: stop_fd, wake_fd, window sockets */
	atomic_bool stopping;
	atomic_uint open_connections;
	atomic_long in_flight;
	atomic_ulong windows_aborted;
	atomic_ulong windows_waiting;
	atomic_ulong refused[REF__COUNT];
	_Atomic uint64_t refusal_logged[REF__COUNT]; /* last log line, monotonic ns */
	atomic_ulong requests[R__COUNT][N_CODES];

	/* light: /metrics, index, cmdline; symbol: /symbol (slow bodies of
	 * addresses never delay /metrics); heavy: profiles */
	struct pool light, symbol, heavy;
	pthread_t timer;
	bool timer_started;
	pthread_mutex_t win_lock; /* windows, windows_open, client->windows */
	struct job *windows; /* waiting, doubly linked */
	unsigned windows_open; /* begun and not yet released (max_windows) */
	pthread_mutex_t conn_lock; /* conns */
	struct conn *conns;
	struct client *clients[CLIENT_BUCKETS]; /* polling thread only */
};

/*
 * Work handed to a pool for one request. Owned by its struct req; while
 * queued, running or waiting its connection is suspended, so MHD neither
 * closes it nor calls on_completed (stop() resumes every one first).
 */
struct job {
	struct pp_http_server *s;
	struct MHD_Connection *c;
	struct req *rq;
	enum route route;
	char *url;
	bool post;
	struct job *next; /* pool queue */
	struct job *wprev, *wnext; /* s->windows */
	/* a window: */
	bool waiting; /* in s->windows */
	bool render; /* the window ended: the next run renders it */
	int fd; /* the client's socket, watched for EPOLLRDHUP */
	enum pp_profile_kind kind;
	unsigned secs;
	uint64_t end_ns;
	void *base;
	struct client *wcl; /* counted in wcl->windows and windows_open; NULL: not counted */
	bool counted;
	char filename[64];
	/* the result, read by the polling thread after the resume */
	struct MHD_Response *resp; /* NULL: close the connection */
	unsigned code;
};

/* Per request, created by the URI log callback so we see the raw query. */
struct req {
	char *uri;
	struct pp_buf body;
	bool started;
	bool too_large;
	bool in_flight;
	struct job *job;
};

/* What one handler invocation works with. */
struct call {
	struct pp_http_server *s;
	struct MHD_Connection *c;
	enum route route;
	const char *query; /* raw, never NULL */
	const char *url; /* path, never NULL */
	struct job *job; /* non-NULL in a worker: responses are stored there */
	bool pending; /* a window was handed to the timer: no response yet */
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
	if (x->job) {
		/* A worker: the polling thread queues it after the resume. */
		if (x->job->resp)
			MHD_destroy_response(x->job->resp);
		x->job->resp = resp;
		x->job->code = code;
		return MHD_YES;
	}
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

/* Log a refusal at most once per REFUSAL_LOG_INTERVAL_NS per reason; always count it. */
static void refuse(struct pp_http_server *s, enum refusal why)
{
	static const char *const what[REF__COUNT] = {
		[REF_MAX_CONNECTIONS] = "http.max_connections open, none to evict",
		[REF_PER_CLIENT] = "429: http.max_connections_per_client from one address",
		[REF_PER_CLIENT_ACCEPT] = "twice http.max_connections_per_client from one "
					  "address, closed at accept",
		[REF_HEADER_TIMEOUT] = "headers not complete within "
				       "http.header_timeout_seconds",
		[REF_EVICTED] = "http.max_connections open: the oldest connection waiting "
				"for its headers is closed",
		[REF_HOST] = "421: Host header not a loopback name, an address of this machine "
			     "or in http.allowed_hosts (DNS rebinding?)",
		[REF_CROSS_SITE] = "403: cross-site browser request (Sec-Fetch-Site or Origin) "
				   "for profiles or data",
		[REF_FRAMING] = "400: ambiguous request framing (Content-Length with "
				"Transfer-Encoding, or conflicting lengths)",
		[REF_PER_CLIENT_EVICTED] = "http.max_connections_per_client from one address: "
					   "its oldest connection waiting for headers is closed",
		[REF_WINDOWS] = "503: http.max_windows profile windows open",
		[REF_WINDOWS_PER_CLIENT] = "503: http.max_windows_per_client profile windows "
					   "open from one address",
		[REF_WINDOW_BYTES] = "503: profile window baselines hold "
				     "limits.max_window_bytes",
	};
	unsigned long n = atomic_fetch_add(&s->refused[why], 1) + 1;
	uint64_t now = pp_now_mono_ns(), last = atomic_load(&s->refusal_logged[why]);

	if ((last && now - last < REFUSAL_LOG_INTERVAL_NS) ||
	    !atomic_compare_exchange_strong(&s->refusal_logged[why], &last, now))
		return;
	pp_dbg("http: refusing connections (%s; %lu so far)", what[why], n);
	if (s->src.refused)
		s->src.refused(s->src.ctx, what[why], n);
}

/*
 * Count a window against max_windows and max_windows_per_client before
 * its baseline is taken. 0, or the refusal (its message in *why).
 */
static int window_reserve(struct call *x, const char **why)
{
	struct pp_http_server *s = x->s;
	struct job *j = x->job;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(x->c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	const struct conn *k = ci ? ci->socket_context : NULL;
	/* The client lives while one of its connections is open: this one is. */
	struct client *cl = k ? k->cl : NULL;
	int r = 0;

	pthread_mutex_lock(&s->win_lock);
	if (s->windows_open >= s->max_windows) {
		r = REF_WINDOWS;
		*why = "too many profile windows open (http.max_windows); try again when one "
		       "ends";
	} else if (cl && cl->windows >= s->max_windows_per_client) {
		r = REF_WINDOWS_PER_CLIENT;
		*why = "too many profile windows open from this address "
		       "(http.max_windows_per_client); try again when one ends";
	} else {
		s->windows_open++;
		if (cl)
			cl->windows++;
		j->wcl = cl;
		j->counted = true;
	}
	pthread_mutex_unlock(&s->win_lock);
	if (r)
		refuse(s, (enum refusal)r);
	return r;
}

/* The window's baseline is released: it no longer counts. Any thread. */
static void window_unreserve(struct pp_http_server *s, struct job *j)
{
	pthread_mutex_lock(&s->win_lock);
	if (j->counted) {
		s->windows_open--;
		if (j->wcl)
			j->wcl->windows--;
		j->counted = false;
		j->wcl = NULL;
	}
	pthread_mutex_unlock(&s->win_lock);
}

/* The polling thread queues what the worker built, on the call after the resume. */
static void job_finish(struct job *j)
{
	MHD_resume_connection(j->c);
}

/* Give up a job: release its window, close its connection. Any thread. */
static void job_abort(struct job *j)
{
	const struct pp_http_source *src = &j->s->src;

	if (j->base) {
		atomic_fetch_add(&j->s->windows_aborted, 1);
		if (src->release)
			src->release(src->ctx, j->kind, j->base);
		j->base = NULL;
	}
	window_unreserve(j->s, j);
	if (j->resp)
		MHD_destroy_response(j->resp);
	j->resp = NULL;
	job_finish(j);
}

static void pool_submit(struct pool *p, struct job *j)
{
	pthread_mutex_lock(&p->lock);
	if (p->stop) {
		pthread_mutex_unlock(&p->lock);
		job_abort(j);
		return;
	}
	j->next = NULL;
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

/* Under win_lock. */
static void window_unlink(struct pp_http_server *s, struct job *j)
{
	if (j->wprev)
		j->wprev->wnext = j->wnext;
	else
		s->windows = j->wnext;
	if (j->wnext)
		j->wnext->wprev = j->wprev;
	j->wprev = j->wnext = NULL;
	j->waiting = false;
	if (j->fd >= 0)
		(void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, j->fd, NULL);
	atomic_fetch_sub(&s->windows_waiting, 1);
}

/* A worker hands a begun window to the timer thread. 0 or -ESHUTDOWN. */
static int window_add(struct call *x, enum pp_profile_kind kind, unsigned secs, void *base,
		      const char *filename)
{
	struct pp_http_server *s = x->s;
	struct job *j = x->job;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(x->c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct epoll_event ev = { .events = EPOLLRDHUP, .data.ptr = j };
	uint64_t one = 1;

	j->kind = kind;
	j->secs = secs;
	j->base = base;
	j->fd = ci ? ci->connect_fd : -1;
	j->end_ns = pp_now_mono_ns() + (uint64_t)secs * 1000000000ull;
	snprintf(j->filename, sizeof(j->filename), "%s", filename);
	pthread_mutex_lock(&s->win_lock);
	if (atomic_load(&s->stopping)) {
		pthread_mutex_unlock(&s->win_lock);
		j->base = NULL;
		return -ESHUTDOWN;
	}
	j->wprev = NULL;
	j->wnext = s->windows;
	if (s->windows)
		s->windows->wprev = j;
	s->windows = j;
	j->waiting = true;
	atomic_fetch_add(&s->windows_waiting, 1);
	/* Without the watch the window still ends; only a hang-up goes unseen. */
	if (j->fd >= 0 && epoll_ctl(s->epfd, EPOLL_CTL_ADD, j->fd, &ev) < 0) {
		pp_dbg("http: cannot watch a window's socket: %s", strerror(errno));
		j->fd = -1;
	}
	pthread_mutex_unlock(&s->win_lock);
	if (write(s->wake_fd, &one, sizeof(one)) < 0)
		pp_dbg("http: eventfd write: %s", strerror(errno));
	return 0;
}

/* Close connections whose headers are late. Timer thread. */
static void scan_headers(struct pp_http_server *s, uint64_t now)
{
	pthread_mutex_lock(&s->conn_lock);
	for (struct conn *k = s->conns; k; k = k->next) {
		uint64_t dl = atomic_load(&k->header_deadline);

		if (!dl || now < dl)
			continue;
		atomic_store(&k->header_deadline, 0);
		/*
		 * MHD closes the socket only after the CLOSED notification,
		 * which unlinks k under conn_lock: the fd is still this one.
		 */
		(void)shutdown(k->fd, SHUT_RDWR);
		if (!k->over_limit)
			refuse(s, REF_HEADER_TIMEOUT);
	}
	pthread_mutex_unlock(&s->conn_lock);
}

static void *timer_main(void *arg)
{
	struct pp_http_server *s = arg;
	uint64_t last_scan = 0;

	for (;;) {
		struct epoll_event ev[32];
		struct job *due = NULL;
		uint64_t now = pp_now_mono_ns(), next = now + 500000000ull;
		int n;

		pthread_mutex_lock(&s->win_lock);
		for (struct job *j = s->windows; j; j = j->wnext)
			if (j->end_ns < next)
				next = j->end_ns;
		pthread_mutex_unlock(&s->win_lock);
		/* Round up so we never spin on a sub-millisecond remainder. */
		n = epoll_wait(s->epfd, ev, ARRAY_SIZE(ev),
			       next > now ? (int)((next - now + 999999) / 1000000) : 0);
		if (atomic_load(&s->stopping))
			break;
		for (int i = 0; i < n; i++) {
			struct job *j = ev[i].data.ptr;
			uint64_t v;

			if (j == NULL) {
				if (read(s->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					pp_dbg("http: eventfd read: %s", strerror(errno));
				continue;
			}
			pthread_mutex_lock(&s->win_lock);
			if (j->waiting)
				window_unlink(s, j);
			else
				j = NULL;
			pthread_mutex_unlock(&s->win_lock);
			if (j) {
				pp_dbg("http: %s window of %us abandoned: client went away",
				       pp_profile_kind__name(j->kind), j->secs);
				job_abort(j);
			}
		}
		now = pp_now_mono_ns();
		pthread_mutex_lock(&s->win_lock);
		for (struct job *j = s->windows, *nx; j; j = nx) {
			nx = j->wnext;
			if (j->end_ns > now)
				continue;
			window_unlink(s, j);
			j->next = due;
			due = j;
		}
		pthread_mutex_unlock(&s->win_lock);
		while (due) {
			struct job *j = due;

			due = j->next;
			j->render = true;
			pool_submit(&s->heavy, j);
		}
		if (now - last_scan >= 500000000ull) {
			scan_headers(s, now);
			last_scan = now;
		}
	}
	return NULL;
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

/*
 * A CPU window or a delta, in a heavy worker: begin, then hand the window
 * to the timer thread (x->pending); render_window runs when it ends.
 */
static enum MHD_Result serve_window(struct call *x, enum pp_profile_kind kind, unsigned secs,
				    const char *filename)
{
	static const char *const retry_hdrs[] = { "Retry-After", "1", "Connection", "close", NULL };
	const struct pp_http_source *src = &x->s->src;
	void *base = NULL;
	enum MHD_Result refused;
	const char *why = NULL;
	int r;

	if (!src->begin || !src->render || !x->job)
		return send_errno(x, -EOPNOTSUPP);
	if (refuse_unavailable(x, kind, &refused))
		return refused;
	if (window_reserve(x, &why))
		return send_error_hdrs(x, 503, why, retry_hdrs);
	r = src->begin(src->ctx, kind, &base);
	if (r < 0) {
		window_unreserve(x->s, x->job);
		if (r != -EAGAIN)
			return send_errno(x, r);
		refuse(x->s, REF_WINDOW_BYTES);
		return send_error_hdrs(x, 503,
				       "profile windows hold too much memory "
				       "(limits.max_window_bytes); try again when one ends",
				       retry_hdrs);
	}
	r = window_add(x, kind, secs, base, filename);
	if (r < 0) {
		atomic_fetch_add(&x->s->windows_aborted, 1);
		if (src->release)
			src->release(src->ctx, kind, base);
		window_unreserve(x->s, x->job);
		return MHD_NO;
	}
	x->pending = true;
	return MHD_YES;
}

/* The window ended: render against its base, release it. Heavy worker. */
static enum MHD_Result render_window(struct call *x)
{
	struct job *j = x->job;
	const struct pp_http_source *src = &x->s->src;
	struct pp_buf out = { .max = MAX_BODY_BYTES };
	char disp[96];
	const char *hdrs[] = { "Content-Disposition", disp, NULL };
	int r = src->render(src->ctx, j->kind, j->base, 0, &out);

	if (src->release)
		src->release(src->ctx, j->kind, j->base);
	j->base = NULL;
	window_unreserve(x->s, j);
	if (r < 0) {
		pp_buf_free(&out);
		return send_errno(x, r);
	}
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s\"", j->filename);
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
	  "sampled allocations, seen as for heap, cumulative since podprof attached to the "
	  "process; shows alloc_space by default" },
	{ "block", PP_PROFILE_BLOCK, "time threads spent off-CPU in blocking syscalls" },
	{ "cmdline", -1, "the target's command line, arguments separated by NUL bytes" },
	{ "goroutine", PP_PROFILE_GOROUTINE,
	  "stack dump of every thread of the target (debug=2: full dump with thread names and "
	  "states)" },
	{ "heap", PP_PROFILE_HEAP,
	  "sampled live allocations, seen by a sampling agent podprof loads into the target's "
	  "process (heap.mode auto, the default), or by eBPF uprobes on its allocator where "
	  "the agent cannot be loaded (the log and the profile's comments say why)" },
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
	r |= pp_buf_puts(&b, "# HELP podprof_http_refused_total Connections and requests "
			     "refused by the server's limits, by reason.\n"
			     "# TYPE podprof_http_refused_total counter\n");
	for (int i = 0; i < REF__COUNT; i++)
		r |= pp_buf_printf(&b, "podprof_http_refused_total{reason=\"%s\"} %lu\n",
				   refusal_names[i], atomic_load(&s->refused[i]));
	r |= pp_buf_printf(&b,
			   "# HELP podprof_http_windows_waiting Profile windows waiting for their "
			   "end (they hold no worker).\n"
			   "# TYPE podprof_http_windows_waiting gauge\n"
			   "podprof_http_windows_waiting %lu\n",
			   atomic_load(&s->windows_waiting));
	pthread_mutex_lock(&s->win_lock);
	unsigned wopen = s->windows_open;
	pthread_mutex_unlock(&s->win_lock);
	r |= pp_buf_printf(&b,
			   "# HELP podprof_http_windows_open Profile windows begun and not yet "
			   "answered (at most http.max_windows).\n"
			   "# TYPE podprof_http_windows_open gauge\n"
			   "podprof_http_windows_open %u\n",
			   wopen);
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
			   atomic_load(&s->refused[REF_MAX_CONNECTIONS]),
			   atomic_load(&s->open_connections), atomic_load(&s->in_flight),
			   atomic_load(&s->windows_aborted));
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

/* Re-read the machine's addresses and hostname. Under host_lock. */
static void own_refresh(struct pp_http_server *s, uint64_t now)
{
	struct ifaddrs *ifa = NULL;
	char hn[256];

	s->own_at = now;
	if (getifaddrs(&ifa) == 0) {
		size_t cap = 0, n = 0;
		unsigned char(*v)[16];

		for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
			cap++;
		cap = PP_MIN(PP_MAX(cap, (size_t)1), (size_t)OWN_ADDRS_MAX);
		v = calloc(cap, sizeof(*v));
		for (struct ifaddrs *i = ifa; v && i && n < cap; i = i->ifa_next) {
			const struct sockaddr *sa = i->ifa_addr;

			if (sa && sa->sa_family == AF_INET) {
				v[n][10] = v[n][11] = 0xff;
				memcpy(&v[n++][12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
			} else if (sa && sa->sa_family == AF_INET6) {
				memcpy(v[n++], &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
			}
		}
		freeifaddrs(ifa);
		if (v) {
			free(s->own);
			s->own = v;
			s->n_own = n;
		}
	}
	if (gethostname(hn, sizeof(hn)) == 0) {
		hn[sizeof(hn) - 1] = '\0';
		if (pp_http__host_name(hn, s->hostname, sizeof(s->hostname)) < 0)
			s->hostname[0] = '\0';
	}
}

/*
 * Whether a host (as pp_http__host_name gives it) names this server: a
 * loopback name or address, the listen address, an entry of
 * http.allowed_hosts, an address of one of the machine's interfaces (a pod
 * IP as a scraper sends it) or its hostname. A miss re-reads the
 * interfaces and the hostname (addresses change), at most once a second.
 */
static bool host_known(struct pp_http_server *s, const char *h)
{
	unsigned char a[16];
	bool is_addr = pp_http__host_addr(h, a), ok = false;

	if (pp_http__host_is_loopback(h) ||
	    (s->listen_host[0] && pp_http__host_listed(s->listen_host, h)) ||
	    (s->allowed_hosts && pp_http__host_listed(s->allowed_hosts, h)))
		return true;
	pthread_mutex_lock(&s->host_lock);
	for (int pass = 0; pass < 2 && !ok; pass++) {
		if (pass) {
			uint64_t now = pp_now_mono_ns();

			if (now - s->own_at < OWN_REFRESH_NS)
				break;
			own_refresh(s, now);
		}
		if (is_addr) {
			for (size_t i = 0; i < s->n_own && !ok; i++)
				ok = memcmp(s->own[i], a, 16) == 0;
		} else {
			ok = s->hostname[0] && strcmp(s->hostname, h) == 0;
		}
	}
	pthread_mutex_unlock(&s->host_lock);
	return ok;
}

/* A request without Host (HTTP/1.0) is allowed: rebinding needs a name. */
static bool host_allowed(struct pp_http_server *s, struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	char h[256];

	if (!v)
		return true;
	return pp_http__host_name(v, h, sizeof(h)) == 0 && host_known(s, h);
}

/* An Origin header ("scheme://host[:port]") whose host names this server. */
static bool origin_allowed(struct pp_http_server *s, const char *origin)
{
	const char *p = strstr(origin, "://");
	char hp[256], h[256];
	size_t n;

	if (!p)
		return false; /* "null": a sandboxed or file: page */
	p += 3;
	n = strcspn(p, "/?#");
	if (!n || n >= sizeof(hp))
		return false;
	memcpy(hp, p, n);
	hp[n] = '\0';
	return pp_http__host_name(hp, h, sizeof(h)) == 0 && host_known(s, h);
}

/*
 * The routes that cost CPU or reveal data. The index (reached by a link
 * from another site, it shows only what the profiles are), its redirect,
 * the UI's static files, /healthz and the 404s stay open to any site.
 */
static bool route_reveals(enum route r)
{
	return (r >= R_KIND_FIRST && r <= R_KIND_LAST) || r == R_CMDLINE || r == R_SYMBOL ||
	       r == R_METRICS;
}

/*
 * A browser request made by a page of another site. Sec-Fetch-Site is set
 * by the browser, not by the page: "cross-site" and "same-site" (another
 * port or subdomain: with kubectl port-forward every local web app shares
 * "localhost" with podprof) are refused; "same-origin" (podprof's own UI)
 * and "none" (a typed URL, a bookmark) are not; non-browser clients send
 * none. A POST from an Origin that does not name this server is refused
 * too (browsers without Sec-Fetch-*).
 */
static bool cross_site(struct pp_http_server *s, struct MHD_Connection *c, const char *method)
{
	const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");
	const char *origin;

	if (site && (strcasecmp(site, "cross-site") == 0 || strcasecmp(site, "same-site") == 0))
		return true;
	if (strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0)
		return false;
	origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	return origin && !origin_allowed(s, origin);
}

/* What the request's headers say about its body, for the smuggling checks. */
struct framing {
	unsigned n_te;
	const char *cl;
	bool bad; /* conflicting or malformed */
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	struct framing *f = cls;

	(void)kind;
	if (!key)
		return MHD_YES;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (!value || !*value || value[strspn(value, "0123456789")] ||
		    (f->cl && strcmp(f->cl, value) != 0))
			f->bad = true;
		f->cl = value;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->n_te++;
		if (!value || strcasecmp(value, "chunked") != 0)
			f->bad = true;
	}
	return MHD_YES;
}

/*
 * Request smuggling shapes, refused whatever libmicrohttpd makes of them:
 * Content-Length with Transfer-Encoding, two different Content-Length
 * values, a length that is not a plain number, a transfer coding other
 * than one "chunked".
 */
static bool framing_ambiguous(struct MHD_Connection *c)
{
	struct framing f = { 0 };

	MHD_get_connection_values(c, MHD_HEADER_KIND, framing_header, &f);
	return f.bad || f.n_te > 1 || (f.n_te && f.cl);
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

/* Answered in the polling thread: they read nothing a worker could hold. */
static bool inline_route(enum route r)
{
	return r == R_REDIRECT || r == R_TRACE || r == R_UNKNOWN_PROFILE || r == R_HEALTHZ ||
	       r == R_UI || r == R_OTHER;
}

static bool heavy_route(enum route r)
{
	return r >= R_KIND_FIRST && r <= R_KIND_LAST;
}

/* A worker runs one job; the connection stays suspended until job_finish. */
static void run_job(struct job *j)
{
	struct call x = { .s = j->s,
			  .c = j->c,
			  .route = j->route,
			  .query = "",
			  .url = j->url ? j->url : "",
			  .job = j };
	enum MHD_Result ret;

	if (j->rq->uri) {
		const char *q = strchr(j->rq->uri, '?');
		if (q)
			x.query = q + 1;
	}
	if (j->render)
		ret = render_window(&x);
	else
		ret = dispatch(&x, j->rq, j->post ? MHD_HTTP_METHOD_POST : MHD_HTTP_METHOD_GET);
	if (x.pending)
		return; /* the timer thread owns it now */
	if (ret != MHD_YES && j->resp) {
		MHD_destroy_response(j->resp);
		j->resp = NULL;
	}
	job_finish(j);
}

static void *pool_main(void *arg)
{
	struct pool *p = arg;

	for (;;) {
		struct job *j;

		pthread_mutex_lock(&p->lock);
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stop) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		j = p->head;
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		run_job(j);
	}
}

/* Suspend the connection and queue its request. MHD_NO to close it. */
static enum MHD_Result defer(struct call *x, struct req *rq, const char *method)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return MHD_NO;
	j->s = x->s;
	j->c = x->c;
	j->rq = rq;
	j->route = x->route;
	j->fd = -1;
	j->post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
	j->url = strdup(x->url);
	if (!j->url) {
		free(j);
		return MHD_NO;
	}
	rq->job = j;
	MHD_suspend_connection(x->c);
	pool_submit(heavy_route(x->route)  ? &x->s->heavy
		    : x->route == R_SYMBOL ? &x->s->symbol
					   : &x->s->light,
		    j);
	return MHD_YES;
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
	if (rq->job) {
		/* Resumed: the worker's response, or close. */
		struct job *j = rq->job;
		enum MHD_Result ret;

		if (!j->resp)
			return MHD_NO;
		ret = MHD_queue_response(c, j->code, j->resp);
		MHD_destroy_response(j->resp);
		j->resp = NULL;
		if (ret == MHD_YES)
			count_request(s, j->route, j->code);
		return ret;
	}
	if (rq->uri) {
		const char *q = strchr(rq->uri, '?');
		if (q)
			x.query = q + 1;
	}

	if (!rq->started) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		struct conn *k = ci ? ci->socket_context : NULL;
		const char *cl;
		uint64_t len;

		rq->started = true;
		rq->in_flight = true;
		atomic_fetch_add(&s->in_flight, 1);
		rq->body.max = s->max_request_bytes;
		if (k)
			atomic_store(&k->header_deadline, 0);
		if (k && k->over_limit) {
			static const char *const close_hdr[] = { "Connection", "close",
								 "Retry-After", "1", NULL };
			return send_error_hdrs(&x, 429,
					       "too many connections from this address "
					       "(http.max_connections_per_client)",
					       close_hdr);
		}
		if (framing_ambiguous(c)) {
			static const char *const close_hdr[] = { "Connection", "close", NULL };

			refuse(s, REF_FRAMING);
			return send_error_hdrs(&x, 400,
					       "ambiguous request framing: Content-Length with "
					       "Transfer-Encoding, conflicting Content-Length "
					       "values or an unsupported Transfer-Encoding",
					       close_hdr);
		}
		/* /healthz answers kubelet probes, whatever Host they were given. */
		if (x.route != R_HEALTHZ && !host_allowed(s, c)) {
			static const char *const close_hdr[] = { "Connection", "close", NULL };

			refuse(s, REF_HOST);
			return send_error_hdrs(&x, 421,
					       "Misdirected Request: the Host header names neither "
					       "this machine nor a loopback address; add the name "
					       "to http.allowed_hosts to use it",
					       close_hdr);
		}
		if (route_reveals(x.route) && cross_site(s, c, method)) {
			static const char *const close_hdr[] = { "Connection", "close", NULL };

			refuse(s, REF_CROSS_SITE);
			return send_error_hdrs(&x, 403,
					       "Forbidden: cross-site request (open the URL "
					       "directly "
					       "or from podprof's index page)",
					       close_hdr);
		}
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
	if (inline_route(x.route))
		return dispatch(&x, rq, method);
	return defer(&x, rq, method);
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
	if (rq->job) {
		if (rq->job->resp)
			MHD_destroy_response(rq->job->resp);
		free(rq->job->url);
		free(rq->job);
	}
	if (rq->started && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
		/* Keep-alive: the next request's headers are due after the idle time. */
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		struct conn *k = ci ? ci->socket_context : NULL;

		if (k)
			atomic_store(&k->header_deadline,
				     pp_now_mono_ns() + (uint64_t)(s->timeout_seconds +
								   s->header_timeout_seconds) *
								1000000000ull);
	}
	pp_buf_free(&rq->body);
	free(rq->uri);
	free(rq);
	*con_cls = NULL;
}

/* The address as a key: IPv4 (also v4-mapped IPv6) in 4 bytes, IPv6 in 16. */
static bool client_key(const struct sockaddr *sa, unsigned char key[16], unsigned char *len)
{
	if (sa && sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		*len = 4;
		return true;
	}
	if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(key, &a->s6_addr[12], 4);
			*len = 4;
		} else {
			memcpy(key, a->s6_addr, 16);
			*len = 16;
		}
		return true;
	}
	return false;
}

static unsigned client_hash(const unsigned char *key, unsigned char len)
{
	uint32_t h = 2166136261u;

	for (unsigned i = 0; i < len; i++)
		h = (h ^ key[i]) * 16777619u;
	return h % CLIENT_BUCKETS;
}

/* The entry of an address, created when create. Polling thread only. */
static struct client *client_find(struct pp_http_server *s, const struct sockaddr *sa, bool create)
{
	unsigned char key[16], len;
	struct client *cl;
	unsigned h;

	if (!client_key(sa, key, &len))
		return NULL;
	h = client_hash(key, len);
	for (cl = s->clients[h]; cl; cl = cl->next)
		if (cl->len == len && memcmp(cl->addr, key, len) == 0)
			return cl;
	if (!create)
		return NULL;
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return NULL;
	memcpy(cl->addr, key, len);
	cl->len = len;
	cl->next = s->clients[h];
	s->clients[h] = cl;
	return cl;
}

static void client_put(struct pp_http_server *s, struct client *cl)
{
	struct client **pp;

	if (!cl || --cl->count)
		return;
	pp = &s->clients[client_hash(cl->addr, cl->len)];
	while (*pp && *pp != cl)
		pp = &(*pp)->next;
	if (*pp)
		*pp = cl->next;
	free(cl);
}

/* Open connections of an address, less those being closed. Polling thread. */
static unsigned client_open(const struct client *cl)
{
	return cl ? cl->count - cl->evicting : 0;
}

/*
 * Close the connection whose headers are due first (waiting for a first
 * request's headers, or idle between keep-alive requests), among those of
 * cl (NULL: all). false if every one is busy with a request. Polling
 * thread: the per-address counts are its own.
 */
static bool evict_one(struct pp_http_server *s, struct client *cl)
{
	struct conn *victim = NULL;
	uint64_t best = UINT64_MAX;

	pthread_mutex_lock(&s->conn_lock);
	for (struct conn *k = s->conns; k; k = k->next) {
		uint64_t dl = atomic_load(&k->header_deadline);

		if (dl && dl < best && k->fd >= 0 && (!cl || k->cl == cl)) {
			best = dl;
			victim = k;
		}
	}
	if (victim) {
		/* As in scan_headers: MHD closes the fd after unlinking it here. */
		atomic_store(&victim->header_deadline, 0);
		(void)shutdown(victim->fd, SHUT_RDWR);
		/* Its address may take a new one now, before MHD sees the close. */
		if (victim->cl && !victim->evicted) {
			victim->evicted = true;
			victim->cl->evicting++;
		}
	}
	pthread_mutex_unlock(&s->conn_lock);
	return victim != NULL;
}

/*
 * The accept policy and the connection notifications all run in the
 * polling thread, one connection after the other, so open_connections and
 * the per-address counts are exact when the policy reads them.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct pp_http_server *s = cls;
	struct client *cl;

	unsigned open = atomic_load(&s->open_connections);

	if (open >= s->max_connections) {
		/* Make room by closing the connection that has waited longest for its headers. */
		if (open >= s->max_connections + EVICT_HEADROOM || !evict_one(s, NULL)) {
			refuse(s, REF_MAX_CONNECTIONS);
			return MHD_NO;
		}
		refuse(s, REF_EVICTED);
	}
	/*
	 * An address at its limit (every client of a kubectl port-forward is
	 * 127.0.0.1): its oldest idle connection makes room for the newcomer;
	 * only when all of them are busy with requests is the newcomer
	 * answered 429, or closed here beyond twice the limit.
	 */
	cl = client_find(s, addr, false);
	if (client_open(cl) >= s->max_per_client) {
		if (evict_one(s, cl))
			refuse(s, REF_PER_CLIENT_EVICTED);
		else if (client_open(cl) >= 2 * s->max_per_client) {
			refuse(s, REF_PER_CLIENT_ACCEPT);
			return MHD_NO;
		}
	}
	return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct pp_http_server *s = cls;
	struct conn *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fi =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ai =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		unsigned secs = s->header_timeout_seconds;

		atomic_fetch_add(&s->open_connections, 1);
		k = calloc(1, sizeof(*k));
		if (!k)
			return; /* no limits for this one; harmless */
		k->fd = fi ? fi->connect_fd : -1;
		k->cl = client_find(s, ai ? ai->client_addr : NULL, true);
		if (k->cl)
			k->cl->count++;
		if (k->cl && client_open(k->cl) > s->max_per_client) {
			k->over_limit = true;
			refuse(s, REF_PER_CLIENT);
			secs = PP_MIN(secs, OVER_LIMIT_HEADER_SECONDS);
		}
		atomic_store(&k->header_deadline,
			     pp_now_mono_ns() + (uint64_t)secs * 1000000000ull);
		pthread_mutex_lock(&s->conn_lock);
		k->next = s->conns;
		if (s->conns)
			s->conns->prev = k;
		s->conns = k;
		pthread_mutex_unlock(&s->conn_lock);
		*socket_context = k;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		atomic_fetch_sub(&s->open_connections, 1);
		if (!k)
			return;
		pthread_mutex_lock(&s->conn_lock);
		if (k->prev)
			k->prev->next = k->next;
		else
			s->conns = k->next;
		if (k->next)
			k->next->prev = k->prev;
		pthread_mutex_unlock(&s->conn_lock);
		if (k->evicted)
			k->cl->evicting--;
		client_put(s, k->cl);
		free(k);
		*socket_context = NULL;
	}
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
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	if (s->epfd >= 0)
		close(s->epfd);
	for (size_t i = 0; i < CLIENT_BUCKETS; i++)
		while (s->clients[i]) {
			struct client *cl = s->clients[i];
			s->clients[i] = cl->next;
			free(cl);
		}
	pthread_mutex_destroy(&s->win_lock);
	pthread_mutex_destroy(&s->conn_lock);
	pthread_mutex_destroy(&s->light.lock);
	pthread_cond_destroy(&s->light.cond);
	pthread_mutex_destroy(&s->symbol.lock);
	pthread_cond_destroy(&s->symbol.cond);
	pthread_mutex_destroy(&s->heavy.lock);
	pthread_cond_destroy(&s->heavy.cond);
	if (s->token) {
		explicit_bzero(s->token, s->token_len);
		free(s->token);
	}
	pthread_mutex_destroy(&s->host_lock);
	free(s->own);
	free(s->allowed_hosts);
	free(s->title);
	free(s);
}

static int pool_start(struct pool *p, unsigned n)
{
	for (p->n = 0; p->n < n; p->n++) {
		int r = pthread_create(&p->threads[p->n], NULL, pool_main, p);
		if (r)
			return -r;
	}
	return 0;
}

/* Join the workers (each finishes its job), then give up what is queued. */
static void pool_stop(struct pool *p)
{
	struct job *j;

	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	p->n = 0;
	pthread_mutex_lock(&p->lock);
	j = p->head;
	p->head = p->tail = NULL;
	pthread_mutex_unlock(&p->lock);
	while (j) {
		struct job *nx = j->next;
		job_abort(j);
		j = nx;
	}
}

/*
 * Stop the threads that hold suspended connections and resume every one
 * (closing it), so MHD_stop_daemon finds none suspended. After this no job
 * is referenced outside its request.
 */
static void stop_workers(struct pp_http_server *s)
{
	uint64_t one = 1;

	pthread_mutex_lock(&s->win_lock);
	atomic_store(&s->stopping, true);
	pthread_mutex_unlock(&s->win_lock);
	if (s->stop_fd >= 0 && write(s->stop_fd, &one, sizeof(one)) < 0)
		pp_dbg("http: eventfd write: %s", strerror(errno));
	pool_stop(&s->light);
	pool_stop(&s->symbol);
	pool_stop(&s->heavy);
	if (s->timer_started)
		pthread_join(s->timer, NULL);
	s->timer_started = false;
	pthread_mutex_lock(&s->win_lock);
	while (s->windows) {
		struct job *j = s->windows;
		window_unlink(s, j);
		pthread_mutex_unlock(&s->win_lock);
		pp_dbg("http: %s window of %us abandoned: server stopping",
		       pp_profile_kind__name(j->kind), j->secs);
		job_abort(j);
		pthread_mutex_lock(&s->win_lock);
	}
	pthread_mutex_unlock(&s->win_lock);
}

/* max_connections within the process's fd limit (every connection is an fd). */
static unsigned fd_capped(unsigned want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    want > rl.rlim_cur / 2) {
		unsigned cap = (unsigned)PP_MAX(rl.rlim_cur / 2, 16);
		pp_dbg("http: max_connections %u lowered to %u (RLIMIT_NOFILE %llu)", want, cap,
		       (unsigned long long)rl.rlim_cur);
		return cap;
	}
	return want;
}

struct pp_http_server *pp_http_server__start(const struct pp_http_opts *opts,
					     const struct pp_http_source *src)
{
	struct pp_http_server *s;
	char host[256];
	unsigned port, workers;
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
	s->stop_fd = s->wake_fd = s->epfd = -1;
	pthread_mutex_init(&s->win_lock, NULL);
	pthread_mutex_init(&s->conn_lock, NULL);
	pthread_mutex_init(&s->host_lock, NULL);
	pthread_mutex_init(&s->light.lock, NULL);
	pthread_cond_init(&s->light.cond, NULL);
	pthread_mutex_init(&s->symbol.lock, NULL);
	pthread_cond_init(&s->symbol.cond, NULL);
	pthread_mutex_init(&s->heavy.lock, NULL);
	pthread_cond_init(&s->heavy.cond, NULL);
	s->light.s = s->symbol.s = s->heavy.s = s;
	s->src = *src;
	s->max_connections =
		fd_capped(opts->max_connections ? opts->max_connections : DEFAULT_MAX_CONNECTIONS);
	s->max_per_client = opts->max_connections_per_client ? opts->max_connections_per_client
							     : DEFAULT_MAX_PER_CLIENT;
	s->header_timeout_seconds = opts->header_timeout_seconds ? opts->header_timeout_seconds
								 : DEFAULT_HEADER_TIMEOUT_SECONDS;
	s->max_request_bytes = opts->max_request_bytes ? opts->max_request_bytes
						       : DEFAULT_MAX_REQUEST_BYTES;
	s->max_window_seconds = opts->max_window_seconds ? opts->max_window_seconds
							 : DEFAULT_MAX_WINDOW_SECONDS;
	s->max_windows = opts->max_windows ? opts->max_windows : DEFAULT_MAX_WINDOWS;
	s->max_windows_per_client = opts->max_windows_per_client ? opts->max_windows_per_client
								 : DEFAULT_MAX_WINDOWS_PER_CLIENT;
	s->timeout_seconds = opts->timeout_seconds ? opts->timeout_seconds
						   : DEFAULT_TIMEOUT_SECONDS;
	if (opts->token && *opts->token) {
		s->token = strdup(opts->token);
		s->token_len = strlen(opts->token);
	}
	if (opts->index_title)
		s->title = strdup(opts->index_title);
	if (opts->allowed_hosts && *opts->allowed_hosts)
		s->allowed_hosts = strdup(opts->allowed_hosts);
	if (*host && pp_http__host_name(host, s->listen_host, sizeof(s->listen_host)) < 0)
		s->listen_host[0] = '\0';
	own_refresh(s, pp_now_mono_ns());
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if ((opts->token && *opts->token && !s->token) || (opts->index_title && !s->title) ||
	    (opts->allowed_hosts && *opts->allowed_hosts && !s->allowed_hosts) || s->stop_fd < 0 ||
	    s->wake_fd < 0 || s->epfd < 0) {
		r = s->stop_fd < 0 || s->wake_fd < 0 || s->epfd < 0 ? errno : ENOMEM;
		server_free(s);
		errno = r;
		return NULL;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->stop_fd, &ev) < 0 ||
		    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wake_fd, &ev) < 0) {
			r = errno;
			server_free(s);
			errno = r;
			return NULL;
		}
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
	 * limit leaves room for the evicted connections still being closed, so
	 * it never refuses (uncounted) first.
	 */
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
					MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
				0, on_accept, s, on_request, s, MHD_OPTION_LISTEN_SOCKET,
				(MHD_socket)mhd_fd, MHD_OPTION_CONNECTION_LIMIT,
				(unsigned int)(s->max_connections + EVICT_HEADROOM + 1),
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
	workers = opts->workers ? PP_MIN(opts->workers, MAX_WORKERS) : DEFAULT_WORKERS;
	r = pool_start(&s->light, LIGHT_WORKERS);
	if (!r)
		r = pool_start(&s->symbol, SYMBOL_WORKERS);
	if (!r)
		r = pool_start(&s->heavy, workers);
	if (!r) {
		r = -pthread_create(&s->timer, NULL, timer_main, s);
		s->timer_started = r == 0;
	}
	if (r) {
		pp_dbg("http: cannot start threads: %s", strerror(-r));
		stop_workers(s);
		MHD_stop_daemon(s->d);
		server_free(s);
		errno = -r;
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
	if (!s)
		return;
	stop_workers(s);
	MHD_stop_daemon(s->d);
	server_free(s);
}
