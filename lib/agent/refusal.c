/* SPDX-License-Identifier: Apache-2.0 */
#include "refusal.h"

#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/caps.h"
#include "util/util.h"

static int read_int(const char *path)
{
	char *text = NULL;
	size_t len = 0;
	int v = -1;
	if (pp_read_file(path, 4096, &text, &len) == 0) {
		char *end;
		long l = strtol(text, &end, 10);
		if (end != text)
			v = (int)l;
	}
	free(text);
	return v;
}

void pp_refusal_env__read(struct pp_refusal_env *env)
{
	char *text = NULL;
	size_t len = 0;
	uint64_t eff = 0;

	memset(env, 0, sizeof(*env));
	env->seccomp_mode = -1;
	if (pp_read_file("/proc/self/status", 1 << 16, &text, &len) == 0) {
		const char *p = strstr(text, "\nSeccomp:");
		if (p)
			env->seccomp_mode = atoi(p + 9);
	}
	free(text);
	text = NULL;
	env->perf_paranoid = read_int("/proc/sys/kernel/perf_event_paranoid");
	env->unprivileged_bpf_disabled = read_int("/proc/sys/kernel/unprivileged_bpf_disabled");
	/* "none integrity [confidentiality]": the bracketed word is the mode in force */
	if (pp_read_file("/sys/kernel/security/lockdown", 4096, &text, &len) == 0)
		env->lockdown_confidentiality = strstr(text, "[confidentiality]") != NULL;
	free(text);
	if (pp_caps__effective(&eff) == 0) {
		env->cap_perfmon = eff & (1ull << PP_CAP_PERFMON);
		env->cap_bpf = eff & (1ull << PP_CAP_BPF);
		env->cap_sys_admin = eff & (1ull << PP_CAP_SYS_ADMIN);
		env->cap_sys_ptrace = eff & (1ull << PP_CAP_SYS_PTRACE);
	}
}

int pp_refusal__probe(enum pp_sys sys)
{
	if (sys == PP_SYS_PERF_EVENT_OPEN) {
		struct perf_event_attr attr = {
			.size = sizeof(attr),
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_period = 10000000,
			.disabled = 1,
			.exclude_kernel = 1,
			.exclude_hv = 1,
		};
		long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			return -errno;
		close((int)fd);
		return 0;
	}
	/* The smallest map there is, freed at once: refused exactly when the tracers would be. */
	union bpf_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
	if (fd < 0)
		return -errno;
	close((int)fd);
	return 0;
}

bool pp_refusal__is_refusal(int err)
{
	return err == -EPERM || err == -EACCES;
}

void pp_refusal__explain(enum pp_sys sys, int err, const struct pp_refusal_env *env, char *buf,
			 size_t n)
{
	bool perf = sys == PP_SYS_PERF_EVENT_OPEN;
	const char *name = perf ? "perf_event_open" : "bpf";
	const char *cap = perf ? "PERFMON" : "BPF";
	bool has_cap = env->cap_sys_admin || (perf ? env->cap_perfmon : env->cap_bpf);
	const char *what = strerror(err < 0 ? -err : err);

	if (!pp_refusal__is_refusal(err)) {
		snprintf(buf, n, "%s: %s", name, what);
	} else if (!has_cap && perf) {
		snprintf(buf, n,
			 "%s: %s: CAP_PERFMON missing (kernel.perf_event_paranoid=%d); add "
			 "PERFMON to securityContext.capabilities.add",
			 name, what, env->perf_paranoid);
	} else if (!has_cap) {
		snprintf(buf, n,
			 "%s: %s: CAP_BPF missing; add BPF to securityContext.capabilities.add",
			 name, what);
	} else if (env->seccomp_mode == 2 && err == -EPERM) {
		snprintf(buf, n,
			 "%s: %s by the container's seccomp profile although CAP_%s is held (the "
			 "default profiles of podman and CRI-O allow %s only with CAP_SYS_ADMIN); "
			 "run podprof with the Localhost seccomp profile "
			 "deploy/seccomp/podprof.json "
			 "(chart: --set seccompProfile.type=Localhost)",
			 name, what, cap, name);
	} else if (perf && err == -EACCES && !env->cap_sys_ptrace) {
		snprintf(buf, n,
			 "%s: %s: podprof may not trace the application (CAP_SYS_PTRACE missing "
			 "and the application runs as another user); add SYS_PTRACE to "
			 "securityContext.capabilities.add",
			 name, what);
	} else if (env->lockdown_confidentiality) {
		snprintf(buf, n,
			 "%s: %s: the kernel is locked down (lockdown=confidentiality), which "
			 "forbids %s; boot the node with lockdown=integrity or none",
			 name, what, perf ? "perf events that read kernel state" : "BPF tracing");
	} else if (env->seccomp_mode == 1) {
		snprintf(buf, n, "%s: %s: podprof runs in strict seccomp mode", name, what);
	} else {
		snprintf(buf, n,
			 "%s: %s although CAP_%s is held (a security module or seccomp "
			 "profile refused it)",
			 name, what, cap);
	}
}
