/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lifecycle workload for the injected heap agent.
 *   lifecycle dlopen LIB: prints "waiting", on SIGUSR1 dlopen()s LIB and
 *     prints "loaded", on SIGUSR1 calls its lib_site(), prints "ready",
 *     waits for SIGUSR1/SIGTERM.
 *   lifecycle exec PROG ARGS...: prints "waiting", on SIGUSR1 execs PROG
 *     (the signal mask is kept).
 *   lifecycle fork: prints "waiting", on SIGUSR1 forks; the child prints
 *     "child <pid>", waits for SIGUSR1, runs fork_site() and prints
 *     "ready", then waits for SIGTERM (the parent waits for the child).
 * Every allocation is 7000 bytes x 3000, kept live.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 3000
#define SZ 7000

static void *keep[N];
static volatile unsigned long sink;

static void wait_sig(void)
{
	sigset_t set;
	int sig = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
}

__attribute__((noinline)) void fork_site(void)
{
	for (int i = 0; i < N; i++) {
		keep[i] = malloc(SZ);
		sink += (unsigned long)keep[i];
	}
}

int main(int argc, char **argv)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		return 2;
	printf("waiting\n");
	wait_sig();
	if (strcmp(argv[1], "dlopen") == 0 && argc > 2) {
		void *h = dlopen(argv[2], RTLD_NOW);
		void (*site)(int, int);

		if (!h)
			return 3;
		site = (void (*)(int, int))dlsym(h, "lib_site");
		if (!site)
			return 3;
		printf("loaded\n");
		wait_sig();
		site(N, SZ);
		printf("ready\n");
		wait_sig();
		return 0;
	}
	if (strcmp(argv[1], "exec") == 0 && argc > 2) {
		execv(argv[2], argv + 2);
		return 3;
	}
	if (strcmp(argv[1], "fork") == 0) {
		pid_t c = fork();

		if (c == 0) {
			printf("child %d\n", (int)getpid());
			wait_sig();
			fork_site();
			printf("ready\n");
			wait_sig();
			_exit(0);
		}
		waitpid(c, NULL, 0);
		return 0;
	}
	return 2;
}
