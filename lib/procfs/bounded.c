// SPDX-License-Identifier: Apache-2.0
/*
 * Target file access under a deadline (procfs.h, "Files that never
 * answer").
 *
 * A file system can make open, stat and read wait for ever (a FUSE server
 * that stops answering; O_NONBLOCK changes nothing there). Every access to
 * a target's file goes through here: the caller hands a job to an opener
 * thread and waits up to the deadline. On timeout the caller gets
 * -ETIMEDOUT and goes on; the job is abandoned to its thread, which frees
 * it (and closes what it opened) if the file system ever answers. While a
 * job is stuck, its device (from the maps line, known without touching the
 * file system) is "hung": further jobs on it fail at once. Stuck threads
 * are replaced up to PP_OPENER_THREADS_MAX; when every thread is stuck,
 * jobs fail at once too. Nothing here ever waits past the deadline.
 *
 * Lock: pool.lock guards everything below it; never held across a file
 * system call.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "procfs.h"
#include "procfs-internal.h"
#include "util/log.h"

#define IDLE_EXIT_NS (30ull * 1000000000ull) /* an idle opener thread ends after this */

enum job_kind { JOB_OPEN_MAPPED, JOB_RESOLVE, JOB_OPEN_IN_ROOT, JOB_BUILDID, JOB_CALL };

struct job {
	struct job *next; /* queue */
	enum job_kind kind;
	/* in: copies, so an abandoned job never reads the caller's memory */
	pid_t pid;
	struct pp_map m;
	char path[PATH_MAX];
	unsigned flags;
	int oflags;
	uint64_t resolve;
	bool want_path;
	dev_t dev; /* the mapping's device, 0 when not known */
	int (*fn)(void *arg); /* JOB_CALL, on a copy of the caller's argument */
	_Alignas(max_align_t) unsigned char arg[PP_CALL_ARG_MAX];
	/* out */
	int ret;
	char out[PATH_MAX + 64];
	struct stat st;
	bool st_ok;
	uint8_t id[PP_BUILD_ID_MAX];
	size_t id_len;
	/* state, under pool.lock */
	bool started, done, abandoned;
};

struct slot {
	bool used;
	struct job *cur; /* running job, NULL when idle */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a job was queued */
	pthread_cond_t done; /* a job finished */
	struct job *head, *tail;
	struct slot slots[PP_OPENER_THREADS_MAX];
	unsigned threads, idle, stuck;
} pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

/* The conditions wait on CLOCK_MONOTONIC (deadlines must not move with the wall clock). */
static void conds_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool.work, &ca);
	pthread_cond_init(&pool.done, &ca);
	pthread_condattr_destroy(&ca);
}

/*
 * fork: the child has none of the opener threads, so it starts with an
 * empty pool (the jobs queued in the parent are the parent's callers'; in
 * the child they are only leaked memory).
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&pool.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&pool.lock);
}

static void fork_child(void)
{
	pthread_mutex_init(&pool.lock, NULL);
	conds_init();
	pool.head = pool.tail = NULL;
	memset(pool.slots, 0, sizeof(pool.slots));
	pool.threads = pool.idle = pool.stuck = 0;
}

static void pool_init(void)
{
	conds_init();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static _Atomic unsigned deadline_ms = PP_FILE_DEADLINE_MS;
static _Atomic uint64_t hangs_total, skipped_total;
static __thread bool on_opener; /* this thread is an opener: run jobs inline */

void pp_proc__set_file_deadline(unsigned ms)
{
	if (ms)
		atomic_store(&deadline_ms, ms);
}

void pp_proc__file_stats(struct pp_file_stats *ret)
{
	ret->hangs = atomic_load(&hangs_total);
	ret->skipped = atomic_load(&skipped_total);
	pthread_mutex_lock(&pool.lock);
	ret->stuck_threads = pool.stuck;
	pthread_mutex_unlock(&pool.lock);
}

static void copy_map(struct job *j, const struct pp_map *m)
{
	j->m = *m;
	j->m.path = NULL;
	if (m->path) {
		snprintf(j->path, sizeof(j->path), "%s", m->path);
		j->m.path = j->path;
	}
	j->dev = makedev(m->dev_major, m->dev_minor);
}

static void execute(struct job *j)
{
	switch (j->kind) {
	case JOB_OPEN_MAPPED:
		j->ret = pp_proc__open_mapped_raw(j->pid, &j->m, j->flags);
		break;
	case JOB_RESOLVE:
		j->ret = pp_proc__resolve_mapped_raw(j->pid, &j->m, j->flags,
						     j->want_path ? j->out : NULL, sizeof(j->out),
						     &j->st);
		j->st_ok = j->ret == 0;
		break;
	case JOB_OPEN_IN_ROOT:
		j->ret = pp_proc__open_in_root_raw(j->pid, j->path, j->oflags, j->resolve);
		break;
	case JOB_BUILDID: {
		int fd = pp_proc__open_mapped_raw(j->pid, &j->m, 0);

		j->ret = fd;
		if (fd < 0)
			break;
		j->st_ok = fstat(fd, &j->st) == 0;
		j->ret = pp_buildid__from_fd(fd, j->id, &j->id_len);
		close(fd);
		break;
	}
	case JOB_CALL:
		j->ret = j->fn(j->arg);
		break;
	}
}

/* What an abandoned job leaves behind when its file system answers at last. */
static void job_drop(struct job *j)
{
	if ((j->kind == JOB_OPEN_MAPPED || j->kind == JOB_OPEN_IN_ROOT) && j->ret >= 0)
		close(j->ret);
	free(j);
}

static bool dev_hung(dev_t dev)
{
	for (unsigned i = 0; dev && i < PP_OPENER_THREADS_MAX; i++) {
		struct job *c = pool.slots[i].cur;
		if (c && c->abandoned && c->dev == dev)
			return true;
	}
	return false;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec abs_after(uint64_t ns)
{
	uint64_t t = now_ns() + ns;
	return (struct timespec){ (time_t)(t / 1000000000ull), (long)(t % 1000000000ull) };
}

static void *opener_main(void *arg)
{
	struct slot *s = arg;
	sigset_t all;

	/* No asynchronous signal is meant for this thread (exit_group's
	 * SIGKILL still is); faults stay deliverable (a blocked SIGBUS from
	 * a truncated file would kill the process). */
	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	on_opener = true;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct timespec until = abs_after(IDLE_EXIT_NS);
		int r = 0;

		pool.idle++;
		while (!pool.head && r != ETIMEDOUT)
			r = pthread_cond_timedwait(&pool.work, &pool.lock, &until);
		pool.idle--;
		if (!pool.head)
			break;
		struct job *j = pool.head;
		pool.head = j->next;
		if (!pool.head)
			pool.tail = NULL;
		j->started = true;
		s->cur = j;
		pthread_mutex_unlock(&pool.lock);
		execute(j);
		pthread_mutex_lock(&pool.lock);
		s->cur = NULL;
		if (j->abandoned) {
			pool.stuck--;
			job_drop(j);
		} else {
			j->done = true;
			pthread_cond_broadcast(&pool.done);
		}
	}
	s->used = false;
	pool.threads--;
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

/* Under pool.lock: one more opener thread if none is idle and the cap allows. */
static void spawn_locked(void)
{
	pthread_attr_t at;
	pthread_t th;

	if (pool.idle > 0 || pool.threads >= PP_OPENER_THREADS_MAX)
		return;
	for (unsigned i = 0; i < PP_OPENER_THREADS_MAX; i++) {
		struct slot *s = &pool.slots[i];
		if (s->used)
			continue;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&at, 256 * 1024);
		s->used = true;
		if (pthread_create(&th, &at, opener_main, s) == 0)
			pool.threads++;
		else
			s->used = false;
		pthread_attr_destroy(&at);
		return;
	}
}

static void unqueue_locked(struct job *j)
{
	struct job **p = &pool.head, *prev = NULL;

	for (; *p; prev = *p, p = &(*p)->next) {
		if (*p != j)
			continue;
		*p = j->next;
		if (pool.tail == j)
			pool.tail = prev;
		return;
	}
}

/*
 * Runs j under the deadline. 0 when j ran (its ret and outputs are set;
 * the caller frees j), -ETIMEDOUT when it did not finish in time or its
 * device is hung (j is then owned by the pool or already freed).
 */
static int run(struct job *j)
{
	if (on_opener) {
		execute(j);
		return 0;
	}
	pthread_once(&pool_once, pool_init);
	struct timespec until = abs_after((uint64_t)atomic_load(&deadline_ms) * 1000000ull);
	int r = 0;

	pthread_mutex_lock(&pool.lock);
	if (dev_hung(j->dev) ||
	    (pool.threads == PP_OPENER_THREADS_MAX && pool.stuck == pool.threads)) {
		pthread_mutex_unlock(&pool.lock);
		atomic_fetch_add(&skipped_total, 1);
		free(j);
		return -ETIMEDOUT;
	}
	j->next = NULL;
	if (pool.tail)
		pool.tail->next = j;
	else
		pool.head = j;
	pool.tail = j;
	spawn_locked();
	if (!pool.threads) {
		/* no thread could be made (a sandbox, no memory): run here, unbounded */
		unqueue_locked(j);
		pthread_mutex_unlock(&pool.lock);
		execute(j);
		return 0;
	}
	pthread_cond_signal(&pool.work);
	while (!j->done && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&pool.done, &pool.lock, &until);
	if (j->done) {
		pthread_mutex_unlock(&pool.lock);
		return 0;
	}
	if (!j->started) {
		/* queued behind stuck jobs: never ran */
		unqueue_locked(j);
		pthread_mutex_unlock(&pool.lock);
		atomic_fetch_add(&skipped_total, 1);
		free(j);
		return -ETIMEDOUT;
	}
	j->abandoned = true;
	pool.stuck++;
	spawn_locked(); /* the queue behind it needs a thread */
	pthread_mutex_unlock(&pool.lock);
	atomic_fetch_add(&hangs_total, 1);
	pp_dbg("procfs: file access for pid %d timed out after %u ms, abandoned", (int)j->pid,
	       atomic_load(&deadline_ms));
	return -ETIMEDOUT;
}

static struct job *job_new(enum job_kind kind, pid_t pid, const struct pp_map *m)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	j->kind = kind;
	j->pid = pid;
	if (m)
		copy_map(j, m);
	return j;
}

int pp_proc__open_mapped_ex(pid_t pid, const struct pp_map *m, unsigned flags)
{
	if (pid <= 0 || !m)
		return -EINVAL;
	if (!m->path || m->special || m->path[0] != '/' || !m->inode)
		return -ENOENT;
	if (strlen(m->path) >= PATH_MAX)
		return -ENAMETOOLONG;
	struct job *j = job_new(JOB_OPEN_MAPPED, pid, m);
	if (!j)
		return -ENOMEM;
	j->flags = flags;
	int r = run(j);
	if (r < 0)
		return r;
	r = j->ret;
	free(j);
	return r;
}

int pp_proc__open_mapped(pid_t pid, const struct pp_map *m)
{
	return pp_proc__open_mapped_ex(pid, m, 0);
}

static int resolve(pid_t pid, const struct pp_map *m, unsigned flags, char *buf, size_t n,
		   struct stat *ret_st)
{
	if (pid <= 0 || !m || (buf && n == 0))
		return -EINVAL;
	if (!m->path || m->special || m->path[0] != '/' || !m->inode)
		return -ENOENT;
	if (strlen(m->path) >= PATH_MAX)
		return -ENAMETOOLONG;
	struct job *j = job_new(JOB_RESOLVE, pid, m);
	if (!j)
		return -ENOMEM;
	j->flags = flags;
	j->want_path = buf != NULL;
	int r = run(j);
	if (r < 0)
		return r;
	r = j->ret;
	if (r == 0 && buf) {
		if (strlen(j->out) >= n)
			r = -ENAMETOOLONG;
		else
			strcpy(buf, j->out);
	}
	if (r == 0 && ret_st)
		*ret_st = j->st;
	free(j);
	return r;
}

int pp_proc__mapped_path_ex(pid_t pid, const struct pp_map *m, unsigned flags, char *buf, size_t n)
{
	if (!buf)
		return -EINVAL;
	return resolve(pid, m, flags, buf, n, NULL);
}

int pp_proc__mapped_path(pid_t pid, const struct pp_map *m, char *buf, size_t n)
{
	return pp_proc__mapped_path_ex(pid, m, 0, buf, n);
}

int pp_proc__mapped_stat(pid_t pid, const struct pp_map *m, struct stat *ret)
{
	if (!ret)
		return -EINVAL;
	return resolve(pid, m, 0, NULL, 0, ret);
}

int pp_proc__open_in_root(pid_t pid, const char *path, int flags, uint64_t resolve_flags)
{
	if (pid <= 0 || !path || path[0] != '/')
		return -EINVAL;
	if (strlen(path) >= PATH_MAX)
		return -ENAMETOOLONG;
	struct job *j = job_new(JOB_OPEN_IN_ROOT, pid, NULL);
	if (!j)
		return -ENOMEM;
	snprintf(j->path, sizeof(j->path), "%s", path);
	j->oflags = flags;
	j->resolve = resolve_flags;
	int r = run(j);
	if (r < 0)
		return r;
	r = j->ret;
	free(j);
	return r;
}

int pp_proc__mapped_buildid(pid_t pid, const struct pp_map *m, uint8_t *ret, size_t *ret_len,
			    struct stat *ret_st)
{
	if (pid <= 0 || !m || !ret || !ret_len)
		return -EINVAL;
	if (!m->path || m->special || m->path[0] != '/' || !m->inode)
		return -ENOENT;
	if (strlen(m->path) >= PATH_MAX)
		return -ENAMETOOLONG;
	if (ret_st)
		memset(ret_st, 0, sizeof(*ret_st));
	struct job *j = job_new(JOB_BUILDID, pid, m);
	if (!j)
		return -ENOMEM;
	int r = run(j);
	if (r < 0)
		return r;
	r = j->ret;
	if (ret_st && j->st_ok)
		*ret_st = j->st;
	if (r == 0) {
		memcpy(ret, j->id, j->id_len);
		*ret_len = j->id_len;
	}
	free(j);
	return r;
}

int pp_proc__call_bounded(int (*fn)(void *arg), const void *arg, size_t size)
{
	if (!fn || size > PP_CALL_ARG_MAX)
		return -EINVAL;
	struct job *j = job_new(JOB_CALL, 0, NULL);
	if (!j)
		return -ENOMEM;
	j->fn = fn;
	if (size)
		memcpy(j->arg, arg, size);
	int r = run(j);
	if (r < 0)
		return r;
	r = j->ret;
	free(j);
	return r;
}
