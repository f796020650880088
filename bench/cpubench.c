/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpubench [--wait] [threads] [rounds]: a fixed amount of CPU work in functions
 * built without frame pointers; prints the wall time and the process's CPU
 * time (user + system, all threads) of the work in seconds, on one line.
 * Used to measure the slowdown podprof's CPU sampling causes. With --wait it
 * prints "ready" and waits for a line on stdin first, so a profiler can
 * attach before the timed part.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static long g_rounds = 400;

static double cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static uint64_t __attribute__((noinline)) leaf_work(uint64_t x, long n)
{
	for (long i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static uint64_t __attribute__((noinline)) mid_work(uint64_t x)
{
	volatile char pad[4096];
	pad[0] = (char)x;
	return leaf_work(x + (uint64_t)pad[0], 250000);
}

static void *run(void *arg)
{
	uint64_t x = (uintptr_t)arg;
	for (long r = 0; r < g_rounds; r++)
		x = mid_work(x);
	return (void *)(uintptr_t)x;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		char line[16];
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
		argc--;
		argv++;
	}
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 1;
	if (argc > 2)
		g_rounds = strtol(argv[2], NULL, 10);
	if (n < 1 || n > 1024 || g_rounds < 1)
		return 2;
	pthread_t t[1024];
	struct timespec a, b;
	double c0 = cpu_seconds();
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, (void *)(uintptr_t)(i + 1)))
			return 1;
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double c1 = cpu_seconds();
	printf("%.4f %.4f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
	       c1 - c0);
	return 0;
}
