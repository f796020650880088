/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structs shared by bpf/offcpu.bpf.c and lib/offcpu/offcpu.c. Fixed-width
 * types only, no pointers; sizes are checked on both sides.
 */
#ifndef PODPROF_BPF_OFFCPU_H
#define PODPROF_BPF_OFFCPU_H

#include <linux/types.h>

#define OFFCPU_NREGS 17 /* DWARF order, as struct pp_regs */
#define OFFCPU_MAX_STACK 32768 /* upper bound of the copied user stack */
#define OFFCPU_PAGE 4096

enum offcpu_rec_kind {
	OFFCPU_REC_BLOCK = 1,
	OFFCPU_REC_MUTEX = 2,
	OFFCPU_REC_THREAD_CREATE = 3,
};

enum offcpu_rec_flags {
	OFFCPU_F_REGS = 1 << 0, /* regs[] valid */
	OFFCPU_F_SAMPLED = 1 << 1, /* spell shorter than sample_ns, kept with p = delay/sample_ns */
};

/* Indices of the drop counters (per-CPU array "counters"). */
enum offcpu_counter {
	OFFCPU_CNT_RINGBUF_FULL = 0, /* bpf_ringbuf_output failed */
	OFFCPU_CNT_RATE_CAP, /* per-process rate cap hit */
	OFFCPU_CNT_STACK_ERR, /* the first stack page could not be read */
	OFFCPU_CNT_THREADS_FULL, /* no room in the per-thread map */
	OFFCPU_CNT_EXITED, /* a target's last thread exited: its entry removed in BPF */
	OFFCPU_CNT__MAX,
};

/* One ring-buffer record: this header, then stack_len bytes of user stack
 * copied from regs[7] (rsp) upwards. */
struct offcpu_rec {
	__u32 kind;
	__u32 flags;
	__u32 pid; /* in podprof's PID namespace */
	__u32 tid;
	__u32 new_tid; /* THREAD_CREATE: clone's return value */
	__u32 stack_len;
	__u64 delay_ns; /* off-CPU time accumulated during the syscall */
	__s64 syscall_nr;
	__u64 regs[OFFCPU_NREGS];
};

_Static_assert(sizeof(struct offcpu_rec) == 176, "offcpu_rec layout");

/* Value of the "targets" map (key: tgid in podprof's PID namespace). */
struct offcpu_target {
	__u64 win_start_ns; /* rate-cap window */
	__u64 win_events;
};

_Static_assert(sizeof(struct offcpu_target) == 16, "offcpu_target layout");

/* Value of the "threads" map (key: kernel-global tid). */
struct offcpu_thread {
	__u64 enter_ns; /* 0: not inside a traced syscall */
	__u64 switch_out_ns; /* 0: on CPU */
	__u64 offcpu_ns;
	__u64 arg; /* clone flags / futex op */
	__s64 nr;
	__u32 tgid; /* podprof-namespace tgid, for remove_process */
	__u32 pad;
};

_Static_assert(sizeof(struct offcpu_thread) == 48, "offcpu_thread layout");

#endif
