/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlswap LIBA LIBB: dlopen()s (RTLD_LAZY) and dlclose()s LIBA and LIBB in
 * turn, over and over, so each is mapped where the other just was, and
 * calls their swap_work() (swaplib.c: allocations through lazily bound
 * slots; aborts when a word of its data is not its own). Each round's
 * result is checked against a computation without the heap. Prints
 * "running"; on SIGTERM prints "ok <rounds>" (exit 0) or "MISMATCH"
 * (exit 3).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t expect(uint64_t seed)
{
	uint64_t sum = 0;

	for (int i = 0; i < 16; i++)
		sum += (unsigned char)(seed + i);
	return sum;
}

int main(int argc, char **argv)
{
	uint64_t rounds = 0;

	if (argc < 3)
		return 2;
	signal(SIGTERM, on_term);
	printf("running\n");
	fflush(stdout);
	while (!stop) {
		void *h = dlopen(argv[1 + rounds % 2], RTLD_LAZY | RTLD_LOCAL);

		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		uint64_t (*fn)(uint64_t) = (uint64_t(*)(uint64_t))dlsym(h, "swap_work");
		if (!fn)
			return 1;
		/* a few calls, some time mapped: podprof sees the library */
		for (int k = 0; k < 50; k++)
			if (fn(rounds + k) != expect(rounds + k)) {
				printf("MISMATCH round %llu\n", (unsigned long long)rounds);
				return 3;
			}
		usleep(2000);
		for (int k = 0; k < 50; k++)
			if (fn(rounds + k) != expect(rounds + k)) {
				printf("MISMATCH round %llu\n", (unsigned long long)rounds);
				return 3;
			}
		dlclose(h);
		rounds++;
	}
	printf("ok %llu\n", (unsigned long long)rounds);
	return 0;
}
