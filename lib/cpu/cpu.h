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
	pid_t pid, tid; /* in podprof's PID namespace */
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t weight_ns; /* period represented by this sample */
	bool regs_valid; /* false e.g. for samples taken in a kernel thread */
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
	unsigned frequency_hz; /* samples per second per thread of CPU time */
	unsigned stack_bytes; /* multiple of 8, <= 65528 */
	bool kernel_callchain; /* include kernel frames (needs perf_event_paranoid <= 1 or CAP_PERFMON) */
	bool user_callchain; /* also ask for the kernel's frame-pointer callchain */
	unsigned ring_pages; /* data pages per thread ring (power of 2); 0 = auto (~4 samples) */
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

/*
 * Perf record parsing, pure functions over untrusted buffers (exposed for
 * unit tests and fuzzing). The callback given to pp_cpu_sampler__new must
 * not call back into the sampler (it runs under its lock).
 */
struct pp_perf_fmt {
	uint64_t sample_type; /* PERF_SAMPLE_*: IP TID TIME ADDR ID STREAM_ID CPU PERIOD
				     * CALLCHAIN RAW REGS_USER STACK_USER are understood */
	uint64_t regs_mask; /* sample_regs_user */
};

struct pp_perf_rec {
	uint32_t type; /* PERF_RECORD_* */
	uint64_t lost; /* PERF_RECORD_LOST: lost count */
	uint64_t ip; /* PERF_RECORD_SAMPLE */
	struct pp_raw_sample sample; /* PERF_RECORD_SAMPLE (weight_ns left 0); borrows buf */
};

/*
 * Parse the record of len bytes at buf (8-byte aligned; its header's size
 * must equal len). Returns 0, -EINVAL for a malformed record, -ENOTSUP for
 * a sample_type it cannot walk. ret->sample's pointers borrow buf.
 */
int pp_perf__parse_record(const void *buf, size_t len, const struct pp_perf_fmt *fmt,
			  struct pp_perf_rec *ret);

/*
 * Next record in a perf ring data area of ring_size bytes (power of two)
 * holding bytes [tail, head). A record that wraps is copied into scratch
 * (>= 65536 bytes, 8-aligned). Returns the record length and sets *ret,
 * 0 when the ring is empty, -EINVAL when the ring is corrupt.
 */
int pp_perf_ring__next(const uint8_t *data, uint64_t ring_size, uint64_t head, uint64_t tail,
		       uint8_t *scratch, const uint8_t **ret);

#endif
