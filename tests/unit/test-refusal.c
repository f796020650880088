/* SPDX-License-Identifier: Apache-2.0 */
/* The explanation of a refused syscall, for each cause, and the probes on this machine. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/refusal.h"

static const struct pp_refusal_env all_caps = {
	.seccomp_mode = 0,
	.perf_paranoid = 2,
	.unprivileged_bpf_disabled = 2,
	.cap_perfmon = true,
	.cap_bpf = true,
	.cap_sys_ptrace = true,
};

static void explain(enum pp_sys sys, int err, const struct pp_refusal_env *env, char *buf)
{
	pp_refusal__explain(sys, err, env, buf, 512);
	assert_true(strlen(buf) > 0 && strlen(buf) < 511);
	assert_null(strchr(buf, '\n')); /* one log line, one label value */
}

static void test_seccomp(void **state)
{
	char buf[512];
	struct pp_refusal_env env = all_caps;
	env.seccomp_mode = 2;
	explain(PP_SYS_PERF_EVENT_OPEN, -EPERM, &env, buf);
	assert_non_null(strstr(buf, "perf_event_open: Operation not permitted"));
	assert_non_null(strstr(buf, "seccomp profile although CAP_PERFMON is held"));
	assert_non_null(strstr(buf, "deploy/seccomp/podprof.json"));
	explain(PP_SYS_BPF, -EPERM, &env, buf);
	assert_non_null(strstr(buf, "bpf: Operation not permitted"));
	assert_non_null(strstr(buf, "CAP_BPF is held"));
	/* SYS_ADMIN stands in for both */
	env.cap_bpf = env.cap_perfmon = false;
	env.cap_sys_admin = true;
	explain(PP_SYS_BPF, -EPERM, &env, buf);
	assert_non_null(strstr(buf, "seccomp"));
}

static void test_missing_cap(void **state)
{
	char buf[512];
	struct pp_refusal_env env = all_caps;
	env.seccomp_mode = 2; /* a missing capability explains it first */
	env.cap_perfmon = false;
	env.perf_paranoid = 3;
	explain(PP_SYS_PERF_EVENT_OPEN, -EACCES, &env, buf);
	assert_non_null(strstr(buf, "CAP_PERFMON missing (kernel.perf_event_paranoid=3)"));
	assert_non_null(strstr(buf, "add PERFMON to securityContext.capabilities.add"));
	assert_null(strstr(buf, "seccomp"));
	env.cap_bpf = false;
	explain(PP_SYS_BPF, -EPERM, &env, buf);
	assert_non_null(strstr(buf, "CAP_BPF missing; add BPF"));
	/* perf on an app of another uid without CAP_SYS_PTRACE: the ptrace access check */
	env = all_caps;
	env.seccomp_mode = 2;
	env.cap_sys_ptrace = false;
	explain(PP_SYS_PERF_EVENT_OPEN, -EACCES, &env, buf);
	assert_non_null(strstr(buf, "CAP_SYS_PTRACE missing"));
	assert_non_null(strstr(buf, "add SYS_PTRACE"));
	explain(PP_SYS_PERF_EVENT_OPEN, -EPERM, &env, buf); /* EPERM: still seccomp */
	assert_non_null(strstr(buf, "seccomp"));
}

static void test_lockdown_and_others(void **state)
{
	char buf[512];
	struct pp_refusal_env env = all_caps;
	env.lockdown_confidentiality = true;
	explain(PP_SYS_BPF, -EPERM, &env, buf);
	assert_non_null(strstr(buf, "lockdown=confidentiality"));
	env.lockdown_confidentiality = false;
	explain(PP_SYS_PERF_EVENT_OPEN, -EACCES, &env, buf);
	assert_non_null(strstr(buf, "security module or seccomp"));
	/* not a refusal: just the error */
	explain(PP_SYS_BPF, -EINVAL, &env, buf);
	assert_string_equal(buf, "bpf: Invalid argument");
	assert_true(pp_refusal__is_refusal(-EPERM) && pp_refusal__is_refusal(-EACCES));
	assert_false(pp_refusal__is_refusal(-ENOENT) || pp_refusal__is_refusal(0));
}

static void test_probe_here(void **state)
{
	/* The tests run as root with every capability and no seccomp filter. */
	struct pp_refusal_env env;
	pp_refusal_env__read(&env);
	if (geteuid() != 0 || !env.cap_bpf || !env.cap_perfmon || env.seccomp_mode != 0 ||
	    env.lockdown_confidentiality)
		skip();
	assert_int_equal(pp_refusal__probe(PP_SYS_PERF_EVENT_OPEN), 0);
	assert_int_equal(pp_refusal__probe(PP_SYS_BPF), 0);
	assert_true(env.perf_paranoid >= -1 && env.perf_paranoid <= 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seccomp),
		cmocka_unit_test(test_missing_cap),
		cmocka_unit_test(test_lockdown_and_others),
		cmocka_unit_test(test_probe_here),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
