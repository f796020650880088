/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collector interface: how the agent drives the CPU sampler, the heap
 * tracer, the off-CPU tracer and the thread snapshots. The agent's target
 * registry (discovery, adoption of children, exits) owns the processes and
 * the per-process bookkeeping of every collector: which are attached, how
 * many attaches failed, which must attach again after an exec, which are
 * detached when a process exits. That bookkeeping is written once, in the
 * agent, for every collector; a collector only says how to attach, detach,
 * poll and report its counters.
 *
 * Every callback gets the agent's context (ctx) and is called with no agent
 * lock held.
 *
 * Lock order (the agent's locks, and the collectors' and store's own):
 *
 *   snapshot_lock -> win_lock -> collector lock -> unw_lock
 *     -> unwinder lock
 *     -> agent lock (targets) -> store lock
 *   state_lock: a leaf, taken alone.
 *
 *  - snapshot_lock: thread dumps (goroutine, threadcreate); held across a
 *    dump, which reads /proc and stops threads (the one lock under which
 *    file I/O is allowed: it only serializes dumps).
 *  - win_lock: open CPU windows; held only to switch sampling on or off.
 *  - A collector lock (inside lib/cpu, lib/heap, lib/offcpu) may be held
 *    while the collector calls back into the agent, so attach, detach and
 *    enable are never called with the agent lock or unw_lock held: detaches
 *    are queued under the agent lock and run after it is released.
 *  - unw_lock: the table of shared unwinders; the agent lock is taken under
 *    it (to check a process is still a target), never the other way round.
 *    No file I/O under it: an unwinder is created empty and loads its files
 *    under its own lock.
 *  - agent lock: targets, pending detaches, thread creation stacks. Copies
 *    in and out only; /proc is read after it is released (the store is
 *    told about exits under it; the store's calls do no file I/O).
 *  - store lock: see store/store.h (counters copied, rendering outside).
 *
 * No file I/O, ELF/DWARF loading or rendering under a collector, agent or
 * store lock; an exception is noted where it is made. The heap tracer's
 * slow work with one target (injecting the agent: ptrace stops and the
 * target's memory; reading the agent's counters from it; patching after a
 * dlopen) runs under that target's own op lock, never under the tracer's
 * table lock: stats of other targets, the ring's poll and its periodic
 * tick go on meanwhile (lib/heap/heap.c, struct heap_proc).
 */
#ifndef PODPROF_COLLECTOR_H
#define PODPROF_COLLECTOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "http/present.h"

/* One attach of one collector to one process. */
struct pp_collector_attach {
	pid_t pid;
	const char *comm;
	bool last_try; /* the last attempt (max_attempts): log why it failed */
	bool refusal_logged; /* a refusal for this process was logged before */
};

struct pp_collector_ops {
	const char *name; /* "cpu": log prefix and the collector="" label */
	const char *profiles; /* the endpoints it feeds, for the index page */
	const char *loses; /* what its being unavailable takes away, for the log */
	/* Failed attaches to a process before it is given up (0: retried at
	 * every discovery pass). */
	unsigned max_attempts;
	/* Attach again (detach first) after the process execs. */
	bool reattach_on_exec;
	/*
	 * Attach to a process: 0, or -errno (-ESRCH: it is gone; a refusal,
	 * pp_refusal__is_refusal, counts toward refused). The collector logs
	 * its own failures. NULL: nothing to attach (thread snapshots).
	 */
	int (*attach)(void *ctx, const struct pp_collector_attach *req);
	/* Stop collecting from pid (it exited or exec'd). */
	void (*detach)(void *ctx, pid_t pid);
	/* No target at all is attached and an attach was refused with err:
	 * mark the collector unavailable, with the reason. NULL: ignored. */
	void (*refused)(void *ctx, int err);
	/* Wait up to timeout_ms for events and deliver them (on the
	 * collector's own thread). NULL: no thread. */
	int (*poll)(void *ctx, int timeout_ms);
	/* Copy the collector's counters into its part of m (called for /metrics
	 * whether the collector exists or not; m->targets is filled before).
	 * Takes the collector's lock around the copy; no file I/O. */
	void (*stats)(void *ctx, struct pp_metrics *m);
};

#endif
