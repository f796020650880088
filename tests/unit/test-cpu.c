/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU sampler's ring-buffer record decoder: a pure function over bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/cpu.h"
#include "../../bpf/cpu.h"

static uint64_t buf[(sizeof(struct cpu_rec) + 4096) / 8 + 1];

/* A record as bpf/cpu.bpf.c writes it; returns its size in bytes. */
static size_t build(uint32_t flags, uint32_t stack_len, uint32_t n_kernel, uint32_t n_user)
{
	struct cpu_rec r = { .pid = 1234,
			     .tid = 1240,
			     .time_ns = 987654321,
			     .flags = flags,
			     .stack_len = stack_len,
			     .n_kernel = n_kernel,
			     .n_user = n_user };

	for (int i = 0; i < CPU_NREGS; i++)
		r.regs[i] = 0x1000 + (uint64_t)i;
	for (int i = 0; i < CPU_MAX_IPS; i++) {
		r.kernel_ips[i] = 0xffffffff81000000ull + 16 * (uint64_t)i;
		r.user_ips[i] = 0x401000 + 16 * (uint64_t)i;
	}
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &r, sizeof(r));
	for (uint32_t i = 0; i < stack_len && i < 4096; i++)
		((uint8_t *)buf)[sizeof(r) + i] = (uint8_t)i;
	return sizeof(r) + (stack_len < 4096 ? stack_len : 4096);
}

static void test_valid(void **state)
{
	struct pp_raw_sample s;
	size_t len = build(CPU_F_REGS, 256, 3, 2);

	(void)state;
	assert_int_equal(pp_cpu_rec__parse(buf, len, 10101010, &s), 0);
	assert_int_equal(s.pid, 1234);
	assert_int_equal(s.tid, 1240);
	assert_int_equal(s.time_ns, 987654321);
	assert_int_equal(s.weight_ns, 10101010);
	assert_true(s.regs_valid);
	assert_int_equal(s.regs.r[PP_REG_SP], 0x1000 + PP_REG_SP);
	assert_int_equal(s.stack_len, 256);
	assert_ptr_equal(s.stack, (uint8_t *)buf + sizeof(struct cpu_rec));
	assert_int_equal(s.stack[255], 255);
	assert_int_equal(s.n_kernel, 3);
	assert_int_equal(s.kernel_ips[2], 0xffffffff81000020ull);
	assert_int_equal(s.n_user, 2);
	assert_int_equal(s.user_ips[1], 0x401010);
}

static void test_no_stack_no_chains(void **state)
{
	struct pp_raw_sample s;
	size_t len = build(0, 0, 0, 0);

	(void)state;
	assert_int_equal(pp_cpu_rec__parse(buf, len, 1, &s), 0);
	assert_false(s.regs_valid);
	assert_null(s.stack);
	assert_null(s.kernel_ips);
	assert_null(s.user_ips);
}

static void test_malformed(void **state)
{
	struct pp_raw_sample s;
	size_t len;

	(void)state;
	/* Stack longer than the record. */
	len = build(CPU_F_REGS, 64, 0, 0);
	assert_int_equal(pp_cpu_rec__parse(buf, len - 1, 1, &s), -EINVAL);
	/* Truncated header. */
	assert_int_equal(pp_cpu_rec__parse(buf, sizeof(struct cpu_rec) - 8, 1, &s), -EINVAL);
	/* Callchain counts over the arrays. */
	len = build(CPU_F_REGS, 0, CPU_MAX_IPS + 1, 0);
	assert_int_equal(pp_cpu_rec__parse(buf, len, 1, &s), -EINVAL);
	len = build(CPU_F_REGS, 0, 0, CPU_MAX_IPS + 1);
	assert_int_equal(pp_cpu_rec__parse(buf, len, 1, &s), -EINVAL);
	/* Stack over the maximum copy. */
	len = build(CPU_F_REGS, CPU_MAX_STACK + 8, 0, 0);
	assert_int_equal(pp_cpu_rec__parse(buf, len, 1, &s), -EINVAL);
	/* Unaligned buffer, NULLs. */
	len = build(0, 0, 0, 0);
	assert_int_equal(pp_cpu_rec__parse((uint8_t *)buf + 1, len - 1, 1, &s), -EINVAL);
	assert_int_equal(pp_cpu_rec__parse(NULL, len, 1, &s), -EINVAL);
	/* pid 0 (the idle task) never reaches user space. */
	len = build(0, 0, 0, 0);
	memset(buf, 0, sizeof(uint32_t)); /* pid is the first field */
	assert_int_equal(pp_cpu_rec__parse(buf, len, 1, &s), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_no_stack_no_chains),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
