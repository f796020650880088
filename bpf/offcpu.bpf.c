// SPDX-License-Identifier: GPL-2.0
/*
 * Off-CPU tracer: time a target thread spends switched out (voluntarily)
 * inside a syscall, reported at that syscall's exit with the thread's user
 * registers and a copy of its user stack; plus the creation of threads
 * (clone/clone3 with CLONE_THREAD). Raw tracepoints only: no tracefs.
 *
 * Per-thread state is keyed by the kernel-global tid (unique, and what
 * sched_switch sees for the incoming task); processes are selected by
 * their tgid in podprof's PID namespace, which is also what events carry.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "offcpu.h"
#include "ustack.h"

#define NR_CLONE 56
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_FUTEX 202
#define NR_CLONE3 435
#define NR_FUTEX_WAITV 449
#define NR_FUTEX_WAIT 455

#define FUTEX_WAIT 0
#define FUTEX_LOCK_PI 6
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK 127 /* drops FUTEX_PRIVATE_FLAG (128), FUTEX_CLOCK_REALTIME (256) */

#define CLONE_THREAD 0x00010000ULL

/* Kernel types, only the fields used; CO-RE relocates them (the ___pp
 * suffix keeps them apart from any UAPI definition). */
struct atomic___pp {
	int counter;
};

struct signal_struct___pp {
	struct atomic___pp live;
} __attribute__((preserve_access_index));

struct task_struct___pp {
	int pid;
	struct signal_struct___pp *signal;
} __attribute__((preserve_access_index));

/* Set before load. */
const volatile __u64 pidns_dev = 0;
const volatile __u64 pidns_ino = 0;
const volatile __u64 min_block_ns = 0;
const volatile __u64 sample_ns = 0;
const volatile __u32 stack_bytes = 16384;
const volatile __u64 rate_cap = 0; /* records per second per process, 0 = none */
const volatile __u64 ringbuf_bytes = 0; /* for the wakeup threshold */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct offcpu_target);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct offcpu_thread);
} threads SEC(".maps");

struct scratch {
	struct offcpu_rec rec;
	__u8 stack[OFFCPU_MAX_STACK + OFFCPU_PAGE];
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
	__uint(max_entries, OFFCPU_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} rb SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1;
}

/* Current task's pid/tgid in podprof's namespace; <0 when it has none. */
static __always_inline int ns_ids(__u32 *ret_pid, __u32 *ret_tgid)
{
	struct bpf_pidns_info ns = {};

	if (bpf_get_ns_current_pid_tgid(pidns_dev, pidns_ino, &ns, sizeof(ns)))
		return -1;
	*ret_pid = ns.pid;
	*ret_tgid = ns.tgid;
	return 0;
}

static __always_inline int is_futex_wait(__s64 nr, __u64 arg)
{
	if (nr == NR_FUTEX_WAITV || nr == NR_FUTEX_WAIT)
		return 1;
	if (nr != NR_FUTEX)
		return 0;
	switch (arg & FUTEX_CMD_MASK) {
	case FUTEX_WAIT:
	case FUTEX_WAIT_BITSET:
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
	case FUTEX_WAIT_REQUEUE_PI:
		return 1;
	}
	return 0;
}

SEC("raw_tp/sys_enter")
int offcpu_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs___pp *regs = (void *)ctx->args[0];
	__s64 nr = (__s64)ctx->args[1];
	__u32 pid, tgid, key;
	struct offcpu_thread *t, nt = {};
	__u64 arg = 0;

	if (nr == NR_EXIT || nr == NR_EXIT_GROUP)
		return 0;
	if (ns_ids(&pid, &tgid) || !bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	if (nr == NR_CLONE) {
		arg = BPF_CORE_READ(regs, di);
	} else if (nr == NR_CLONE3) {
		void *uargs = (void *)BPF_CORE_READ(regs, di);

		if (bpf_probe_read_user(&arg, sizeof(arg), uargs))
			arg = 0;
	} else if (nr == NR_FUTEX) {
		arg = BPF_CORE_READ(regs, si);
	}

	key = (__u32)bpf_get_current_pid_tgid();
	t = bpf_map_lookup_elem(&threads, &key);
	if (t) {
		t->enter_ns = bpf_ktime_get_ns();
		t->switch_out_ns = 0;
		t->offcpu_ns = 0;
		t->arg = arg;
		t->nr = nr;
		t->tgid = tgid;
		return 0;
	}
	nt.enter_ns = bpf_ktime_get_ns();
	nt.arg = arg;
	nt.nr = nr;
	nt.tgid = tgid;
	if (bpf_map_update_elem(&threads, &key, &nt, BPF_ANY))
		count(OFFCPU_CNT_THREADS_FULL);
	return 0;
}

/* sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
 *              unsigned int prev_state); runs in prev's context. */
SEC("raw_tp/sched_switch")
int offcpu_sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___pp *next = (void *)ctx->args[2];
	__u64 preempt = ctx->args[0] & 0xff;
	__u32 prev_state = (__u32)ctx->args[3];
	struct offcpu_thread *t;
	__u32 key;
	__u64 now = 0;

	key = (__u32)bpf_get_current_pid_tgid();
	if (key) {
		t = bpf_map_lookup_elem(&threads, &key);
		/* Only voluntary sleeps count: a preempted thread is runnable. */
		if (t && t->enter_ns && !preempt && prev_state) {
			now = bpf_ktime_get_ns();
			t->switch_out_ns = now;
		}
	}
	key = (__u32)BPF_CORE_READ(next, pid);
	if (!key)
		return 0;
	t = bpf_map_lookup_elem(&threads, &key);
	if (t && t->switch_out_ns) {
		if (!now)
			now = bpf_ktime_get_ns();
		if (t->enter_ns && now > t->switch_out_ns)
			t->offcpu_ns += now - t->switch_out_ns;
		t->switch_out_ns = 0;
	}
	return 0;
}

/* Keeps the record rate of one process under rate_cap per second. */
static __always_inline int rate_ok(struct offcpu_target *tg, __u64 now)
{
	if (!rate_cap)
		return 1;
	if (now - tg->win_start_ns >= 1000000000ULL) {
		tg->win_start_ns = now;
		tg->win_events = 0;
	}
	if (tg->win_events >= rate_cap)
		return 0;
	__sync_fetch_and_add(&tg->win_events, 1);
	return 1;
}

/*
 * glibc's and musl's clone/clone3 wrappers are frameless assembly leaves
 * with no CFI after the syscall instruction (glibc ends the FDE there on
 * purpose), so an unwinder stops at the wrapper. When the word at rsp is a
 * return address just after a direct call (e8 rel32) to a function that
 * starts shortly before rip, the wrapper is such a leaf: perform its `ret`
 * (rip = [rsp], rsp += 8), so the stack starts at the wrapper's caller.
 */
static __always_inline void step_out_of_clone_wrapper(struct scratch *s)
{
	__u64 sp = s->rec.regs[7], ip = s->rec.regs[16], ra = 0, target;
	__u8 call[5];
	__s32 rel;

	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)sp) || ra < 5)
		return;
	if (bpf_probe_read_user(call, sizeof(call), (void *)(ra - 5)) || call[0] != 0xe8)
		return;
	rel = (__s32)((__u32)call[1] | (__u32)call[2] << 8 | (__u32)call[3] << 16 |
		      (__u32)call[4] << 24);
	target = ra + (__s64)rel;
	if (target > ip || ip - target > 512)
		return;
	s->rec.regs[16] = ra;
	s->rec.regs[7] = sp + 8;
}

SEC("raw_tp/sys_exit")
int offcpu_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs___pp *regs = (void *)ctx->args[0];
	__s64 ret = (__s64)ctx->args[1];
	__u32 key = (__u32)bpf_get_current_pid_tgid();
	__u32 pid, tgid, kind, flags = 0, idx, len;
	struct offcpu_thread *t;
	struct offcpu_target *tg;
	struct scratch *s;
	__u64 delay = 0, now, wake;
	__s64 nr;
	__u64 arg;

	t = bpf_map_lookup_elem(&threads, &key);
	if (!t || !t->enter_ns)
		return 0;
	nr = t->nr;
	arg = t->arg;
	delay = t->offcpu_ns;
	t->enter_ns = 0;
	t->switch_out_ns = 0;
	t->offcpu_ns = 0;

	if ((nr == NR_CLONE || nr == NR_CLONE3) && ret > 0 && (arg & CLONE_THREAD)) {
		kind = OFFCPU_REC_THREAD_CREATE;
	} else {
		if (!delay || delay < min_block_ns)
			return 0;
		kind = is_futex_wait(nr, arg) ? OFFCPU_REC_MUTEX : OFFCPU_REC_BLOCK;
		if (sample_ns && delay < sample_ns) {
			__u64 r = ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();

			if (r % sample_ns >= delay)
				return 0;
			flags |= OFFCPU_F_SAMPLED;
		}
	}
	/* The process may have been removed since sys_enter. */
	if (ns_ids(&pid, &tgid))
		return 0;
	tg = bpf_map_lookup_elem(&targets, &tgid);
	if (!tg)
		return 0;
	now = bpf_ktime_get_ns();
	if (!rate_ok(tg, now)) {
		count(OFFCPU_CNT_RATE_CAP);
		return 0;
	}

	idx = bpf_get_smp_processor_id();
	s = bpf_map_lookup_elem(&scratch, &idx);
	if (!s)
		return 0;
	s->rec.kind = kind;
	s->rec.pid = tgid;
	s->rec.tid = pid;
	s->rec.new_tid = kind == OFFCPU_REC_THREAD_CREATE ? (__u32)ret : 0;
	s->rec.delay_ns = kind == OFFCPU_REC_THREAD_CREATE ? 0 : delay;
	s->rec.syscall_nr = nr;
	ustack_read_regs(s->rec.regs, regs);
	if (s->rec.regs[7] && s->rec.regs[16])
		flags |= OFFCPU_F_REGS;
	if (kind == OFFCPU_REC_THREAD_CREATE && (flags & OFFCPU_F_REGS))
		step_out_of_clone_wrapper(s);
	s->rec.flags = flags;

	len = 0;
	if (flags & OFFCPU_F_REGS) {
		len = ustack_copy(s->stack, s->rec.regs[7], stack_bytes, OFFCPU_MAX_STACK);
		if (!len)
			count(OFFCPU_CNT_STACK_ERR);
	}
	if (len > OFFCPU_MAX_STACK)
		len = OFFCPU_MAX_STACK;
	s->rec.stack_len = len;

	/* No wakeup per record (user space polls), unless the ring is half full. */
	wake = BPF_RB_NO_WAKEUP;
	if (ringbuf_bytes && bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) > ringbuf_bytes / 2)
		wake = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&rb, s, sizeof(struct offcpu_rec) + len, wake))
		count(OFFCPU_CNT_RINGBUF_FULL);
	return 0;
}

/* A dying thread never reaches sys_exit of its last syscall: forget it.
 * The last thread of a target (signal->live at 0, do_exit decremented it
 * before this tracepoint) takes the target's entry with it, so a process
 * that later gets the same pid is not recorded as the old target. */
SEC("raw_tp/sched_process_exit")
int offcpu_task_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___pp *task = (void *)bpf_get_current_task();
	__u32 key = (__u32)bpf_get_current_pid_tgid();
	__u32 pid, tgid;

	bpf_map_delete_elem(&threads, &key);
	if (BPF_CORE_READ(task, signal, live.counter) != 0 || ns_ids(&pid, &tgid))
		return 0;
	if (bpf_map_delete_elem(&targets, &tgid) == 0)
		count(OFFCPU_CNT_EXITED);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
