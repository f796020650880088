/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap workload: known amounts at known call sites, for the heap tracer's
 * tests. Usage: sites full|small|lostfree
 *
 * lostfree: the small site_a and the full site_c; after "ready" and the
 * second SIGUSR1 it frees site_a's blocks, prints "freed" and waits for a
 * third (a tracer that has not drained its ring buffer sees these frees
 * while the buffer is full).
 *
 * Protocol on stdout: "waiting <&site_a> <&main>" then it blocks until
 * SIGUSR1 (so a tracer can attach first), allocates, prints "ready", and
 * blocks until SIGUSR1 or SIGTERM again, then exits 0.
 *
 * Sizes are chosen to be unlike anything libc allocates internally, so a
 * test can tell the sites apart by size:
 *   site_a  malloc(4000)        kept live   (full: 16777 = ~64 MiB)
 *   site_b  calloc(10, 1601)    kept live   (full: 1048 = ~16 MiB)
 *   site_c  malloc(65000)+free  2 threads   (full: 16520 = ~1 GiB)
 *   realloc chain 10001 -> 10002 -> ... (10 steps), kept live
 *   posix_memalign 1111, aligned_alloc 2224, memalign 3333, valloc 4444,
 *   each freed; reallocarray(NULL, 5, 1111) kept live
 */
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

#define NOINLINE __attribute__((noinline))

#define A_SIZE 4000
#define B_N 10
#define B_M 1601
#define C_SIZE 65000
#define CHAIN 10

static unsigned n_a, n_b, n_c;
static void **keep_a, **keep_b;
static void *keep_chain, *keep_ra;
static volatile unsigned long sink;

NOINLINE void site_a(void)
{
	for (unsigned i = 0; i < n_a; i++) {
		keep_a[i] = malloc(A_SIZE);
		sink += (unsigned long)keep_a[i];
	}
}

NOINLINE void site_b(void)
{
	for (unsigned i = 0; i < n_b; i++) {
		keep_b[i] = calloc(B_N, B_M);
		sink += (unsigned long)keep_b[i];
	}
}

NOINLINE void site_c(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		char *p = malloc(C_SIZE);

		if (p)
			p[i % C_SIZE] = 1;
		sink += (unsigned long)p;
		free(p);
	}
}

static void *site_c_thread(void *arg)
{
	site_c((unsigned)(unsigned long)arg);
	return NULL;
}

NOINLINE void site_realloc(void)
{
	void *p = NULL;

	for (unsigned i = 0; i < CHAIN; i++) {
		void *q = realloc(p, 10001 + i);

		if (!q)
			abort();
		p = q;
	}
	keep_chain = p;
	keep_ra = reallocarray(NULL, 5, 1111);
}

NOINLINE void site_aligned(void)
{
	void *p = NULL;

	/* Every result goes to sink: the compiler may drop an unused
	 * malloc/free pair (aligned_alloc is a builtin). */
	if (posix_memalign(&p, 64, 1111) != 0)
		abort();
	sink += (unsigned long)p;
	free(p);
	p = aligned_alloc(16, 2224);
	sink += (unsigned long)p;
	free(p);
	p = memalign(128, 3333);
	sink += (unsigned long)p;
	free(p);
	p = valloc(4444);
	sink += (unsigned long)p;
	free(p);
}

static void wait_usr1(void)
{
	sigset_t set;
	int sig = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
}

int main(int argc, char **argv)
{
	bool full = argc > 1 && strcmp(argv[1], "full") == 0;
	bool lostfree = argc > 1 && strcmp(argv[1], "lostfree") == 0;
	pthread_t th[2];
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	n_a = full ? 16777 : 200;
	n_b = full ? 1048 : 50;
	n_c = full || lostfree ? 8260 : 50; /* per thread */
	keep_a = malloc(sizeof(void *) * n_a);
	keep_b = malloc(sizeof(void *) * n_b);
	if (!keep_a || !keep_b)
		return 1;
	printf("waiting %p %p\n", (void *)site_a, (void *)main);
	fflush(stdout);
	wait_usr1();

	site_a();
	site_b();
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, site_c_thread, (void *)(unsigned long)n_c);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	site_realloc();
	site_aligned();
	printf("ready\n");
	fflush(stdout);
	wait_usr1();
	if (lostfree) {
		for (unsigned i = 0; i < n_a; i++)
			free(keep_a[i]);
		printf("freed\n");
		fflush(stdout);
		wait_usr1();
	}
	return 0;
}
