/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlchurn LIB: burns CPU inside a shared library that it dlopen()s and
 * dlclose()s over and over (so the library is mapped and unmapped while
 * podprof samples), starting and joining short-lived threads meanwhile.
 * Prints its pid, runs until killed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile uint64_t sink;

static void *short_thread(void *arg)
{
	uint64_t x = (uintptr_t)arg;
	for (int i = 0; i < 2000000; i++)
		x = x * 6364136223846793005ull + 1;
	sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (uint64_t round = 0;; round++) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		uint64_t (*fn)(uint64_t, unsigned long) =
			(uint64_t(*)(uint64_t, unsigned long))dlsym(h, "churn_work");
		pthread_t t;
		pthread_create(&t, NULL, short_thread, (void *)(uintptr_t)round);
		if (fn)
			sink = fn(round, 3000000);
		pthread_join(t, NULL);
		dlclose(h);
	}
}
