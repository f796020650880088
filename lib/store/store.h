/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile store: aggregates unwound stacks from every collector into
 * cumulative counters keyed by (kind, process, thread, size, stack), keeps
 * the live table of sampled heap allocations, and renders any kind as a
 * pprof profile (or the legacy text formats), absolute or as the delta
 * since a snapshot.
 *
 * The sample paths only intern: a new location gets its mapping from the
 * maps held (no I/O) and is queued for the store's symbolization worker
 * thread, which resolves it outside the lock (reading the maps again when
 * the address is in none of them, at most every 20 ms per process) and
 * writes the names back under the lock. Locations are so resolved within
 * moments of being first seen, while the process and its files still
 * exist; files are cached by the symbolizer by build id (dev+inode without
 * one), so processes that exited later still resolve from the cache.
 *
 * Objects: each executable file mapping of a process is an object,
 * identified by build id, else dev+inode+size+mtime (from a stat taken
 * when its build id is read, before the lock), else the maps line's
 * dev+inode; held (refcounted) by the maps, interned mappings and
 * locations using it. A location in an object is keyed by (object, file
 * offset): one location, symbolized once, serves every process mapping
 * that file; a profile gives each process its own address for it (its
 * mapping of the object). Kernel locations are keyed by address for every
 * process; locations in anonymous or unknown memory by (process, address).
 *
 * A render first waits (at most 2 s) for the locations queued so far; any
 * still missing are rendered address-only.
 *
 * Lifecycle: an exited process (its stacks, thread names, the locations
 * no other process's stacks use; its live heap entries go at exit) is
 * released once it exited linger_ns ago
 * and no snapshot taken before its exit is still open. Snapshots key their
 * values by a stable stack id, so they survive slots being reused. Caps
 * bound what is held now: distinct stacks (max_stacks), locations
 * (max_locations), live heap entries (max_live), processes alive or not yet
 * released (max_procs); at a cap, exited processes no snapshot needs are
 * released before their linger ends; what still does not fit is counted as
 * dropped (pp_store_stats).
 *
 * Locking: one internal mutex, the store lock. Every function below takes
 * it (not nested, and no other lock of podprof's is taken inside it) and
 * does no file or /proc I/O and no ELF/DWARF work while holding it, unless
 * said otherwise. Callers may hold their own locks around these calls
 * (the agent's target lock is held around process_exit). The worker thread
 * takes the store lock to take and return work, and the symbolizer's locks
 * without it. Functions return 0 or -errno.
 */
#ifndef PODPROF_STORE_H
#define PODPROF_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procfs/procfs.h"
#include "symbolize/symbolize.h"
#include "util/profkind.h"
#include "util/util.h"

struct pp_store;

/*
 * What the worker resolves locations with: the symbolizer passed to
 * pp_store__new by default (its functions, same contracts); unit tests pass
 * a fake. Called from the worker thread (and /symbol's caller) without the
 * store lock.
 */
struct pp_store_sym_ops {
	int (*resolve)(void *ctx, pid_t pid, const struct pp_map *m, const uint8_t *build_id,
		       size_t build_id_len, uint64_t addr, struct pp_sym_result *ret);
	int (*resolve_kernel)(void *ctx, uint64_t addr, struct pp_sym_result *ret);
	int (*resolve_jit)(void *ctx, pid_t pid, uint64_t addr, struct pp_sym_result *ret);
};

struct pp_store_opts {
	unsigned max_stacks;
	unsigned max_live;
	unsigned max_procs;
	unsigned max_locations; /* 0 = 4 * max_stacks + 4096 */
	uint64_t heap_sample_rate; /* for scaling heap values */
	uint64_t cpu_period_ns; /* weight of one CPU sample */
	uint64_t linger_ns; /* exited processes kept at least this long; 0 = 60 s */
	uint64_t max_snapshot_bytes; /* held by open snapshots; 0 = no cap */
	const struct pp_store_sym_ops *sym_ops; /* NULL: the symbolizer given to new */
	void *sym_ctx;
};

/* sym may be NULL (and opts->sym_ops too: locations stay address-only).
 * Starts the symbolization worker thread when there is either. */
struct pp_store *pp_store__new(const struct pp_store_opts *opts, struct pp_symbolizer *sym);
void pp_store__free(struct pp_store *st);

/*
 * A process (re)appeared or its maps changed. maps is taken (moved) on
 * success. group = index of the config target entry it matched. Reads the
 * build ids of maps' executable files (file I/O) before taking the lock.
 */
int pp_store__process_update(struct pp_store *st, const struct pp_proc_info *info,
			     struct pp_maps *maps, int group);
/* The process exited: its live heap entries are dropped (their memory is
 * gone); the rest is kept until released (see Lifecycle). */
void pp_store__process_exit(struct pp_store *st, pid_t pid);
/* Release what the lifecycle allows now (also done at most once a second
 * by process_update/process_exit, and at a cap). Store lock. */
void pp_store__collect(struct pp_store *st);
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

/*
 * Snapshot of one kind's counters for windows and deltas. While open it
 * keeps every process that exits after it (and its stacks). Free every
 * snapshot before the store. Both take the store lock.
 *
 * Snapshots are immutable and share what has not changed: a new one is
 * an overlay on the newest full snapshot of its kind (holding a reference
 * to it), with only the stacks whose values changed since that one was
 * taken; when more than half of them did, it is a full copy instead. A
 * flood of windows on a quiet profile costs a header each, not a copy of
 * every stack. Values stay exact (each window's own time and values). The
 * bytes held by open snapshots are capped by opts->max_snapshot_bytes:
 * over it, NULL with errno EAGAIN (counted in snapshots_refused). Other
 * failures: ENOMEM.
 */
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
/* Waits (at most 2 s, no lock held) for the locations queued so far to be
 * symbolized, copies what the profile needs under the store lock (values
 * relative to base, the locations used, names and mappings), then builds
 * the proto (and gzip) or text without it. */
int pp_store__render(struct pp_store *st, const struct pp_store_render_opts *o, struct pp_buf *out);

/* Distinct non-zero stacks of a kind (index page). */
long pp_store__count(struct pp_store *st, enum pp_profile_kind kind, int group);

/* /symbol: name of the function at addr in a live process of group (-1 any).
 * Copies the mapping under the lock, resolves (file I/O) outside it. */
int pp_store__symbol(struct pp_store *st, int group, uint64_t addr, struct pp_buf *out);

/* Heap figures of one process, from the sampled live table (scaled estimates). */
struct pp_store_heap_stats {
	uint64_t inuse_bytes, inuse_objects, alloc_bytes, alloc_objects;
};
int pp_store__heap_stats(struct pp_store *st, pid_t pid, struct pp_store_heap_stats *ret);

struct pp_store_stats {
	uint64_t stacks, locations, live_entries; /* held now */
	uint64_t procs; /* alive */
	uint64_t procs_held; /* alive + exited not yet released */
	uint64_t dropped_stacks, dropped_live, dropped_procs, unknown_frees;
	uint64_t dropped_locations; /* samples dropped: max_locations reached */
	uint64_t released_procs; /* exited processes whose data was released */
	uint64_t objects; /* files mapped by the processes held (build id, else
			   * dev+inode+size+mtime): each one's locations and names
			   * serve every process mapping it */
	uint64_t file_opens; /* files opened to read a build id (a file already
			      * held as an object is recognized by a stat) */
	uint64_t cpu_samples, heap_samples, contention_samples;
	uint64_t snapshots; /* open snapshots (one per window) */
	uint64_t snapshots_full; /* of them, full copies (the others are overlays) */
	uint64_t snapshot_bytes; /* held by them */
	uint64_t snapshot_shares; /* overlays taken: windows that shared a full copy */
	uint64_t snapshots_refused; /* refused: max_snapshot_bytes */
};
void pp_store__stats(struct pp_store *st, struct pp_store_stats *ret);

#endif
