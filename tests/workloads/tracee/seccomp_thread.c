/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp_thread SECONDS [--late-tsync T [--no-worker]]: a worker thread installs, on
 * itself only (no TSYNC, after PR_SET_NO_NEW_PRIVS), a seccomp filter that
 * kills the process (SECCOMP_RET_KILL_PROCESS) on memfd_create, mmap,
 * mprotect, munmap and close, then sleeps in nanosleep, a quietly
 * restarting call. The process must survive: nothing but the worker runs
 * under the filter, and the worker never makes those calls. Two threads
 * allocate; the main thread waits in sigtimedwait.
 *
 * --late-tsync T: T seconds in, the allocating threads are stopped and
 * joined, the worker leaves with a raw exit (its own filter would make the
 * kernel refuse a TSYNC: a thread whose filter is not an ancestor of the
 * caller's cannot be synchronized; a raw exit leaves glibc's thread
 * teardown, which may unmap, out of the worker), and the main thread
 * installs a process-wide filter (SECCOMP_FILTER_FLAG_TSYNC) that kills
 * the process on mprotect. From then on only the main thread allocates,
 * small blocks from the main arena (brk, never mprotect). The process must
 * survive until its end. Prints "late filter installed" once it is.
 * --no-worker: no worker thread at all (only the late filter is there
 * to be tripped over: a stop at detach, not at attach).
 *
 * calls = the worker's sleeps plus the main thread's allocations after
 * the late filter; bad = failures of the target's own setup (a filter the
 * kernel refused) and churn blocks whose contents changed. Being killed
 * by a filter is the failure the test sees (no RESULT line, SIGSYS).
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "tracee.h"

static uint64_t sleeps, late_allocs, bad; /* atomics */
static volatile int worker_tid, worker_go = 1, worker_ready;

#define KILL_IF(nr)                                      \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

static int install(struct sock_filter *f, unsigned short n, unsigned flags)
{
	struct sock_fprog prog = { .len = n, .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* TSYNC returns the id of a thread it cannot synchronize */
	long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);

	return r < 0 ? -errno : (r > 0 ? -EBUSY : 0);
}

static void *worker(void *arg)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		KILL_IF(SYS_memfd_create),
		KILL_IF(SYS_mmap),
		KILL_IF(SYS_mprotect),
		KILL_IF(SYS_munmap),
		KILL_IF(SYS_close),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};

	(void)arg;
	worker_tid = (int)syscall(SYS_gettid);
	if (install(f, sizeof(f) / sizeof(f[0]), 0) < 0)
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
	worker_ready = 1;
	/* from here: no call that the filter kills (no stdio, no malloc) */
	while (worker_go) {
		struct timespec ts = { 0, 100000000 };

		syscall(SYS_nanosleep, &ts, NULL);
		__atomic_add_fetch(&sleeps, 1, __ATOMIC_RELAXED);
	}
	syscall(SYS_exit, 0); /* only this thread; glibc's teardown skipped */
	return NULL;
}

static int late_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		KILL_IF(SYS_mprotect),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};

	return install(f, sizeof(f) / sizeof(f[0]), SECCOMP_FILTER_FLAG_TSYNC);
}

/* Main thread after the late filter: small blocks, main arena. */
static unsigned char *small[16];
static uint64_t small_seed = 12345;

static void small_allocs(void)
{
	for (int i = 0; i < 32; i++) {
		unsigned k = (unsigned)(tr_rng(&small_seed) % 16);

		free(small[k]);
		small[k] = malloc(16 + k * 24);
		if (small[k])
			memset(small[k], (int)k, 16 + k * 24);
		__atomic_add_fetch(&late_allocs, 1, __ATOMIC_RELAXED);
	}
}

int main(int argc, char **argv)
{
	uint64_t start = tr_now_ns();
	double secs, late = 0;
	pthread_t w, c[2];
	char detail[160];
	bool with_worker = true;
	int lr = 0;

	if ((argc == 4 || argc == 5) && strcmp(argv[2], "--late-tsync") == 0)
		late = tr_parse_secs(argv[3]);
	if (argc == 5 && strcmp(argv[4], "--no-worker") == 0)
		with_worker = false;
	else if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: %s SECONDS [--late-tsync SECONDS [--no-worker]]\n",
			argv[0]);
		return 2;
	}
	secs = tr_parse_secs(argv[1]);
	small_allocs(); /* the main thread's arena is the main arena from here */
	tr_block_term();
	if ((with_worker && pthread_create(&w, NULL, worker, NULL)) ||
	    pthread_create(&c[0], NULL, tr_churn, (void *)1) ||
	    pthread_create(&c[1], NULL, tr_churn, (void *)2)) {
		perror("pthread_create");
		return 2;
	}
	while (with_worker && !worker_ready)
		tr_sleep_us(1000);
	printf("running\n");
	fflush(stdout);
	if (late > 0 && late < secs) {
		if (!tr_wait_end(start, late, 0, NULL)) {
			pthread_join(c[0], NULL);
			pthread_join(c[1], NULL);
			worker_go = 0;
			while (with_worker && syscall(SYS_tgkill, getpid(), worker_tid, 0) == 0)
				tr_sleep_us(1000);
			lr = late_filter();
			if (lr < 0)
				__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
			else
				printf("late filter installed\n");
			fflush(stdout); /* stdio's buffer exists: no allocation */
			tr_stop = 0; /* the main thread goes on alone */
			tr_wait_end(start, secs, 2, small_allocs);
		}
	} else {
		tr_wait_end(start, secs, 0, NULL);
	}
	snprintf(detail, sizeof(detail), "sleeps=%llu late_allocs=%llu late_filter=%s(%d)",
		 (unsigned long long)sleeps, (unsigned long long)late_allocs,
		 late > 0 ? (lr == 0 ? "installed" : "refused") : "none", lr);
	tr_result(sleeps + late_allocs, bad, detail);
}
