/* SPDX-License-Identifier: Apache-2.0 */
/* Perf record parser and ring reader: pure functions over untrusted bytes. */
#include <asm/perf_regs.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/cpu.h"

#define SAMPLE_TYPE                                                                    \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN | \
	 PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)

static uint64_t rec[256];

/* A sample record as the kernel writes it; returns its size in bytes. */
static size_t build_sample(uint64_t abi, uint64_t stack_size, uint64_t dyn)
{
	size_t i = 1;
	uint64_t mask = pp_regs__perf_mask();

	memset(rec, 0, sizeof(rec));
	rec[i++] = 0x401000; /* ip */
	rec[i++] = (uint64_t)1234 | ((uint64_t)1240 << 32); /* pid, tid */
	rec[i++] = 987654321; /* time */
	rec[i++] = 6; /* callchain nr */
	rec[i++] = (uint64_t)PERF_CONTEXT_KERNEL;
	rec[i++] = 0xffffffff81000010ull;
	rec[i++] = 0xffffffff81000020ull;
	rec[i++] = (uint64_t)PERF_CONTEXT_USER;
	rec[i++] = 0x401000;
	rec[i++] = 0x401234;
	rec[i++] = abi;
	if (abi)
		for (int r = 0; r < __builtin_popcountll(mask); r++)
			rec[i++] = 100 + (uint64_t)r; /* AX BX CX DX SI DI BP SP IP R8..R15 */
	rec[i++] = stack_size;
	if (stack_size) {
		for (uint64_t k = 0; k < stack_size / 8; k++)
			rec[i++] = 0xabc0 + k;
		rec[i++] = dyn;
	}
	struct perf_event_header h = { .type = PERF_RECORD_SAMPLE, .size = (uint16_t)(i * 8) };
	memcpy(rec, &h, sizeof(h));
	return i * 8;
}

static const struct pp_perf_fmt fmt = { .sample_type = SAMPLE_TYPE, .regs_mask = 0 };

static struct pp_perf_fmt full_fmt(void)
{
	struct pp_perf_fmt f = fmt;

	f.regs_mask = pp_regs__perf_mask();
	return f;
}

static void test_sample(void **state)
{
	struct pp_perf_fmt f = full_fmt();
	struct pp_perf_rec r;
	size_t len = build_sample(PERF_SAMPLE_REGS_ABI_64, 64, 40);

	assert_int_equal(pp_perf__parse_record(rec, len, &f, &r), 0);
	assert_int_equal(r.type, PERF_RECORD_SAMPLE);
	assert_int_equal(r.ip, 0x401000);
	assert_int_equal(r.sample.pid, 1234);
	assert_int_equal(r.sample.tid, 1240);
	assert_int_equal(r.sample.time_ns, 987654321);
	assert_int_equal(r.sample.n_kernel, 2);
	assert_int_equal(r.sample.kernel_ips[0], 0xffffffff81000010ull);
	assert_int_equal(r.sample.kernel_ips[1], 0xffffffff81000020ull);
	assert_int_equal(r.sample.n_user, 2);
	assert_int_equal(r.sample.user_ips[1], 0x401234);
	assert_true(r.sample.regs_valid);
	/* perf order AX=100 BX=101 CX=102 DX=103 SI DI BP SP IP=108 R8=109 .. R15=116 */
	assert_int_equal(r.sample.regs.r[0], 100); /* rax */
	assert_int_equal(r.sample.regs.r[1], 103); /* rdx */
	assert_int_equal(r.sample.regs.r[2], 102); /* rcx */
	assert_int_equal(r.sample.regs.r[3], 101); /* rbx */
	assert_int_equal(r.sample.regs.r[PP_REG_BP], 106);
	assert_int_equal(r.sample.regs.r[PP_REG_SP], 107);
	assert_int_equal(r.sample.regs.r[PP_REG_IP], 108);
	assert_int_equal(r.sample.regs.r[8], 109);
	assert_int_equal(r.sample.regs.r[15], 116);
	assert_int_equal(r.sample.stack_len, 40); /* dyn_size < size */
	uint64_t w;
	memcpy(&w, r.sample.stack + 8, 8);
	assert_int_equal(w, 0xabc1);
}

static void test_sample_no_regs(void **state)
{
	struct pp_perf_fmt f = full_fmt();
	struct pp_perf_rec r;
	size_t len = build_sample(PERF_SAMPLE_REGS_ABI_NONE, 0, 0);

	assert_int_equal(pp_perf__parse_record(rec, len, &f, &r), 0);
	assert_false(r.sample.regs_valid);
	assert_null(r.sample.stack);
	assert_int_equal(r.sample.stack_len, 0);
}

static void test_truncated(void **state)
{
	struct pp_perf_fmt f = full_fmt();
	struct pp_perf_rec r;
	size_t len = build_sample(PERF_SAMPLE_REGS_ABI_64, 64, 64);

	/* Every shorter record (header size kept consistent) is malformed. */
	for (size_t l = 8; l < len; l += 8) {
		struct perf_event_header h;
		memcpy(&h, rec, sizeof(h));
		h.size = (uint16_t)l;
		memcpy(rec, &h, sizeof(h));
		assert_int_equal(pp_perf__parse_record(rec, l, &f, &r), -EINVAL);
	}
	/* size disagreeing with len */
	build_sample(PERF_SAMPLE_REGS_ABI_64, 64, 64);
	assert_int_equal(pp_perf__parse_record(rec, len - 8, &f, &r), -EINVAL);
	assert_int_equal(pp_perf__parse_record(rec, 4, &f, &r), -EINVAL);
	/* absurd callchain length */
	build_sample(PERF_SAMPLE_REGS_ABI_64, 64, 64);
	rec[4] = UINT64_MAX / 4;
	assert_int_equal(pp_perf__parse_record(rec, len, &f, &r), -EINVAL);
	/* absurd stack size */
	len = build_sample(PERF_SAMPLE_REGS_ABI_NONE, 8, 8);
	rec[len / 8 - 3] = UINT64_MAX - 3;
	assert_int_equal(pp_perf__parse_record(rec, len, &f, &r), -EINVAL);
	/* unknown sample_type bits */
	f.sample_type |= PERF_SAMPLE_BRANCH_STACK;
	len = build_sample(PERF_SAMPLE_REGS_ABI_64, 64, 64);
	assert_int_equal(pp_perf__parse_record(rec, len, &f, &r), -ENOTSUP);
}

static void test_lost(void **state)
{
	uint64_t buf[3];
	struct perf_event_header h = { .type = PERF_RECORD_LOST, .size = sizeof(buf) };
	struct pp_perf_rec r;

	memcpy(buf, &h, sizeof(h));
	buf[1] = 7;
	buf[2] = 42;
	assert_int_equal(pp_perf__parse_record(buf, sizeof(buf), &fmt, &r), 0);
	assert_int_equal(r.type, PERF_RECORD_LOST);
	assert_int_equal(r.lost, 42);
	h.size = 16;
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(pp_perf__parse_record(buf, 16, &fmt, &r), -EINVAL);
}

static void test_random_bytes(void **state)
{
	struct pp_perf_fmt f = full_fmt();
	struct pp_perf_rec r;
	uint64_t seed = 88172645463325252ull;

	for (int it = 0; it < 20000; it++) {
		size_t words = 1 + (size_t)(seed % 200);
		for (size_t k = 0; k < words; k++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			/* small numbers are likelier to look like sizes */
			rec[k] = (k % 3 == 0) ? (seed & 0xff) : seed;
		}
		struct perf_event_header h = { .type = (uint32_t)(seed % 12),
					       .size = (uint16_t)(words * 8) };
		memcpy(rec, &h, sizeof(h));
		int ret = pp_perf__parse_record(rec, words * 8, &f, &r);
		assert_true(ret == 0 || ret == -EINVAL);
		if (ret == 0 && r.type == PERF_RECORD_SAMPLE) {
			assert_true(r.sample.n_kernel <= words);
			assert_true(r.sample.stack_len <= words * 8);
		}
	}
}

static void put(uint8_t *ring, uint64_t size, uint64_t pos, const void *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ring[(pos + i) & (size - 1)] = ((const uint8_t *)src)[i];
}

static void test_ring(void **state)
{
	_Alignas(8) uint8_t ring[256];
	static _Alignas(8) uint8_t scratch[65536];
	const uint8_t *out;
	uint64_t tail = 1000 * 256 + 200; /* positions are free-running counters */
	uint64_t payload[12];
	struct perf_event_header h = { .type = PERF_RECORD_SAMPLE, .size = sizeof(payload) };

	for (size_t i = 0; i < 12; i++)
		payload[i] = 0x1111111111111111ull * i;
	memcpy(payload, &h, sizeof(h));
	memset(ring, 0, sizeof(ring));
	put(ring, 256, tail, payload, sizeof(payload));

	assert_int_equal(pp_perf_ring__next(ring, 256, tail, tail, scratch, &out), 0);
	/* wraps: 56 bytes at the end, 40 at the start */
	assert_int_equal(pp_perf_ring__next(ring, 256, tail + 96, tail, scratch, &out), 96);
	assert_ptr_equal(out, scratch);
	assert_memory_equal(out, payload, sizeof(payload));
	/* no wrap */
	put(ring, 256, tail + 96, payload, sizeof(payload));
	assert_int_equal(pp_perf_ring__next(ring, 256, tail + 192, tail + 96, scratch, &out), 96);
	assert_ptr_equal(out, ring + ((tail + 96) & 255));
	/* header wrapping across the end */
	uint64_t t2 = 256 * 7 + 252;
	put(ring, 256, t2, payload, sizeof(payload));
	assert_int_equal(pp_perf_ring__next(ring, 256, t2 + 96, t2, scratch, &out), 96);
	assert_memory_equal(out, payload, sizeof(payload));
	/* corrupt: record larger than the data, size 0, unaligned, head too far */
	assert_int_equal(pp_perf_ring__next(ring, 256, tail + 64, tail, scratch, &out), -EINVAL);
	h.size = 0;
	put(ring, 256, tail, &h, sizeof(h));
	assert_int_equal(pp_perf_ring__next(ring, 256, tail + 96, tail, scratch, &out), -EINVAL);
	h.size = 12;
	put(ring, 256, tail, &h, sizeof(h));
	assert_int_equal(pp_perf_ring__next(ring, 256, tail + 96, tail, scratch, &out), -EINVAL);
	assert_int_equal(pp_perf_ring__next(ring, 256, tail + 512, tail, scratch, &out), -EINVAL);
	assert_int_equal(pp_perf_ring__next(ring, 100, tail + 8, tail, scratch, &out), -EINVAL);
}

static void test_regs_mask(void **state)
{
	uint64_t m = pp_regs__perf_mask();
	uint64_t perf[64];
	struct pp_regs r;

	assert_int_equal(__builtin_popcountll(m), 17);
	assert_false(m & (1ull << PERF_REG_X86_FLAGS));
	for (int i = 0; i < 64; i++)
		perf[i] = 1000 + (uint64_t)i;
	/* only IP and SP requested: they are the first two values */
	pp_regs__from_perf(&r, perf, (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP));
	assert_int_equal(r.r[PP_REG_SP], 1000);
	assert_int_equal(r.r[PP_REG_IP], 1001);
	assert_int_equal(r.r[0], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample),	     cmocka_unit_test(test_sample_no_regs),
		cmocka_unit_test(test_truncated),    cmocka_unit_test(test_lost),
		cmocka_unit_test(test_random_bytes), cmocka_unit_test(test_ring),
		cmocka_unit_test(test_regs_mask),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
