/* SPDX-License-Identifier: Apache-2.0 */
/*
 * siginfo SECONDS: signals whose siginfo says who sent them, arriving all
 * the time on whichever thread:
 *   - a POSIX timer (SIGEV_SIGNAL, SIGRTMIN, sival_ptr = &magic) every 2 ms:
 *     si_code must be SI_TIMER and si_value.sival_ptr &magic;
 *   - the same every 1 ms, per thread (SIGEV_THREAD_ID) for each sleeping
 *     thread, so
 *     whichever thread a stopper picks gets its own signals during its stop;
 *   - a forked child's sigqueue(parent, SIGRTMIN+1, 0x5eed) every 2 ms:
 *     si_code SI_QUEUE, si_value.sival_int 0x5eed, si_pid the child.
 * A ptrace stop that takes a signal and hands it back by number (detach or
 * restart with data = signo from any other stop) makes the kernel rebuild
 * the siginfo as SI_USER from the tracer: bad. Threads: 3 in nanosleep,
 * 2 in futex waits, one allocating, main in sigtimedwait with the signals
 * blocked (so the process's land on the other threads). calls = signals
 * handled; the counts are not checked (signals merge and queue), only the
 * siginfo of each.
 */
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "tracee.h"

#define QUEUE_VALUE 0x5eed

static int magic;
static pid_t child;
static uint64_t n_timer, n_queue, bad_timer, bad_queue; /* atomics */
static volatile int first_sig, first_code, first_pid, first_val; /* first bad */
static int futex_word;

static void first_bad(int sig, const siginfo_t *si)
{
	int zero = 0;

	if (__atomic_compare_exchange_n(&first_sig, &zero, sig, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED)) {
		first_code = si->si_code;
		first_pid = si->si_pid;
		first_val = si->si_value.sival_int;
	}
}

static void on_timer(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	__atomic_add_fetch(&n_timer, 1, __ATOMIC_RELAXED);
	if (si->si_code != SI_TIMER || si->si_value.sival_ptr != &magic) {
		__atomic_add_fetch(&bad_timer, 1, __ATOMIC_RELAXED);
		first_bad(sig, si);
	}
}

static void on_queue(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	__atomic_add_fetch(&n_queue, 1, __ATOMIC_RELAXED);
	if (si->si_code != SI_QUEUE || si->si_value.sival_int != QUEUE_VALUE ||
	    si->si_pid != child) {
		__atomic_add_fetch(&bad_queue, 1, __ATOMIC_RELAXED);
		first_bad(sig, si);
	}
}

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* A timer signalling the calling thread every 1 ms: a stop of ~1 ms of
 * any of these threads finds a signal queued for it. */
static void thread_timer(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL | SIGEV_THREAD_ID };
	struct itimerspec its = { { 0, 1000000 }, { 0, 1000000 } };
	timer_t timer;

	sev.sigev_signo = SIGRTMIN;
	sev.sigev_value.sival_ptr = &magic;
	sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer) < 0 ||
	    timer_settime(timer, 0, &its, NULL) < 0) {
		perror("timer_create (thread)");
		exit(2);
	}
}

static void *sleeper(void *arg)
{
	(void)arg;
	thread_timer();
	while (!tr_stop)
		tr_sleep_us(20000);
	return NULL;
}

static void *futex_waiter(void *arg)
{
	(void)arg;
	thread_timer();
	while (!tr_stop) {
		struct timespec ts = { 0, 50000000 };

		/* nobody wakes it: returns on its timeout or a signal */
		syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
	}
	return NULL;
}

static void __attribute__((noreturn)) run_child(pid_t parent, double secs)
{
	union sigval v = { .sival_int = QUEUE_VALUE };
	uint64_t end = tr_now_ns() + (uint64_t)((secs + 5) * 1e9);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	while (tr_now_ns() < end) {
		if (sigqueue(parent, SIGRTMIN + 1, v) < 0 && errno == ESRCH)
			break;
		tr_sleep_us(2000);
	}
	_exit(0);
}

static void handle(int sig, void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa = { .sa_sigaction = fn, .sa_flags = SA_SIGINFO | SA_RESTART };

	if (sigaction(sig, &sa, NULL) < 0) {
		perror("sigaction");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL };
	struct itimerspec its = { { 0, 2000000 }, { 0, 2000000 } };
	uint64_t start = tr_now_ns();
	char detail[256];
	timer_t timer;
	pthread_t t;
	sigset_t rt;

	if (argc != 2) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	double secs = tr_parse_secs(argv[1]);
	pid_t parent = getpid();

	handle(SIGRTMIN, on_timer);
	handle(SIGRTMIN + 1, on_queue);
	tr_block_term();
	/* the handler compares with child: blocked until it is set */
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN + 1);
	sigaddset(&rt, SIGRTMIN);
	pthread_sigmask(SIG_BLOCK, &rt, NULL);
	child = fork();
	if (child < 0) {
		perror("fork");
		return 2;
	}
	if (child == 0)
		run_child(parent, secs);
	pthread_sigmask(SIG_UNBLOCK, &rt, NULL);
	for (int i = 0; i < 6; i++) {
		void *(*fn)(void *) = i < 3 ? sleeper : (i < 5 ? futex_waiter : tr_churn);

		if (pthread_create(&t, NULL, fn, (void *)(uintptr_t)(i + 1))) {
			perror("pthread_create");
			return 2;
		}
	}
	sev.sigev_signo = SIGRTMIN;
	sev.sigev_value.sival_ptr = &magic;
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer) < 0 ||
	    timer_settime(timer, 0, &its, NULL) < 0) {
		perror("timer_create");
		return 2;
	}
	pthread_sigmask(SIG_BLOCK, &rt, NULL); /* the main thread: none */
	printf("running\n");
	fflush(stdout);
	tr_wait_end(start, secs, 0, NULL);
	timer_delete(timer);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	snprintf(detail, sizeof(detail),
		 "timer=%llu timer_bad=%llu queue=%llu queue_bad=%llu "
		 "first_bad=sig:%d/code:%d/pid:%d/val:%#x (child %d)",
		 (unsigned long long)n_timer, (unsigned long long)bad_timer,
		 (unsigned long long)n_queue, (unsigned long long)bad_queue, first_sig, first_code,
		 first_pid, (unsigned)first_val, (int)child);
	tr_result(n_timer + n_queue, bad_timer + bad_queue, detail);
}
