/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU sampler: perf_event cpu-clock at a fixed frequency on every thread of
 * the added processes (threads and children created later too), with
 * PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER and the kernel callchain.
 * Samples are handed raw to a callback from pp_cpu_sampler__poll; unwinding
 * is the caller's (the stack bytes are valid only during the callback).
 *
 * Thread-safety: add/remove/enable may be called from any thread; poll
 * from one thread only (it invokes the callback on that thread).
 */
#ifndef PODPROF_CPU_H
#define PODPROF_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

struct pp_raw_sample {
	pid_t pid, tid;             /* in podprof's PID namespace */
	uint64_t time_ns;           /* CLOCK_MONOTONIC */
	uint64_t weight_ns;         /* period represented by this sample */
	bool regs_valid;            /* false e.g. for samples taken in a kernel thread */
	struct pp_regs regs;
	const uint8_t *stack;       /* copied user stack from regs.r[PP_REG_SP]; borrowed */
	size_t stack_len;
	const uint64_t *kernel_ips; /* kernel callchain, leaf first; borrowed */
	size_t n_kernel;
	const uint64_t *user_ips;   /* frame-pointer user callchain from the kernel, leaf first; borrowed */
	size_t n_user;
};

typedef void (*pp_cpu_sample_fn)(void *ctx, const struct pp_raw_sample *s);

struct pp_cpu_opts {
	unsigned frequency_hz;      /* samples per second per thread of CPU time */
	unsigned stack_bytes;       /* multiple of 8, <= 65528 */
	bool kernel_callchain;      /* include kernel frames (needs perf_event_paranoid <= 1 or CAP_PERFMON) */
	bool user_callchain;        /* also ask for the kernel's frame-pointer callchain */
};

struct pp_cpu_sampler *pp_cpu_sampler__new(const struct pp_cpu_opts *opts, pp_cpu_sample_fn fn,
					   void *ctx);
/* Sample every thread of pid, present and future; idempotent. */
int pp_cpu_sampler__add_process(struct pp_cpu_sampler *s, pid_t pid);
int pp_cpu_sampler__remove_process(struct pp_cpu_sampler *s, pid_t pid);
/* Turn sampling on or off (events stay open). Off costs the target nothing. */
int pp_cpu_sampler__enable(struct pp_cpu_sampler *s, bool on);
/* Wait up to timeout_ms for samples, deliver them; returns number delivered or -errno. */
int pp_cpu_sampler__poll(struct pp_cpu_sampler *s, int timeout_ms);

struct pp_cpu_stats {
	uint64_t samples, lost, throttled, events_open, open_errors;
};
void pp_cpu_sampler__stats(struct pp_cpu_sampler *s, struct pp_cpu_stats *ret);
void pp_cpu_sampler__free(struct pp_cpu_sampler *s);

#endif
