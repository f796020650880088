/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Thread snapshots for /debug/pprof/goroutine: every thread of a process
 * is stopped as briefly as possible (PTRACE_SEIZE + PTRACE_INTERRUPT, regs
 * and stack read, detach), one thread at a time, so the target keeps
 * running. Threads that cannot be stopped (already traced, exited,
 * permission) are listed with the reason.
 *
 * Thread-safety: each call is self-contained: its ptrace requests all come
 * from one short-lived helper thread it creates and joins (a tracee is
 * bound to the tracer *thread*; when a thread does not stop within
 * max_pause_ms the helper exits, which makes the kernel detach it, and a new
 * helper carries on with the remaining threads). Calls for different pids
 * may run concurrently; calls for the same pid must not. No other thread of
 * the caller's process may wait for arbitrary children with __WALL
 * (waitpid(-1, ..., __WALL)) meanwhile: it could consume the stop reports.
 *
 * What the target sees: no SIGSTOP (PTRACE_SEIZE, no options), a stop of a
 * few microseconds per thread, signals that arrive during the stop are
 * re-delivered on detach, a process stopped by a job-control signal stays
 * stopped. Syscalls are restarted as after any ptrace stop; the few that
 * return EINTR after a stop even without a signal (epoll_wait, select,
 * sigtimedwait, ... see signal(7)) may do so here too, as with gdb or
 * eu-stack.
 */
#ifndef PODPROF_THREADS_H
#define PODPROF_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

struct pp_thread_snap {
	pid_t tid;
	char name[16];
	char state; /* from /proc/PID/task/TID/stat before stopping */
	char wchan[64]; /* kernel wait channel, "" if unknown */
	uint64_t voluntary_switches, nonvoluntary_switches;
	uint64_t cpu_time_ns; /* utime+stime */
	bool captured; /* regs and stack valid */
	bool stopped; /* captured in a stop; false: read as it lay (reason says why) */
	int error; /* -errno when not captured */
	char reason[160]; /* why not captured, or why captured without a stop */
	uint64_t pause_ns; /* how long the thread was stopped */
	struct pp_regs regs;
	uint8_t *stack; /* owned; bytes from regs.r[PP_REG_SP] */
	size_t stack_len;
	int signal; /* signal found pending at the stop and re-delivered
				     * on detach, 0 if none (extension) */
};

struct pp_threads_opts {
	unsigned stack_bytes; /* 0: no stack copy; capped at PP_THREADS_STACK_MAX */
	unsigned max_pause_ms; /* give up on a thread that does not stop in time;
				     * 0: PP_THREADS_PAUSE_DEFAULT_MS, capped at 10000 */
	/*
	 * pp_now_mono_ns() after which no thread is interrupted (0: none):
	 * the threads not tried by then are listed with error -ETIME. A thread
	 * interrupted just before may stay stopped up to max_pause_ms past it.
	 */
	uint64_t deadline_ns;
};

#define PP_THREADS_STACK_DEFAULT 32768 /* when opts is NULL */
#define PP_THREADS_STACK_MAX (8u << 20)
#define PP_THREADS_PAUSE_DEFAULT_MS 50

/*
 * Snapshot every thread of pid (any tid of the process works too), in
 * /proc/PID/task order. opts may be NULL (defaults). Threads that exit
 * during the call are left out; every other thread is listed, with
 * captured=false plus error/reason when it could not be stopped:
 * -EPERM ("already traced by pid N", no permission, kernel thread),
 * -ETIMEDOUT (did not stop within max_pause_ms, e.g. in D state), -ESRCH
 * (zombie), -ETIME (opts->deadline_ns passed before it was tried). On return no thread is stopped or traced by us.
 *
 * Returns 0, -ESRCH (no such process, or it exited), -EDEADLK (pid is the
 * caller's own process), -EINVAL, -ENOMEM, -E2BIG (too many threads) or
 * another -errno. Caller frees *ret with pp_threads__free (n may be 0).
 */
int pp_threads__snapshot(pid_t pid, const struct pp_threads_opts *opts, struct pp_thread_snap **ret,
			 size_t *ret_n);
/*
 * The same, a batch of PP_THREADS_BATCH threads at a time: fn gets each
 * thread that did not exit (in /proc/PID/task order) once its batch is
 * done and no thread is stopped; the stack is freed after fn returns
 * (unless fn took it, setting snap->stack to NULL). So at most one batch
 * of stacks is held, whatever the number of threads. *ret_n (may be NULL):
 * the threads handed to fn. fn runs on the calling thread.
 */
#define PP_THREADS_BATCH 16
typedef void (*pp_thread_fn)(void *ctx, struct pp_thread_snap *snap);
int pp_threads__snapshot_each(pid_t pid, const struct pp_threads_opts *opts, pp_thread_fn fn,
			      void *ctx, size_t *ret_n);
/* Frees the stacks and the array; NULL is fine. */
void pp_threads__free(struct pp_thread_snap *snaps, size_t n);

#endif
