/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Heap workload on several kinds of stack, for the injected agent's
 * in-process ring: the main thread (main_site), THREADS pthreads
 * (thread_site), and a fiber (fiber_site) running on a 64 KiB stack of
 * its own (makecontext) with inaccessible guard pages right above and
 * below it, so a copy that went past the fiber's stack would crash the
 * process. Prints "running" and waits; on SIGUSR1 allocates 4 KiB blocks
 * from every site; on a second SIGUSR1 stops, prints "idle <main>
 * <threads> <fiber>" (blocks allocated per site) and waits for SIGTERM to
 * exit 0. Each site keeps its last 64 blocks (the older ones freed); a
 * short pause every 64 blocks keeps each near 10,000 blocks a second.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BLOCK 4096
#define KEEP 64
#define THREADS 3
#define FIBER_STACK (64 * 1024)
#define PAGE 4096

static volatile sig_atomic_t phase; /* 0 wait, 1 allocate, 2 stop, 3 exit */
static unsigned long n_main, n_fiber, n_thread[THREADS];
static void *keep_main[KEEP], *keep_fiber[KEEP], *keep_thread[THREADS][KEEP];
static ucontext_t main_ctx, fiber_ctx;

static void on_signal(int sig)
{
	phase = sig == SIGUSR1 ? (phase < 2 ? phase + 1 : phase) : 3;
}

static void wait_start(void)
{
	struct timespec ts = { 0, 1000000 };

	while (phase == 0)
		nanosleep(&ts, NULL);
}

static void pause_a_little(unsigned long i)
{
	if (i % 64 == 0) {
		struct timespec ts = { 0, 6000000 }; /* 6 ms */

		nanosleep(&ts, NULL);
	}
}

static void keep(void **ring, void *p, unsigned long i)
{
	free(ring[i % KEEP]);
	ring[i % KEEP] = p;
	memset(p, (int)i, 64);
}

NOINLINE void main_site(void)
{
	keep(keep_main, malloc(BLOCK), n_main++);
}

NOINLINE void thread_site(unsigned t)
{
	keep(keep_thread[t], malloc(BLOCK), n_thread[t]++);
}

NOINLINE void fiber_site(void)
{
	keep(keep_fiber, malloc(BLOCK), n_fiber++);
}

/* The fiber allocates 2 blocks per turn, then hands back to main. */
static void fiber_main(void)
{
	for (;;) {
		for (int i = 0; i < 2; i++)
			fiber_site();
		swapcontext(&fiber_ctx, &main_ctx);
	}
}

static void *thread_main(void *arg)
{
	unsigned t = (unsigned)(unsigned long)arg;

	wait_start();
	while (phase == 1) {
		thread_site(t);
		pause_a_little(n_thread[t]);
	}
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	pthread_t th[THREADS];
	static unsigned long total;
	char *m;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* guard page, fiber stack, guard page */
	m = mmap(NULL, FIBER_STACK + 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || mprotect(m + PAGE, FIBER_STACK, PROT_READ | PROT_WRITE) < 0)
		return 1;
	getcontext(&fiber_ctx);
	fiber_ctx.uc_stack.ss_sp = m + PAGE;
	fiber_ctx.uc_stack.ss_size = FIBER_STACK;
	fiber_ctx.uc_link = NULL;
	makecontext(&fiber_ctx, fiber_main, 0);
	for (unsigned long t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, thread_main, (void *)t))
			return 1;
	printf("running\n");
	fflush(stdout);
	wait_start();
	while (phase == 1) {
		main_site();
		if (n_main % 4 == 0)
			swapcontext(&main_ctx, &fiber_ctx);
		pause_a_little(n_main);
	}
	for (unsigned t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		total += n_thread[t];
	}
	printf("idle %lu %lu %lu\n", n_main, total, n_fiber);
	fflush(stdout);
	while (phase == 2)
		pause();
	return 0;
}
