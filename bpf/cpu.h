/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structs shared by bpf/cpu.bpf.c and lib/cpu/cpu.c. Fixed-width types
 * only, no pointers; sizes are checked on both sides.
 */
#ifndef PODPROF_BPF_CPU_H
#define PODPROF_BPF_CPU_H

#include <linux/types.h>

#define CPU_NREGS 17 /* DWARF order, as struct pp_regs */
#define CPU_MAX_STACK 65536 /* upper bound of the copied user stack */
#define CPU_MAX_IPS 64 /* kernel / frame-pointer user callchain entries kept */
#define CPU_PAGE 4096

enum cpu_rec_flags {
	CPU_F_REGS = 1 << 0, /* regs[] hold the task's user registers */
	CPU_F_ADOPTED = 1 << 1, /* first sample of a child adopted in BPF */
};

/* Indices of the drop and diagnostic counters (per-CPU array "counters"). */
enum cpu_counter {
	CPU_CNT_SAMPLES = 0, /* records written to the ring buffer */
	CPU_CNT_RINGBUF_FULL, /* a target's sample lost: no room in the ring buffer */
	CPU_CNT_STACK_ERR, /* the first stack page could not be read (sample kept, no stack) */
	CPU_CNT_TARGETS_FULL, /* an adopted child could not be added to "targets" */
	CPU_CNT_CHILDREN_FULL, /* a forked child could not be remembered */
	CPU_CNT_EXITED, /* a target's last thread exited: its entry removed in BPF */
	CPU_CNT__MAX,
};

/* One ring-buffer record: this header, then stack_len bytes of user stack
 * copied from regs[7] (rsp) upwards. */
struct cpu_rec {
	__u32 pid; /* in podprof's PID namespace */
	__u32 tid;
	__u64 time_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32 flags;
	__u32 stack_len;
	__u32 n_kernel; /* entries of kernel_ips, leaf first */
	__u32 n_user; /* entries of user_ips (frame-pointer chain), leaf first */
	__u32 parent; /* CPU_F_ADOPTED: the target that forked this process */
	__u32 pad;
	__u64 regs[CPU_NREGS];
	__u64 kernel_ips[CPU_MAX_IPS];
	__u64 user_ips[CPU_MAX_IPS];
};

_Static_assert(sizeof(struct cpu_rec) == 40 + 17 * 8 + 2 * 64 * 8, "cpu_rec layout");

/* Value of the "targets" map (key: tgid in podprof's PID namespace) and of
 * the "children" map (key: kernel-global tgid of a child forked by a
 * target, until its first sample). */
struct cpu_target {
	__u32 parent; /* 0: added by user space; else the adopting target's tgid */
	__u32 pad;
};

_Static_assert(sizeof(struct cpu_target) == 8, "cpu_target layout");

#endif
