// SPDX-License-Identifier: Apache-2.0
/*
 * The isolated symbolizer's framing (the helper's answers are decoded as
 * coming from a hostile process) and one real round trip: this binary is
 * also the helper (main hands PP_SYMISO_HELPER_ARG to it, as podprof's
 * does), resolving a function of its own through fds passed by the parent.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "symbolize/isolate.h"
#include "symbolize/symbolize.h"

static void make_result(struct pp_sym_result *r, size_t n, size_t name_len)
{
	memset(r, 0, sizeof(*r));
	r->frames = calloc(n, sizeof(*r->frames));
	assert_non_null(r->frames);
	r->n = n;
	r->has_function = true;
	r->has_inline = n > 1;
	for (size_t i = 0; i < n; i++) {
		char *name = malloc(name_len + 16);
		assert_non_null(name);
		memset(name, 'a' + (int)(i % 26), name_len);
		snprintf(name + name_len, 16, "%zu", i);
		r->frames[i].function = name;
		r->frames[i].system_name = strdup(name);
		r->frames[i].file = i % 2 ? strdup("/src/x.c") : NULL;
		r->frames[i].line = (uint32_t)i + 1;
	}
}

static void t_roundtrip(void **state)
{
	struct pp_sym_result r, got;
	struct pp_symbolizer_stats st = { .files_loaded = 3, .names_bounded = 7 }, gst;
	uint8_t *buf = malloc(PP_SYMISO_MAX_MSG);
	size_t len;
	int rc;

	make_result(&r, 3, 10);
	assert_int_equal(pp_symiso__encode_result(0, &r, &st, buf, PP_SYMISO_MAX_MSG, &len), 0);
	assert_int_equal(pp_symiso__decode_result(buf, len, &rc, &got, &gst), 0);
	assert_int_equal(rc, 0);
	assert_int_equal(got.n, 3);
	assert_true(got.has_function && got.has_inline && !got.has_line);
	for (size_t i = 0; i < 3; i++) {
		assert_string_equal(got.frames[i].function, r.frames[i].function);
		assert_string_equal(got.frames[i].system_name, r.frames[i].system_name);
		if (r.frames[i].file)
			assert_string_equal(got.frames[i].file, r.frames[i].file);
		else
			assert_null(got.frames[i].file);
		assert_int_equal(got.frames[i].line, i + 1);
	}
	assert_int_equal(gst.files_loaded, 3);
	assert_int_equal(gst.names_bounded, 7);
	pp_sym_result__free(&got);

	/* an error carries no frames */
	assert_int_equal(pp_symiso__encode_result(-ENOENT, NULL, &st, buf, PP_SYMISO_MAX_MSG, &len),
			 0);
	assert_int_equal(pp_symiso__decode_result(buf, len, &rc, &got, NULL), 0);
	assert_int_equal(rc, -ENOENT);
	assert_int_equal(got.n, 0);
	pp_sym_result__free(&r);
	free(buf);
}

/* Too many frames, too long names: cut, the outermost frame kept. */
static void t_bounds(void **state)
{
	struct pp_sym_result r, got;
	uint8_t *buf = malloc(PP_SYMISO_MAX_MSG);
	size_t len;
	int rc;

	make_result(&r, 200, 8);
	assert_int_equal(pp_symiso__encode_result(0, &r, NULL, buf, PP_SYMISO_MAX_MSG, &len), 0);
	assert_int_equal(pp_symiso__decode_result(buf, len, &rc, &got, NULL), 0);
	assert_int_equal(got.n, PP_SYMISO_MAX_FRAMES);
	assert_string_equal(got.frames[got.n - 1].function, r.frames[r.n - 1].function);
	pp_sym_result__free(&got);
	pp_sym_result__free(&r);

	make_result(&r, 40, 100000);
	assert_int_equal(pp_symiso__encode_result(0, &r, NULL, buf, PP_SYMISO_MAX_MSG, &len), 0);
	assert_true(len <= PP_SYMISO_MAX_MSG);
	assert_int_equal(pp_symiso__decode_result(buf, len, &rc, &got, NULL), 0);
	assert_true(got.n >= 1 && got.n < 40);
	assert_int_equal(strlen(got.frames[0].function), PP_SYMISO_MAX_STR);
	assert_int_equal(memcmp(got.frames[got.n - 1].function, r.frames[39].function,
				PP_SYMISO_MAX_STR),
			 0);
	pp_sym_result__free(&got);
	pp_sym_result__free(&r);

	/* a buffer too small for even one frame */
	make_result(&r, 1, 10);
	assert_int_equal(pp_symiso__encode_result(0, &r, NULL, buf, 40, &len), -EMSGSIZE);
	pp_sym_result__free(&r);
	free(buf);
}

static void put32_at(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
}

/* Every truncation, every single-byte corruption, and crafted lies. */
static void t_bad_input(void **state)
{
	struct pp_sym_result r, got;
	uint8_t *buf = malloc(PP_SYMISO_MAX_MSG), *b2 = malloc(PP_SYMISO_MAX_MSG);
	size_t len;
	int rc;

	make_result(&r, 4, 20);
	assert_int_equal(pp_symiso__encode_result(0, &r, NULL, buf, PP_SYMISO_MAX_MSG, &len), 0);
	for (size_t n = 0; n < len; n++) {
		assert_int_equal(pp_symiso__decode_result(buf, n, &rc, &got, NULL), -EBADMSG);
		assert_null(got.frames);
	}
	/* trailing garbage */
	memcpy(b2, buf, len);
	b2[len] = 0;
	assert_int_equal(pp_symiso__decode_result(b2, len + 1, &rc, &got, NULL), -EBADMSG);
	/* any byte changed: either still well-formed or refused, never a crash */
	unsigned ok = 0, bad = 0;
	for (size_t i = 0; i < len; i++) {
		for (int v = 0; v < 256; v += 51) {
			memcpy(b2, buf, len);
			b2[i] ^= (uint8_t)(v | 1);
			int e = pp_symiso__decode_result(b2, len, &rc, &got, NULL);
			if (e == 0) {
				ok++;
				assert_true(got.n >= 1 && got.n <= PP_SYMISO_MAX_FRAMES);
				for (size_t k = 0; k < got.n; k++)
					assert_non_null(got.frames[k].function);
				pp_sym_result__free(&got);
			} else {
				assert_int_equal(e, -EBADMSG);
				bad++;
			}
		}
	}
	assert_true(ok > 0 && bad > 0);

	/* header: type, rc, flags, n, 8 stats; then frames */
	const size_t h = 16 + 64;
	memcpy(b2, buf, len);
	put32_at(b2, 12, 5); /* more frames than sent */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	put32_at(b2, 12, 100000); /* more than the maximum */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	memcpy(b2, buf, len);
	put32_at(b2, 4, 5); /* a positive rc */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	memcpy(b2, buf, len);
	put32_at(b2, 4, (uint32_t)-ENOENT); /* an error with frames */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	memcpy(b2, buf, len);
	put32_at(b2, h + 8, 0xfffffff0u); /* a string longer than the message */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	memcpy(b2, buf, len);
	put32_at(b2, h + 8, 0xffffffffu); /* the function name missing */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	memcpy(b2, buf, len);
	b2[h + 12 + 3] = '\0'; /* a NUL inside a name */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	memcpy(b2, buf, len);
	put32_at(b2, 0, 0x41414141); /* another message type */
	assert_int_equal(pp_symiso__decode_result(b2, len, &rc, &got, NULL), -EBADMSG);
	pp_sym_result__free(&r);
	free(buf);
	free(b2);
}

__attribute__((noinline)) int pp_test_isolated_target(int x);
__attribute__((noinline)) int pp_test_isolated_target(int x)
{
	return x * 3 + 1;
}

/* A real helper (this binary) names one of our own functions. */
static void t_helper_resolves(void **state)
{
	struct pp_maps maps = { 0 };
	struct pp_symiso_opts o = { .memory_mib = 256, .cpu_seconds = 60, .timeout_ms = 30000 };
	struct pp_sym_result res = { 0 };
	uint64_t addr = (uint64_t)(uintptr_t)&pp_test_isolated_target;

	assert_int_equal(pp_test_isolated_target(1), 4);
	struct pp_symiso *s = pp_symiso__new(&o);
	assert_non_null(s);
	assert_true(pp_symiso__pid(s) > 0);
	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	const struct pp_map *m = pp_maps__find(&maps, addr);
	assert_non_null(m);
	assert_int_equal(pp_symiso__resolve(s, getpid(), m, NULL, 0, addr, &res), 0);
	assert_true(res.n >= 1 && res.has_function);
	assert_string_equal(res.frames[res.n - 1].function, "pp_test_isolated_target");
	pp_sym_result__free(&res);
	struct pp_symiso_stats st;
	pp_symiso__check(s);
	pp_symiso__stats(s, &st);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.crashes, 0);
	assert_true(st.sym.files_loaded >= 1);
	pp_maps__free(&maps);
	pp_symiso__free(s);
}

/* Names of addrs through a helper with the given cache budget; *ret_st its counters. */
static void names_through(uint64_t cache_bytes, bool no_dwarf, const uint64_t *addrs, size_t n,
			  int rounds, char **ret_names, struct pp_symiso_stats *ret_st)
{
	struct pp_maps maps = { 0 };
	struct pp_symiso_opts o = { .memory_mib = 256,
				    .cpu_seconds = 60,
				    .timeout_ms = 30000,
				    .cache_bytes = cache_bytes,
				    .no_dwarf = no_dwarf };
	struct pp_symiso *s = pp_symiso__new(&o);
	assert_non_null(s);
	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++) {
			struct pp_sym_result res = { 0 };
			const struct pp_map *m = pp_maps__find(&maps, addrs[i]);
			assert_non_null(m);
			assert_int_equal(
				pp_symiso__resolve(s, getpid(), m, NULL, 0, addrs[i], &res), 0);
			assert_true(res.n >= 1 && res.has_function);
			const char *got = res.frames[res.n - 1].function;
			if (r == 0)
				ret_names[i] = strdup(got);
			else
				assert_string_equal(got, ret_names[i]);
			pp_sym_result__free(&res);
		}
	}
	pp_symiso__check(s);
	pp_symiso__stats(s, ret_st);
	pp_maps__free(&maps);
	pp_symiso__free(s);
}

/*
 * The helper's cache budget (limits.symbol_cache_bytes): with a budget too
 * small for any file, each request alternating between our binary and libc
 * loads its file and evicts the other (and gives the pages back); the names
 * are the same as with the default budget, which loads each file once. (A
 * budget under twice a file's DWARF leaves that file symbols only, so both
 * helpers run without DWARF here.)
 */
static void t_helper_cache_budget(void **state)
{
	const uint64_t addrs[] = { (uint64_t)(uintptr_t)&pp_test_isolated_target,
				   (uint64_t)(uintptr_t)&getpid, (uint64_t)(uintptr_t)&qsort };
	const size_t n = sizeof(addrs) / sizeof(addrs[0]);
	char *big[3] = { 0 }, *tiny[3] = { 0 };
	struct pp_symiso_stats st;

	assert_int_equal(pp_test_isolated_target(2), 7);
	names_through(0, true, addrs, n, 3, big, &st);
	assert_string_equal(big[0], "pp_test_isolated_target");
	assert_int_equal(st.crashes, 0);
	assert_int_equal(st.sym.files_evicted, 0);
	uint64_t loaded_big = st.sym.files_loaded;
	assert_true(loaded_big >= 2 && loaded_big <= n);

	names_through(1, true, addrs, n, 3, tiny, &st);
	assert_int_equal(st.crashes, 0);
	assert_int_equal(st.restarts, 0);
	/* every request after the first loads a file again and evicts the one before */
	assert_true(st.sym.files_loaded >= 3 * n - 1);
	assert_true(st.sym.files_evicted >= 3 * n - 2);
	assert_int_equal(st.sym.cache_bytes, 0); /* nothing in use, nothing kept */
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(tiny[i], big[i]);
		free(big[i]);
		free(tiny[i]);
	}
}

/* JIT code through the helper: our own perf map, its fd passed by podprof's side. */
static void t_helper_perf_map(void **state)
{
	struct pp_symiso_opts o = { .memory_mib = 256, .timeout_ms = 30000 };
	struct pp_sym_result res = { 0 };
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "7f0000001000 100 jitted_one\n7f0000002000 80 _Z6jittedv\n");
	fclose(f);
	struct pp_symiso *s = pp_symiso__new(&o);
	assert_non_null(s);
	assert_int_equal(pp_symiso__resolve_jit(s, getpid(), 0x7f0000002010ull, &res), 0);
	assert_int_equal(res.n, 1);
	assert_string_equal(res.frames[0].function, "jitted");
	pp_sym_result__free(&res);
	assert_int_equal(pp_symiso__resolve_jit(s, getpid(), 0x7f0000003000ull, &res), -ENOENT);
	pp_symiso__free(s);
	unlink(path);
}

/* A hostile helper: says it is ready, then answers garbage. It is killed,
 * counted, the file is refused, and the caller gets the file+offset name. */
static void t_helper_garbage(void **state)
{
	char script[] = "/tmp/pp-fake-helper-XXXXXX";
	int fd = mkstemp(script);
	assert_true(fd >= 0);
	/* M_READY (no flags), then a message of no known type (printf: one write each) */
	dprintf(fd, "#!/bin/sh\nprintf '\\066\\114\\123\\122\\0\\0\\0\\0' >&3\n"
		    "printf 'garbage!' >&3\n"
		    "exec sleep 30\n");
	close(fd);
	assert_int_equal(chmod(script, 0700), 0);
	struct pp_symiso_opts o = { .exe = script, .timeout_ms = 5000 };
	struct pp_symiso *s = pp_symiso__new(&o);
	assert_non_null(s);
	pid_t h = pp_symiso__pid(s);
	struct pp_map m = { .start = 0x400000,
			    .end = 0x401000,
			    .offset = 0x1000,
			    .inode = 42,
			    .path = "/bin/libx.so" };
	struct pp_sym_result res = { 0 };
	assert_int_equal(pp_symiso__resolve(s, getpid(), &m, NULL, 0, 0x400010, &res), 0);
	assert_string_equal(res.frames[0].function, "libx.so+0x1010");
	assert_false(res.has_function);
	pp_sym_result__free(&res);
	assert_int_equal(kill(h, 0), -1); /* killed and reaped */
	struct pp_symiso_stats st;
	pp_symiso__stats(s, &st);
	assert_int_equal(st.crashes, 1);
	assert_int_equal(st.files_refused, 1);
	/* the file is not sent again, even to a new helper */
	assert_int_equal(pp_symiso__resolve(s, getpid(), &m, NULL, 0, 0x400020, &res), 0);
	assert_false(res.has_function);
	pp_sym_result__free(&res);
	pp_symiso__stats(s, &st);
	assert_int_equal(st.crashes, 1);
	assert_int_equal(st.requests_refused, 2);
	pp_symiso__free(s);
	unlink(script);
}

/* A helper that cannot start (or never says it is confined): no isolate,
 * the caller parses in-process instead of losing every name. */
static void t_helper_cannot_start(void **state)
{
	struct pp_symiso_opts o = { .exe = "/nonexistent/podprof", .timeout_ms = 5000 };
	assert_null(pp_symiso__new(&o));
	struct pp_symiso_opts o2 = { .exe = "/bin/true", .timeout_ms = 5000 };
	assert_null(pp_symiso__new(&o2));
}

/* The paths podprof derives for debug files cannot be steered out of their
 * roots: names are plain file names, podprof's own root is only its
 * /usr/lib/debug (".." in the mapped path stays inside it), and no opener
 * takes a path in podprof's root. */
static void t_debug_paths(void **state)
{
	assert_true(pp_sym__debuglink_name_ok("libx.so.debug"));
	const char *bad[] = { "", ".", "..", "../x", "a/b", "/etc/passwd" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(pp_sym__debuglink_name_ok(bad[i]));
		for (unsigned k = 0; k < PP_SYM_DEBUGLINK_CANDIDATES; k++)
			assert_int_equal(pp_sym__open_debuglink_direct(getpid(), "/usr/bin/x",
								       bad[i], k),
					 -ENOENT);
	}
	/* candidate 3 (podprof's /usr/lib/debug): "/etc/passwd" there, not ours */
	assert_int_equal(pp_sym__open_debuglink_direct(getpid(), "/../../../../etc/x", "passwd", 3),
			 -ENOENT);
	assert_int_equal(pp_sym__open_debuglink_direct(0, "/etc/x", "passwd", 0), -ENOENT);
	assert_int_equal(pp_sym__open_in_root_direct(0, "/etc/passwd"), -EINVAL);
	assert_int_equal(pp_sym__open_debuglink_direct(getpid(), "/usr/bin/x", "passwd",
						       PP_SYM_DEBUGLINK_CANDIDATES),
			 -ENOENT);
	/* a build id nothing has */
	uint8_t id[20];
	memset(id, 0x5a, sizeof(id));
	assert_int_equal(pp_sym__open_debug_id_direct(getpid(), id, sizeof(id)), -ENOENT);
	assert_int_equal(pp_sym__open_debug_id_direct(getpid(), id, 0), -ENOENT);
}

/* ---------- a hostile helper: the attacker's side of the protocol ---------- */

static size_t put_u32(uint8_t *b, size_t off, uint32_t v)
{
	memcpy(b + off, &v, 4);
	return off + 4;
}

static size_t put_s(uint8_t *b, size_t off, const char *str)
{
	off = put_u32(b, off, (uint32_t)strlen(str));
	memcpy(b + off, str, strlen(str));
	return off + strlen(str);
}

/* One M_OPEN on fd 3: the reply's err; *ret_fd a passed fd or -1. */
static int hostile_ask(const uint8_t *msg, size_t len, int *ret_fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	uint8_t r[16];
	struct iovec iov = { .iov_base = r, .iov_len = sizeof(r) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };

	*ret_fd = -1;
	if (send(3, msg, len, 0) != (ssize_t)len)
		_exit(10);
	ssize_t n = recvmsg(3, &mh, MSG_CMSG_CLOEXEC);
	if (n != 8)
		_exit(11);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
	uint32_t type, err;
	memcpy(&type, r, 4);
	memcpy(&err, r + 4, 4);
	if (type != PP_SYMISO_M_OPEN_REPLY)
		_exit(12);
	return (int)err;
}

/*
 * Says it is ready, takes one request, and asks podprof for what an
 * attacker would: the secret by path (the retired kind), the mapped file
 * with a path of its own appended, debuglink names with "..", a candidate
 * out of range, a build id nothing has, an unknown kind; then the mapped
 * file as it should. Its answer names what it got: "asks:" and per ask the
 * error, "+fd" when a descriptor came with it.
 */
static int hostile_helper(const char *secret)
{
	static uint8_t b[PP_SYMISO_MAX_MSG];
	uint32_t ready[2] = { PP_SYMISO_M_READY, 0 };
	if (send(3, ready, sizeof(ready), 0) != sizeof(ready))
		return 1;
	ssize_t n = recv(3, b, sizeof(b), 0);
	uint32_t type = 0;
	if (n >= 4)
		memcpy(&type, b, 4);
	if (type != PP_SYMISO_M_RESOLVE)
		return 2;
	uint8_t m[8][600];
	size_t len[8], k = 0, o;
	/* the old protocol: kind 2, a pid and a path */
	o = put_u32(m[k], 0, PP_SYMISO_M_OPEN);
	o = put_u32(m[k], o, 2);
	o = put_u32(m[k], o, (uint32_t)getppid());
	len[k] = put_s(m[k], o, secret);
	k++;
	/* the mapped file, with a path of its own appended */
	o = put_u32(m[k], 0, PP_SYMISO_M_OPEN);
	o = put_u32(m[k], o, PP_SYMISO_OPEN_MAPPED);
	len[k] = put_s(m[k], o, secret);
	k++;
	/* debuglink names that are paths, a candidate out of range */
	const char *names[] = { "../../../../../../../..", "../key.pem", "key.pem" };
	for (int i = 0; i < 3; i++) {
		o = put_u32(m[k], 0, PP_SYMISO_M_OPEN);
		o = put_u32(m[k], o, PP_SYMISO_OPEN_DEBUGLINK);
		o = put_u32(m[k], o, i == 2 ? 7 : 0);
		len[k] = put_s(m[k], o, i == 0 ? secret : names[i]);
		k++;
	}
	/* a build id no file has */
	o = put_u32(m[k], 0, PP_SYMISO_M_OPEN);
	o = put_u32(m[k], o, PP_SYMISO_OPEN_DEBUG_ID);
	o = put_u32(m[k], o, 20);
	memset(m[k] + o, 0xa5, 20);
	len[k++] = o + 20;
	/* an unknown kind */
	o = put_u32(m[k], 0, PP_SYMISO_M_OPEN);
	len[k] = put_u32(m[k], o, 99);
	k++;
	/* the mapped file, as asked for */
	o = put_u32(m[k], 0, PP_SYMISO_M_OPEN);
	len[k] = put_u32(m[k], o, PP_SYMISO_OPEN_MAPPED);
	k++;

	char name[256] = "asks:";
	for (size_t i = 0; i < k; i++) {
		int fd;
		int err = hostile_ask(m[i], len[i], &fd);
		snprintf(name + strlen(name), sizeof(name) - strlen(name), "%s%d%s", i ? "," : "",
			 err, fd >= 0 ? "+fd" : "");
		if (fd >= 0)
			close(fd);
	}
	struct pp_sym_frame f = { .function = name };
	struct pp_sym_result res = { .frames = &f, .n = 1, .has_function = true };
	size_t out;
	if (pp_symiso__encode_result(0, &res, NULL, b, sizeof(b), &out) < 0 ||
	    send(3, b, out, 0) != (ssize_t)out)
		return 3;
	while (recv(3, b, sizeof(b), 0) > 0)
		;
	return 0;
}

/* podprof's side against the hostile helper: one answer (-ENOENT) for every
 * refusal, whatever its reason, and only the mapped file passed. */
static void t_helper_hostile(void **state)
{
	char self[PATH_MAX], secret[] = "/tmp/pp-secret-XXXXXX",
			     script[] = "/tmp/pp-hostile-XXXXXX";
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(sl > 0);
	self[sl] = '\0';
	int fd = mkstemp(secret);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "SECRET", 6), 6);
	assert_int_equal(fchmod(fd, 0600), 0);
	if (fchown(fd, 4242, 4242) < 0)
		print_message("(secret keeps our owner: not root)\n");
	close(fd);
	fd = mkstemp(script);
	assert_true(fd >= 0);
	dprintf(fd, "#!/bin/sh\nexec '%s' --hostile-helper '%s'\n", self, secret);
	close(fd);
	assert_int_equal(chmod(script, 0700), 0);

	struct pp_maps maps = { 0 };
	uint64_t addr = (uint64_t)(uintptr_t)&pp_test_isolated_target;
	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	const struct pp_map *m = pp_maps__find(&maps, addr);
	assert_non_null(m);
	struct pp_symiso_opts o = { .exe = script, .timeout_ms = 30000 };
	struct pp_symiso *s = pp_symiso__new(&o);
	assert_non_null(s);
	struct pp_sym_result res = { 0 };
	assert_int_equal(pp_symiso__resolve(s, getpid(), m, NULL, 0, addr, &res), 0);
	assert_int_equal(res.n, 1);
	assert_string_equal(res.frames[0].function, "asks:-2,-2,-2,-2,-2,-2,-2,0+fd");
	pp_sym_result__free(&res);
	struct pp_symiso_stats st;
	pp_symiso__stats(s, &st);
	assert_int_equal(st.opens_refused, 7);
	assert_int_equal(st.crashes, 0);
	pp_symiso__free(s);
	pp_maps__free(&maps);
	unlink(script);
	unlink(secret);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--hostile-helper"))
		return hostile_helper(argv[2]);
	if (argc > 1 && !strcmp(argv[1], PP_SYMISO_HELPER_ARG))
		return pp_symiso__helper_main(argc, argv);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_roundtrip),		 cmocka_unit_test(t_bounds),
		cmocka_unit_test(t_bad_input),		 cmocka_unit_test(t_helper_resolves),
		cmocka_unit_test(t_helper_perf_map),	 cmocka_unit_test(t_helper_garbage),
		cmocka_unit_test(t_helper_cannot_start), cmocka_unit_test(t_helper_cache_budget),
		cmocka_unit_test(t_helper_hostile),	 cmocka_unit_test(t_debug_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
