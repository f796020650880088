/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Thread snapshots with ptrace.
 *
 * Per thread: read stat/status/wchan, PTRACE_SEIZE (no options, so no
 * SIGSTOP and no event stops), PTRACE_INTERRUPT, poll waitpid(__WALL |
 * WNOHANG) until the stop or the deadline, PTRACE_GETREGS, copy the stack
 * with process_vm_readv, PTRACE_DETACH (re-delivering a signal reported by
 * a signal-delivery-stop). One thread at a time.
 *
 * PTRACE_DETACH only works on a tracee in a ptrace-stop, and a thread in
 * uninterruptible sleep may stay running (in the kernel) for a long time.
 * Tracees are bound to the tracer thread and the kernel detaches all of
 * them when that thread exits (exit_ptrace, which also drops the pending
 * interrupt trap). So the ptrace work runs on a helper thread: when a
 * thread does not stop in time, or anything leaves a tracee in a state we
 * cannot prove clean, the helper exits, we wait until the kernel has really
 * let it go, and a new helper continues with the next thread.
 */
#include "threads.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "procfs/procfs.h"
#include "tracee/tracee.h"
#include "util/log.h"
#include "util/util.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

#define PAUSE_MAX_MS 10000
#define HELPER_STACK (256 * 1024)
#define STAT_MAX 4096
#define STATUS_MAX 16384
#define WCHAN_MAX 256
#define IOV_PIECES 64 /* page-sized remote pieces per process_vm_readv */
#define PF_KTHREAD_FLAG 0x00200000u

enum capture_result {
	CAP_DONE, /* snap filled (captured or with a reason); thread released */
	CAP_GONE, /* thread exited: leave it out */
	CAP_ABANDON, /* snap filled, but the thread may still be seized: helper must exit */
};

struct snap_ctx {
	pid_t pid;
	unsigned stack_bytes;
	unsigned max_pause_ms;
	uint64_t deadline_ns; /* 0: none */
	struct pp_thread_snap *snaps;
	bool *gone;
	size_t n;
	size_t next; /* first thread the next helper handles */
	size_t stop; /* end of the current batch */
	uint8_t *scratch; /* stack_bytes */
	int mem_fd; /* /proc/PID/mem, opened only if process_vm_readv is refused */
	bool abandoned; /* the last helper exited with a tracee */
};

static void set_reason(struct pp_thread_snap *s, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_reason(struct pp_thread_snap *s, int err, const char *fmt, ...)
{
	va_list ap;

	s->captured = false;
	s->error = err;
	va_start(ap, fmt);
	vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
	va_end(ap);
}

static int read_task_file(pid_t pid, pid_t tid, const char *name, size_t max, char **ret,
			  size_t *ret_len)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid, name);
	return pp_read_file(path, max, ret, ret_len);
}

/* "Name:\tvalue" from status text; -ENOENT when absent. */
static int status_u64(const char *text, const char *key, uint64_t *ret)
{
	size_t kl = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
			const char *v = p + kl + 1;
			char num[32];
			size_t i = 0;

			while (*v == ' ' || *v == '\t')
				v++;
			while (v[i] >= '0' && v[i] <= '9' && i < sizeof(num) - 1) {
				num[i] = v[i];
				i++;
			}
			num[i] = '\0';
			return pp_parse_u64(num, 10, 0, UINT64_MAX, ret);
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -ENOENT;
}

static int tracer_of(pid_t pid, pid_t tid, pid_t *ret)
{
	_cleanup_free_ char *text = NULL;
	uint64_t v;
	size_t len;
	int r;

	r = read_task_file(pid, tid, "status", STATUS_MAX, &text, &len);
	if (r < 0)
		return r;
	r = status_u64(text, "TracerPid", &v);
	if (r < 0)
		return r;
	*ret = (pid_t)v;
	return 0;
}

/*
 * stat: comm between '(' and the last ')', then state, ppid, pgrp, session,
 * tty_nr, tpgid, flags (9), minflt, cminflt, majflt, cmajflt, utime (14),
 * stime (15).
 */
static int parse_task_stat(const char *text, struct pp_thread_snap *s, bool *ret_kthread)
{
	const char *open = strchr(text, '(');
	const char *close = strrchr(text, ')');
	uint64_t flags = 0, utime = 0, stime = 0;
	long tck;

	if (!open || !close || close < open || close[1] != ' ')
		return -EINVAL;
	size_t cl = PP_MIN((size_t)(close - open - 1), sizeof(s->name) - 1);
	memcpy(s->name, open + 1, cl);
	s->name[cl] = '\0';

	const char *p = close + 2;
	s->state = *p;
	for (int field = 3; field <= 15 && *p; field++) {
		const char *end = strchr(p, ' ');
		char num[32];
		size_t l = end ? (size_t)(end - p) : strlen(p);

		if (field == 9 || field == 14 || field == 15) {
			if (l == 0 || l >= sizeof(num))
				return -EINVAL;
			memcpy(num, p, l);
			num[l] = '\0';
			uint64_t *dst = field == 9 ? &flags : field == 14 ? &utime : &stime;
			if (pp_parse_u64(num, 10, 0, UINT64_MAX, dst) < 0)
				return -EINVAL;
		}
		if (!end)
			break;
		p = end + 1;
	}
	tck = sysconf(_SC_CLK_TCK);
	if (tck <= 0)
		tck = 100;
	uint64_t ticks = utime + stime;
	s->cpu_time_ns = ticks / (uint64_t)tck * 1000000000ull +
			 ticks % (uint64_t)tck * 1000000000ull / (uint64_t)tck;
	*ret_kthread = (flags & PF_KTHREAD_FLAG) != 0;
	return 0;
}

/* Fills the /proc part of s. -ENOENT/-ESRCH when the thread is gone. */
static int read_task_info(pid_t pid, struct pp_thread_snap *s, bool *ret_kthread, pid_t *ret_tracer)
{
	_cleanup_free_ char *stat_text = NULL, *status = NULL, *wchan = NULL;
	size_t len;
	uint64_t v;
	int r;

	r = read_task_file(pid, s->tid, "stat", STAT_MAX, &stat_text, &len);
	if (r < 0)
		return r;
	r = parse_task_stat(stat_text, s, ret_kthread);
	if (r < 0)
		return r;

	*ret_tracer = 0;
	if (read_task_file(pid, s->tid, "status", STATUS_MAX, &status, &len) == 0) {
		if (status_u64(status, "voluntary_ctxt_switches", &v) == 0)
			s->voluntary_switches = v;
		if (status_u64(status, "nonvoluntary_ctxt_switches", &v) == 0)
			s->nonvoluntary_switches = v;
		if (status_u64(status, "TracerPid", &v) == 0)
			*ret_tracer = (pid_t)v;
	}

	s->wchan[0] = '\0';
	if (read_task_file(pid, s->tid, "wchan", WCHAN_MAX, &wchan, &len) == 0 && len > 0) {
		while (len > 0 && (wchan[len - 1] == '\n' || wchan[len - 1] == ' '))
			len--;
		wchan[len] = '\0';
		if (strcmp(wchan, "0") != 0)
			snprintf(s->wchan, sizeof(s->wchan), "%s", wchan);
	}
	return 0;
}

#if defined(__x86_64__)
/* PTRACE_GETREGS layout to DWARF register order. */
static void regs_from_user(struct pp_regs *ret, const struct user_regs_struct *u)
{
	ret->r[0] = u->rax;
	ret->r[1] = u->rdx;
	ret->r[2] = u->rcx;
	ret->r[3] = u->rbx;
	ret->r[4] = u->rsi;
	ret->r[5] = u->rdi;
	ret->r[6] = u->rbp;
	ret->r[7] = u->rsp;
	ret->r[8] = u->r8;
	ret->r[9] = u->r9;
	ret->r[10] = u->r10;
	ret->r[11] = u->r11;
	ret->r[12] = u->r12;
	ret->r[13] = u->r13;
	ret->r[14] = u->r14;
	ret->r[15] = u->r15;
	ret->r[16] = u->rip;
}
#endif

/*
 * Copies up to len bytes from addr in pid, stopping at the first page that
 * cannot be read. Returns the number of bytes copied (0 when none).
 */
static size_t copy_stack(struct snap_ctx *c, pid_t tid, uint64_t addr, uint8_t *buf, size_t len)
{
	const uint64_t page = 4096;
	size_t done = 0;

	while (done < len && c->mem_fd < 0) {
		struct iovec remote[IOV_PIECES];
		struct iovec local;
		size_t want = 0;
		int k = 0;

		while (k < IOV_PIECES && done + want < len) {
			uint64_t a = addr + done + want;
			size_t piece = PP_MIN((size_t)(page - a % page), len - done - want);

			remote[k].iov_base = (void *)(uintptr_t)a;
			remote[k].iov_len = piece;
			want += piece;
			k++;
		}
		local.iov_base = buf + done;
		local.iov_len = want;
		ssize_t r = process_vm_readv(tid, &local, 1, remote, (unsigned long)k, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOSYS || errno == EPERM) {
				char path[64];

				snprintf(path, sizeof(path), "/proc/%d/mem", (int)c->pid);
				c->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
				if (c->mem_fd < 0)
					c->mem_fd = -2; /* give up on stacks */
				break;
			}
			return done;
		}
		done += (size_t)r;
		if ((size_t)r < want)
			return done;
	}
	/* Fallback: /proc/PID/mem, page by page. */
	while (done < len && c->mem_fd >= 0) {
		uint64_t a = addr + done;
		size_t piece = PP_MIN((size_t)(page - a % page), len - done);
		ssize_t r = pread(c->mem_fd, buf + done, piece, (off_t)a);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
		if ((size_t)r < piece)
			break;
	}
	return done;
}

/* /proc/sys/kernel/yama/ptrace_scope, -1 when there is no Yama. */
static int yama_scope(void)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	uint64_t v;

	if (pp_read_file("/proc/sys/kernel/yama/ptrace_scope", 64, &text, &len) < 0)
		return -1;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (pp_parse_u64(text, 10, 0, 3, &v) < 0)
		return -1;
	return (int)v;
}

/* Keeps the first got bytes of the scratch copy as the thread's stack. */
static void keep_stack(struct snap_ctx *c, struct pp_thread_snap *s, size_t got)
{
	if (got == 0)
		return;
	s->stack = malloc(got);
	if (s->stack) {
		memcpy(s->stack, c->scratch, got);
		s->stack_len = got;
	}
}

/*
 * A thread blocked in a call whose interruption it would see: read
 * without stopping it. Its registers are those the kernel saved at the
 * call's entry (pp_tracee__blocked_regs), else only sp and pc from
 * /proc/PID/task/TID/syscall; its stack does not move while it is blocked,
 * which is checked after the copy.
 */
static enum capture_result capture_blocked(struct snap_ctx *c, struct pp_thread_snap *s,
					   const struct pp_tracee_sys *sys, const char *why)
{
	struct user_regs_struct ur;
	struct pp_tracee_sys again;
	size_t got = 0;
	bool full = false;
	uint64_t t0 = pp_now_mono_ns();

#if defined(__x86_64__)
	full = pp_tracee__blocked_regs(c->pid, s->tid, &ur) == 0 && ur.rsp == sys->sp &&
	       ur.rip == sys->pc;
	memset(&s->regs, 0, sizeof(s->regs));
	if (full) {
		regs_from_user(&s->regs, &ur);
	} else {
		s->regs.r[PP_REG_SP] = sys->sp;
		s->regs.r[PP_REG_IP] = sys->pc;
	}
#else
	set_reason(s, -EOPNOTSUPP, "unsupported architecture");
	return CAP_DONE;
#endif
	if (c->stack_bytes > 0)
		got = copy_stack(c, s->tid, sys->sp, c->scratch, c->stack_bytes);
	if (pp_tracee__syscall_of(c->pid, s->tid, &again) < 0 || again.nr != sys->nr ||
	    again.sp != sys->sp || again.pc != sys->pc) {
		set_reason(s, -EAGAIN, "not stopped (%s), and it returned while being read", why);
		return CAP_DONE;
	}
	s->captured = true;
	s->stopped = false;
	s->pause_ns = 0;
	snprintf(s->reason, sizeof(s->reason), "not stopped: %s%s", why,
		 full ? "" : "; only sp and pc known");
	keep_stack(c, s, got);
	pp_dbg("threads: %d read without a stop in %.1f us", (int)s->tid,
	       (double)(pp_now_mono_ns() - t0) / 1e3);
	return CAP_DONE;
}

static enum capture_result capture_one(struct snap_ctx *c, struct pp_thread_snap *s)
{
	pid_t tracer = 0;
	bool kthread = false;
	int r, inject = 0;

	r = read_task_info(c->pid, s, &kthread, &tracer);
	if (r == -ENOENT || r == -ESRCH)
		return CAP_GONE;
	if (r < 0) {
		set_reason(s, r, "cannot read /proc: %s", strerror(-r));
		return CAP_DONE;
	}
	if (kthread) {
		set_reason(s, -EPERM, "kernel thread");
		return CAP_DONE;
	}
	if (s->state == 'Z' || s->state == 'X') {
		set_reason(s, -ESRCH, "thread exited (zombie)");
		return CAP_DONE;
	}

	struct pp_tracee_sys sys;
	char why[96];
	struct pp_tracee t;
	char reason[128];
	int r2 = pp_tracee__stop(&t, c->pid, s->tid, 0, c->max_pause_ms, reason, sizeof(reason));

	if (r2 == -ESRCH)
		return tracer_of(c->pid, s->tid, &tracer) < 0
			       ? CAP_GONE
			       : (set_reason(s, -ESRCH, "%s", reason), CAP_DONE);
	if (r2 == -EPERM) {
		if (tracer_of(c->pid, s->tid, &tracer) < 0)
			return CAP_GONE;
		if (tracer != 0)
			set_reason(s, -EPERM, "already traced by pid %d", (int)tracer);
		else if (yama_scope() == 3)
			set_reason(s, -EPERM, "ptrace disabled (yama ptrace_scope 3)");
		else
			set_reason(s, -EPERM,
				   "ptrace not permitted (needs CAP_SYS_PTRACE, or yama "
				   "ptrace_scope, seccomp or LSM denies it)");
		return CAP_DONE;
	}
	if (r2 == -ETIMEDOUT) {
		set_reason(s, -ETIMEDOUT, "did not stop within %u ms (state %c%s%s)",
			   c->max_pause_ms, s->state, s->wchan[0] ? ", wchan " : "", s->wchan);
		return CAP_ABANDON;
	}
	/* A thread blocked in a call whose interruption it would see is not
	 * stopped (tracee.h rule 2): its registers are those the kernel
	 * saved when it entered the call, its stack is read as it lies. */
	if (r2 == -EAGAIN && pp_tracee__syscall_of(c->pid, s->tid, &sys) == 0 &&
	    pp_tracee__visible(c->pid, &sys, why, sizeof(why)))
		return capture_blocked(c, s, &sys, why);
	if (r2 < 0) {
		set_reason(s, r2, "%s", reason);
		return pp_tracee__abandoned() ? CAP_ABANDON : CAP_DONE;
	}
	inject = t.signal;
	regs_from_user(&s->regs, &t.regs);
	s->captured = true;
	s->stopped = true;

	size_t got = 0;
	if (s->captured && c->stack_bytes > 0)
		got = copy_stack(c, s->tid, s->regs.r[PP_REG_SP], c->scratch, c->stack_bytes);

	s->pause_ns = pp_tracee__release(&t);
	if (pp_tracee__abandoned()) {
		/* killed while stopped (SIGKILL wakes a tracee): the kernel
		 * cleans up when the helper exits */
		if (s->captured)
			set_reason(s, -ESRCH, "thread exited while stopped");
		return CAP_ABANDON;
	}
	s->signal = inject;

	keep_stack(c, s, got);
	return CAP_DONE;
}

static void *helper_main(void *arg)
{
	struct snap_ctx *c = arg;

	while (c->next < c->stop) {
		size_t i = c->next++;
		enum capture_result r;

		if (c->deadline_ns && pp_now_mono_ns() >= c->deadline_ns) {
			/* Never interrupt a thread past the dump's deadline. */
			struct pp_thread_snap *s = &c->snaps[i];
			bool kthread = false;
			pid_t tracer = 0;

			int e = read_task_info(c->pid, s, &kthread, &tracer);

			if (e == -ENOENT || e == -ESRCH) {
				c->gone[i] = true;
				continue;
			}
			set_reason(s, -ETIME, "not stopped: the dump's deadline had passed");
			continue;
		}
		r = capture_one(c, &c->snaps[i]);

		if (r == CAP_GONE)
			c->gone[i] = true;
		if (r == CAP_ABANDON) {
			c->abandoned = true;
			pp_tracee__abandon();
			break;
		}
	}
	return NULL;
}

static int helper_fn(void *arg)
{
	helper_main(arg);
	return 0;
}

/* The ptrace work of a batch, on a pp_tracee__run helper (every signal
 * blocked; when a tracee is abandoned the helper's exit lets it go, and
 * pp_tracee__run waits until the kernel has). -ECANCELED once podprof is
 * stopping. */
static int run_helper(struct snap_ctx *c)
{
	return pp_tracee__run(helper_fn, c);
}

/* -EDEADLK when pid names a thread of our own process. */
static int check_not_self(pid_t pid)
{
	_cleanup_free_ char *text = NULL;
	char path[64];
	size_t len;
	uint64_t tgid;
	int r;

	if (pid == getpid())
		return -EDEADLK;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	r = pp_read_file(path, STATUS_MAX, &text, &len);
	if (r == -ENOENT)
		return -ESRCH;
	if (r < 0)
		return r;
	if (status_u64(text, "Tgid", &tgid) == 0 && (pid_t)tgid == getpid())
		return -EDEADLK;
	return 0;
}

static bool process_exists(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	return stat(path, &st) == 0;
}

int pp_threads__snapshot_each(pid_t pid, const struct pp_threads_opts *opts, pp_thread_fn fn,
			      void *ctx, size_t *ret_n)
{
	struct snap_ctx c = { .pid = pid, .mem_fd = -1 };
	_cleanup_free_ pid_t *tids = NULL;
	_cleanup_free_ bool *gone = NULL;
	_cleanup_free_ uint8_t *scratch = NULL;
	_cleanup_free_ struct pp_thread_snap *snaps = NULL;
	size_t ntids = 0, done = 0, n = 0;
	int r = 0;

	if (pid <= 0 || !fn)
		return -EINVAL;
	r = check_not_self(pid);
	if (r < 0)
		return r;

	c.stack_bytes = opts ? opts->stack_bytes : PP_THREADS_STACK_DEFAULT;
	c.stack_bytes = PP_MIN(c.stack_bytes, PP_THREADS_STACK_MAX);
	c.max_pause_ms = opts && opts->max_pause_ms ? opts->max_pause_ms
						    : PP_THREADS_PAUSE_DEFAULT_MS;
	c.max_pause_ms = PP_MIN(c.max_pause_ms, (unsigned)PAUSE_MAX_MS);
	c.deadline_ns = opts ? opts->deadline_ns : 0;

	r = pp_proc__list_tids(pid, &tids, &ntids);
	if (r == -ENOENT)
		return -ESRCH;
	if (r < 0)
		return r;
	if (ntids == 0) {
		if (ret_n)
			*ret_n = 0;
		return process_exists(pid) ? 0 : -ESRCH;
	}

	snaps = calloc(ntids, sizeof(*snaps));
	gone = calloc(ntids, sizeof(*gone));
	if (c.stack_bytes)
		scratch = malloc(c.stack_bytes);
	if (!snaps || !gone || (c.stack_bytes && !scratch))
		return -ENOMEM;
	for (size_t i = 0; i < ntids; i++)
		snaps[i].tid = tids[i];
	c.snaps = snaps;
	c.gone = gone;
	c.n = ntids;
	c.scratch = scratch;

	/* A batch at a time: its threads' stacks are handed to fn and freed
	 * before the next batch is copied. */
	while (c.next < c.n && r == 0) {
		c.stop = PP_MIN(c.n, c.next + PP_THREADS_BATCH);
		while (c.next < c.stop) {
			c.abandoned = false;
			r = run_helper(&c);
			if (r < 0)
				break;
		}
		/* Threads that exited on the way are left out. */
		for (; done < c.next; done++) {
			if (r == 0 && !gone[done]) {
				fn(ctx, &snaps[done]);
				n++;
			}
			free(snaps[done].stack);
			snaps[done].stack = NULL;
		}
	}
	if (c.mem_fd >= 0)
		close(c.mem_fd);
	for (; done < ntids; done++)
		free(snaps[done].stack);
	if (r < 0)
		return r;
	if (n == 0 && !process_exists(pid))
		return -ESRCH;
	if (ret_n)
		*ret_n = n;
	return 0;
}

struct collected {
	struct pp_thread_snap *v;
	size_t n, cap;
	bool oom;
};

static void collect_one(void *ctx, struct pp_thread_snap *s)
{
	struct collected *c = ctx;

	if (c->n == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 16;
		struct pp_thread_snap *nv = realloc(c->v, ncap * sizeof(*nv));
		if (!nv) {
			c->oom = true;
			return;
		}
		c->v = nv;
		c->cap = ncap;
	}
	c->v[c->n++] = *s;
	s->stack = NULL; /* ours now */
}

int pp_threads__snapshot(pid_t pid, const struct pp_threads_opts *opts, struct pp_thread_snap **ret,
			 size_t *ret_n)
{
	struct collected c = { 0 };
	int r;

	if (!ret || !ret_n)
		return -EINVAL;
	r = pp_threads__snapshot_each(pid, opts, collect_one, &c, NULL);
	if (r == 0 && c.oom)
		r = -ENOMEM;
	if (r < 0) {
		pp_threads__free(c.v, c.n);
		return r;
	}
	*ret = c.v;
	*ret_n = c.n;
	return 0;
}

void pp_threads__free(struct pp_thread_snap *snaps, size_t n)
{
	if (!snaps)
		return;
	for (size_t i = 0; i < n; i++)
		free(snaps[i].stack);
	free(snaps);
}
