// SPDX-License-Identifier: GPL-2.0
/*
 * CPU sampler (see lib/cpu/cpu.c): one program on a cpu-clock perf event
 * per CPU. It runs for whatever task is on that CPU when the timer fires,
 * keeps only the target processes (by tgid in podprof's PID namespace,
 * the "targets" map), and writes the task's user registers, its user stack
 * and the kernel callchain into one ring buffer. Every thread of a target
 * is sampled, new and short-lived ones included, with no per-thread state.
 *
 * Children: a fork by a target (sched_process_fork, the parent is the
 * current task) is remembered by the child's kernel tgid in "children";
 * the child's first sample adds it to "targets" and marks the record, so
 * user space adopts it. The fork hook costs one hash lookup per fork on
 * the node.
 *
 * Exits: when the last thread of a target exits (sched_process_exit with
 * signal->live at 0), its "targets" entry goes, so a process that later
 * takes the same pid is not sampled as the old target before user space
 * notices the exit. Likewise a remembered child's "children" entry.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "cpu.h"
#include "ustack.h"

struct atomic___cpu {
	int counter;
};

struct signal_struct___cpu {
	struct atomic___cpu live; /* threads not yet past do_exit's group_dead test */
} __attribute__((preserve_access_index));

struct task_struct___cpu {
	int tgid;
	struct signal_struct___cpu *signal;
} __attribute__((preserve_access_index));

/* Set before load. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;
const volatile __u32 stack_bytes = 32768;
const volatile __u32 kernel_stacks = 1;
const volatile __u32 user_callchain = 0;
const volatile __u32 follow_children = 1;
const volatile __u64 ringbuf_bytes = 0; /* for the wakeup threshold */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct cpu_target);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct cpu_target);
} children SEC(".maps");

struct scratch {
	struct cpu_rec rec;
	__u8 stack[CPU_MAX_STACK + USTACK_PAGE];
};

/* One slot per CPU (a per-CPU array cannot hold values this large);
 * max_entries is set to the number of possible CPUs before load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPU_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* set by user space */
} rb SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1;
}

/* The current task's tgid if it is a target (adopting a remembered child
 * on its first sample), else 0. */
static __always_inline __u32 target_tgid(struct bpf_pidns_info *ns, __u32 *ret_flags,
					 __u32 *ret_parent)
{
	struct cpu_target *t;
	__u32 host;

	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, ns, sizeof(*ns)))
		return 0; /* not in podprof's PID namespace */
	if (bpf_map_lookup_elem(&targets, &ns->tgid))
		return ns->tgid;
	if (!follow_children)
		return 0;
	host = bpf_get_current_pid_tgid() >> 32;
	t = bpf_map_lookup_elem(&children, &host);
	if (!t)
		return 0;
	*ret_parent = t->parent;
	if (bpf_map_update_elem(&targets, &ns->tgid, t, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&targets, &ns->tgid)) {
		count(CPU_CNT_TARGETS_FULL);
		return 0;
	}
	bpf_map_delete_elem(&children, &host);
	*ret_flags |= CPU_F_ADOPTED;
	return ns->tgid;
}

SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct bpf_pidns_info ns = {};
	struct pt_regs___pp *regs;
	struct scratch *s;
	__u32 idx, flags = 0, parent = 0, len = 0;
	long n;
	__u64 wake;

	if (!target_tgid(&ns, &flags, &parent))
		return 0;
	idx = bpf_get_smp_processor_id();
	s = bpf_map_lookup_elem(&scratch, &idx);
	if (!s)
		return 0;
	s->rec.pid = ns.tgid;
	s->rec.tid = ns.pid;
	s->rec.time_ns = bpf_ktime_get_ns();
	s->rec.parent = parent;

	/* The task's user registers whether the timer hit user or kernel mode. */
	regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	ustack_read_regs(s->rec.regs, regs);
	if (s->rec.regs[7] && s->rec.regs[16])
		flags |= CPU_F_REGS;

	s->rec.n_kernel = 0;
	if (kernel_stacks && (ctx->regs.cs & 3) == 0) {
		n = bpf_get_stack(ctx, s->rec.kernel_ips, sizeof(s->rec.kernel_ips), 0);
		if (n > 0)
			s->rec.n_kernel = (__u32)n / 8;
	}
	s->rec.n_user = 0;
	if (user_callchain) {
		n = bpf_get_stack(ctx, s->rec.user_ips, sizeof(s->rec.user_ips), BPF_F_USER_STACK);
		if (n > 0)
			s->rec.n_user = (__u32)n / 8;
	}
	if (flags & CPU_F_REGS) {
		len = ustack_copy(s->stack, s->rec.regs[7], stack_bytes, CPU_MAX_STACK);
		if (!len)
			count(CPU_CNT_STACK_ERR);
	}
	if (len > CPU_MAX_STACK)
		len = CPU_MAX_STACK;
	s->rec.stack_len = len;
	s->rec.flags = flags;

	/* No wakeup per record (user space polls), unless the ring is half full. */
	wake = BPF_RB_NO_WAKEUP;
	if (ringbuf_bytes && bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > ringbuf_bytes / 2)
		wake = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&rb, s, sizeof(struct cpu_rec) + len, wake)) {
		count(CPU_CNT_RINGBUF_FULL);
		if (flags & CPU_F_ADOPTED) /* let the next sample report the adoption */
			bpf_map_delete_elem(&targets, &ns.tgid);
		return 0;
	}
	count(CPU_CNT_SAMPLES);
	return 0;
}

/* sched_process_fork(struct task_struct *parent, struct task_struct *child) */
SEC("raw_tp/sched_process_fork")
int cpu_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___cpu *child = (void *)ctx->args[1];
	struct bpf_pidns_info ns = {};
	struct cpu_target t = {};
	__u32 child_tgid;

	if (!follow_children)
		return 0;
	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)) ||
	    !bpf_map_lookup_elem(&targets, &ns.tgid))
		return 0;
	child_tgid = BPF_CORE_READ(child, tgid);
	if (child_tgid == (__u32)(bpf_get_current_pid_tgid() >> 32))
		return 0; /* a new thread: sampled as part of its process already */
	t.parent = ns.tgid;
	if (bpf_map_update_elem(&children, &child_tgid, &t, BPF_ANY))
		count(CPU_CNT_CHILDREN_FULL);
	return 0;
}

/* sched_process_exit(struct task_struct *p): runs in the exiting task, after
 * do_exit decremented signal->live; 0 means the whole thread group is gone. */
SEC("raw_tp/sched_process_exit")
int cpu_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___cpu *task = (void *)bpf_get_current_task();
	struct bpf_pidns_info ns = {};
	__u32 host;

	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	host = bpf_get_current_pid_tgid() >> 32;
	bpf_map_delete_elem(&children, &host);
	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)))
		return 0;
	if (bpf_map_delete_elem(&targets, &ns.tgid) == 0)
		count(CPU_CNT_EXITED);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
