/* SPDX-License-Identifier: Apache-2.0 */
/*
 * altstack SECONDS: the main thread's signal stack is 64 KiB in the middle
 * of a 96 KiB mapping whose 16 KiB below and 16 KiB above hold a known
 * pattern (the program's own data: nothing but this program may change
 * it). The main thread raises SIGUSR1; its handler runs on that stack
 * (SA_ONSTACK, every signal blocked), uses all of it but 3 KiB (a buffer
 * it fills, as a deep handler would) and stays in pause(). A checker
 * thread compares the two guarded regions with their pattern every
 * 100 us, and without a pause while the main thread is in a stop (its
 * state in /proc/self/task/TID/stat is t or T): a write that is undone
 * before the thread resumes is seen too. Bad: a check that found a
 * changed byte (a write below the handler's stack pointer that its stack
 * cannot hold lands there).
 * calls = checks. A control thread waits for the end, a fourth thread
 * allocates.
 */
#include <alloca.h>
#include <fcntl.h>
#include <sys/mman.h>

#include "tracee.h"

#define GUARD (16u << 10)
#define ALT (64u << 10)
#define LEFT 3072 /* stack the handler leaves free for pause() */

static unsigned char *region, *ref;
static uint64_t checks, bad, stopped_seen; /* atomics */
static long first_off = 1; /* offset from the altstack's base of the first changed byte */
static unsigned first_byte, first_want;
static volatile unsigned long handler_sp_off; /* handler's buffer end - altstack base */

static void on_usr1(int sig)
{
	unsigned char here;
	size_t room = (size_t)(&here - (region + GUARD));
	size_t use = room > LEFT ? room - LEFT : 0;
	unsigned char *buf = alloca(use);

	(void)sig;
	memset(buf, 0x5a, use);
	__asm__ volatile("" : : "r"(buf) : "memory");
	handler_sp_off = (unsigned long)(buf - (region + GUARD));
	/* set up: now the test may attach (write(2) is async-signal-safe) */
	if (write(STDOUT_FILENO, "running\n", 8) != 8)
		_exit(2);
	for (;;)
		pause(); /* every signal is blocked: never returns */
}

static void check_once(void)
{
	static const size_t at[2] = { 0, GUARD + ALT };
	bool found = false;

	for (int i = 0; i < 2; i++) {
		if (memcmp(region + at[i], ref + at[i], GUARD) == 0)
			continue;
		found = true;
		if (first_off != 1)
			continue;
		for (size_t j = at[i]; j < at[i] + GUARD; j++) {
			if (region[j] != ref[j]) {
				first_off = (long)j - (long)GUARD;
				first_byte = region[j];
				first_want = ref[j];
				break;
			}
		}
	}
	__atomic_add_fetch(&checks, 1, __ATOMIC_RELAXED);
	if (found)
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
}

/* The main thread's state letter, '?' when unreadable. */
static char main_state(int fd)
{
	char buf[256], *p;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return '?';
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* after the command name, which may hold anything */
	return p && p[1] == ' ' ? p[2] : '?';
}

static void *checker(void *arg)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)(intptr_t)arg);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	while (!tr_stop) {
		char st = fd >= 0 ? main_state(fd) : '?';

		check_once();
		if (st == 't' || st == 'T') {
			for (int i = 0; i < 64 && !tr_stop; i++)
				check_once(); /* no pause while it is stopped */
			__atomic_add_fetch(&stopped_seen, 1, __ATOMIC_RELAXED);
			continue;
		}
		tr_sleep_us(100);
	}
	return NULL;
}

struct end_args {
	uint64_t start;
	double secs;
};

static void *control(void *arg)
{
	struct end_args *e = arg;
	char detail[192];

	tr_wait_end(e->start, e->secs, 0, NULL);
	check_once();
	snprintf(detail, sizeof(detail),
		 "handler_buf_at=%lu stops_seen=%llu first_off=%ld first_byte=%#x/%#x",
		 handler_sp_off, (unsigned long long)stopped_seen, first_off == 1 ? 0 : first_off,
		 first_byte, first_want);
	tr_result(checks, bad, detail);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_ONSTACK };
	struct end_args e = { .start = tr_now_ns() };
	size_t len = 2 * GUARD + ALT;
	stack_t ss;
	pthread_t t;

	if (argc != 2) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	e.secs = tr_parse_secs(argv[1]);
	region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ref = malloc(len);
	if (region == MAP_FAILED || !ref) {
		perror("mmap");
		return 2;
	}
	for (size_t i = 0; i < len; i++)
		ref[i] = (unsigned char)(i * 131 + (i >> 8) + 7);
	memcpy(region, ref, len);
	ss.ss_sp = region + GUARD;
	ss.ss_size = ALT;
	ss.ss_flags = 0;
	sigfillset(&sa.sa_mask);
	if (sigaltstack(&ss, NULL) < 0 || sigaction(SIGUSR1, &sa, NULL) < 0) {
		perror("sigaltstack");
		return 2;
	}
	tr_block_term();
	if (pthread_create(&t, NULL, control, &e) ||
	    pthread_create(&t, NULL, checker, (void *)(intptr_t)getpid()) ||
	    pthread_create(&t, NULL, tr_churn, (void *)1)) {
		perror("pthread_create");
		return 2;
	}
	raise(SIGUSR1); /* the main thread stays in the handler until the end */
	return 3;
}
