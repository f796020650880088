/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The /debug/pprof HTTP surface on libmicrohttpd, exactly as
 * PPROF-COMPAT.md §1 describes it: routing, query parsing (first value
 * wins), delta mode and its error order, the index page, cmdline, symbol,
 * /healthz and /metrics, the error format (text/plain + X-Go-Pprof: 1).
 *
 * Profiles come from a pp_http_source; this module owns only HTTP. Long
 * requests (CPU windows, deltas) never block short ones; connections,
 * request sizes and idle time are bounded; a client that goes away ends
 * its wait.
 */
#ifndef PODPROF_HTTP_H
#define PODPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/profkind.h"
#include "util/util.h"

/* A collector's state, for the index page. */
struct pp_http_collector {
	const char *name; /* "cpu" */
	const char *profiles; /* "profile" */
	const char *state; /* "ok", "disabled" (by the config), "unavailable" */
	char reason[512]; /* why it is unavailable and the fix; "" otherwise */
};

/*
 * What the server serves. Every callback is called from HTTP worker
 * threads, concurrently, and must be thread-safe. Return 0 or -errno; on
 * error the server answers 500 with the errno text (503 for -EAGAIN).
 */
struct pp_http_source {
	void *ctx;
	/*
	 * Start a window: CPU (/profile) or delta (?seconds=N) for the other
	 * kinds. *ret_base is handed back to render and release.
	 */
	int (*begin)(void *ctx, enum pp_profile_kind kind, void **ret_base);
	/*
	 * Render kind into out. base is NULL for an absolute profile; else the
	 * result is the difference since begin. debug: 0 = gzipped
	 * profile.proto, 1 = legacy text, 2 = long text (goroutine).
	 */
	int (*render)(void *ctx, enum pp_profile_kind kind, void *base, int debug,
		      struct pp_buf *out);
	void (*release)(void *ctx, enum pp_profile_kind kind, void *base);
	/* Count for the index page; -1 = unknown. */
	long (*count)(void *ctx, enum pp_profile_kind kind);
	/* The target's argv joined by NUL, no trailing NUL. */
	int (*cmdline)(void *ctx, struct pp_buf *out);
	/* Name of the function at addr, appended to out; -ENOENT if none. */
	int (*symbol)(void *ctx, uint64_t addr, struct pp_buf *out);
	/* Prometheus text to append to /metrics (the server adds its own lines). */
	int (*metrics)(void *ctx, struct pp_buf *out);
	/* true = healthy; msg gets a short status text either way. */
	bool (*healthy)(void *ctx, struct pp_buf *msg);
	/*
	 * NULL, or false when kind cannot be served because the kernel refused
	 * what its collector needs; msg gets why and the fix (one line). The
	 * server then answers 500 "Could not enable <kind> profiling: <msg>"
	 * (Go's answer when it cannot start the CPU profiler) instead of an
	 * empty profile, for every client and every debug= value.
	 */
	bool (*available)(void *ctx, enum pp_profile_kind kind, struct pp_buf *msg);
	/* NULL, or fills up to max collector states for the index page; returns how many. */
	size_t (*collectors)(void *ctx, struct pp_http_collector *ret, size_t max);
	/*
	 * NULL, or told that connections are being refused: what (the limit
	 * and what the client gets) and how many so far for that reason. At
	 * most once per 10 s per reason, from the server's I/O or timer thread:
	 * it must not block. For the caller's log (lib/ logs only at debug).
	 */
	void (*refused)(void *ctx, const char *what, unsigned long total);
};

/*
 * A zero limit means its default: 1024 connections, 64 per client address,
 * 65536 bytes, 30 s idle, 10 s for the headers, 300 s windows, 4 workers,
 * 256 windows, 32 per client address.
 */
struct pp_http_opts {
	/* "host:port", ":port" (all addresses), "[::1]:port"; NULL = 127.0.0.1:6060 */
	const char *listen;
	/*
	 * At the limit a new connection closes the one waiting longest for its
	 * headers, else it is closed at accept (counted in /metrics). Capped at
	 * RLIMIT_NOFILE / 2.
	 */
	unsigned max_connections;
	/*
	 * connections from one client address: a new one closes the oldest of
	 * them waiting for headers; when all are busy, it is answered 429
	 */
	unsigned max_connections_per_client;
	unsigned max_request_bytes; /* request body cap (413 above); sizes the header memory too */
	unsigned timeout_seconds; /* idle connection timeout */
	/* a request's headers must be complete this long after it began, else it is closed */
	unsigned header_timeout_seconds;
	unsigned workers; /* threads rendering profiles (windows wait without one) */
	unsigned max_window_seconds; /* /profile and delta windows above this -> 400 */
	/*
	 * windows begun and not yet answered (default 256), of them from one
	 * client address (default 32): beyond, 503 with the reason. begin()
	 * returning -EAGAIN (the source's memory cap for baselines) is a 503 too.
	 */
	unsigned max_windows, max_windows_per_client;
	/* non-NULL: require "Authorization: Bearer <token>" except on /healthz */
	const char *token;
	/*
	 * Host header values accepted besides the built-in ones (loopback
	 * names and addresses, the listen address, the machine's own
	 * addresses and hostname): comma-separated names or addresses,
	 * "*.example.com" for the names below example.com, "*" for any.
	 * Others are answered 421 (DNS rebinding). NULL = none.
	 */
	const char *allowed_hosts;
	const char *index_title; /* shown on the index page, e.g. the target name */
};

struct pp_http_server;

/*
 * Starts serving at once: one event loop for I/O, a bounded pool for the
 * work (see http.c). src is
 * copied; src->ctx must outlive the server. NULL with errno set
 * (EADDRINUSE, EINVAL for a bad address, EIO if libmicrohttpd failed).
 */
struct pp_http_server *pp_http_server__start(const struct pp_http_opts *opts,
					     const struct pp_http_source *src);
/* The port actually bound (useful with port 0). */
unsigned pp_http_server__port(const struct pp_http_server *s);
/*
 * Stops accepting, ends waits (their windows are released, not rendered),
 * joins threads. No callback runs after it returns. NULL ok.
 */
void pp_http_server__stop(struct pp_http_server *s);

/* Pure helpers, exposed for unit tests and fuzzing. */

/*
 * Split "host:port" as the flag accepts it. host is "" for ":port"; IPv6
 * literals need brackets. 0, -EINVAL, -ENAMETOOLONG (host_len too small).
 */
int pp_http__parse_listen(const char *listen, char *host, size_t host_len, unsigned *port);
/*
 * Look up the first value of `name` in a raw query string ("a=1&b=2"),
 * percent-decoded into buf. 1 found, 0 absent, -E2BIG too long.
 */
int pp_http__query_get(const char *query, const char *name, char *buf, size_t n);
/*
 * Parse a /symbol request body or query: words per Go's ParseUint(w, 0, 64)
 * ('+' separated; 0x/0o/0b/leading-0 octal/decimal, '_' between digits),
 * zero, unparsable and overflowing words skipped, order and duplicates
 * kept, at most the first 100000 words looked at. *ret (caller frees, may
 * be NULL when *ret_n is 0). 0 or -ENOMEM.
 */
int pp_http__parse_symbol_request(const char *body, size_t len, uint64_t **ret, size_t *ret_n);

/*
 * The host of a Host header (or a listen or allow-list entry): port
 * dropped, lowercased, one trailing dot dropped, IPv6 brackets and zone
 * dropped ("[::1]:6060" -> "::1", "Example.COM.:80" -> "example.com").
 * 0, -EINVAL (empty, malformed, bytes a host cannot hold), -ENAMETOOLONG.
 */
int pp_http__host_name(const char *hdr, char *buf, size_t n);
/* An IPv4 (as IPv4-mapped IPv6) or IPv6 literal into ret; false if host is a name. */
bool pp_http__host_addr(const char *host, unsigned char ret[16]);
/* localhost, *.localhost, 127.0.0.0/8, ::1 (host as pp_http__host_name gives it). */
bool pp_http__host_is_loopback(const char *host);
/*
 * Whether host (as pp_http__host_name gives it) is in a comma-separated
 * allow-list: names compared without case, addresses by value,
 * "*.example.com" matches the names below example.com, "*" anything.
 */
bool pp_http__host_listed(const char *list, const char *host);

#endif
