/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A thread that spends its time inside vfork(): its child sleeps a second
 * before it exits, again and again, while the main thread waits. Prints
 * "running" once the first vfork() started; on SIGTERM prints "ok N" (N
 * children, all exited 0) or "bad N".
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop, bad;
static volatile unsigned kids;

static void *vforker(void *arg)
{
	(void)arg;
	while (!stop) {
		pid_t c = vfork();
		int st = 0;

		if (c == 0) {
			struct timespec ts = { 1, 0 };

			syscall(SYS_nanosleep, &ts, NULL);
			_exit(0);
		}
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
		kids++;
	}
	return NULL;
}

int main(void)
{
	sigset_t set;
	pthread_t th;
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_create(&th, NULL, vforker, NULL);
	printf("running\n");
	fflush(stdout);
	sigwait(&set, &sig);
	stop = 1;
	pthread_join(th, NULL);
	printf("%s %u\n", bad ? "bad" : "ok", kids);
	return 0;
}
