// SPDX-License-Identifier: GPL-2.0
/*
 * The user registers of one task as the kernel saved them when it entered
 * the kernel (task_pt_regs), for a thread dump of a thread blocked in a
 * syscall, which podprof must not interrupt (lib/tracee/tracee.h rule 2).
 * A task iterator limited to that one task (link_info task.tid, in
 * podprof's PID namespace); one record per task: its pt_regs.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct seq_file;

/* Kernel types, only the fields used; CO-RE relocates them. */
struct bpf_iter_meta___pp {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct task_struct___tr {
	int pid;
} __attribute__((preserve_access_index));

struct bpf_iter__task___pp {
	struct bpf_iter_meta___pp *meta;
	struct task_struct___tr *task;
} __attribute__((preserve_access_index));

#define PT_REGS_WORDS 21 /* x86-64 struct pt_regs */

SEC("iter/task")
int task_regs(struct bpf_iter__task___pp *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct___tr *task = ctx->task;
	__u64 regs[PT_REGS_WORDS];
	void *p;

	if (!task)
		return 0;
	p = (void *)bpf_task_pt_regs((struct task_struct *)task);
	if (!p || bpf_probe_read_kernel(regs, sizeof(regs), p))
		return 0;
	bpf_seq_write(seq, regs, sizeof(regs));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
