/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap tracer: eBPF uprobes (bpf/heap.bpf.c) on the allocator a target
 * really uses, attached per PID through the file the kernel maps. Sampling
 * is byte-based Poisson in BPF (mean sample_rate bytes, per thread); only
 * sampled allocations and the frees of sampled addresses reach user space,
 * through a ring buffer read without wakeups by pp_heap_tracer__poll.
 *
 * Thread-safety: attach/detach/stats from any thread; poll from one.
 * Locks: a table lock held only to find and reference a process; each
 * process's slow work (injection, the agent's counters, links) under its
 * own lock; attach and detach serialized among themselves.
 */
#ifndef PODPROF_HEAP_H
#define PODPROF_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "unwind/unwind.h"

enum pp_heap_event_type { PP_HEAP_ALLOC = 1, PP_HEAP_FREE = 2 };

struct pp_heap_event {
	enum pp_heap_event_type type;
	pid_t pid, tid; /* podprof's PID namespace */
	uint64_t addr;
	uint64_t size; /* requested bytes; for FREE the size recorded at ALLOC */
	uint64_t time_ns;
	/* ALLOC only: registers and copied stack at the allocator's return
	 * (caller frames present), for pp_unwinder__unwind. */
	bool regs_valid;
	struct pp_regs regs;
	const uint8_t *stack; /* borrowed during the callback */
	size_t stack_len;
	/* ALLOC: where the callback says how its unwind of this stack went;
	 * the tracer sizes the process's later copies from it (copying only
	 * what its stacks use: each 4 KiB page costs the target ~0.8 us). */
	struct pp_heap_stack_use *use;
};

struct pp_heap_stack_use {
	bool unwound; /* the fields below are set */
	bool complete; /* reached the outermost frame */
	bool short_copy; /* truncated: the stack went on above the copy */
	size_t used; /* bytes of the copy the unwind read */
};

typedef void (*pp_heap_event_fn)(void *ctx, const struct pp_heap_event *ev);

struct pp_heap_opts {
	uint64_t sample_rate; /* mean bytes between samples; <= 1 = every allocation */
	unsigned max_live; /* capacity of the sampled-address table */
	unsigned stack_bytes;
	double budget_percent; /* of one CPU */
	enum pp_heap_policy over_budget;
	bool no_session; /* appended: never try the uprobe session (tests, diagnostics) */
	enum pp_heap_mode
		mode; /* appended: auto (default), preload, inject, uprobe (off: never attach) */
	unsigned ring_bytes; /* appended: BPF ring buffer size, rounded up to a power of two; 0 = from
			      * the sample rate (pp_heap_ring_size) */
};

/* The heap ring's size in bytes: bytes rounded up to a power of two, or,
 * for 0, derived from the sample rate (4 MiB at the default 512 KiB, 16 MiB
 * at 64 KiB and below). */
uint32_t pp_heap_ring_size(unsigned bytes, uint64_t sample_rate);

struct pp_heap_tracer *pp_heap_tracer__new(const struct pp_heap_opts *opts, pp_heap_event_fn fn,
					   void *ctx);
/* Find the allocator of pid and attach; -ENOENT if none exports malloc. */
int pp_heap_tracer__attach(struct pp_heap_tracer *t, pid_t pid);
int pp_heap_tracer__detach(struct pp_heap_tracer *t, pid_t pid);
int pp_heap_tracer__poll(struct pp_heap_tracer *t, int timeout_ms);

struct pp_heap_proc_stats {
	char allocator[64]; /* e.g. "libc.so.6", "libjemalloc.so.2", "static:/app" */
	uint64_t mallocs, frees; /* every call, counted in BPF */
	uint64_t alloc_bytes; /* total requested bytes */
	uint64_t sampled; /* samples emitted */
	double calls_per_sec; /* recent rate */
	double est_overhead_percent; /* of one CPU */
	bool paused; /* over budget with policy pause */
	bool session; /* uprobe session in use (else uretprobe) */
	/* Appended fields. */
	bool over_budget; /* est_overhead_percent > budget (any policy) */
	bool exited; /* target gone; probes released, stats kept until detach */
	unsigned probes; /* functions probed */
	unsigned probe_fallbacks; /* functions probed at +0 on a single-stepped instruction */
	double pause_overhead_percent; /* the estimate that triggered the pause (0: not paused) */
	/* Injected agent (heap.mode inject/auto): */
	bool injected; /* allocations seen through the agent, not uprobes */
	bool preloaded; /* that agent was loaded at start (LD_PRELOAD), not injected */
	bool agent_reused; /* an agent left by an earlier podprof was reused */
	char mode_reason[160]; /* why not injected ("" when injected or mode uprobe) */
	unsigned inject_slots; /* GOT slots redirected */
	unsigned inject_modules; /* modules with a redirected slot */
	unsigned inject_skipped; /* slots left alone (bound, or possibly bound, elsewhere) */
	uint64_t inject_pause_ns; /* longest stop of a target thread */
	char coverage[256]; /* slots per module, "app:3 libstdc++.so.6:2" */
	unsigned stack_copy_bytes; /* stack copied per sampled allocation now */
	uint64_t stack_short; /* samples whose copy was too short (stack truncated) */
	/* The agent's in-process ring (injected processes): */
	uint64_t ring_samples; /* sampled allocations recorded in the process (in sampled too) */
	uint64_t ring_full; /* sampled allocations sent to the uprobe instead: ring full */
	uint64_t ring_nostack; /* ... instead: the thread's stack range not known yet */
	uint64_t ring_skipped; /* times unreadable ring contents were skipped */
};
int pp_heap_tracer__proc_stats(struct pp_heap_tracer *t, pid_t pid, struct pp_heap_proc_stats *ret);

struct pp_heap_stats {
	uint64_t events, ringbuf_drops, live_table_full, stack_read_errors, attach_errors, procs;
	/* FREE events that found the ring buffer full: delivered later through
	 * a side table, or lost (the table full too; the allocation stays live) */
	uint64_t frees_deferred, frees_lost;
	uint64_t nested; /* appended: calls skipped as nested in another allocator call */
};
void pp_heap_tracer__stats(struct pp_heap_tracer *t, struct pp_heap_stats *ret);
void pp_heap_tracer__free(struct pp_heap_tracer *t);
/* The process's mappings changed (dlopen): redirect the slots of new
 * modules when it is injected. Returns the number of slots newly
 * redirected (>= 0), -ENOENT (not attached) or -errno. */
int pp_heap_tracer__maps_changed(struct pp_heap_tracer *t, pid_t pid);
/* Why the last attach failed in heap.mode inject (the injection's reason;
 * "" otherwise). Borrowed; read from the thread that called attach. */
const char *pp_heap_tracer__attach_reason(struct pp_heap_tracer *t);
/* Why the uprobe session is not used ("" when it is or before the first
 * attach). Borrowed until pp_heap_tracer__free. */
const char *pp_heap_tracer__session_reason(struct pp_heap_tracer *t);

/*
 * Lower level, exposed for tests and diagnostics.
 */

/* First instruction in code[0..len) where a uprobe is emulated and the
 * entry state (argument registers, rsp) is intact; see x86.c for the rule.
 * *ret_emulated false and *ret_off 0 when none is found. */
int pp_heap__probe_offset(const uint8_t *code, size_t len, size_t *ret_off, bool *ret_emulated);
/* The same, protecting only the first nargs argument registers (and rsp):
 * what the entry program of that function actually reads. */
int pp_heap__probe_offset_args(const uint8_t *code, size_t len, unsigned nargs, size_t *ret_off,
			       bool *ret_emulated);

enum { PP_HEAP_NFN = 10 };
/* Function names in the order of enum heap_fn (bpf/heap.h). */
extern const char *const pp_heap_fn_names[PP_HEAP_NFN];

struct pp_heap_fn_probe {
	int fn; /* index into pp_heap_fn_names */
	uint64_t vaddr; /* symbol value */
	uint64_t file_off; /* file offset of the function */
	uint64_t probe_off; /* file offset probed (file_off + insn offset) */
	bool emulated; /* probe_off is an emulated instruction */
};

struct pp_heap_allocator {
	char name[64]; /* as in pp_heap_proc_stats.allocator */
	char path[4096]; /* attachable path (pp_proc__mapped_path) */
	char map_path[4096]; /* the path in the target's maps */
	bool is_static; /* the allocator is in the main executable */
	unsigned n;
	struct pp_heap_fn_probe fns[PP_HEAP_NFN]; /* aliases (same address) appear once */
};

/* The allocator pid uses: the first object in symbol-resolution order
 * (main executable, LD_PRELOAD, DT_NEEDED breadth-first, then the rest in
 * map order) that defines malloc. -ENOENT if none, -ESRCH if pid is gone. */
int pp_heap__find_allocator(pid_t pid, struct pp_heap_allocator *ret);

#endif
