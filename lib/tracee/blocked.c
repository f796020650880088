/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registers of a thread blocked in a syscall, without stopping it: the
 * user registers the kernel saved at its entry (struct pt_regs), read by a
 * BPF task iterator limited to that thread (bpf/taskregs.bpf.c). Needs
 * CAP_BPF and CAP_PERFMON and a kernel with task-specific iterators
 * (6.1); without them, -ENOTSUP and the caller uses what
 * /proc/PID/task/TID/syscall gives.
 *
 * The registers are only meaningful while the thread stays in the call:
 * the caller compares sp and pc with /proc/PID/task/TID/syscall read before
 * and after.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "tracee.h"
#include "util/log.h"
#include "taskregs.skel.h"

#define PT_REGS_WORDS 21 /* x86-64 struct pt_regs == the first 21 of user_regs_struct */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct taskregs_bpf *g_skel;
static bool g_failed;

/* The loaded program, or NULL (once failed, never tried again). */
static struct taskregs_bpf *skel(void)
{
	struct taskregs_bpf *s;

	pthread_mutex_lock(&g_lock);
	if (!g_skel && !g_failed) {
		g_skel = taskregs_bpf__open_and_load();
		if (!g_skel) {
			g_failed = true;
			pp_dbg("tracee: registers of blocked threads without BPF: %s",
			       strerror(errno));
		}
	}
	s = g_skel;
	pthread_mutex_unlock(&g_lock);
	return s;
}

int pp_tracee__blocked_regs(pid_t pid, pid_t tid, struct user_regs_struct *ret)
{
#if defined(__x86_64__)
	union bpf_iter_link_info li;
	struct bpf_link *link;
	struct taskregs_bpf *s = skel();
	uint64_t regs[PT_REGS_WORDS];
	size_t got = 0;
	int fd, r = 0;

	(void)pid;
	if (!s)
		return -ENOTSUP;
	memset(&li, 0, sizeof(li));
	li.task.tid = (__u32)tid;
	LIBBPF_OPTS(bpf_iter_attach_opts, o, .link_info = &li, .link_info_len = sizeof(li));
	link = bpf_program__attach_iter(s->progs.task_regs, &o);
	if (!link)
		return -errno ? -errno : -ENOTSUP;
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	while (got < sizeof(regs)) {
		ssize_t n = read(fd, (char *)regs + got, sizeof(regs) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got != sizeof(regs)) {
		r = -ESRCH; /* gone, or not in this namespace */
		goto out;
	}
	memset(ret, 0, sizeof(*ret));
	memcpy(ret, regs, sizeof(regs));
out:
	bpf_link__destroy(link);
	return r;
#else
	(void)pid;
	(void)tid;
	(void)ret;
	return -ENOTSUP;
#endif
}
