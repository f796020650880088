/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The perf ring-buffer record parsers of lib/cpu: pp_perf__parse_record
 * and pp_perf_ring__next.
 *
 * Input layout: byte 0 selects the mode (bit 0: ring, else record).
 *  record: [8 sample_type][8 regs_mask][record...]; the record's header
 *          size is set to its length unless bit 1 of byte 0 is set.
 *  ring:   [8 head][8 tail][ring data...] with the ring cut to the largest
 *          power of two; then every record it yields is parsed.
 * Invariants: pointers in the result lie inside the record; lengths fit.
 */
#include "fuzz.h"

#include <linux/perf_event.h>

#include "cpu/cpu.h"

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static bool inside(const void *p, size_t n, const uint8_t *buf, size_t len)
{
	const uint8_t *q = p;

	return q >= buf && n <= len && (size_t)(q - buf) <= len - n;
}

static void parse(const uint8_t *rec, size_t len, const struct pp_perf_fmt *fmt)
{
	struct pp_perf_rec r;
	int err;

	err = pp_perf__parse_record(rec, len, fmt, &r);
	fuzz_check(err == 0 || err == -EINVAL || err == -ENOTSUP);
	if (err < 0)
		return;
	if (r.type != PERF_RECORD_SAMPLE)
		return;
	const struct pp_raw_sample *s = &r.sample;
	if (s->stack)
		fuzz_check(inside(s->stack, s->stack_len, rec, len));
	else
		fuzz_check(s->stack_len == 0);
	if (s->kernel_ips)
		fuzz_check(inside(s->kernel_ips, s->n_kernel * 8, rec, len));
	if (s->user_ips)
		fuzz_check(inside(s->user_ips, s->n_user * 8, rec, len));
	/* touch everything the caller would read */
	uint64_t sum = 0;
	for (size_t i = 0; i < s->stack_len; i++)
		sum += s->stack[i];
	for (size_t i = 0; i < s->n_kernel; i++)
		sum += s->kernel_ips[i];
	for (size_t i = 0; i < s->n_user; i++)
		sum += s->user_ips[i];
	__asm__ volatile("" : : "r"(sum));
}

static void fuzz_record(uint8_t mode, const uint8_t *data, size_t size)
{
	struct pp_perf_fmt fmt;
	uint8_t *rec;

	if (size < 16)
		return;
	fmt.sample_type = rd64(data);
	fmt.regs_mask = rd64(data + 8);
	data += 16;
	size -= 16;
	if (size > 65535)
		return;
	/* exact-size, 8-aligned copy (malloc alignment) */
	rec = malloc(size ? size : 1);
	if (!rec)
		return;
	memcpy(rec, data, size);
	if (!(mode & 2) && size >= sizeof(struct perf_event_header)) {
		uint16_t sz = (uint16_t)size;
		memcpy(rec + offsetof(struct perf_event_header, size), &sz, 2);
	}
	parse(rec, size, &fmt);
	free(rec);
}

static void fuzz_ring(const uint8_t *data, size_t size)
{
	static uint8_t scratch[65536] __attribute__((aligned(8)));
	struct pp_perf_fmt fmt = {
		.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
			       PERF_SAMPLE_STACK_USER,
		.regs_mask = 0xff01ff, /* pp_regs__perf_mask(): 17 registers */
	};
	uint64_t head, tail, ring_size = 8;
	uint8_t *ring;

	if (size < 16 + 8)
		return;
	head = rd64(data);
	tail = rd64(data + 8) & ~(uint64_t)7; /* the kernel keeps records 8-aligned */
	data += 16;
	size -= 16;
	while (ring_size * 2 <= size && ring_size < (1u << 20))
		ring_size *= 2;
	ring = malloc(ring_size);
	if (!ring)
		return;
	memcpy(ring, data, ring_size);
	for (int i = 0; i < 64; i++) {
		const uint8_t *rec = NULL;
		int n = pp_perf_ring__next(ring, ring_size, head, tail, scratch, &rec);

		fuzz_check(n >= 0 || n == -EINVAL);
		if (n <= 0)
			break;
		fuzz_check((size_t)n >= sizeof(struct perf_event_header));
		fuzz_check((uint64_t)n <= ring_size);
		fuzz_check(inside(rec, (size_t)n, ring, ring_size) ||
			   inside(rec, (size_t)n, scratch, sizeof(scratch)));
		parse(rec, (size_t)n, &fmt);
		tail += (uint64_t)n; /* n is a multiple of 8 */
	}
	free(ring);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_ring(data + 1, size - 1);
	else
		fuzz_record(data[0], data + 1, size - 1);
	return 0;
}
