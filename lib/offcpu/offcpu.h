/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Off-CPU and contention tracing (bpf/offcpu.bpf.c) for the block, mutex
 * and threadcreate profiles: BPF on raw/BTF tracepoints (sched_switch,
 * raw_syscalls sys_enter/sys_exit; no tracefs needed), filtered in BPF to
 * the added processes. At the end of a blocking syscall the thread's
 * registers and user stack are copied (task context), so stacks unwind
 * like CPU samples.
 *
 * Thread-safety: add/remove/stats from any thread; poll from one.
 */
#ifndef PODPROF_OFFCPU_H
#define PODPROF_OFFCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

enum pp_offcpu_kind {
	PP_OFFCPU_BLOCK = 1,        /* time switched out inside a blocking syscall */
	PP_OFFCPU_MUTEX = 2,        /* time blocked in futex waits */
	PP_OFFCPU_THREAD_CREATE = 3,/* a clone/clone3 that created a thread (new_tid) */
};

struct pp_offcpu_event {
	enum pp_offcpu_kind kind;
	pid_t pid, tid;
	pid_t new_tid;              /* THREAD_CREATE only */
	uint64_t delay_ns;          /* BLOCK/MUTEX: off-CPU time */
	double count;               /* sampling-scaled contentions (>= 1) */
	double delay_scaled_ns;     /* sampling-scaled delay */
	long syscall_nr;
	bool regs_valid;
	struct pp_regs regs;
	const uint8_t *stack;       /* borrowed during the callback */
	size_t stack_len;
};

typedef void (*pp_offcpu_event_fn)(void *ctx, const struct pp_offcpu_event *ev);

struct pp_offcpu_opts {
	unsigned stack_bytes;
	uint64_t min_block_ns;      /* shorter spells are ignored */
	uint64_t sample_ns;         /* Go-style block rate: spells shorter are sampled with p = delay/sample_ns and scaled */
};

struct pp_offcpu *pp_offcpu__new(const struct pp_offcpu_opts *opts, pp_offcpu_event_fn fn, void *ctx);
int pp_offcpu__add_process(struct pp_offcpu *o, pid_t pid);
int pp_offcpu__remove_process(struct pp_offcpu *o, pid_t pid);
int pp_offcpu__poll(struct pp_offcpu *o, int timeout_ms);

struct pp_offcpu_stats {
	uint64_t events, drops, stack_errors;
};
void pp_offcpu__stats(struct pp_offcpu *o, struct pp_offcpu_stats *ret);
void pp_offcpu__free(struct pp_offcpu *o);

#endif
