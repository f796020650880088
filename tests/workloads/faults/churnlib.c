/* SPDX-License-Identifier: Apache-2.0 */
/* The library dlchurn maps and unmaps. */
#include <stdint.h>

uint64_t churn_work(uint64_t x, unsigned long n);

__attribute__((noinline)) uint64_t churn_work(uint64_t x, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}
