/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Thread snapshots for /debug/pprof/goroutine: every thread of a process
 * is stopped as briefly as possible (PTRACE_SEIZE + PTRACE_INTERRUPT, regs
 * and stack read, detach), one thread at a time, so the target keeps
 * running. Threads that cannot be stopped (already traced, exited,
 * permission) are listed with the reason.
 *
 * Thread-safety: each call is self-contained (ptrace from the calling
 * thread only); calls for the same pid must not run concurrently.
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
	char state;                 /* from /proc/PID/task/TID/stat before stopping */
	char wchan[64];             /* kernel wait channel, "" if unknown */
	uint64_t voluntary_switches, nonvoluntary_switches;
	uint64_t cpu_time_ns;       /* utime+stime */
	bool captured;              /* regs and stack valid */
	int error;                  /* -errno when not captured */
	char reason[96];            /* human text when not captured */
	uint64_t pause_ns;          /* how long the thread was stopped */
	struct pp_regs regs;
	uint8_t *stack;             /* owned; bytes from regs.r[PP_REG_SP] */
	size_t stack_len;
};

struct pp_threads_opts {
	unsigned stack_bytes;
	unsigned max_pause_ms;      /* give up on a thread that does not stop in time */
};

/* Snapshot every thread of pid. Caller frees with pp_threads__free. */
int pp_threads__snapshot(pid_t pid, const struct pp_threads_opts *opts,
			 struct pp_thread_snap **ret, size_t *ret_n);
void pp_threads__free(struct pp_thread_snap *snaps, size_t n);

#endif
