/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unwinding through the preloaded agent (with unwlib.c preloaded after
 * it): prints "waiting"; on SIGUSR1 calls unw_site() (malloc(12345), which
 * unwlib unwinds from) 100 times and prints "frames N", N the frames
 * unwlib's unwinder walked from its malloc to main (-1: it did not reach
 * main); then waits for SIGTERM.
 */

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void *unw_site(void)
{
	void *p = malloc(12345);

	__asm__ volatile("" ::"r"(p) : "memory");
	return p;
}

int main(void)
{
	sigset_t set;
	int sig, *frames;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("waiting\n");
	fflush(stdout);
	sigwait(&set, &sig);
	for (int i = 0; i < 100; i++)
		free(unw_site());
	frames = dlsym(RTLD_DEFAULT, "unwlib_frames");
	printf("frames %d\n", frames ? *frames : -2);
	fflush(stdout);
	sigwait(&set, &sig);
	return 0;
}
