// SPDX-License-Identifier: GPL-2.0
/* Placeholder: replaced by the module's real program. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_placeholder SEC(".maps");

char LICENSE[] SEC("license") = "GPL";
