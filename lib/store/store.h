/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile store: aggregates unwound stacks from every collector into
 * cumulative counters keyed by (kind, process, thread, size, stack), keeps
 * the live table of sampled heap allocations, and renders any kind as a
 * pprof profile (or the legacy text formats), absolute or as the delta
 * since a snapshot.
 *
 * Locations are symbolized when first seen (while the process and its
 * files still exist), so profiles of processes that have exited still have
 * names. Everything is bounded: distinct stacks (max_stacks), live heap
 * entries (max_live), processes (max_procs); what does not fit is counted
 * as dropped.
 *
 * Thread-safe: one internal lock. Functions return 0 or -errno.
 */
#ifndef PODPROF_STORE_H
#define PODPROF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http/http.h"
#include "procfs/procfs.h"
#include "symbolize/symbolize.h"
#include "util/util.h"

struct pp_store;

struct pp_store_opts {
	unsigned max_stacks;
	unsigned max_live;
	unsigned max_procs;
	uint64_t heap_sample_rate; /* for scaling heap values */
	uint64_t cpu_period_ns; /* weight of one CPU sample */
};

struct pp_store *pp_store__new(const struct pp_store_opts *opts, struct pp_symbolizer *sym);
void pp_store__free(struct pp_store *st);

/*
 * A process (re)appeared or its maps changed. maps is taken (moved) on
 * success. group = index of the config target entry it matched.
 */
int pp_store__process_update(struct pp_store *st, const struct pp_proc_info *info,
			     struct pp_maps *maps, int group);
/* The process exited: its live heap entries are dropped (their memory is gone). */
void pp_store__process_exit(struct pp_store *st, pid_t pid);
/* true if the store knows pid as a live process. */
bool pp_store__has_process(struct pp_store *st, pid_t pid);
void pp_store__set_thread_name(struct pp_store *st, pid_t pid, pid_t tid, const char *name);
/* Forget pid's tid -> name table (before setting the live threads again). */
void pp_store__forget_threads(struct pp_store *st, pid_t pid);

/* Internal kinds beyond the HTTP ones share enum pp_profile_kind. */

/*
 * pcs: user stack, leaf first, pcs[0] the exact IP, then return addresses
 * (the store subtracts 1). kpcs: kernel frames, leaf first (may be NULL).
 */
int pp_store__add_cpu(struct pp_store *st, pid_t pid, pid_t tid, const uint64_t *pcs, size_t n,
		      const uint64_t *kpcs, size_t nk, uint64_t weight_ns);
int pp_store__heap_alloc(struct pp_store *st, pid_t pid, pid_t tid, const uint64_t *pcs, size_t n,
			 uint64_t addr, uint64_t size);
int pp_store__heap_free(struct pp_store *st, pid_t pid, uint64_t addr);
/* kind: PP_PROFILE_BLOCK or PP_PROFILE_MUTEX. count/delay already scaled. */
int pp_store__add_contention(struct pp_store *st, enum pp_profile_kind kind, pid_t pid, pid_t tid,
			     const uint64_t *pcs, size_t n, int64_t count, int64_t delay_ns);

/*
 * Gauge kinds (goroutine, threadcreate): replace the current set of stacks.
 * Begin a new generation, add each thread, then publish.
 */
int pp_store__gauge_begin(struct pp_store *st, enum pp_profile_kind kind);
int pp_store__gauge_add(struct pp_store *st, enum pp_profile_kind kind, pid_t pid, pid_t tid,
			const uint64_t *pcs, size_t n);
void pp_store__gauge_end(struct pp_store *st, enum pp_profile_kind kind);

/* Snapshot of one kind's counters for windows and deltas. */
struct pp_store_snapshot;
struct pp_store_snapshot *pp_store__snapshot(struct pp_store *st, enum pp_profile_kind kind);
void pp_store_snapshot__free(struct pp_store_snapshot *snap);

struct pp_store_render_opts {
	enum pp_profile_kind kind;
	const struct pp_store_snapshot *base; /* NULL = absolute */
	int debug; /* 0 proto (gzip), 1 legacy text */
	int group; /* -1 = every target, else that config entry only */
	const char *const *comments; /* extra comments (proto) / '#' lines (text) */
	size_t n_comments;
};
int pp_store__render(struct pp_store *st, const struct pp_store_render_opts *o, struct pp_buf *out);

/* Distinct non-zero stacks of a kind (index page). */
long pp_store__count(struct pp_store *st, enum pp_profile_kind kind, int group);

/* /symbol: name of the function at addr in a live process of group (-1 any). */
int pp_store__symbol(struct pp_store *st, int group, uint64_t addr, struct pp_buf *out);

/* Heap figures of one process, from the sampled live table (scaled estimates). */
struct pp_store_heap_stats {
	uint64_t inuse_bytes, inuse_objects, alloc_bytes, alloc_objects;
};
int pp_store__heap_stats(struct pp_store *st, pid_t pid, struct pp_store_heap_stats *ret);

struct pp_store_stats {
	uint64_t stacks, locations, procs, live_entries;
	uint64_t dropped_stacks, dropped_live, dropped_procs, unknown_frees;
	uint64_t cpu_samples, heap_samples, contention_samples;
};
void pp_store__stats(struct pp_store *st, struct pp_store_stats *ret);

#endif
