/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deepbind PLUGIN [dlmopen]: dlopen()s PLUGIN (ownalloc.c) with
 * RTLD_DEEPBIND | RTLD_LAZY (or, with "dlmopen", loads it with RTLD_LAZY
 * into a new link-map namespace, with a libc of its own) and calls its
 * plug_work() in a loop, with glibc allocations of its own in between.
 * Until the first SIGUSR1 the plugin uses malloc and free only; after it,
 * also calloc and realloc, whose PLT slots were never bound (lazy) when
 * the signal came. Every round's checksum is recomputed without the heap.
 * Prints "running"; on SIGUSR1 prints "lazy"; on SIGTERM prints "ok
 * <rounds> <lazy rounds>" (exit 0) or "MISMATCH" (exit 3). A block given
 * to the wrong allocator aborts (SIGABRT).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop, lazy;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	lazy = 1;
}

static uint64_t expect(uint64_t seed)
{
	uint64_t sum = 0;

	for (int i = 0; i < 32; i++) {
		size_t n = 8 + (size_t)((seed + i) % 61);

		for (size_t j = 0; j < n; j++)
			sum += seed * 31 + i + j;
	}
	return sum;
}

int main(int argc, char **argv)
{
	uint64_t rounds = 0, lazy_rounds = 0;
	int said = 0;

	if (argc < 2)
		return 2;
	void *h = argc > 2 && strcmp(argv[2], "dlmopen") == 0
			  ? dlmopen(LM_ID_NEWLM, argv[1], RTLD_LAZY)
			  : dlopen(argv[1], RTLD_DEEPBIND | RTLD_LAZY);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	uint64_t (*work)(uint64_t, int) = (uint64_t(*)(uint64_t, int))dlsym(h, "plug_work");
	if (!work)
		return 1;
	signal(SIGTERM, on_term);
	signal(SIGUSR1, on_usr1);
	printf("running\n");
	fflush(stdout);
	while (!stop) {
		int l = lazy;
		char *mine = malloc(100 + rounds % 200); /* glibc's */

		if (!mine)
			return 1;
		memset(mine, 1, 100);
		if (work(rounds, l) != expect(rounds)) {
			printf("MISMATCH round %llu\n", (unsigned long long)rounds);
			return 3;
		}
		free(mine);
		rounds++;
		lazy_rounds += l;
		if (l && !said) {
			printf("lazy\n");
			fflush(stdout);
			said = 1;
		}
		if (rounds % 64 == 0)
			usleep(1000);
	}
	printf("ok %llu %llu\n", (unsigned long long)rounds, (unsigned long long)lazy_rounds);
	return 0;
}
