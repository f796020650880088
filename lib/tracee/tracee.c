/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stopping a thread of another process and giving it back as it was: the
 * rules are in tracee.h; this file is their implementation, x86-64 only.
 */
#include "tracee.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/util.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif
#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif
#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#define ERESTARTNOINTR 513 /* kernel-internal: restart the call, handler or not */
#define STEP_WAIT_NS 2000000000ull
#define HELPER_STACK (256 * 1024)

/* ------------------------------------------------------------ counters */

static struct pp_tracee_stats g_stats;

#define COUNT(field) __atomic_fetch_add(&g_stats.field, 1, __ATOMIC_RELAXED)

void pp_tracee__stats(struct pp_tracee_stats *ret)
{
	ret->stops = __atomic_load_n(&g_stats.stops, __ATOMIC_RELAXED);
	ret->postponed = __atomic_load_n(&g_stats.postponed, __ATOMIC_RELAXED);
	ret->restarted = __atomic_load_n(&g_stats.restarted, __ATOMIC_RELAXED);
	ret->signals = __atomic_load_n(&g_stats.signals, __ATOMIC_RELAXED);
	ret->timeouts = __atomic_load_n(&g_stats.timeouts, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ /proc */

static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

int pp_tracee__syscall_of(pid_t pid, pid_t tid, struct pp_tracee_sys *ret)
{
	char p[96], buf[320], *q, *end;
	ssize_t n;

	memset(ret, 0, sizeof(*ret));
	snprintf(p, sizeof(p), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	n = read_small(p, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (n == 0)
		return -EIO;
	if (strncmp(buf, "running", 7) == 0) {
		ret->nr = -2;
		return 0;
	}
	ret->nr = strtol(buf, &end, 10);
	q = end;
	if (ret->nr >= 0) {
		for (int i = 0; i < 6; i++) {
			ret->args[i] = strtoull(q, &end, 16);
			if (end == q)
				return -EIO;
			q = end;
		}
	}
	ret->sp = strtoull(q, &end, 16);
	q = end;
	ret->pc = strtoull(q, &end, 16);
	return 0;
}

/* A "Key:\t<hex>" field of a status file. */
static bool status_hex(const char *text, const char *key, uint64_t *ret)
{
	const char *l = strstr(text, key);

	if (!l)
		return false;
	*ret = strtoull(l + strlen(key), NULL, 16);
	return true;
}

bool pp_tracee__seccomp(pid_t pid, pid_t tid)
{
	char p[96], buf[4096];
	const char *l;

	snprintf(p, sizeof(p), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (read_small(p, buf, sizeof(buf)) <= 0)
		return true; /* unknown: as if filtered */
	l = strstr(buf, "\nSeccomp:");
	return l && strtol(l + 9, NULL, 10) != 0;
}

/* An unblocked signal pending for the thread (its own or the process's)? */
static bool signal_pending(pid_t pid, pid_t tid)
{
	char p[96], buf[4096];
	uint64_t own = 0, shared = 0, blocked = 0;

	snprintf(p, sizeof(p), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (read_small(p, buf, sizeof(buf)) <= 0)
		return true;
	if (!status_hex(buf, "\nSigPnd:", &own) || !status_hex(buf, "\nShdPnd:", &shared) ||
	    !status_hex(buf, "\nSigBlk:", &blocked))
		return true;
	return ((own | shared) & ~blocked) != 0;
}

static int read_mem(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
		char p[64];
		int fd;

		snprintf(p, sizeof(p), "/proc/%d/mem", (int)pid);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		n = pread(fd, buf, len, (off_t)addr);
		close(fd);
		return n == (ssize_t)len ? 0 : -EIO;
	}
	return -EIO;
}

/* ------------------------------------------------------------ rule 1 */

/* Is a thread of pid inside vfork() (vfork, or clone/clone3 with
 * CLONE_VFORK)? */
static bool in_vfork(pid_t pid)
{
	char p[64];
	DIR *d;
	struct dirent *e;
	bool found = false;

	if (pid <= 1)
		return false;
	snprintf(p, sizeof(p), "/proc/%d/task", (int)pid);
	d = opendir(p);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		struct pp_tracee_sys s;
		uint64_t flags = 0;

		if (tid <= 0 || pp_tracee__syscall_of(pid, tid, &s) < 0)
			continue;
		found = s.nr == SYS_vfork || (s.nr == SYS_clone && (s.args[0] & CLONE_VFORK)) ||
			(s.nr == 435 /* clone3: struct clone_args, flags first */ &&
			 read_mem(pid, s.args[0], &flags, sizeof(flags)) == 0 &&
			 (flags & CLONE_VFORK));
	}
	closedir(d);
	return found;
}

static pid_t parent_of(pid_t pid)
{
	char p[64], buf[2048];
	const char *q;

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	if (read_small(p, buf, sizeof(buf)) <= 0)
		return 0;
	q = strstr(buf, "\nPPid:");
	return q ? (pid_t)strtol(q + 6, NULL, 10) : 0;
}

int pp_tracee__process_check(pid_t pid, char *reason, size_t n)
{
	if (in_vfork(pid)) {
		snprintf(reason, n, "a thread is in vfork()");
		return -EAGAIN;
	}
	if (in_vfork(parent_of(pid))) {
		/* maybe its vfork child: it runs on its parent's memory */
		snprintf(reason, n, "its parent is in vfork()");
		return -EAGAIN;
	}
	return 0;
}

/* ------------------------------------------------------------ rule 2 */

/*
 * The socket's SO_RCVTIMEO/SO_SNDTIMEO is zero (a blocked call on it is
 * restarted after an interrupt, not failed with EINTR). Looked at through a
 * copy of the descriptor (pidfd_getfd); unknown counts as set.
 */
static bool sock_timeout_zero(pid_t pid, int fd, int opt)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), sfd;
	struct timeval tv = { 1, 0 };
	socklen_t len = sizeof(tv);

	if (pfd < 0)
		return false;
	sfd = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	close(pfd);
	if (sfd < 0)
		return false;
	if (getsockopt(sfd, SOL_SOCKET, opt, &tv, &len) < 0)
		tv.tv_sec = 1;
	close(sfd);
	return tv.tv_sec == 0 && tv.tv_usec == 0;
}

/* What fd of pid is: 's' socket, 'q' a descriptor whose blocking read the
 * kernel restarts (pipe, eventfd, signalfd, timerfd, inotify), '?' else. */
static char fd_kind(pid_t pid, uint64_t fd)
{
	char p[96], l[128];
	ssize_t n;

	if (fd > 1u << 30)
		return '?';
	snprintf(p, sizeof(p), "/proc/%d/fd/%llu", (int)pid, (unsigned long long)fd);
	n = readlink(p, l, sizeof(l) - 1);
	if (n <= 0)
		return '?';
	l[n] = '\0';
	if (strncmp(l, "socket:", 7) == 0)
		return 's';
	if (strncmp(l, "pipe:", 5) == 0 || strcmp(l, "anon_inode:[eventfd]") == 0 ||
	    strcmp(l, "anon_inode:[signalfd]") == 0 || strcmp(l, "anon_inode:[timerfd]") == 0 ||
	    strcmp(l, "anon_inode:inotify") == 0)
		return 'q';
	return '?';
}

static const char *sys_name(long nr)
{
	switch (nr) {
	case SYS_read:
		return "read";
	case SYS_readv:
		return "readv";
	case SYS_recvfrom:
		return "recvfrom";
	case SYS_recvmsg:
		return "recvmsg";
	case SYS_accept:
		return "accept";
	case SYS_accept4:
		return "accept4";
	case SYS_epoll_wait:
		return "epoll_wait";
	case SYS_epoll_pwait:
		return "epoll_pwait";
	case 441:
		return "epoll_pwait2";
	case SYS_rt_sigtimedwait:
		return "sigtimedwait";
	case SYS_io_getevents:
		return "io_getevents";
	case 426:
		return "io_uring_enter";
	case SYS_connect:
		return "connect";
	case SYS_write:
		return "write";
	case SYS_vfork:
		return "vfork";
	case SYS_clone:
		return "clone";
	case 435:
		return "clone3";
	default:
		return NULL;
	}
}

bool pp_tracee__visible(pid_t pid, const struct pp_tracee_sys *s, char *why, size_t n)
{
	const char *name = sys_name(s->nr);
	uint64_t flags = 0;
	char kind;

	if (s->nr < 0)
		return false;
	switch (s->nr) {
	case SYS_poll:
	case SYS_select:
	case SYS_pause:
	case SYS_nanosleep:
	case SYS_wait4:
	case SYS_futex:
	case SYS_clock_nanosleep:
	case SYS_waitid:
	case SYS_pselect6:
	case SYS_ppoll:
	case SYS_rt_sigsuspend:
	case SYS_restart_syscall: /* a restarted nanosleep, poll, futex wait */
	case 449: /* futex_waitv */
		/* restarted by the kernel, timeouts kept (restart_block, or the
		 * remaining time written back as select/ppoll always do) */
		return false;
	case SYS_read:
	case SYS_readv:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_accept:
	case SYS_accept4:
		if ((s->nr == SYS_recvfrom && (s->args[3] & MSG_WAITALL)) ||
		    (s->nr == SYS_recvmsg && (s->args[2] & MSG_WAITALL)))
			break; /* a partial read would be returned */
		kind = fd_kind(pid, s->args[0]);
		if (kind == 'q' && (s->nr == SYS_read || s->nr == SYS_readv))
			return false;
		if (kind == 's' && sock_timeout_zero(pid, (int)s->args[0], SO_RCVTIMEO))
			return false;
		if (why)
			snprintf(why, n, "in %s on %s", name,
				 kind == 's' ? "a socket with a receive timeout (EINTR)"
					     : "a descriptor that may fail with EINTR");
		return true;
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		if ((int)s->args[3] < 0)
			return false; /* no timeout: restarted (rule 2's race) */
		break;
	case 441: /* epoll_pwait2 */
	case SYS_rt_sigtimedwait:
		if (s->args[s->nr == 441 ? 3 : 2] == 0)
			return false; /* no timeout: restarted (rule 2's race) */
		break;
	case SYS_clone:
	case 435: /* clone3: flags first in struct clone_args */
		if (!(s->nr == SYS_clone ? s->args[0] & CLONE_VFORK
					 : read_mem(pid, s->args[0], &flags, sizeof(flags)) < 0 ||
						   (flags & CLONE_VFORK)))
			return false; /* a plain clone: restarted (ERESTARTNOINTR) */
		/* fall through */
	case SYS_vfork:
		/* a vfork parent must never be stopped (rule 1) */
		if (why)
			snprintf(why, n, "in %s (a vfork parent is never stopped)", name);
		return true;
	default:
		break;
	}
	if (why) {
		if (name)
			snprintf(why, n, "in %s (an interruption returns EINTR)", name);
		else
			snprintf(why, n, "in syscall %ld (an interruption may be visible)", s->nr);
	}
	return true;
}

/* Calls whose -EINTR after our interrupt means nothing was done, so a
 * restart with the same arguments is what the program would have seen had
 * the interrupt come a moment later (rule 2's race). */
static bool eintr_restartable(long nr)
{
	switch (nr) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
	case 441: /* epoll_pwait2 */
	case SYS_rt_sigtimedwait:
	case SYS_read:
	case SYS_readv:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_accept:
	case SYS_accept4:
	case SYS_io_getevents:
		return true;
	default:
		return false;
	}
}

/* ------------------------------------------------------------ helpers */

static __thread bool tls_abandoned;
static __thread bool tls_in_run;

void pp_tracee__abandon(void)
{
	tls_abandoned = true;
}

bool pp_tracee__abandoned(void)
{
	return tls_abandoned;
}

static void pause_briefly(unsigned *round)
{
	/* A running or sleeping thread stops within microseconds: yield a
	 * few times first, then sleep with a growing interval up to 1 ms. */
	if (*round < 16) {
		sched_yield();
	} else {
		unsigned shift = PP_MIN(*round - 16, 6u);
		struct timespec ts = { 0, (long)(16000u << shift) };

		if (ts.tv_nsec > 1000000)
			ts.tv_nsec = 1000000;
		nanosleep(&ts, NULL);
	}
	(*round)++;
}

/* Waits for tid's next stop or exit until deadline: 0, -ETIMEDOUT, -errno. */
static int wait_tracee(pid_t tid, uint64_t deadline, int *status)
{
	unsigned round = 0;

	for (;;) {
		pid_t w = waitpid(tid, status, __WALL | WNOHANG);

		if (w == tid)
			return 0;
		if (w < 0 && errno != EINTR)
			return -errno;
		if (pp_now_mono_ns() >= deadline)
			return -ETIMEDOUT;
		pause_briefly(&round);
	}
}

/* Is the thread's rip inside an rseq critical section it registered? */
static bool in_rseq_cs(struct pp_tracee *t)
{
	struct {
		uint64_t ptr;
		uint32_t size, sig, flags, pad;
	} conf = { 0 };
	struct {
		uint32_t version, flags;
		uint64_t start, post_commit_offset, abort_ip;
	} cs;
	uint64_t cs_ptr = 0;
	long r = ptrace(PTRACE_GET_RSEQ_CONFIGURATION, t->tid, (void *)sizeof(conf), &conf);

	if (r <= 0 || !conf.ptr)
		return false; /* no rseq (or a kernel without the request: none) */
	if (read_mem(t->pid, conf.ptr + 8, &cs_ptr, sizeof(cs_ptr)) < 0)
		return true; /* registered but unreadable: do not risk it */
	if (!cs_ptr)
		return false;
	if (read_mem(t->pid, cs_ptr, &cs, sizeof(cs)) < 0)
		return true;
	return t->regs.rip - cs.start < cs.post_commit_offset;
}

static void detach(struct pp_tracee *t, int sig)
{
	if (ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(uintptr_t)sig) < 0) {
		/* killed meanwhile, or not in a stop: the helper's exit lets
		 * it go (exit_ptrace) */
		pp_dbg("tracee: PTRACE_DETACH %d: %s", (int)t->tid, strerror(errno));
		pp_tracee__abandon();
	}
	t->seized = false;
}

/* ------------------------------------------------------------ stop */

int pp_tracee__stop(struct pp_tracee *t, pid_t pid, pid_t tid, unsigned flags,
		    unsigned max_pause_ms, char *reason, size_t n)
{
	struct pp_tracee_sys sys;
	char why[128];
	int status = 0, r;
	unsigned event;

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	t->flags = flags;
	if (!tls_in_run) {
		snprintf(reason, n, "internal: stop outside pp_tracee__run");
		return -EINVAL;
	}
	r = pp_tracee__syscall_of(pid, tid, &sys);
	if (r == -ENOENT || r == -ESRCH) {
		snprintf(reason, n, "thread exited");
		return -ESRCH;
	}
	if (r == 0 && pp_tracee__visible(pid, &sys, why, sizeof(why))) {
		COUNT(postponed);
		snprintf(reason, n, "thread %d is %s", (int)tid, why);
		return -EAGAIN;
	}
	if ((flags & PP_TRACEE_RUN) && pp_tracee__seccomp(pid, tid)) {
		COUNT(postponed);
		snprintf(reason, n, "thread %d has a seccomp filter", (int)tid);
		return -EAGAIN;
	}
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0) {
		r = -errno;
		snprintf(reason, n, "ptrace not permitted (%s)", strerror(errno));
		return r == -ESRCH ? -ESRCH : -EPERM;
	}
	t->seized = true;
	t->t0 = pp_now_mono_ns();
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0)
		pp_dbg("tracee: PTRACE_INTERRUPT %d: %s", (int)tid, strerror(errno));
	r = wait_tracee(tid, t->t0 + (uint64_t)max_pause_ms * 1000000ull, &status);
	if (r == -ETIMEDOUT) {
		COUNT(timeouts);
		pp_tracee__abandon(); /* still seized: the helper's exit lets it go */
		t->seized = false;
		snprintf(reason, n, "thread %d did not stop within %u ms", (int)tid, max_pause_ms);
		return -ETIMEDOUT;
	}
	if (r < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {
		t->seized = false;
		if (r < 0)
			pp_tracee__abandon();
		snprintf(reason, n, "thread exited while stopping it");
		return -ESRCH;
	}
	if (!WIFSTOPPED(status)) {
		pp_tracee__abandon();
		t->seized = false;
		snprintf(reason, n, "unexpected wait status 0x%x", (unsigned)status);
		return -EPROTO;
	}
	event = (unsigned)status >> 16;
	if (event == 0) {
		/* signal-delivery-stop: given back with this very stop, so its
		 * siginfo is kept (rule 3) */
		t->signal = WSTOPSIG(status);
		if (flags & PP_TRACEE_RUN) {
			COUNT(signals);
			detach(t, t->signal);
			snprintf(reason, n, "a signal arrived as thread %d stopped", (int)tid);
			return -EAGAIN;
		}
	} else if (event == PTRACE_EVENT_STOP && WSTOPSIG(status) != SIGTRAP &&
		   (flags & PP_TRACEE_RUN)) {
		/* group-stop: the process is being stopped (job control);
		 * detaching leaves it stopped; reading it is fine, running
		 * code in it is not */
		detach(t, 0);
		snprintf(reason, n, "process is stopped (job control)");
		return -EAGAIN;
	}
	if (ptrace(PTRACE_GETREGS, tid, NULL, &t->regs) < 0) {
		r = -errno;
		detach(t, t->signal);
		snprintf(reason, n, "PTRACE_GETREGS: %s", strerror(-r));
		return r == -ESRCH ? -ESRCH : -EIO;
	}
	/* Rule 2's race: the thread entered a call that fails with EINTR
	 * after our check; with nothing else pending, restart it. */
	if (event == PTRACE_EVENT_STOP && (long)t->regs.orig_rax >= 0 &&
	    (long)t->regs.rax == -EINTR && eintr_restartable((long)t->regs.orig_rax) &&
	    !signal_pending(pid, tid)) {
		struct user_regs_struct fix = t->regs;

		fix.rax = (unsigned long long)-ERESTARTNOINTR;
		if (ptrace(PTRACE_SETREGS, tid, NULL, &fix) == 0) {
			t->regs = fix;
			t->restarted = true;
			COUNT(restarted);
		}
	}
	if (flags & PP_TRACEE_RUN) {
		if (in_rseq_cs(t)) {
			COUNT(postponed);
			detach(t, 0);
			snprintf(reason, n, "thread %d is in an rseq critical section", (int)tid);
			return -EAGAIN;
		}
		if (ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(t->mask), &t->mask) < 0) {
			r = -errno;
			detach(t, 0);
			snprintf(reason, n, "PTRACE_GETSIGMASK: %s", strerror(-r));
			return -EIO;
		}
		uint64_t all = ~0ull;
		if (ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(all), &all) < 0) {
			r = -errno;
			detach(t, 0);
			snprintf(reason, n, "PTRACE_SETSIGMASK: %s", strerror(-r));
			return -EIO;
		}
		t->mask_set = true;
	}
	COUNT(stops);
	return 0;
}

int pp_tracee__step(struct pp_tracee *t, struct user_regs_struct *r, unsigned len)
{
	uint64_t start = r->rip;
	int status, tries = 0;

	if (!t->seized || !(t->flags & PP_TRACEE_RUN))
		return -EINVAL;
	r->orig_rax = (unsigned long long)-1; /* no restart of the interrupted call */
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, r) < 0)
		return -errno;
	for (;;) {
		int e;

		if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL) < 0)
			return -errno;
		e = wait_tracee(t->tid, pp_now_mono_ns() + STEP_WAIT_NS, &status);
		if (e == -ETIMEDOUT) {
			/* a remote call that blocks: bring it back to a stop
			 * so release can clear the trap flag */
			ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
			e = wait_tracee(t->tid, pp_now_mono_ns() + STEP_WAIT_NS, &status);
			if (e < 0) {
				pp_tracee__abandon();
				t->seized = false;
				return -ETIMEDOUT;
			}
			if (WIFSTOPPED(status))
				return -ETIMEDOUT;
		}
		if (e < 0)
			return e;
		if (!WIFSTOPPED(status)) {
			t->seized = false;
			return -ESRCH;
		}
		if (ptrace(PTRACE_GETREGS, t->tid, NULL, r) < 0)
			return -errno;
		if (r->rip == start + len)
			return 0;
		/* every signal is blocked: a signal here is the instruction's
		 * own fault (or our trap), not the program's: it is dropped */
		if ((status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP)
			return -EFAULT;
		if (r->rip != start || ++tries > 16)
			return -EPROTO;
	}
}

int pp_tracee__syscall(struct pp_tracee *t, uint64_t gadget, long nr, uint64_t a1, uint64_t a2,
		       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, long *ret)
{
	struct user_regs_struct r = t->regs;
	int e;

	if (pp_tracee__seccomp(t->pid, t->tid))
		return -EPERM; /* a filter came meanwhile (TSYNC): run nothing */
	r.rax = (unsigned long long)nr;
	r.rdi = a1;
	r.rsi = a2;
	r.rdx = a3;
	r.r10 = a4;
	r.r8 = a5;
	r.r9 = a6;
	r.rip = gadget;
	e = pp_tracee__step(t, &r, 2); /* syscall */
	if (e < 0)
		return e;
	*ret = (long)r.rax;
	return 0;
}

uint64_t pp_tracee__release(struct pp_tracee *t)
{
	if (!t->seized)
		return 0;
	if (t->flags & PP_TRACEE_RUN) {
		if (ptrace(PTRACE_SETREGS, t->tid, NULL, &t->regs) < 0)
			pp_tracee__abandon();
		if (t->mask_set &&
		    ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof(t->mask), &t->mask) < 0)
			pp_tracee__abandon();
	}
	if (t->signal)
		COUNT(signals);
	detach(t, t->signal);
	return pp_now_mono_ns() - t->t0;
}

/* ------------------------------------------------------------ helper */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static unsigned g_inflight;
static bool g_closing;

struct run_arg {
	int (*fn)(void *);
	void *ctx;
	int ret;
	pid_t tid;
	bool abandoned;
};

static void *run_main(void *p)
{
	struct run_arg *a = p;

	a->tid = (pid_t)syscall(SYS_gettid);
	tls_in_run = true;
	tls_abandoned = false;
	a->ret = a->fn(a->ctx);
	a->abandoned = tls_abandoned;
	return NULL;
}

/* The joined helper may still be on its way out of the kernel: wait until
 * its task is gone, i.e. exit_ptrace has released its tracee. */
static void wait_task_gone(pid_t htid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)htid);
	for (int i = 0; i < 20000 && stat(path, &st) == 0; i++) {
		struct timespec ts = { 0, 50000 };

		nanosleep(&ts, NULL);
	}
}

int pp_tracee__run(int (*fn)(void *ctx), void *ctx)
{
	struct run_arg a = { .fn = fn, .ctx = ctx };
	pthread_attr_t attr;
	pthread_t th;
	sigset_t all, old;
	int r;

	pthread_mutex_lock(&g_lock);
	if (g_closing) {
		pthread_mutex_unlock(&g_lock);
		return -ECANCELED;
	}
	g_inflight++;
	pthread_mutex_unlock(&g_lock);

	r = pthread_attr_init(&attr);
	if (r == 0) {
		pthread_attr_setstacksize(&attr, HELPER_STACK);
		/* the helper blocks every signal: nothing interrupts a stop */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		r = pthread_create(&th, &attr, run_main, &a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
	if (r == 0) {
		pthread_join(th, NULL);
		if (a.abandoned)
			wait_task_gone(a.tid);
		r = a.ret;
	} else {
		r = -r;
	}

	pthread_mutex_lock(&g_lock);
	g_inflight--;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	return r;
}

int pp_tracee__close(unsigned timeout_ms)
{
	struct timespec until;
	int left;

	until = pp_realtime_in_ms(timeout_ms);
	pthread_mutex_lock(&g_lock);
	g_closing = true;
	while (g_inflight > 0) {
		if (pthread_cond_timedwait(&g_cond, &g_lock, &until) == ETIMEDOUT)
			break;
	}
	left = (int)g_inflight;
	pthread_mutex_unlock(&g_lock);
	return left;
}
