/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recycler N workers burn_ms idle_ms: a pre-fork server recycling its
 * workers. Prints its pid, then keeps `workers` children running; each burns
 * burn_ms of its own CPU time, sleeps idle_ms (a worker waiting for its
 * next request) and exits, and is replaced at once. The first N
 * children burn in early_child_burn(), every later one in
 * late_child_burn(). Prints "reaped K" every 500 children reaped and
 * "phase2 K" once the N-th has been reaped. Runs until killed (the children
 * die with it); the parent itself only forks and waits.
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"

static volatile uint64_t sink;

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void early_child_burn(uint64_t ns)
{
	uint64_t x = (uint64_t)(uintptr_t)&x ^ 5, t0 = cpu_ns();
	while (cpu_ns() - t0 < ns)
		SPIN_KERNEL(x, 20000ul);
	sink = x;
}

__attribute__((noinline)) static void late_child_burn(uint64_t ns)
{
	uint64_t x = (uint64_t)(uintptr_t)&x ^ 6, t0 = cpu_ns();
	while (cpu_ns() - t0 < ns)
		SPIN_KERNEL(x, 20001ul);
	sink = x;
}

static long arg(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < lo || v > hi)
		exit(2);
	return v;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	long n = arg(argv[1], 1, 10000000), workers = arg(argv[2], 1, 64);
	uint64_t burn = (uint64_t)arg(argv[3], 1, 10000) * 1000000ull;
	long idle_ms = arg(argv[4], 0, 10000);
	pid_t parent = getpid();
	long started = 0, reaped = 0, running = 0;

	printf("%d\n", (int)parent);
	fflush(stdout);
	for (;;) {
		while (running < workers) {
			bool late = started >= n;
			pid_t c = fork();
			if (c < 0) {
				sleep(1);
				break;
			}
			if (c == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != parent)
					_exit(0);
				if (late)
					late_child_burn(burn);
				else
					early_child_burn(burn);
				struct timespec ts = { idle_ms / 1000,
						       (idle_ms % 1000) * 1000000L };
				nanosleep(&ts, NULL);
				_exit(0);
			}
			started++;
			running++;
		}
		if (wait(NULL) < 0) {
			if (errno == ECHILD)
				running = 0;
			continue;
		}
		running--;
		reaped++;
		if (reaped % 500 == 0)
			printf("reaped %ld\n", reaped);
		if (reaped == n)
			printf("phase2 %ld\n", reaped);
		fflush(stdout);
	}
	return 0;
}
