/* SPDX-License-Identifier: Apache-2.0 */
/*
 * covbench: allocator calls the injected agent can and cannot see, in a
 * known mix, for run_coverage.py. Prints "ready", then for each line N read
 * from stdin runs N iterations and prints "done" (idle in between, so two
 * observers reading their counters before and after see the same calls).
 * Each iteration makes three allocations and three frees:
 *   malloc(64)   through the executable's GOT: seen by the agent
 *   strdup()     its malloc goes through libc's own GOT slot (malloc is
 *                interposable), which the agent redirects too: seen
 *   early(64)    a pointer to malloc read at start, before any
 *                redirection: not seen
 * and frees all three through the GOT (seen). So the agent should count
 * 2/3 of the allocations a uprobe on libc's malloc counts, and every free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile early)(size_t);
static const char *volatile text = "podprof coverage bench string";

int main(void)
{
	void *volatile sink;
	char line[32];

	early = malloc; /* GLOB_DAT slot read now: the real malloc */
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		long n = strtol(line, NULL, 10);

		for (long i = 0; i < n; i++) {
			char *a = malloc(64), *b = strdup(text), *c = early(64);

			sink = a;
			sink = b;
			sink = c;
			(void)sink;
			free(a);
			free(b);
			free(c);
		}
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
