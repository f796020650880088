/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stopping a thread of another process, and giving it back exactly as it
 * was. The one place podprof stops a thread of an application: the heap
 * injector (which also runs code in the stopped thread) and thread dumps
 * use it alike.
 *
 * The rules, each a hazard seen in real programs:
 *
 *  1. A process where a thread, or the process's parent, is inside vfork()
 *     is not touched (pp_tracee__process_check): the vfork parent would stay
 *     in tracing stop, and the child runs on the parent's memory.
 *  2. A thread blocked in a syscall whose interruption the program could
 *     see is never stopped (pp_tracee__visible): epoll_wait, sigtimedwait,
 *     io_getevents, ... return EINTR to a ptrace interrupt, and a socket
 *     call with SO_RCVTIMEO/SO_SNDTIMEO returns EINTR instead of
 *     restarting. Only calls the kernel restarts unnoticed (futex, poll,
 *     nanosleep, wait4, read of a pipe or of a socket without a timeout,
 *     ...) may be interrupted, and so may calls that wait without a timeout
 *     (epoll_wait(-1), sigwait): their -EINTR is turned into a restart,
 *     which the program cannot tell from no interruption at all. The same
 *     is done for a thread that enters such a call between the check and
 *     the interrupt; never when a signal is pending for it (its EINTR is
 *     then the program's own).
 *  3. A signal arriving as the thread stops (a signal-delivery-stop) is
 *     handed back at once with the same stop, so the kernel keeps its
 *     siginfo (si_code, si_value) untouched. While podprof runs code in a
 *     thread, all its signals are blocked (PTRACE_SETSIGMASK): they stay
 *     queued with their siginfo and are delivered after the release.
 *  4. PP_TRACEE_RUN (podprof will run syscalls in the thread): the thread
 *     must have no seccomp filter of its own (checked again before every
 *     remote syscall) and must not be inside an rseq critical section (its
 *     abort would be skipped). podprof writes nothing below the thread's
 *     stack pointer (it may be on an alternate signal stack carved out of
 *     someone else's memory): scratch memory is mapped for the purpose.
 *  5. Every stop runs on a helper thread (pp_tracee__run) with all signals
 *     blocked: a thread that does not stop in time is left to the kernel
 *     (the helper exits, which detaches it and drops the pending trap), so
 *     a timeout leaves nothing attached.
 *  6. pp_tracee__close (podprof's shutdown) refuses new stops and waits for
 *     those in flight: SIGTERM never ends podprof in the middle of a stop.
 *     Only a SIGKILL of podprof while it runs code in a thread (the few
 *     microseconds of one remote syscall or store, registers changed) can
 *     hurt the target; nothing else is done in that state.
 */
#ifndef PODPROF_TRACEE_H
#define PODPROF_TRACEE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* What a thread is doing, from /proc/PID/task/TID/syscall (no stop). */
struct pp_tracee_sys {
	long nr; /* syscall it is blocked in; -1 none (user mode), -2 running */
	uint64_t args[6];
	uint64_t sp, pc; /* user sp and pc (nr >= -1) */
};

int pp_tracee__syscall_of(pid_t pid, pid_t tid, struct pp_tracee_sys *ret);

/*
 * Would a ptrace interrupt of this thread be visible to the program (rule
 * 2)? False for a thread not in a syscall, or in one the kernel restarts
 * unnoticed. why (may be NULL) gets the call's name and why.
 */
bool pp_tracee__visible(pid_t pid, const struct pp_tracee_sys *s, char *why, size_t n);

/*
 * Registers of a thread blocked in a syscall, read without stopping it (as
 * the kernel saved them at the call's entry; BPF). 0, or -ENOTSUP (no BPF
 * here), -ESRCH, -errno. Meaningful only while the thread stays in the
 * call: compare sp and pc with pp_tracee__syscall_of.
 */
int pp_tracee__blocked_regs(pid_t pid, pid_t tid, struct user_regs_struct *ret);

/* Rule 1: 0, or -EAGAIN with the reason. */
int pp_tracee__process_check(pid_t pid, char *reason, size_t n);

/* Does this thread have a seccomp filter (its own or the process's)? */
bool pp_tracee__seccomp(pid_t pid, pid_t tid);

enum pp_tracee_flags {
	PP_TRACEE_RUN = 1 << 0, /* podprof will run code in the thread (rule 4) */
};

struct pp_tracee {
	pid_t pid, tid;
	unsigned flags;
	struct user_regs_struct regs; /* given back at release */
	int signal; /* reported at the stop, handed back at release */
	uint64_t mask; /* its signal mask before PP_TRACEE_RUN blocked all */
	bool mask_set;
	bool seized;
	bool restarted; /* rule 2's race: an -EINTR we caused turned into a restart */
	uint64_t t0; /* when it was interrupted */
};

/*
 * Stops thread tid of pid (seize, interrupt, wait up to max_pause_ms).
 * Returns 0 (stopped; regs hold its registers), -EAGAIN (not now: reason
 * says why; nothing is attached), -EPERM, -ESRCH (gone) or -ETIMEDOUT (did
 * not stop in time: the thread stays attached to the calling helper until
 * it exits, see pp_tracee__run). Must be called inside pp_tracee__run.
 */
int pp_tracee__stop(struct pp_tracee *t, pid_t pid, pid_t tid, unsigned flags,
		    unsigned max_pause_ms, char *reason, size_t n);

/*
 * PP_TRACEE_RUN only: sets the registers to r and lets the thread run until
 * rip is len bytes past r->rip (one instruction); r gets the registers
 * after. -EFAULT when that instruction faulted (the fault is ours and is
 * dropped), -EPROTO when it went elsewhere.
 */
int pp_tracee__step(struct pp_tracee *t, struct user_regs_struct *r, unsigned len);

/*
 * PP_TRACEE_RUN only: runs syscall nr in the thread through the `syscall`
 * instruction at gadget; *ret gets its result. -EPERM without running it
 * when the thread has a seccomp filter by now.
 */
int pp_tracee__syscall(struct pp_tracee *t, uint64_t gadget, long nr, uint64_t a1, uint64_t a2,
		       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, long *ret);

/*
 * Gives the thread back: registers and signal mask as they were, the
 * signal reported at the stop handed back. Returns how long it was
 * stopped (ns). Safe on a tracee that is not seized.
 */
uint64_t pp_tracee__release(struct pp_tracee *t);

/*
 * Runs fn(ctx) on a new thread with every signal blocked, and returns its
 * result. If a stop timed out (or a release failed) the thread is waited
 * for until the kernel has let its tracee go. -ECANCELED without running
 * fn after pp_tracee__close.
 */
int pp_tracee__run(int (*fn)(void *ctx), void *ctx);

/* Inside pp_tracee__run: a tracee may still be attached; the helper must
 * end (set by pp_tracee__stop and pp_tracee__release themselves). */
void pp_tracee__abandon(void);
bool pp_tracee__abandoned(void);

/*
 * Shutdown: no new pp_tracee__run; waits up to timeout_ms for those
 * running. Returns the number still running at the timeout (0: none).
 */
int pp_tracee__close(unsigned timeout_ms);

/* Process-wide counters for /metrics. */
struct pp_tracee_stats {
	uint64_t stops; /* threads stopped */
	uint64_t postponed; /* stops not done: a rule said no */
	uint64_t restarted; /* -EINTR caused by us turned into a restart */
	uint64_t signals; /* signals handed back at release */
	uint64_t timeouts;
};
void pp_tracee__stats(struct pp_tracee_stats *ret);

#endif
