/* SPDX-License-Identifier: Apache-2.0 */
/*
 * syscallbench ROUNDS CALLS: an unrelated process's syscall cost. Each
 * round times CALLS getppid() calls (a syscall that does no work) and
 * prints the round's nanoseconds per call, one line per round: the
 * thread's CPU time (user + system, so the BPF programs that run in the
 * syscall path count and time spent preempted by other tenants does not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 5;
	long calls = argc > 2 ? atol(argv[2]) : 200000;

	if (rounds <= 0 || calls <= 0) {
		fprintf(stderr, "usage: syscallbench ROUNDS CALLS\n");
		return 2;
	}
	for (long r = 0; r < rounds; r++) {
		double t0 = now_ns();
		for (long i = 0; i < calls; i++)
			syscall(SYS_getppid);
		printf("%.1f\n", (now_ns() - t0) / (double)calls);
		fflush(stdout);
	}
	return 0;
}
