/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Isolated symbolization: the target's files (ELF symbol tables, DWARF
 * through libdw, the demangler, perf maps) are parsed in a helper process,
 * so a crash, a memory bomb or a hang in libelf, libdw or libiberty costs
 * that file's names, not podprof.
 *
 * The helper is podprof itself, executed again with a hidden first
 * argument (PP_SYMISO_HELPER_ARG; cmd/podprof/main.c hands it to
 * pp_symiso__helper_main). Its first call makes it non-dumpable. Before
 * reading anything it drops every capability (effective, permitted,
 * inheritable, ambient and, where allowed, the bounding set), taking on
 * the way its own uid and gid (helper_uid; the saved uid stays podprof's
 * so that podprof, without CAP_KILL, can kill it), sets no_new_privs,
 * limits its address space (RLIMIT_AS, memory_mib) and CPU time
 * (RLIMIT_CPU, cpu_seconds; it restarts itself cleanly at half of it), and
 * installs a seccomp filter that allows reading the descriptors it is
 * given, memory management and messages on its socket; opening files and
 * changing ids are not among them.
 *
 * It talks to podprof over a SOCK_SEQPACKET socketpair (it holds only its
 * end), one request at a time: podprof sends a location; when the helper
 * needs a file it asks for what it needs, never where it is (the wire
 * format below carries no path, pid, device or inode): the mapped file of
 * the request, the debug file of a build id, a .gnu_debuglink candidate
 * (a plain name), the perf map of the request's pid. podprof derives the
 * path from the request it is serving (pp_sym__open_*_direct: inside the
 * target's root through openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
 * and in its own root only inside /usr/lib/debug), checks what it opened
 * (the mapped inode, the build id) and passes the fd with SCM_RIGHTS; every
 * refusal, whatever its reason, is the same -ENOENT (no oracle), counted
 * in opens_refused. The helper answers with the frames and its
 * symbolizer's counters. Every answer is checked (pp_symiso__decode_result)
 * as coming from a hostile process.
 *
 * What this does not defend against: a process with CAP_SYS_PTRACE over
 * podprof can take podprof's end of the socket (pidfd_getfd) and speak for
 * podprof to the helper, or use podprof directly; one with CAP_KILL, or of
 * podprof's uid, can stop or kill the helper (names are lost, nothing
 * leaks). Without CAP_SETUID/CAP_SETGID the helper keeps podprof's uid
 * (stats.shared_uid): still non-dumpable and capability-less.
 *
 * Robustness: each request has a deadline (timeout_ms): a helper that
 * misses it is killed and restarted. A helper that dies during a request
 * (a signal, RLIMIT_AS, a malformed answer) is restarted with a backoff
 * (none if it had run for a minute, else doubling from 100 ms to 30 s).
 * In both cases the file being resolved (build id, else dev+inode; the
 * perf map: its pid) is remembered and never sent again: its locations
 * get the "file+0xoffset" name. While the helper cannot run, locations
 * get that name too.
 *
 * Thread-safe: one lock around each request (the helper serves one at a
 * time); the counters are published under a lock of their own. No logging above debug: the caller logs from pp_symiso__stats.
 */
#ifndef PODPROF_SYMBOLIZE_ISOLATE_H
#define PODPROF_SYMBOLIZE_ISOLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "symbolize.h"

#define PP_SYMISO_HELPER_ARG "--symbolizer-helper"
/* The helper's uid and gid by default: next to nobody (65534) and
 * distroless's nonroot (65532), used by neither; within the 65536 ids a
 * user namespace usually maps. */
#define PP_SYMISO_HELPER_UID 65533u
/* Largest message either way. */
#define PP_SYMISO_MAX_MSG 65536
/* Frames and string bytes an answer may carry. */
#define PP_SYMISO_MAX_FRAMES 64
#define PP_SYMISO_MAX_STR 4096

struct pp_symiso;

struct pp_symiso_opts {
	uint64_t cache_bytes; /* the helper's symbolizer cache; 0 = its default */
	bool no_dwarf;
	unsigned memory_mib; /* RLIMIT_AS of the helper; 0 = none */
	unsigned cpu_seconds; /* RLIMIT_CPU of the helper; 0 = none */
	unsigned timeout_ms; /* per request; 0 = 30000 */
	unsigned idle_seconds; /* pp_symiso__check ends a helper unused this long (its cache
				* with it); the next request starts one. 0 = never */
	const char *exe; /* the podprof binary; NULL = /proc/self/exe */
	uint32_t helper_uid; /* uid and gid of the helper; 0 = PP_SYMISO_HELPER_UID */
	int log_level; /* enum pp_log_level for the helper's stderr */
	bool log_json; /* its lines in JSON (log.format) */
};

/* Starts the helper and waits (timeout_ms) for it to say it is confined
 * and serving. NULL with errno if it does not: the caller should parse
 * in-process rather than lose every name. */
struct pp_symiso *pp_symiso__new(const struct pp_symiso_opts *opts);
void pp_symiso__free(struct pp_symiso *s);

/* Same contracts as pp_symbolizer__resolve / __resolve_jit. -ETIMEDOUT,
 * -EIO: the helper hung or died on this request. */
int pp_symiso__resolve(struct pp_symiso *s, pid_t pid, const struct pp_map *m,
		       const uint8_t *build_id, size_t build_id_len, uint64_t addr,
		       struct pp_sym_result *ret);
int pp_symiso__resolve_jit(struct pp_symiso *s, pid_t pid, uint64_t addr,
			   struct pp_sym_result *ret);

/* Collects a helper that died between requests and starts the next one
 * (when the backoff allows), or ends one unused for idle_seconds (the next
 * request starts one); call it now and then. Never waits for a request
 * under way. */
void pp_symiso__check(struct pp_symiso *s);

/* The helper's pid now (0 when none runs). */
pid_t pp_symiso__pid(struct pp_symiso *s);

struct pp_symiso_stats {
	uint64_t requests;
	uint64_t restarts; /* helpers started after the first */
	uint64_t crashes; /* helpers that died (signal, exit, bad answer) */
	uint64_t timeouts; /* requests past the deadline: helper killed */
	uint64_t files_refused; /* files remembered as killing the helper */
	uint64_t requests_refused; /* requests answered without the helper (refused file, backoff) */
	uint64_t recycled; /* helpers that restarted themselves at half their CPU budget */
	uint64_t idle_ends; /* helpers ended after idle_seconds without a request */
	uint64_t opens_refused; /* files the helper asked for that podprof did not pass */
	bool shared_uid; /* the running helper could not take helper_uid (no CAP_SETUID/SETGID
			  * or an unmapped id): it runs as podprof's uid, non-dumpable */
	struct pp_symbolizer_stats sym; /* the helpers' symbolizers, summed over restarts */
};
/* As of the last request or check: never waits for a request under way. */
void pp_symiso__stats(struct pp_symiso *s, struct pp_symiso_stats *ret);

/*
 * Wire format, exposed for tests that play a hostile helper: u32 fields in
 * native byte order, strings as u32 length + bytes.
 * - podprof -> helper: M_RESOLVE pid addr(u64) map build_id_len build_id;
 *   M_JIT pid addr(u64).
 * - helper -> podprof: M_READY once; M_OPEN kind [args] (any number, up to
 *   a cap per request), answered by M_OPEN_REPLY err with the fd in
 *   SCM_RIGHTS when err is 0 and -ENOENT for every failure; M_RESULT
 *   (pp_symiso__encode_result) ends the request.
 * The kinds carry no path, pid, device or inode: OPEN_MAPPED (nothing),
 * OPEN_DEBUG_ID (u32 len, the build id), OPEN_DEBUGLINK (u32 candidate,
 * string name), OPEN_PERF_MAP (nothing). Kind 2 (a path) is retired.
 */
enum {
	PP_SYMISO_M_RESOLVE = 0x52534c31,
	PP_SYMISO_M_JIT,
	PP_SYMISO_M_OPEN,
	PP_SYMISO_M_OPEN_REPLY,
	PP_SYMISO_M_RESULT,
	PP_SYMISO_M_READY,
};
enum {
	PP_SYMISO_OPEN_MAPPED = 1,
	PP_SYMISO_OPEN_PERF_MAP = 3,
	PP_SYMISO_OPEN_DEBUG_ID,
	PP_SYMISO_OPEN_DEBUGLINK,
};

/* The helper's main: argv[1] is PP_SYMISO_HELPER_ARG. Returns an exit code. */
int pp_symiso__helper_main(int argc, char **argv);

/*
 * Framing of the helper's answer, exposed for tests. encode: rc and (when
 * rc == 0) the frames, strings cut at PP_SYMISO_MAX_STR, at most
 * PP_SYMISO_MAX_FRAMES frames (the outermost kept), within cap bytes.
 * decode: checks every length and count against len; -EBADMSG for anything
 * malformed (ret left empty), else 0 and *ret_rc / *ret / *ret_stats set.
 */
int pp_symiso__encode_result(int rc, const struct pp_sym_result *r,
			     const struct pp_symbolizer_stats *st, uint8_t *buf, size_t cap,
			     size_t *ret_len);
int pp_symiso__decode_result(const uint8_t *buf, size_t len, int *ret_rc, struct pp_sym_result *ret,
			     struct pp_symbolizer_stats *ret_stats);

#endif
