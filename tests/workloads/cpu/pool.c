/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shape of most C++ and Rust servers, for the CPU sampler.
 *
 * pool N BURST_US PERIOD_MS: prints its pid, starts N threads named
 *   "pool-<i>"; each burns about BURST_US of its own CPU time in
 *   pool_burn() and sleeps about PERIOD_MS - BURST_US, both drawn
 *   uniformly within +-50%. Runs until killed.
 * short LIFE_MS: prints its pid, then creates threads one after another,
 *   each burning LIFE_MS of its own CPU time in short_burn() and exiting;
 *   the main thread only waits for them. Runs until killed.
 */
#include <pthread.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

static volatile uint64_t sink;
static long burst_ns, period_ns, life_ns;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Burns ns of this thread's CPU time in small units. */
#define BURN_FN(name, k)                                         \
	__attribute__((noinline)) static void name(long ns)      \
	{                                                        \
		uint64_t x = (uint64_t)(uintptr_t)&x ^ (k);      \
		uint64_t until = thread_cpu_ns() + (uint64_t)ns; \
		while (thread_cpu_ns() < until)                  \
			SPIN_KERNEL(x, 20000ul + (k));           \
		sink = x;                                        \
	}

BURN_FN(pool_burn, 1)
BURN_FN(short_burn, 2)

static void *pool_thread(void *arg)
{
	char name[16];

	snprintf(name, sizeof(name), "pool-%d", (int)(intptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;

	/* Bursts and sleeps vary by +-50% around their means, and the timer
	 * slack is minimal, so no thread runs in step with the sampler's
	 * timer (a phase-locked workload is over- or under-sampled by any
	 * timer-driven profiler, perf included). */
	prctl(PR_SET_TIMERSLACK, 1UL);
	for (;;) {
		long b = burst_ns / 2 + (long)(rand_r(&seed) % (unsigned)burst_ns);
		long z = (period_ns - burst_ns) / 2 +
			 (long)(rand_r(&seed) % (unsigned)(period_ns - burst_ns));
		struct timespec d = { z / 1000000000, z % 1000000000 };

		pool_burn(b);
		nanosleep(&d, NULL);
	}
	return NULL;
}

static void *short_thread(void *arg)
{
	short_burn(life_ns);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "pool") == 0) {
		int n = atoi(argv[2]);
		burst_ns = atol(argv[3]) * 1000;
		period_ns = atol(argv[4]) * 1000000;
		if (n <= 0 || n > 4096 || burst_ns <= 0 || period_ns <= burst_ns ||
		    period_ns >= 1000000000)
			return 2;
		printf("%d\n", (int)getpid());
		fflush(stdout);
		for (int i = 0; i < n; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, pool_thread, (void *)(intptr_t)i) != 0)
				return 1;
		}
		for (;;)
			pause();
	}
	if (argc == 3 && strcmp(argv[1], "short") == 0) {
		life_ns = atol(argv[2]) * 1000000;
		if (life_ns <= 0)
			return 2;
		printf("%d\n", (int)getpid());
		fflush(stdout);
		for (;;) {
			pthread_t t;
			if (pthread_create(&t, NULL, short_thread, NULL) != 0)
				return 1;
			pthread_join(t, NULL);
		}
	}
	fprintf(stderr, "usage: pool pool N BURST_US PERIOD_MS | pool short LIFE_MS\n");
	return 2;
}
