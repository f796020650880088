/* SPDX-License-Identifier: Apache-2.0 */
/*
 * forker [delay_ms]: prints its pid, burns CPU in parent_burn() on the main
 * thread; after delay_ms (default 500) starts a thread burning in
 * late_thread_burn() and forks a child that burns in child_burn() on its
 * main thread and child_thread_burn() in a thread of its own. Everything
 * runs until killed (the child dies with the parent).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

static volatile uint64_t sink;

/* Distinct constants, so the compiler cannot fold them into one function. */
#define BURN_FN(name, k)                                    \
	__attribute__((noinline)) static void name(void)    \
	{                                                   \
		uint64_t x = (uint64_t)(uintptr_t)&x ^ (k); \
		SPIN_KERNEL(x, 100000ul + (k));             \
		sink = x;                                   \
	}

BURN_FN(parent_burn, 1)
BURN_FN(late_thread_burn, 2)
BURN_FN(child_burn, 3)
BURN_FN(child_thread_burn, 4)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *late_thread(void *arg)
{
	for (;;)
		late_thread_burn();
	return NULL;
}

static void *child_thread(void *arg)
{
	for (;;)
		child_thread_burn();
	return NULL;
}

int main(int argc, char **argv)
{
	long delay = 500;
	pid_t parent = getpid();

	if (argc > 1) {
		char *end;
		delay = strtol(argv[1], &end, 10);
		if (*end || delay < 0 || delay > 100000)
			return 2;
	}
	printf("%d\n", (int)parent);
	fflush(stdout);

	uint64_t t0 = now_ms();
	while (now_ms() - t0 < (uint64_t)delay)
		parent_burn();

	pthread_t t;
	if (pthread_create(&t, NULL, late_thread, NULL) != 0)
		return 1;
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		pthread_t ct;
		if (pthread_create(&ct, NULL, child_thread, NULL) != 0)
			_exit(1);
		for (;;)
			child_burn();
	}
	for (;;)
		parent_burn();
	return 0;
}
