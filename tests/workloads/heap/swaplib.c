/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two libraries dlswap loads in turn at the same address, built from
 * this file: SWAP_A with 64 KiB of read-only padding before its GOT, SWAP_B
 * with a 128 KiB canary array in .data, so that B's data covers the place
 * of A's GOT. Each call allocates through the (lazily bound) PLT and checks
 * that its data is its own: __dso_handle still holds its own address and
 * every canary word its value; a write into them aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__dso_handle;

#define NCANARY 16384
#ifdef SWAP_A
#define CANARY 0xa5a5a5a5a5a5a5a5ull
__attribute__((used)) static const char pad[65536] = { 1 };
static volatile uint64_t canary[8] = { [0 ... 7] = CANARY };
#define N 8
#else
#define CANARY 0x5b5b5b5b5b5b5b5bull
static volatile uint64_t canary[NCANARY] = { [0 ... NCANARY - 1] = CANARY };
#define N NCANARY
#endif

uint64_t swap_work(uint64_t seed);

uint64_t swap_work(uint64_t seed)
{
	uint64_t sum = 0;

	if (__dso_handle != &__dso_handle)
		abort();
	for (int i = 0; i < N; i++)
		if (canary[i] != CANARY)
			abort();
	for (int i = 0; i < 16; i++) {
		size_t n = 16 + (size_t)((seed + i) % 200);
		unsigned char *p = i % 2 ? calloc(1, n) : malloc(n);

		if (!p)
			abort();
		memset(p, (int)(seed + i), n);
		if (i % 4 == 3) {
			p = realloc(p, 2 * n);
			if (!p)
				abort();
		}
		sum += p[n - 1];
		free(p);
	}
	return sum;
}
