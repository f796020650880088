/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_threads__snapshot on real processes: a forked child with threads in
 * known states (nanosleep loop, blocked read, spinning, mutex holder and
 * waiter, optionally a vfork parent in D state), stopped with real ptrace.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "threads/threads.h"
#include "unwind/unwind.h"

enum role { R_MAIN, R_SLEEPER, R_READER, R_SPINNER, R_HOLDER, R_WAITER, R_VFORK, NROLES };

static const char *const role_names[NROLES] = { "main",	  "sleeper", "reader", "spinner",
						"holder", "waiter",  "vfork" };

struct shared {
	uint64_t progress; /* spinner */
	int sigcount; /* signal handler */
	int ready;
	int vfork_done; /* vfork thread came back */
	int read_returns; /* the reader's read() returned (EINTR would show here) */
	int waiter_returns; /* the waiter got a mutex nobody releases */
	pid_t tid[NROLES];
};

struct target {
	pid_t pid;
	struct shared *shm;
	int nthreads;
	bool with_vfork;
};

static struct shared *g_shm; /* in the child */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_pipe[2];
static unsigned g_vfork_ms;

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* How long to wait for the target to reach a state: only a guard against
 * a hang (a loaded machine runs the target late). */
#define WAIT_NS (60ull * 1000000000ull)

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void on_signal(int sig)
{
	(void)sig;
	__atomic_fetch_add(&g_shm->sigcount, 1, __ATOMIC_SEQ_CST);
}

/* The unwind test looks for a return address inside this section. */
extern const char __start_pp_sleeper_text[];
extern const char __stop_pp_sleeper_text[];

__attribute__((noinline, section("pp_sleeper_text"))) static void sleeper_loop(void)
{
	for (;;) {
		struct timespec ts = { 0, 10 * 1000000L };

		nanosleep(&ts, NULL);
		__asm__ volatile("" ::: "memory");
	}
}

static void *sleeper_thread(void *arg)
{
	(void)arg;
	g_shm->tid[R_SLEEPER] = gettid_();
	sleeper_loop();
	return NULL;
}

static void *reader_thread(void *arg)
{
	char c;

	(void)arg;
	g_shm->tid[R_READER] = gettid_();
	for (;;) {
		if (read(g_pipe[0], &c, 1) == 0)
			sleep_ms(1000);
		__atomic_fetch_add(&g_shm->read_returns, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void *spinner_thread(void *arg)
{
	(void)arg;
	g_shm->tid[R_SPINNER] = gettid_();
	for (;;)
		__atomic_fetch_add(&g_shm->progress, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void *holder_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_lock);
	g_shm->tid[R_HOLDER] = gettid_();
	for (;;)
		sleep_ms(100);
	return NULL;
}

static void *waiter_thread(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&g_shm->tid[R_HOLDER], __ATOMIC_SEQ_CST))
		sleep_ms(1);
	g_shm->tid[R_WAITER] = gettid_();
	pthread_mutex_lock(&g_lock); /* held forever by the holder */
	__atomic_store_n(&g_shm->waiter_returns, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void *vfork_thread(void *arg)
{
	(void)arg;
	g_shm->tid[R_VFORK] = gettid_();
	pid_t c = vfork();
	if (c == 0) {
		/* Parent thread waits uninterruptibly (D) meanwhile. */
		struct timespec ts = { g_vfork_ms / 1000, (long)(g_vfork_ms % 1000) * 1000000L };
		syscall(SYS_nanosleep, &ts, NULL);
		_exit(0);
	}
	__atomic_store_n(&g_shm->vfork_done, 1, __ATOMIC_SEQ_CST);
	for (;;)
		sleep_ms(100);
	return NULL;
}

static void *short_thread(void *arg)
{
	(void)arg;
	sleep_ms(3);
	return NULL;
}

static bool g_churn;

static void __attribute__((noreturn)) target_main(bool with_vfork)
{
	void *(*fns[NROLES])(void *) = { NULL,		 sleeper_thread, reader_thread,
					 spinner_thread, holder_thread,	 waiter_thread,
					 vfork_thread };
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	int last = with_vfork ? R_VFORK : R_WAITER;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGRTMIN + 1, &sa, NULL);
	if (pipe(g_pipe) < 0)
		_exit(2);
	g_shm->tid[R_MAIN] = gettid_();
	for (int r = R_SLEEPER; r <= last; r++) {
		pthread_t th;
		if (pthread_create(&th, NULL, fns[r], NULL) != 0)
			_exit(3);
	}
	for (int r = R_SLEEPER; r <= last; r++)
		while (!__atomic_load_n(&g_shm->tid[r], __ATOMIC_SEQ_CST))
			sleep_ms(1);
	__atomic_store_n(&g_shm->ready, 1, __ATOMIC_SEQ_CST);
	while (g_churn) {
		/* Threads that are born and die while snapshots run. */
		pthread_t th[8];
		int k = 0;
		for (; k < 8; k++)
			if (pthread_create(&th[k], NULL, short_thread, NULL) != 0)
				break;
		while (k-- > 0)
			pthread_join(th[k], NULL);
	}
	for (;;)
		pause();
}

/* Reads State letter and TracerPid of one thread; false when it is gone. */
static bool task_status(pid_t pid, pid_t tid, char *ret_state, pid_t *ret_tracer)
{
	char path[96], line[256];
	bool got = false;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	*ret_tracer = -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "State:", 6) == 0) {
			const char *p = line + 6;
			while (*p == ' ' || *p == '\t')
				p++;
			*ret_state = *p;
			got = true;
		} else if (strncmp(line, "TracerPid:", 10) == 0) {
			*ret_tracer = (pid_t)strtol(line + 10, NULL, 10);
		}
	}
	fclose(f);
	return got;
}

static char task_state(pid_t pid, pid_t tid)
{
	char st = '?';
	pid_t tr;

	task_status(pid, tid, &st, &tr);
	return st;
}

/* Waits until the thread's state is one of states (bounded). */
static bool wait_state(pid_t pid, pid_t tid, const char *states)
{
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		if (strchr(states, task_state(pid, tid)))
			return true;
		sleep_ms(1);
	}
	return false;
}

static void start_target(struct target *t, bool with_vfork, unsigned vfork_ms)
{
	struct shared *shm =
		mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(shm != MAP_FAILED);
	memset(shm, 0, sizeof(*shm));
	g_vfork_ms = vfork_ms;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		g_shm = shm;
		target_main(with_vfork);
	}
	t->pid = pid;
	t->shm = shm;
	t->with_vfork = with_vfork;
	t->nthreads = with_vfork ? NROLES : NROLES - 1;
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS;
	     pp_now_mono_ns() < end && !__atomic_load_n(&shm->ready, __ATOMIC_SEQ_CST);)
		sleep_ms(1);
	assert_int_equal(__atomic_load_n(&shm->ready, __ATOMIC_SEQ_CST), 1);
	if (g_churn)
		return;
	/* Let the blockers reach their blocking calls. */
	assert_true(wait_state(pid, shm->tid[R_READER], "S"));
	assert_true(wait_state(pid, shm->tid[R_WAITER], "S"));
	assert_true(wait_state(pid, shm->tid[R_MAIN], "S"));
	assert_true(wait_state(pid, shm->tid[R_SLEEPER], "S"));
}

static void stop_target(struct target *t)
{
	kill(t->pid, SIGKILL);
	waitpid(t->pid, NULL, 0);
	munmap(t->shm, sizeof(*t->shm));
}

static int role_of(const struct target *t, pid_t tid)
{
	for (int r = 0; r < NROLES; r++)
		if (t->shm->tid[r] == tid)
			return r;
	return -1;
}

/* No thread of pid is traced or in a tracing stop. */
static void assert_released(pid_t pid)
{
	pid_t *tids = NULL;
	size_t n = 0;

	assert_int_equal(pp_proc__list_tids(pid, &tids, &n), 0);
	for (size_t i = 0; i < n; i++) {
		char st = '?';
		pid_t tracer = -1;
		if (!task_status(pid, tids[i], &st, &tracer))
			continue;
		if (tracer != 0 || st == 't')
			fprintf(stderr, "tid %d: state %c tracer %d\n", tids[i], st, tracer);
		assert_int_equal(tracer, 0);
		assert_int_not_equal(st, 't');
	}
	free(tids);
}

/* The spinner keeps making progress (bounded wait, no timing assertion). */
static void assert_progress(const struct target *t)
{
	uint64_t p0 = __atomic_load_n(&t->shm->progress, __ATOMIC_SEQ_CST);

	for (uint64_t end = pp_now_mono_ns() + WAIT_NS; pp_now_mono_ns() < end;) {
		if (__atomic_load_n(&t->shm->progress, __ATOMIC_SEQ_CST) > p0 + 1000)
			return;
		sleep_ms(1);
	}
	fail_msg("spinner made no progress");
}

static const struct pp_thread_snap *find_snap(const struct pp_thread_snap *s, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (s[i].tid == tid)
			return &s[i];
	return NULL;
}

static void check_captured(pid_t pid, const struct pp_thread_snap *s)
{
	struct pp_maps maps = { 0 };

	assert_true(s->captured);
	assert_int_equal(s->error, 0);
	assert_non_null(s->stack);
	assert_true(s->stack_len >= 64);
	assert_true(s->stack_len <= 32768);
	assert_int_equal(pp_maps__read(pid, &maps), 0);
	const struct pp_map *m = pp_maps__find(&maps, s->regs.r[PP_REG_IP]);
	assert_non_null(m);
	assert_true(m->prot & PP_PROT_X);
	m = pp_maps__find(&maps, s->regs.r[PP_REG_SP]);
	assert_non_null(m);
	assert_true((m->prot & (PP_PROT_R | PP_PROT_W)) == (PP_PROT_R | PP_PROT_W));
	/* The copy never runs past the stack mapping. */
	assert_true(s->regs.r[PP_REG_SP] + s->stack_len <= m->end ||
		    pp_maps__find(&maps, m->end) != NULL);
	pp_maps__free(&maps);
}

static void test_snapshot_states(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 32768, .max_pause_ms = 2000 };
	struct pp_thread_snap *snaps = NULL;
	struct target t;
	size_t n = 0;

	(void)state;
	start_target(&t, false, 0);
	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	assert_int_equal(snaps[0].tid, t.pid);
	for (size_t i = 0; i < n; i++) {
		const struct pp_thread_snap *s = &snaps[i];
		int r = role_of(&t, s->tid);

		assert_true(r >= 0);
		if (!s->captured)
			fprintf(stderr, "%s: %s\n", role_names[r], s->reason);
		check_captured(t.pid, s);
		assert_true(s->pause_ns > 0);
		/* The spinner and the periodic sleepers may be caught running or
		 * runnable; the threads blocked for good must be sleeping. */
		if (r == R_SPINNER || r == R_SLEEPER || r == R_HOLDER)
			assert_true(s->state == 'R' || s->state == 'S');
		else
			assert_int_equal(s->state, 'S');
		if (r == R_SLEEPER)
			assert_true(s->voluntary_switches > 0);
		/* (The spinner's CPU time may still read 0 ticks on a loaded
		 * machine: /proc counts whole clock ticks.) */
		assert_true(s->name[0] != '\0');
	}
	pp_threads__free(snaps, n);
	assert_released(t.pid);
	assert_progress(&t);
	/* Every thread still runs: nothing left stopped. */
	for (int r = 0; r < t.nthreads; r++)
		assert_int_not_equal(task_state(t.pid, t.shm->tid[r]), 't');
	stop_target(&t);
}

static void test_unwind_sleeper(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 32768, .max_pause_ms = 2000 };
	struct pp_thread_snap *snaps = NULL;
	struct target t;
	size_t n = 0;

	(void)state;
	start_target(&t, false, 0);
	struct pp_unwinder *u = pp_unwinder__new(t.pid, NULL);
	if (!u) {
		stop_target(&t);
		skip();
	}
	bool found = false;
	/* The sleeper is almost always inside nanosleep; retry a few times for
	 * the rare snapshot that lands between two calls. */
	for (int attempt = 0; attempt < 5 && !found; attempt++) {
		assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
		const struct pp_thread_snap *s = find_snap(snaps, n, t.shm->tid[R_SLEEPER]);
		assert_non_null(s);
		assert_true(s->captured);
		uint64_t pcs[128];
		size_t np = 0;
		unsigned flags = 0;
		int r = pp_unwinder__unwind(u, &s->regs, s->stack, s->stack_len, pcs, 128, &np,
					    &flags);
		if (r == 0) {
			for (size_t i = 1; i < np; i++) {
				uintptr_t pc = (uintptr_t)pcs[i] - 1;
				if (pc >= (uintptr_t)__start_pp_sleeper_text &&
				    pc < (uintptr_t)__stop_pp_sleeper_text)
					found = true;
			}
		}
		pp_threads__free(snaps, n);
	}
	pp_unwinder__free(u);
	stop_target(&t);
	assert_true(found);
}

struct snap_loop {
	pid_t pid;
	int rounds;
	int failures;
	int reinjected;
	volatile int done;
};

static void *snap_loop_thread(void *arg)
{
	struct snap_loop *l = arg;
	struct pp_threads_opts o = { .stack_bytes = 16384, .max_pause_ms = 2000 };

	for (int i = 0; i < l->rounds; i++) {
		struct pp_thread_snap *snaps = NULL;
		size_t n = 0;
		if (pp_threads__snapshot(l->pid, &o, &snaps, &n) < 0) {
			l->failures++;
			continue;
		}
		for (size_t k = 0; k < n; k++) {
			if (!snaps[k].captured)
				l->failures++;
			if (snaps[k].signal)
				l->reinjected++;
		}
		pp_threads__free(snaps, n);
	}
	__atomic_store_n(&l->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Queued (real-time) signals sent during snapshots must all be handled. */
static void test_signals_delivered(void **state)
{
	struct snap_loop l = { .rounds = 50 };
	struct target t;
	pthread_t th;
	int sent = 0;

	(void)state;
	start_target(&t, false, 0);
	l.pid = t.pid;
	assert_int_equal(pthread_create(&th, NULL, snap_loop_thread, &l), 0);
	while (!__atomic_load_n(&l.done, __ATOMIC_SEQ_CST) && sent < 5000) {
		int r = sent % 3;
		union sigval v = { .sival_int = sent };
		if (r == 0) {
			assert_int_equal(sigqueue(t.pid, SIGRTMIN + 1, v), 0);
		} else {
			/* Thread-directed: hits the thread being stopped more often. */
			pid_t tid = t.shm->tid[(sent / 3) % t.nthreads];
			assert_int_equal(syscall(SYS_tgkill, t.pid, tid, SIGRTMIN + 1), 0);
		}
		sent++;
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	pthread_join(th, NULL);
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS;
	     pp_now_mono_ns() < end && __atomic_load_n(&t.shm->sigcount, __ATOMIC_SEQ_CST) < sent;)
		sleep_ms(1);
	fprintf(stderr, "# %d signals sent, %d handled, %d re-delivered from a stop\n", sent,
		__atomic_load_n(&t.shm->sigcount, __ATOMIC_SEQ_CST), l.reinjected);
	assert_int_equal(__atomic_load_n(&t.shm->sigcount, __ATOMIC_SEQ_CST), sent);
	assert_int_equal(l.failures, 0);
	assert_released(t.pid);
	assert_progress(&t);
	stop_target(&t);
}

static void test_exited_pid(void **state)
{
	struct pp_thread_snap *snaps = (void *)0x1;
	size_t n = 77;

	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(pp_threads__snapshot(pid, NULL, &snaps, &n), -ESRCH);
	assert_ptr_equal(snaps, (void *)0x1);
	assert_int_equal(n, 77);
	assert_int_equal(pp_threads__snapshot(0, NULL, &snaps, &n), -EINVAL);
	assert_int_equal(pp_threads__snapshot(-5, NULL, &snaps, &n), -EINVAL);
}

static void *idle_thread(void *arg)
{
	pid_t *tid = arg;

	__atomic_store_n(tid, gettid_(), __ATOMIC_SEQ_CST);
	for (;;)
		sleep_ms(100);
	return NULL;
}

static void test_self(void **state)
{
	struct pp_thread_snap *snaps = NULL;
	pid_t tid = 0;
	pthread_t th;
	size_t n = 0;

	(void)state;
	alarm(30); /* a hang would be a failure */
	assert_int_equal(pp_threads__snapshot(getpid(), NULL, &snaps, &n), -EDEADLK);
	assert_int_equal(pthread_create(&th, NULL, idle_thread, &tid), 0);
	while (!__atomic_load_n(&tid, __ATOMIC_SEQ_CST))
		sleep_ms(1);
	assert_int_equal(pp_threads__snapshot(tid, NULL, &snaps, &n), -EDEADLK);
	assert_int_equal(pp_threads__snapshot(gettid_(), NULL, &snaps, &n), -EDEADLK);
	pthread_cancel(th);
	pthread_join(th, NULL);
	alarm(0);
}

/* A second process seizes the sleeper: it is listed with the tracer's pid. */
static void test_already_traced(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 4096, .max_pause_ms = 2000 };
	struct pp_thread_snap *snaps = NULL;
	int ready[2], hold[2];
	struct target t;
	size_t n = 0;
	char c = 0;

	(void)state;
	start_target(&t, false, 0);
	pid_t victim = t.shm->tid[R_SLEEPER];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	assert_int_equal(pipe2(hold, O_CLOEXEC), 0);
	pid_t tracer = fork();
	assert_true(tracer >= 0);
	if (tracer == 0) {
		close(ready[0]);
		close(hold[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		c = ptrace(PTRACE_SEIZE, victim, NULL, NULL) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		while (read(hold[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(ready[1]);
	close(hold[0]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	assert_int_equal(c, 'y');

	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	char want[64];
	snprintf(want, sizeof(want), "already traced by pid %d", (int)tracer);
	for (size_t i = 0; i < n; i++) {
		if (snaps[i].tid == victim) {
			assert_false(snaps[i].captured);
			assert_int_equal(snaps[i].error, -EPERM);
			assert_string_equal(snaps[i].reason, want);
			assert_null(snaps[i].stack);
		} else {
			check_captured(t.pid, &snaps[i]);
		}
	}
	pp_threads__free(snaps, n);
	/* The other tracer's seize is untouched by us. */
	char st;
	pid_t tr;
	assert_true(task_status(t.pid, victim, &st, &tr));
	assert_int_equal(tr, tracer);

	close(hold[1]);
	assert_int_equal(waitpid(tracer, NULL, 0), tracer);
	close(ready[0]);
	assert_released(t.pid);
	assert_progress(&t);
	stop_target(&t);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int count_own_threads(void)
{
	pid_t *tids = NULL;
	size_t n = 0;

	assert_int_equal(pp_proc__list_tids(getpid(), &tids, &n), 0);
	free(tids);
	return (int)n;
}

static void test_repeated(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 32768, .max_pause_ms = 2000 };
	struct target t;
	uint64_t max_pause = 0;

	(void)state;
	start_target(&t, false, 0);
	int fds = count_fds();
	int threads = count_own_threads();
	for (int i = 0; i < 50; i++) {
		struct pp_thread_snap *snaps = NULL;
		size_t n = 0;
		assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
		assert_int_equal(n, (size_t)t.nthreads);
		for (size_t k = 0; k < n; k++) {
			assert_true(snaps[k].captured);
			max_pause = snaps[k].pause_ns > max_pause ? snaps[k].pause_ns : max_pause;
		}
		pp_threads__free(snaps, n);
	}
	fprintf(stderr, "# 50 snapshots, longest stop %.1f us\n", (double)max_pause / 1e3);
	assert_int_equal(count_fds(), fds);
	assert_int_equal(count_own_threads(), threads);
	assert_released(t.pid);
	assert_progress(&t);
	/* The mutex waiter is still waiting, the reader still reading (right
	 * after a detach they may be 'R' on their way back into the syscall). */
	assert_true(wait_state(t.pid, t.shm->tid[R_WAITER], "S"));
	assert_true(wait_state(t.pid, t.shm->tid[R_READER], "S"));
	assert_int_equal(__atomic_load_n(&t.shm->read_returns, __ATOMIC_SEQ_CST), 0);
	assert_int_equal(__atomic_load_n(&t.shm->waiter_returns, __ATOMIC_SEQ_CST), 0);
	stop_target(&t);
}

/* A process stopped by SIGSTOP is captured and stays stopped. */
static void test_group_stopped(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 8192, .max_pause_ms = 2000 };
	struct pp_thread_snap *snaps = NULL;
	struct target t;
	size_t n = 0;

	(void)state;
	start_target(&t, false, 0);
	assert_int_equal(kill(t.pid, SIGSTOP), 0);
	for (int r = 0; r < t.nthreads; r++)
		assert_true(wait_state(t.pid, t.shm->tid[r], "T"));
	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(snaps[i].state, 'T');
		check_captured(t.pid, &snaps[i]);
		assert_int_equal(snaps[i].signal, 0);
	}
	pp_threads__free(snaps, n);
	assert_released(t.pid);
	/* Detach wakes a group-stopped thread, which goes straight back to
	 * the group-stop in the kernel (briefly 'R', no user code runs). */
	for (int r = 0; r < t.nthreads; r++)
		assert_true(wait_state(t.pid, t.shm->tid[r], "T"));
	uint64_t p0 = __atomic_load_n(&t.shm->progress, __ATOMIC_SEQ_CST);
	sleep_ms(20);
	assert_int_equal(__atomic_load_n(&t.shm->progress, __ATOMIC_SEQ_CST), p0);
	assert_int_equal(kill(t.pid, SIGCONT), 0);
	assert_progress(&t);
	stop_target(&t);
}

/* A vfork parent waits in D state: never stopped, read as it lies. */
static void test_d_state_timeout(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 8192, .max_pause_ms = 300 };
	struct pp_thread_snap *snaps = NULL;
	struct target t;
	size_t n = 0;

	(void)state;
	start_target(&t, true, 3000);
	pid_t vt = t.shm->tid[R_VFORK];
	assert_true(wait_state(t.pid, vt, "D"));
	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	for (size_t i = 0; i < n; i++) {
		if (snaps[i].tid == vt) {
			/* a vfork parent is never stopped: read as it lies,
			 * with the registers it entered vfork with */
			check_captured(t.pid, &snaps[i]);
			assert_false(snaps[i].stopped);
			assert_int_equal(snaps[i].pause_ns, 0);
			assert_non_null(strstr(snaps[i].reason, "not stopped: in vfork"));
			assert_int_equal(snaps[i].state, 'D');
		} else {
			check_captured(t.pid, &snaps[i]);
		}
	}
	pp_threads__free(snaps, n);
	/* Released at once, although it has not stopped. */
	assert_released(t.pid);
	assert_int_equal(__atomic_load_n(&t.shm->vfork_done, __ATOMIC_SEQ_CST), 0);
	/* When the vfork child exits the thread carries on, never stopped. */
	for (uint64_t end = pp_now_mono_ns() + WAIT_NS;
	     pp_now_mono_ns() < end && !__atomic_load_n(&t.shm->vfork_done, __ATOMIC_SEQ_CST);)
		sleep_ms(1);
	assert_int_equal(__atomic_load_n(&t.shm->vfork_done, __ATOMIC_SEQ_CST), 1);
	assert_released(t.pid);
	assert_true(wait_state(t.pid, vt, "S"));
	assert_progress(&t);
	stop_target(&t);
}

/*
 * The dump's deadline: no thread is stopped once it has passed. A deadline
 * in the past stops none; one that passes while the vfork thread refuses to
 * stop (300 ms) leaves every later thread untouched.
 */
static void test_deadline(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 4096, .max_pause_ms = 300, .deadline_ns = 1 };
	struct pp_thread_snap *snaps = NULL;
	struct target t;
	size_t n = 0, after = 0;
	bool seen = false;

	(void)state;
	start_target(&t, true, 3000);
	pid_t vt = t.shm->tid[R_VFORK];
	assert_true(wait_state(t.pid, vt, "D"));
	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	for (size_t i = 0; i < n; i++) {
		assert_false(snaps[i].captured);
		assert_int_equal(snaps[i].error, -ETIME);
		assert_int_equal(snaps[i].pause_ns, 0);
		assert_non_null(strstr(snaps[i].reason, "deadline"));
		assert_true(snaps[i].state != 0); /* still described */
	}
	pp_threads__free(snaps, n);
	assert_released(t.pid);

	/* The deadline passes while the helper waits for the vfork thread. */
	o.deadline_ns = pp_now_mono_ns() + 100 * 1000000ull;
	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (snaps[i].tid == vt)
			seen = true;
		if (snaps[i].error == -ETIME) {
			assert_false(snaps[i].captured);
			assert_int_equal(snaps[i].pause_ns, 0);
			after++;
		} else {
			check_captured(t.pid, &snaps[i]);
		}
	}
	assert_true(seen);
	pp_threads__free(snaps, n);
	assert_released(t.pid);
	assert_progress(&t);
	stop_target(&t);
	print_message("deadline: %zu threads left untouched\n", after);
}

/* Threads that exit between the listing and the stop are left out. */
static void test_churn(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 4096, .max_pause_ms = 2000 };
	struct target t;
	size_t listed = 0, captured = 0, extra = 0;

	(void)state;
	g_churn = true;
	start_target(&t, false, 0);
	g_churn = false;
	for (int i = 0; i < 30; i++) {
		struct pp_thread_snap *snaps = NULL;
		size_t n = 0;
		assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
		assert_true(n >= (size_t)t.nthreads);
		extra += n - (size_t)t.nthreads;
		for (size_t k = 0; k < n; k++) {
			listed++;
			if (snaps[k].captured) {
				captured++;
				continue;
			}
			/* Only a thread caught exiting may fail. */
			assert_int_equal(role_of(&t, snaps[k].tid), -1);
			assert_true(snaps[k].reason[0] != '\0');
			assert_true(snaps[k].error < 0);
		}
		for (int r = 0; r < t.nthreads; r++) {
			const struct pp_thread_snap *s = find_snap(snaps, n, t.shm->tid[r]);
			assert_non_null(s);
			assert_true(s->captured);
		}
		pp_threads__free(snaps, n);
	}
	/* How many short-lived threads get caught depends on the load; the
	 * point is that threads exiting at any step never break a snapshot. */
	fprintf(stderr, "# churn: %zu threads listed (%zu short-lived), %zu captured\n", listed,
		extra, captured);
	assert_released(t.pid);
	assert_progress(&t);
	stop_target(&t);
}

/* Defaults (opts NULL), and stack_bytes 0 gives regs without a stack. */
static void test_opts(void **state)
{
	struct pp_threads_opts o = { .stack_bytes = 0, .max_pause_ms = 2000 };
	struct pp_thread_snap *snaps = NULL;
	struct target t;
	size_t n = 0;

	(void)state;
	start_target(&t, false, 0);
	assert_int_equal(pp_threads__snapshot(t.pid, &o, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	for (size_t i = 0; i < n; i++) {
		assert_true(snaps[i].captured);
		assert_null(snaps[i].stack);
		assert_int_equal(snaps[i].stack_len, 0);
		assert_int_not_equal(snaps[i].regs.r[PP_REG_IP], 0);
	}
	pp_threads__free(snaps, n);
	/* A tid other than the leader names the same process. */
	assert_int_equal(pp_threads__snapshot(t.shm->tid[R_READER], NULL, &snaps, &n), 0);
	assert_int_equal(n, (size_t)t.nthreads);
	for (size_t i = 0; i < n; i++) {
		/* Default max_pause_ms (50) can run out on a loaded machine. */
		if (!snaps[i].captured) {
			assert_int_equal(snaps[i].error, -ETIMEDOUT);
			assert_non_null(strstr(snaps[i].reason, "did not stop within 50 ms"));
			continue;
		}
		assert_true(snaps[i].stack_len > 0 &&
			    snaps[i].stack_len <= PP_THREADS_STACK_DEFAULT);
	}
	pp_threads__free(snaps, n);
	pp_threads__free(NULL, 0);
	assert_released(t.pid);
	stop_target(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_snapshot_states),
		cmocka_unit_test(test_unwind_sleeper),
		cmocka_unit_test(test_signals_delivered),
		cmocka_unit_test(test_exited_pid),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_already_traced),
		cmocka_unit_test(test_repeated),
		cmocka_unit_test(test_group_stopped),
		cmocka_unit_test(test_d_state_timeout),
		cmocka_unit_test(test_opts),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
