/* SPDX-License-Identifier: Apache-2.0 */
/*
 * eintr SECONDS: four threads each loop on one blocking call that nothing
 * ever completes, so every return must be its timeout:
 *   recv      recv() on a socketpair end with SO_RCVTIMEO 1.5 s: -1/EAGAIN
 *   epoll     epoll_wait() on an empty epoll, 1500 ms: 0
 *   sigwait   sigtimedwait() for SIGUSR1 (blocked, never sent), 1.5 s: EAGAIN
 *   recv_sa   as recv, with a SIGUSR2 handler installed with SA_RESTART
 *             (never sent)
 * None of these is restarted after a stop of its thread (signal(7)): a
 * ptrace stop shows as EINTR or as a return before the timeout. Bad: an
 * EINTR, a return more than 100 ms early, any other result. Late is fine
 * (a loaded machine). The main thread waits in sigtimedwait (not a quietly
 * restarting call), a fifth thread allocates.
 */
#include <sys/epoll.h>
#include <sys/socket.h>

#include "tracee.h"

#define TIMEOUT_MS 1500
#define EARLY_MS 100

enum { K_RECV, K_EPOLL, K_SIGWAIT, K_RECV_SA, NK };
static const char *const kname[NK] = { "recv", "epoll", "sigwait", "recv_sa" };

struct kind {
	uint64_t calls, eintr, early, other; /* atomics */
	int first_errno; /* of the first bad return */
	long first_ms; /* its elapsed time */
};
static struct kind kinds[NK];

static void on_usr2(int sig)
{
	(void)sig;
}

static int recv_socket(void)
{
	struct timeval tv = { TIMEOUT_MS / 1000, (TIMEOUT_MS % 1000) * 1000 };
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		perror("socketpair");
		exit(2);
	}
	return sv[0]; /* sv[1] stays open: recv never sees an end of file */
}

static void note(struct kind *k, bool ok, int err, uint64_t ms)
{
	__atomic_add_fetch(&k->calls, 1, __ATOMIC_RELAXED);
	if (ok && ms + EARLY_MS >= TIMEOUT_MS)
		return;
	if (err == EINTR)
		__atomic_add_fetch(&k->eintr, 1, __ATOMIC_RELAXED);
	else if (ok)
		__atomic_add_fetch(&k->early, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&k->other, 1, __ATOMIC_RELAXED);
	if (!k->first_ms && !k->first_errno) {
		k->first_errno = err;
		k->first_ms = (long)ms + 1; /* nonzero: recorded */
	}
}

static void *blocker(void *arg)
{
	int kind = (int)(uintptr_t)arg, fd = -1;
	struct kind *k = &kinds[kind];
	sigset_t usr1;
	char c;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (kind == K_RECV || kind == K_RECV_SA)
		fd = recv_socket();
	else if (kind == K_EPOLL)
		fd = epoll_create1(EPOLL_CLOEXEC);
	while (!tr_stop) {
		struct timespec ts = { TIMEOUT_MS / 1000, (TIMEOUT_MS % 1000) * 1000000L };
		struct epoll_event ev;
		uint64_t t0 = tr_now_ns(), ms;
		bool ok;
		long r;
		int e;

		switch (kind) {
		case K_EPOLL:
			r = epoll_wait(fd, &ev, 1, TIMEOUT_MS);
			e = errno;
			ok = r == 0;
			break;
		case K_SIGWAIT:
			r = sigtimedwait(&usr1, NULL, &ts);
			e = errno;
			ok = r < 0 && e == EAGAIN;
			break;
		default:
			r = recv(fd, &c, 1, 0);
			e = errno;
			ok = r < 0 && (e == EAGAIN || e == EWOULDBLOCK);
			break;
		}
		ms = (tr_now_ns() - t0) / 1000000;
		if (!tr_stop)
			note(k, ok, ok ? 0 : (r < 0 ? e : -1), ms);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr2, .sa_flags = SA_RESTART };
	uint64_t start = tr_now_ns(), calls = 0, bad = 0;
	char detail[512];
	size_t off = 0;
	sigset_t usr1;
	pthread_t t;

	if (argc != 2) {
		fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
		return 2;
	}
	double secs = tr_parse_secs(argv[1]);

	tr_block_term();
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	for (int i = 0; i < NK; i++) {
		if (pthread_create(&t, NULL, blocker, (void *)(uintptr_t)i)) {
			perror("pthread_create");
			return 2;
		}
	}
	if (pthread_create(&t, NULL, tr_churn, (void *)1)) {
		perror("pthread_create");
		return 2;
	}
	printf("running\n");
	fflush(stdout);
	tr_wait_end(start, secs, 0, NULL);
	for (int i = 0; i < NK; i++) {
		struct kind *k = &kinds[i];
		uint64_t kb = k->eintr + k->early + k->other;

		calls += k->calls;
		bad += kb;
		off += (size_t)snprintf(detail + off, sizeof(detail) - off,
					"%s=%llu/eintr:%llu/early:%llu/other:%llu", kname[i],
					(unsigned long long)k->calls, (unsigned long long)k->eintr,
					(unsigned long long)k->early, (unsigned long long)k->other);
		if (kb)
			off += (size_t)snprintf(detail + off, sizeof(detail) - off,
						"(first:errno=%d@%ldms)", k->first_errno,
						k->first_ms - 1);
		off += (size_t)snprintf(detail + off, sizeof(detail) - off, " ");
	}
	tr_result(calls, bad, detail);
}
