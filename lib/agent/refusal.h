/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Why the kernel refuses what a collector needs, and what fixes it.
 *
 * The collectors need two syscalls: perf_event_open (CPU sampler, uprobes)
 * and bpf (heap and off-CPU tracers). Four things can refuse them: the
 * container's seccomp filter (the default profiles of podman and CRI-O allow
 * both only with CAP_SYS_ADMIN), a missing capability (CAP_PERFMON, CAP_BPF),
 * kernel.perf_event_paranoid, and kernel lockdown. The probes look at the
 * process's own state; the explanation is a pure function of it, so it is
 * unit-tested without any of those conditions.
 */
#ifndef PODPROF_AGENT_REFUSAL_H
#define PODPROF_AGENT_REFUSAL_H

#include <stdbool.h>
#include <stddef.h>

enum pp_sys { PP_SYS_PERF_EVENT_OPEN, PP_SYS_BPF };

/* What the process knows about its own situation. -1 = unknown. */
struct pp_refusal_env {
	int seccomp_mode; /* /proc/self/status Seccomp: 0 off, 1 strict, 2 filter */
	int perf_paranoid; /* /proc/sys/kernel/perf_event_paranoid */
	int unprivileged_bpf_disabled; /* /proc/sys/kernel/unprivileged_bpf_disabled */
	bool lockdown_confidentiality; /* /sys/kernel/security/lockdown */
	bool cap_perfmon, cap_bpf, cap_sys_admin, cap_sys_ptrace; /* effective */
};

/* Fills env from /proc and /sys of the calling process. Never fails: unknown stays -1/false. */
void pp_refusal_env__read(struct pp_refusal_env *env);

/*
 * Calls the syscall the way the collector would, harmlessly: perf_event_open
 * of a user-only cpu-clock event on the calling thread, bpf creating a
 * one-entry array map (both closed at once). 0 when allowed,
 * else -errno (-EPERM, -EACCES, ...).
 */
int pp_refusal__probe(enum pp_sys sys);

/* true when err is the kind of error a refusal gives (EPERM, EACCES). */
bool pp_refusal__is_refusal(int err);

/*
 * One line saying why sys failed with err (negative errno) and what fixes
 * it, into buf (always NUL-terminated). Pure. For perf_event_open on
 * another process, EACCES without CAP_SYS_PTRACE is the ptrace access
 * check (the application runs as another user), not perf itself.
 */
void pp_refusal__explain(enum pp_sys sys, int err, const struct pp_refusal_env *env, char *buf,
			 size_t n);

#endif
