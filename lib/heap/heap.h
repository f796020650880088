/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap tracer: eBPF uprobes (bpf/heap.bpf.c) on the allocator a target
 * really uses, attached per PID through the file the kernel maps. Sampling
 * is byte-based Poisson in BPF (mean sample_rate bytes, per thread); only
 * sampled allocations and the frees of sampled addresses reach user space,
 * through a ring buffer read without wakeups by pp_heap_tracer__poll.
 *
 * Thread-safety: attach/detach/stats from any thread; poll from one.
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
	pid_t pid, tid;             /* podprof's PID namespace */
	uint64_t addr;
	uint64_t size;              /* requested bytes; for FREE the size recorded at ALLOC */
	uint64_t time_ns;
	/* ALLOC only: registers and copied stack at the allocator's return
	 * (caller frames present), for pp_unwinder__unwind. */
	bool regs_valid;
	struct pp_regs regs;
	const uint8_t *stack;       /* borrowed during the callback */
	size_t stack_len;
};

typedef void (*pp_heap_event_fn)(void *ctx, const struct pp_heap_event *ev);

struct pp_heap_opts {
	uint64_t sample_rate;       /* mean bytes between samples; <= 1 = every allocation */
	unsigned max_live;          /* capacity of the sampled-address table */
	unsigned stack_bytes;
	double budget_percent;      /* of one CPU */
	enum pp_heap_policy over_budget;
};

struct pp_heap_tracer *pp_heap_tracer__new(const struct pp_heap_opts *opts, pp_heap_event_fn fn,
					   void *ctx);
/* Find the allocator of pid and attach; -ENOENT if none exports malloc. */
int pp_heap_tracer__attach(struct pp_heap_tracer *t, pid_t pid);
int pp_heap_tracer__detach(struct pp_heap_tracer *t, pid_t pid);
int pp_heap_tracer__poll(struct pp_heap_tracer *t, int timeout_ms);

struct pp_heap_proc_stats {
	char allocator[64];         /* e.g. "libc.so.6", "libjemalloc.so.2", "static:/app" */
	uint64_t mallocs, frees;    /* every call, counted in BPF */
	uint64_t alloc_bytes;       /* total requested bytes */
	uint64_t sampled;           /* samples emitted */
	double calls_per_sec;       /* recent rate */
	double est_overhead_percent;/* of one CPU */
	bool paused;                /* over budget with policy pause */
	bool session;               /* uprobe session in use (else uretprobe) */
};
int pp_heap_tracer__proc_stats(struct pp_heap_tracer *t, pid_t pid, struct pp_heap_proc_stats *ret);

struct pp_heap_stats {
	uint64_t events, ringbuf_drops, live_table_full, stack_read_errors, attach_errors, procs;
};
void pp_heap_tracer__stats(struct pp_heap_tracer *t, struct pp_heap_stats *ret);
void pp_heap_tracer__free(struct pp_heap_tracer *t);

#endif
