/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mallocbench [--wait [--repeat]] [pairs] [size]: times malloc+free pairs of
 * one size; prints nanoseconds per pair. With --wait it prints "ready" and
 * waits for a line on stdin first, so a tracer can attach before the timed
 * loop. With --repeat it then waits for another line after each loop: "go"
 * runs the loop again, anything else (or end of input) exits, so a caller
 * can read /proc/PID/status between loops.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double loop(long pairs, long size)
{
	void *volatile sink;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < pairs; i++) {
		void *p = malloc((size_t)size);
		sink = p;
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	(void)sink;
	return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
	       (double)pairs;
}

int main(int argc, char **argv)
{
	long pairs = 5000000, size = 64;
	int argi = 1, repeat = 0;
	char line[16];

	if (argc > argi && !strcmp(argv[argi], "--wait")) {
		argi++;
		if (argc > argi && !strcmp(argv[argi], "--repeat")) {
			repeat = 1;
			argi++;
		}
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	if (argc > argi)
		pairs = strtol(argv[argi++], NULL, 10);
	if (argc > argi)
		size = strtol(argv[argi++], NULL, 10);
	do {
		printf("%.1f\n", loop(pairs, size));
		fflush(stdout);
	} while (repeat && fgets(line, sizeof(line), stdin) && !strcmp(line, "go\n"));
	return 0;
}
