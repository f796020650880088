/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mallocbench [pairs] [size]: times malloc+free pairs of one size; prints
 * nanoseconds per pair. With --wait it prints "ready" and waits for a line
 * on stdin first, so a tracer can attach before the timed loop.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
	long pairs = 5000000, size = 64;
	int argi = 1;
	if (argc > argi && !strcmp(argv[argi], "--wait")) {
		printf("ready\n");
		fflush(stdout);
		char line[16];
		if (!fgets(line, sizeof(line), stdin))
			return 1;
		argi++;
	}
	if (argc > argi)
		pairs = strtol(argv[argi++], NULL, 10);
	if (argc > argi)
		size = strtol(argv[argi++], NULL, 10);
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
	double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) /
		    (double)pairs;
	printf("%.1f\n", ns);
	return 0;
}
