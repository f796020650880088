/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spin [threads]: every thread (the main one included) loops forever over
 * the same round of work, split by iteration count:
 *   hot_a 40%, hot_b 30% (called below a frame holding a 16 KiB array, so
 *   a full unwind needs a deep stack copy), hot_c 20%, lib_hot 10% (in
 *   libwlspin.so; compiled in for the static variant).
 * Prints its pid on stdout, runs until killed. Built with
 * -fomit-frame-pointer: only CFI unwinding gives complete stacks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spin.h"

#define ROUND 20000ul

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t hot_a(uint64_t x)
{
	SPIN_KERNEL(x, ROUND * 4);
	return x;
}

__attribute__((noinline)) static uint64_t hot_b(uint64_t x)
{
	SPIN_KERNEL(x, ROUND * 3);
	return x;
}

__attribute__((noinline)) static uint64_t hot_c(uint64_t x)
{
	SPIN_KERNEL(x, ROUND * 2);
	return x;
}

__attribute__((noinline)) static uint64_t big_frame(uint64_t x)
{
	volatile char big[16384];

	/* Use the whole array, as real code would: the kernel copies only
	 * stack pages that are present. */
	for (size_t i = 0; i < sizeof(big); i += 512)
		big[i] = (char)i;
	big[0] = (char)x;
	big[sizeof(big) - 1] = (char)(x >> 8);
	x = hot_b(x + (uint64_t)big[0]);
	return x + (uint64_t)big[sizeof(big) - 1];
}

__attribute__((noinline)) static void worker_loop(uint64_t seed)
{
	uint64_t x = seed;

	for (;;) {
		x = hot_a(x);
		x = big_frame(x);
		x = hot_c(x);
		x = lib_hot(x, ROUND);
		sink = x;
	}
}

static void *thread_main(void *arg)
{
	worker_loop((uint64_t)(uintptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = 2;

	if (argc > 1) {
		char *end;
		n = strtol(argv[1], &end, 10);
		if (*end || n < 1 || n > 64)
			return 2;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (long i = 1; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, thread_main, (void *)(uintptr_t)(i + 1)) != 0)
			return 1;
	}
	worker_loop(1);
	return 0;
}
