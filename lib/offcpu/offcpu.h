/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Off-CPU and contention tracing (bpf/offcpu.bpf.c) for the block, mutex
 * and threadcreate profiles: BPF on raw/BTF tracepoints (sched_switch,
 * raw_syscalls sys_enter/sys_exit; no tracefs needed), filtered in BPF to
 * the added processes. At the end of a blocking syscall the thread's
 * registers and user stack are copied (task context), so stacks unwind
 * like CPU samples.
 *
 * What counts where:
 *  - MUTEX: off-CPU time inside futex waits (futex FUTEX_WAIT,
 *    FUTEX_WAIT_BITSET, FUTEX_LOCK_PI, FUTEX_LOCK_PI2, FUTEX_WAIT_REQUEUE_PI,
 *    any private/realtime-clock variant; futex_waitv; futex_wait), reported
 *    with the waiter's stack (pthread_mutex_lock, but also condition
 *    variables, semaphores, joins: the kernel cannot tell them apart).
 *  - BLOCK: off-CPU time inside every other syscall (read, poll,
 *    epoll_wait, nanosleep, accept, recv, wait4, ...). Futex waits are not
 *    in BLOCK unless opts.futex_in_block is set, which delivers every MUTEX
 *    event a second time as BLOCK (Go's block profile includes sync.Mutex
 *    and channel waits, so that gives the Go meaning).
 *  - Only voluntary sleeps count: time a thread is preempted while running
 *    a syscall is not blocking. The delay is the sum of the intervals from
 *    switch-out to switch-in during one syscall (so it includes run-queue
 *    wait after the wakeup).
 *  - THREAD_CREATE: clone() or clone3() with CLONE_THREAD that succeeded,
 *    with the creator's stack. new_tid is clone's return value, which is in
 *    the creator's PID namespace; podprof traces only processes of its own
 *    PID namespace (below), where that is the same number.
 *    The stack starts at the caller of the libc clone wrapper: glibc's and
 *    musl's have no CFI after the syscall instruction, so BPF performs
 *    that frameless leaf's `ret` when the return address on the stack
 *    follows a direct call to it.
 *
 * PIDs: processes are selected and reported by their pid/tid in podprof's
 * PID namespace (bpf_get_ns_current_pid_tgid). A process in a child
 * namespace of podprof's (not the sidecar case) produces no events.
 *
 * Sampling (opts.sample_ns, like Go's SetBlockProfileRate): spells >=
 * sample_ns are reported with count 1; shorter ones with probability
 * delay/sample_ns and then count = sample_ns/delay, delay_scaled = sample_ns.
 * Spells shorter than min_block_ns are ignored. A per-process rate cap
 * (opts.max_rate) drops the excess; drops are counted in stats.
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
	PP_OFFCPU_BLOCK = 1, /* time switched out inside a blocking syscall */
	PP_OFFCPU_MUTEX = 2, /* time blocked in futex waits */
	PP_OFFCPU_THREAD_CREATE = 3, /* a clone/clone3 that created a thread (new_tid) */
};

struct pp_offcpu_event {
	enum pp_offcpu_kind kind;
	pid_t pid, tid;
	pid_t new_tid; /* THREAD_CREATE only */
	uint64_t delay_ns; /* BLOCK/MUTEX: off-CPU time */
	double count; /* sampling-scaled contentions (>= 1) */
	double delay_scaled_ns; /* sampling-scaled delay */
	long syscall_nr;
	bool regs_valid;
	struct pp_regs regs;
	const uint8_t *stack; /* borrowed during the callback */
	size_t stack_len;
};

typedef void (*pp_offcpu_event_fn)(void *ctx, const struct pp_offcpu_event *ev);

struct pp_offcpu_opts {
	unsigned stack_bytes;
	uint64_t min_block_ns; /* shorter spells are ignored */
	uint64_t sample_ns; /* Go-style block rate: spells shorter are sampled with p = delay/sample_ns and scaled */
	/* Extensions (0 = default): */
	unsigned ringbuf_bytes; /* ring buffer size, power of two; default 8 MiB */
	unsigned max_rate; /* records per second per process; default 1000 */
	bool futex_in_block; /* also report futex waits as BLOCK (see above) */
};

/*
 * Loads the BPF programs, disabled (needs CAP_BPF + CAP_PERFMON or root).
 * opts may be NULL (defaults: 16 KiB stack, no minimum, no sampling).
 * fn is called from pp_offcpu__poll. Returns NULL with errno on failure.
 */
struct pp_offcpu *pp_offcpu__new(const struct pp_offcpu_opts *opts, pp_offcpu_event_fn fn,
				 void *ctx);
/*
 * The sys_enter, sys_exit and sched_switch programs run for every syscall
 * and context switch of every process on the node, so they are attached
 * only between pp_offcpu__enable(o, true) and (o, false); a new tracer is
 * disabled (only the cheap sched_process_exit program is attached).
 * Disabling forgets in-flight syscalls. 0 or -errno (attach failed: still
 * disabled).
 */
int pp_offcpu__enable(struct pp_offcpu *o, bool on);
bool pp_offcpu__enabled(struct pp_offcpu *o);
/* Start/stop tracing a process (pid in podprof's namespace). add: 0, or
 * -ESRCH (no such process), -ENOSPC (1024 processes traced), -errno.
 * add of a traced pid is 0. remove: 0 or -ENOENT; it also forgets the
 * process's in-flight syscalls, so no event of it is produced afterwards
 * (records already in the ring buffer are still delivered by the next poll). */
int pp_offcpu__add_process(struct pp_offcpu *o, pid_t pid);
int pp_offcpu__remove_process(struct pp_offcpu *o, pid_t pid);
/* Waits up to timeout_ms (0: don't wait) for records and delivers them all
 * to fn. Returns the number delivered or -errno (-EINTR on a signal). */
int pp_offcpu__poll(struct pp_offcpu *o, int timeout_ms);

struct pp_offcpu_stats {
	uint64_t events; /* delivered to fn */
	uint64_t drops; /* ring buffer full, rate cap, thread table full */
	uint64_t stack_errors; /* user stack unreadable (event still delivered, stack_len 0) */
	uint64_t exited; /* targets removed in BPF when their last thread exited */
};
void pp_offcpu__stats(struct pp_offcpu *o, struct pp_offcpu_stats *ret);
/* Detaches and frees everything; NULL is fine. */
void pp_offcpu__free(struct pp_offcpu *o);

#endif
