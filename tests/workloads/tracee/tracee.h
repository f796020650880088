/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the hostile targets of tests/integration/test_tracee.py: each
 * target watches, from inside, for what a ptrace stop of one of its
 * threads could change (an interrupted call, a rewritten siginfo, bytes
 * written below a stack pointer, a syscall run by a thread that may not
 * make it), runs for the seconds given as its first argument or until
 * SIGTERM, prints "running" once set up and "RESULT calls=N bad=M ..." at
 * the end, and exits 0 only when bad is 0.
 *
 * The process's SIGTERM is blocked in every thread (tr_block_term before
 * any thread starts) and taken by tr_wait_end's sigtimedwait.
 *
 * tr_churn is a thread that allocates, fills, verifies and frees blocks,
 * so the heap injector has allocator slots to redirect and samples to
 * take; a block whose contents changed counts as bad.
 */
#ifndef PODPROF_TRACEE_H
#define PODPROF_TRACEE_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int tr_stop; /* set once the end is reached */
static uint64_t tr_churn_ops, tr_churn_bad; /* atomics */

static inline uint64_t tr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void tr_sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* Seconds from the command line: 0.1 to 3600, else exit 2. */
static inline double tr_parse_secs(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0.1 && v <= 3600)) {
		fprintf(stderr, "bad seconds: %s\n", s);
		exit(2);
	}
	return v;
}

/* Call before any thread starts: every thread inherits the mask. */
static inline void tr_block_term(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/*
 * Waits until secs after start_ns or a SIGTERM, whichever is first, then
 * sets tr_stop. Calls tick() (if not NULL) every tick_ms meanwhile.
 * Interruptions of the wait itself are not this thread's check: retried.
 * Returns true when it was SIGTERM.
 */
static inline bool tr_wait_end(uint64_t start_ns, double secs, unsigned tick_ms, void (*tick)(void))
{
	uint64_t end = start_ns + (uint64_t)(secs * 1e9);
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	for (;;) {
		uint64_t now = tr_now_ns(), left;
		struct timespec ts;

		if (now >= end)
			break;
		left = end - now;
		if (tick && left > tick_ms * 1000000ull)
			left = tick_ms * 1000000ull;
		ts.tv_sec = (time_t)(left / 1000000000ull);
		ts.tv_nsec = (long)(left % 1000000000ull);
		if (sigtimedwait(&set, NULL, &ts) == SIGTERM) {
			tr_stop = 1;
			return true;
		}
		if (tick)
			tick();
	}
	tr_stop = 1;
	return false;
}

static inline uint64_t tr_rng(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

#define TR_LIVE 64

/* Allocation churn: blocks of 16..4111 bytes, each filled with one value
 * and verified before its free. Rests 1 ms every 256 operations (2 CPUs
 * shared with podprof and the test). */
static inline void *tr_churn(void *arg)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)arg;
	unsigned char *live[TR_LIVE] = { 0 };
	size_t len[TR_LIVE] = { 0 };
	uint64_t ops = 0;

	while (!tr_stop) {
		uint64_t v = tr_rng(&seed);
		unsigned k = (unsigned)(v % TR_LIVE);

		if (live[k]) {
			for (size_t j = 0; j < len[k]; j++) {
				if (live[k][j] != (unsigned char)k) {
					__atomic_add_fetch(&tr_churn_bad, 1, __ATOMIC_RELAXED);
					break;
				}
			}
			free(live[k]);
			live[k] = NULL;
		}
		len[k] = 16 + (size_t)((v >> 16) % 4096);
		live[k] = malloc(len[k]);
		if (live[k])
			memset(live[k], k, len[k]);
		__atomic_add_fetch(&tr_churn_ops, 1, __ATOMIC_RELAXED);
		if (++ops % 256 == 0)
			tr_sleep_us(1000);
	}
	for (unsigned k = 0; k < TR_LIVE; k++)
		free(live[k]);
	return NULL;
}

/* Prints the summary line (detail: the target's own fields) and leaves
 * with _exit: threads may still be blocked in their calls. */
static inline void __attribute__((noreturn))
tr_result(uint64_t calls, uint64_t bad, const char *detail)
{
	uint64_t cbad = __atomic_load_n(&tr_churn_bad, __ATOMIC_RELAXED);

	printf("RESULT calls=%llu bad=%llu churn_ops=%llu churn_bad=%llu %s\n",
	       (unsigned long long)calls, (unsigned long long)(bad + cbad),
	       (unsigned long long)__atomic_load_n(&tr_churn_ops, __ATOMIC_RELAXED),
	       (unsigned long long)cbad, detail);
	fflush(stdout);
	_exit(bad + cbad ? 1 : 0);
}

#endif
