/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CPU sampler's ring-buffer record decoder, pp_cpu_rec__parse (layout
 * in bpf/cpu.h). The input is one record; it is copied to an 8-aligned
 * buffer as the ring buffer hands it out.
 * Invariants: pointers in the result lie inside the record; counts fit.
 */
#include "fuzz.h"

#include "cpu/cpu.h"

static bool inside(const void *p, size_t n, const uint8_t *buf, size_t len)
{
	const uint8_t *q = p;

	return q >= buf && n <= len && (size_t)(q - buf) <= len - n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_raw_sample s;
	uint64_t *buf = malloc(size / 8 * 8 + 8), sum = 0;
	uint8_t *b = (uint8_t *)buf;
	int err;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	err = pp_cpu_rec__parse(buf, size, 10101010, &s);
	fuzz_check(err == 0 || err == -EINVAL);
	if (err == 0) {
		fuzz_check(s.pid > 0 && s.tid > 0 && s.weight_ns == 10101010);
		if (s.stack)
			fuzz_check(inside(s.stack, s.stack_len, b, size));
		else
			fuzz_check(s.stack_len == 0);
		if (s.kernel_ips)
			fuzz_check(inside(s.kernel_ips, s.n_kernel * 8, b, size));
		else
			fuzz_check(s.n_kernel == 0);
		if (s.user_ips)
			fuzz_check(inside(s.user_ips, s.n_user * 8, b, size));
		else
			fuzz_check(s.n_user == 0);
		for (size_t i = 0; i < s.stack_len; i++)
			sum += s.stack[i];
		for (size_t i = 0; i < s.n_kernel; i++)
			sum += s.kernel_ips[i];
		for (size_t i = 0; i < s.n_user; i++)
			sum += s.user_ips[i];
	}
	free(buf);
	return (int)(sum & 0);
}
