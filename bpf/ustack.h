/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Copying a task's user stack in BPF, shared by the programs that unwind
 * in user space (cpu, offcpu). Include after bpf_helpers.h.
 */
#ifndef PODPROF_BPF_USTACK_H
#define PODPROF_BPF_USTACK_H

#define USTACK_PAGE 4096

/* The kernel's saved registers, only the fields used; CO-RE relocates them
 * (the ___pp suffix keeps them apart from any UAPI definition). Needs
 * bpf_core_read.h. */
struct pt_regs___pp {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip;
	unsigned long sp;
} __attribute__((preserve_access_index));

/* out[0..16] = the registers in DWARF order (rax rdx rcx rbx rsi rdi rbp
 * rsp r8..r15 rip), as struct pp_regs. */
#define ustack_read_regs(out, regs)                   \
	do {                                          \
		(out)[0] = BPF_CORE_READ(regs, ax);   \
		(out)[1] = BPF_CORE_READ(regs, dx);   \
		(out)[2] = BPF_CORE_READ(regs, cx);   \
		(out)[3] = BPF_CORE_READ(regs, bx);   \
		(out)[4] = BPF_CORE_READ(regs, si);   \
		(out)[5] = BPF_CORE_READ(regs, di);   \
		(out)[6] = BPF_CORE_READ(regs, bp);   \
		(out)[7] = BPF_CORE_READ(regs, sp);   \
		(out)[8] = BPF_CORE_READ(regs, r8);   \
		(out)[9] = BPF_CORE_READ(regs, r9);   \
		(out)[10] = BPF_CORE_READ(regs, r10); \
		(out)[11] = BPF_CORE_READ(regs, r11); \
		(out)[12] = BPF_CORE_READ(regs, r12); \
		(out)[13] = BPF_CORE_READ(regs, r13); \
		(out)[14] = BPF_CORE_READ(regs, r14); \
		(out)[15] = BPF_CORE_READ(regs, r15); \
		(out)[16] = BPF_CORE_READ(regs, ip);  \
	} while (0)

/* v = min(v, max) in a way the verifier tracks on the register actually used. */
#define USTACK_CLAMP(v, max) \
	asm volatile("if %[x] <= %[m] goto +1; %[x] = %[m];" : [x] "+r"(v) : [m] "i"(max))

/*
 * Copies up to want bytes (at most max_stack) of user stack from sp
 * upwards into dst, page by page: one large read fails as a whole as soon
 * as it crosses the top of the stack mapping. dst must have room for
 * max_stack + USTACK_PAGE bytes. Returns the bytes copied (0: the first
 * page could not be read).
 */
#define ustack_copy(dst, sp, want_bytes, max_stack)                                  \
	({                                                                           \
		__u64 __want = (want_bytes), __off = 0;                              \
		if (__want > (max_stack))                                            \
			__want = (max_stack);                                        \
		for (int __i = 0; __i < (max_stack) / USTACK_PAGE + 1; __i++) {      \
			__u64 __addr = (sp) + __off;                                 \
			__u64 __n = USTACK_PAGE - (__addr & (USTACK_PAGE - 1));      \
			if (__off >= __want)                                         \
				break;                                               \
			if (__n > __want - __off)                                    \
				__n = __want - __off;                                \
			USTACK_CLAMP(__n, USTACK_PAGE);                              \
			USTACK_CLAMP(__off, (max_stack)-1);                          \
			if (bpf_probe_read_user(&(dst)[__off], __n, (void *)__addr)) \
				break;                                               \
			__off += __n;                                                \
		}                                                                    \
		(__u32) __off;                                                       \
	})

#endif
