/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU sampler: one software cpu-clock perf event per CPU at a fixed period,
 * each running a BPF program (bpf/cpu.bpf.c) that keeps the samples of the
 * added processes and copies their user registers, user stack and kernel
 * callchain into one BPF ring buffer. Every thread of an added process is
 * sampled, threads born later and short-lived ones included; children
 * forked by an added process are adopted (sampled from their first tick).
 * Cost and memory scale with the number of CPUs, not of threads; while
 * sampling is off the events are disabled and cost nothing.
 *
 * Samples are handed raw to a callback from pp_cpu_sampler__poll; unwinding
 * is the caller's (the stack bytes are valid only during the callback).
 *
 * Thread-safety and locks: add/remove/enable/flush/stats may be called from
 * any thread; they take the sampler's lock only around bookkeeping (no file
 * I/O, no callback under it). poll from one thread only: it invokes the
 * callback on that thread with no sampler lock held. flush must not be
 * called from the callback or the polling thread.
 */
#ifndef PODPROF_CPU_H
#define PODPROF_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

struct pp_raw_sample {
	pid_t pid, tid; /* in podprof's PID namespace */
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t weight_ns; /* period represented by this sample */
	bool regs_valid; /* false when the task's user registers were unavailable */
	struct pp_regs regs;
	const uint8_t *stack; /* copied user stack from regs.r[PP_REG_SP]; borrowed */
	size_t stack_len;
	const uint64_t *kernel_ips; /* kernel callchain, leaf first; borrowed */
	size_t n_kernel;
	const uint64_t
		*user_ips; /* frame-pointer user callchain from the kernel, leaf first; borrowed */
	size_t n_user;
};

typedef void (*pp_cpu_sample_fn)(void *ctx, const struct pp_raw_sample *s);

struct pp_cpu_opts {
	unsigned frequency_hz; /* samples per second of CPU time (1..100000) */
	unsigned stack_bytes; /* multiple of 8, <= 65528 */
	bool kernel_callchain; /* include kernel frames (needs perf_event_paranoid <= 1 or CAP_PERFMON) */
	bool user_callchain; /* also ask for the kernel's frame-pointer callchain */
	bool no_children; /* do not adopt children forked by added processes */
	unsigned ringbuf_bytes; /* power of 2; 0 = auto (see cpu.c; 1..64 MiB) */
};

/* NULL with errno set: EINVAL (opts), EPERM/EACCES (no CAP_BPF/CAP_PERFMON,
 * or a seccomp filter refusing bpf/perf_event_open), ENODEV (no CPU event
 * could be opened). */
struct pp_cpu_sampler *pp_cpu_sampler__new(const struct pp_cpu_opts *opts, pp_cpu_sample_fn fn,
					   void *ctx);
/* Sample every thread of pid (in podprof's PID namespace), present and
 * future; idempotent. -E2BIG when the target table is full. */
int pp_cpu_sampler__add_process(struct pp_cpu_sampler *s, pid_t pid);
/* Stop sampling pid and the children adopted through it; -ENOENT if absent. */
int pp_cpu_sampler__remove_process(struct pp_cpu_sampler *s, pid_t pid);
/* Turn sampling on or off (events stay open). Off costs every process nothing. */
int pp_cpu_sampler__enable(struct pp_cpu_sampler *s, bool on);
/* Wait up to timeout_ms for samples, deliver them; returns number delivered or -errno. */
int pp_cpu_sampler__poll(struct pp_cpu_sampler *s, int timeout_ms);
/* Wait (up to timeout_ms) until every sample taken before the call has been
 * delivered by pp_cpu_sampler__poll on its thread. 0, or -ETIMEDOUT. */
int pp_cpu_sampler__flush(struct pp_cpu_sampler *s, int timeout_ms);

struct pp_cpu_stats {
	uint64_t samples; /* delivered to the callback */
	uint64_t lost; /* taken but never delivered: ring buffer full, malformed record */
	uint64_t stack_errors; /* delivered without a user stack (first page unreadable) */
	uint64_t adopt_errors; /* forked children that could not be tracked */
	uint64_t adopted; /* children adopted */
	uint64_t exited; /* targets removed in BPF when their last thread exited */
	uint64_t events_open; /* per-CPU events */
	uint64_t open_errors; /* CPUs whose event could not be opened: their time is not sampled */
	uint64_t targets; /* processes sampled now (adopted children included) */
	uint64_t queued; /* written to the ring buffer, not delivered yet */
};
void pp_cpu_sampler__stats(struct pp_cpu_sampler *s, struct pp_cpu_stats *ret);
void pp_cpu_sampler__free(struct pp_cpu_sampler *s);

/*
 * Decode one ring-buffer record of len bytes (layout in bpf/cpu.h) into
 * ret, whose pointers then borrow buf. A pure function over the bytes,
 * exposed for unit tests and fuzzing. 0, or -EINVAL for a malformed record.
 */
int pp_cpu_rec__parse(const void *buf, size_t len, uint64_t weight_ns, struct pp_raw_sample *ret);

#endif
