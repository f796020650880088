/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deepstacks N: N threads, each recursing through DEPTH frames that hold
 * a FRAME_BYTES array (about 96 KiB of live stack per thread), then
 * sleeping for ever. Prints its pid once every thread is parked. For the
 * thread-dump memory test: a dump copies up to cpu.stack_bytes of each.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEPTH 24
#define FRAME_BYTES 4096

static pthread_barrier_t ready;
static volatile int stop; /* never set: keeps the parked threads parked */

__attribute__((noinline)) static int dive(int depth)
{
	volatile char frame[FRAME_BYTES];

	memset((char *)frame, depth, sizeof(frame));
	if (depth == 0) {
		pthread_barrier_wait(&ready);
		while (!stop)
			pause();
		return 0;
	}
	return dive(depth - 1) + frame[depth];
}

static void *worker(void *arg)
{
	(void)arg;
	dive(DEPTH);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	pthread_attr_t attr;

	if (n < 1 || n > 10000)
		return 2;
	pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, worker, NULL))
			return 1;
	}
	pthread_barrier_wait(&ready);
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
