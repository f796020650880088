/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap workload whose stacks get deeper: for the heap tracer's stack copy
 * sizing. Prints "running", then allocates 4 KiB blocks from shallow_site()
 * (called by main) until SIGUSR1, then from deep_site() at the bottom of a
 * recursion of DEPTH frames of ~1 KiB each (about 20 KiB of stack) until
 * a second SIGUSR1, then prints "idle <shallow> <deep>" (blocks allocated)
 * and waits for SIGTERM to exit 0. Blocks are kept in a ring of 256 (the older ones freed), so both sites
 * show in alloc_space; a short pause every 64 blocks keeps the rate near
 * 20,000 blocks a second, like a busy service rather than a storm.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BLOCK 4096
#define RING 256
#define DEPTH 20

static volatile sig_atomic_t phase; /* 0 shallow, 1 deep, 2 idle, 3 stop */
static void *ring[RING];
static unsigned long n_shallow, n_deep, sink;

static void on_signal(int sig)
{
	phase = sig == SIGUSR1 ? (phase < 2 ? phase + 1 : phase) : 3;
}

static void keep(void *p, unsigned long i)
{
	free(ring[i % RING]);
	ring[i % RING] = p;
	memset(p, (int)i, 64);
}

NOINLINE void shallow_site(void)
{
	keep(malloc(BLOCK), n_shallow++);
}

NOINLINE void deep_site(void)
{
	keep(malloc(BLOCK), n_deep++);
}

/* ~1 KiB of stack a frame: the copy must reach DEPTH of them to find main. */
NOINLINE unsigned long deep(int n)
{
	volatile char pad[1000];

	pad[0] = (char)n;
	pad[sizeof(pad) - 1] = (char)n;
	if (n == 0)
		deep_site();
	else
		sink += deep(n - 1);
	return (unsigned long)pad[0] + pad[sizeof(pad) - 1];
}

static void pause_a_little(unsigned long i)
{
	if (i % 64 == 0) {
		struct timespec ts = { 0, 3000000 }; /* 3 ms */

		nanosleep(&ts, NULL);
	}
}

int main(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("running\n");
	fflush(stdout);
	while (phase == 0) {
		shallow_site();
		pause_a_little(n_shallow);
	}
	while (phase == 1) {
		sink += deep(DEPTH);
		pause_a_little(n_deep);
	}
	printf("idle %lu %lu\n", n_shallow, n_deep);
	fflush(stdout);
	while (phase == 2)
		pause();
	for (unsigned i = 0; i < RING; i++)
		free(ring[i]);
	return 0;
}
