/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Threads in known off-CPU states, for the block/mutex/threadcreate tests:
 *   holder():   locks `mu`, sleeps HOLD_MS, unlocks, sleeps GAP_MS, repeat
 *   contender() -> contend_lock(): waits for `mu` (futex), then rests REST_MS
 *   sleeper():  nanosleep(SLEEP_MS) in a loop
 *   reader():   read() on a pipe that writer() feeds a byte every WRITE_MS
 *   spinner():  burns CPU, counting loops
 *   spawner() -> spawn_worker(): pthread_create every SPAWN_MS; each worker
 *               lives WORKER_MS
 * Prints "pid N" first. On SIGUSR1 (only the main thread takes it: the
 * others block it so their sleeps are never cut short) it prints one line
 * of cumulative counters measured by the threads themselves:
 *   stats spin=N sleep_ns=N sleeps=N read_ns=N reads=N lock_wait_ns=N
 *         lock_waits=N spawned=N
 * Exits on SIGTERM or SIGINT.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define HOLD_MS 200
#define GAP_MS 100
#define REST_MS 150
#define SLEEP_MS 100
#define WRITE_MS 300
#define SPAWN_MS 500
#define WORKER_MS 2000

/* Global (not static) so their names are stable in .symtab. */
void contend_lock(void);
void sleeper_nap(void);
void *sleeper(void *arg);
void *reader(void *arg);
void *spinner(void *arg);
int spawn_worker(void);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int pipefd[2];

static atomic_uint_fast64_t spin_count, sleep_ns, sleeps, read_ns, reads, lock_wait_ns, lock_waits,
	spawned;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void *holder(void *arg)
{
	for (;;) {
		pthread_mutex_lock(&mu);
		sleep_ms(HOLD_MS);
		pthread_mutex_unlock(&mu);
		sleep_ms(GAP_MS);
	}
	return arg;
}

__attribute__((noinline)) void contend_lock(void)
{
	uint64_t t0 = now_ns();

	pthread_mutex_lock(&mu);
	lock_wait_ns += now_ns() - t0;
	lock_waits++;
	pthread_mutex_unlock(&mu);
	__asm__ volatile("" ::: "memory");
}

static void *contender(void *arg)
{
	sleep_ms(20); /* let holder take the lock first */
	for (;;) {
		contend_lock();
		sleep_ms(REST_MS);
	}
	return arg;
}

__attribute__((noinline)) void sleeper_nap(void)
{
	struct timespec ts = { 0, SLEEP_MS * 1000000L };
	uint64_t t0 = now_ns();

	nanosleep(&ts, NULL);
	sleep_ns += now_ns() - t0;
	sleeps++;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void *sleeper(void *arg)
{
	for (;;)
		sleeper_nap();
	return arg;
}

static void *writer(void *arg)
{
	for (;;) {
		sleep_ms(WRITE_MS);
		if (write(pipefd[1], "x", 1) < 0)
			return arg;
	}
}

__attribute__((noinline)) void *reader(void *arg)
{
	char c;

	for (;;) {
		uint64_t t0 = now_ns();

		if (read(pipefd[0], &c, 1) <= 0)
			return arg;
		read_ns += now_ns() - t0;
		reads++;
	}
}

__attribute__((noinline)) void *spinner(void *arg)
{
	for (;;) {
		for (volatile int i = 0; i < 100000; i++)
			;
		spin_count++;
	}
	return arg;
}

static void *worker(void *arg)
{
	sleep_ms(WORKER_MS);
	return arg;
}

__attribute__((noinline)) int spawn_worker(void)
{
	pthread_t t;
	pthread_attr_t a;
	int r;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &a, worker, NULL);
	pthread_attr_destroy(&a);
	if (r == 0)
		spawned++;
	__asm__ volatile("" ::: "memory");
	return r;
}

static void *spawner(void *arg)
{
	for (;;) {
		spawn_worker();
		sleep_ms(SPAWN_MS);
	}
	return arg;
}

int main(void)
{
	void *(*fns[])(void *) = { holder, contender, sleeper, writer, reader, spinner, spawner };
	sigset_t set;
	pthread_t t;

	if (pipe(pipefd) < 0)
		return 1;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by every thread */

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (pthread_create(&t, NULL, fns[i], NULL) != 0)
			return 1;
	printf("pid %d\n", (int)getpid());
	fflush(stdout);

	for (;;) {
		int sig;

		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig != SIGUSR1)
			break;
		printf("stats spin=%" PRIuFAST64 " sleep_ns=%" PRIuFAST64 " sleeps=%" PRIuFAST64
		       " read_ns=%" PRIuFAST64 " reads=%" PRIuFAST64 " lock_wait_ns=%" PRIuFAST64
		       " lock_waits=%" PRIuFAST64 " spawned=%" PRIuFAST64 "\n",
		       (uint_fast64_t)spin_count, (uint_fast64_t)sleep_ns, (uint_fast64_t)sleeps,
		       (uint_fast64_t)read_ns, (uint_fast64_t)reads, (uint_fast64_t)lock_wait_ns,
		       (uint_fast64_t)lock_waits, (uint_fast64_t)spawned);
		fflush(stdout);
	}
	return 0;
}
