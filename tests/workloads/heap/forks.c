/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fork-per-request server pattern, for the preloaded heap agent: what a
 * prefork or fork-per-connection daemon (PostgreSQL backends, redis
 * BGSAVE, nginx reloads) does to an agent in its address space.
 *   heap_forks N: prints "waiting"; on SIGUSR1 forks a long-lived child
 *   that prints "child <pid>", waits for SIGUSR1, keeps fork_site()'s
 *   3000 x 7000 bytes live, prints "ready" and waits for SIGTERM. Then the
 *   parent forks N short children one after another: each allocates and
 *   frees blocks it checks (some in a signal handler on an alternate
 *   stack, off its main stack), every 8th execs /bin/true instead (the
 *   agent inherited through the environment), and exits 0 when its data
 *   was intact. The parent prints "done N bad M", M the children that did
 *   not exit 0 (a signal, a failed check), then waits for SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIFE_N 3000
#define LIFE_SZ 7000

static void *keep[LIFE_N];
static volatile int handler_ok;

static void wait_sig(void)
{
	sigset_t set;
	int sig = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigwait(&set, &sig);
}

static void say(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		_exit(3);
}

__attribute__((noinline)) void fork_site(void)
{
	for (int i = 0; i < LIFE_N; i++) {
		keep[i] = malloc(LIFE_SZ);
		memset(keep[i], i & 0xff, LIFE_SZ);
	}
}

/* Blocks written with a pattern, checked and freed: 1 when intact. */
__attribute__((noinline)) static int churn(unsigned seed, int n)
{
	void *b[64];
	size_t sz[64];
	int ok = 1;

	for (int i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		sz[i] = 64 + (seed >> 8) % 200000;
		b[i] = malloc(sz[i]);
		if (!b[i])
			return 0;
		memset(b[i], (int)(seed & 0xff), sz[i]);
		((unsigned char *)b[i])[0] = (unsigned char)i;
	}
	for (int i = 0; i < n; i++) {
		ok &= ((unsigned char *)b[i])[0] == (unsigned char)i;
		free(b[i]);
	}
	return ok;
}

static void on_usr2(int sig)
{
	(void)sig;
	handler_ok = churn(7, 16); /* on the alternate stack */
}

static int child(unsigned i)
{
	static char alt[1 << 16];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	struct sigaction sa = { .sa_handler = on_usr2, .sa_flags = SA_ONSTACK };
	sigset_t set;

	if (i % 8 == 7) {
		char *argv[] = { "true", NULL };

		execv("/bin/true", argv);
		return 4;
	}
	if (!churn(i, 64))
		return 1;
	sigaltstack(&ss, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(SIGUSR2);
	return handler_ok ? 0 : 2;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100, bad = 0;
	sigset_t set;
	char line[64];
	pid_t life;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	say("waiting\n");
	wait_sig();
	life = fork();
	if (life == 0) {
		snprintf(line, sizeof(line), "child %d\n", (int)getpid());
		say(line);
		wait_sig();
		fork_site();
		say("ready\n");
		wait_sig();
		_exit(0);
	}
	for (unsigned i = 0; i < n; i++) {
		pid_t c = fork();
		int st = 0;

		if (c == 0)
			_exit(child(i));
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	}
	snprintf(line, sizeof(line), "done %u bad %u\n", n, bad);
	say(line);
	wait_sig();
	kill(life, SIGTERM);
	waitpid(life, NULL, 0);
	return 0;
}
