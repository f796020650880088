/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Presentation: the /metrics text, the goroutine?debug=2 thread dump text
 * and the comments of heap and CPU profiles, formatted from plain structs.
 *
 * The agent fills the structs (each module's counters copied under that
 * module's lock, /proc read with no lock held) and calls these functions
 * with no lock held. Text past a buffer's cap is cut. Nothing here takes a lock, reads a file or logs; every
 * function is safe from any thread. Names, labels and HELP texts of the
 * metrics are the ones README.md documents: change them there too.
 */
#ifndef PODPROF_PRESENT_H
#define PODPROF_PRESENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpu/cpu.h"
#include "heap/heap.h"
#include "http/http.h"
#include "offcpu/offcpu.h"
#include "procfs/procfs.h"
#include "store/store.h"
#include "symbolize/symbolize.h"
#include "threads/threads.h"
#include "util/util.h"

/* One target as /metrics and the heap comments show it. */
struct pp_present_target {
	pid_t pid;
	char comm[16]; /* the target's to choose: escaped where printed */
	bool have_status; /* status read from /proc/PID/status */
	struct pp_proc_status status;
	bool have_heap; /* heap read from the heap tracer */
	struct pp_heap_proc_stats heap;
};

/* The agent's own counters. */
struct pp_agent_counters {
	uint64_t samples, unwinds, unwinders, unwinds_complete, unwind_truncated, unwind_errors;
	uint64_t attach_errors, target_read_errors, heap_events, offcpu_events;
	uint64_t snapshots, snapshot_pause_ns_max, dumps_limited, dump_deadline_threads;
	/* ptrace stops of target threads (lib/tracee): done, not done because
	 * a rule said no, calls restarted, signals handed back, timeouts */
	uint64_t tracee_stops, tracee_postponed, tracee_restarted, tracee_signals, tracee_timeouts;
	uint64_t thread_names_unread; /* threads past the 4096 named per process and refresh */
	/* threadcreate's table of creation stacks: held, pruned (exited), not kept (full) */
	uint64_t tc_entries, tc_pruned, tc_dropped;
};

/* Everything /metrics shows, copied. */
struct pp_metrics {
	const char *version;
	double uptime_seconds, cpu_seconds;
	uint64_t rss_bytes;
	size_t n_targets; /* all targets (podprof_targets) */
	int cpu_windows;
	bool offcpu_tracing;
	/* The targets listed per pid (at most the first 256). Borrowed. */
	struct pp_present_target *targets;
	size_t n_listed;
	struct pp_agent_counters agent;
	struct pp_store_stats store;
	uint64_t maps_truncated;
	bool have_cpu, have_heap, have_offcpu; /* the collector exists */
	struct pp_cpu_stats cpu;
	struct pp_heap_stats heap;
	struct pp_offcpu_stats offcpu;
	struct pp_symbolizer_stats sym; /* podprof's and the symbolizer helper's */
	bool symiso; /* the symbolizer helper runs (symbolizer.isolate) */
	uint64_t symiso_restarts, symiso_crashes, symiso_timeouts, symiso_files_refused;
	uint64_t symiso_requests, symiso_requests_lost;
	uint64_t symiso_idle_ends; /* helpers ended after symbolizer.idle_seconds unused */
	uint64_t symiso_opens_refused; /* files the helper asked for and did not get */
	uint64_t unwind_debug_refused, unwind_fd_budget, sigbus_repaired;
	uint64_t open_budget; /* passes cut by a target's open budget */
	/* target file accesses past their deadline (procfs.h, pp_file_stats) */
	uint64_t file_hangs, file_skipped;
	unsigned file_stuck_threads;
	uint64_t discovery_age_ms; /* since the last discovery pass ended (0: none yet) */
	/* The collectors' states ("ok", "disabled", "unavailable"). Borrowed. */
	const struct pp_http_collector *colls;
	size_t n_colls;
};

/* Appends the Prometheus text of m to o (cut at o's cap). */
void pp_present__metrics(const struct pp_metrics *m, struct pp_buf *o);

/* What a heap (or allocs) profile says in its comments. */
struct pp_heap_comment_stats {
	const char *disabled_reason; /* "" or why heap tracing is off */
	bool have_heap; /* the heap tracer exists: heap and dropped_live are set */
	uint64_t sample_rate;
	struct pp_heap_stats heap;
	uint64_t store_dropped_live;
	/* The group's targets (those without have_status are left out). Borrowed. */
	const struct pp_present_target *targets;
	size_t n_targets;
};

/* The comment lines, malloc'ed one by one in a malloc'ed array (free each,
 * then the array); *ret NULL and *ret_n 0 without memory. */
void pp_present__heap_comments(const struct pp_heap_comment_stats *s, char ***ret, size_t *ret_n);

/* The CPU window's comment: what was taken, lost and queued between begin
 * and end (sampler counters at the window's start and end). Malloc'ed;
 * NULL without memory. */
char *pp_present__cpu_comment(const struct pp_cpu_stats *begin, const struct pp_cpu_stats *end);

/* ---- goroutine?debug=2: the thread dump text ---- */

/* The text served when thread dumps are disabled by the config. */
void pp_present__dump_disabled(struct pp_buf *out);
/* The header of a repeated dump: taken age_ns ago, the limit interval_ms. */
void pp_present__dump_repeat(struct pp_buf *out, uint64_t age_ns, unsigned interval_ms);
/* A process's header; exe may be NULL. */
void pp_present__dump_process(struct pp_buf *out, pid_t pid, const char *comm, const char *exe,
			      size_t n_threads);
/* A thread's header line, and why its stack is missing if it is. */
void pp_present__dump_thread(struct pp_buf *out, const struct pp_thread_snap *t);
/* One frame: res with its inline frames (res->n > 0), or NULL when the
 * address could not be resolved; path: the mapping's file, or NULL. */
void pp_present__dump_frame(struct pp_buf *out, uint64_t addr, const struct pp_sym_result *res,
			    const char *path);
/* A thread's last line: how long it was stopped. */
void pp_present__dump_thread_end(struct pp_buf *out, const struct pp_thread_snap *t);

#endif
