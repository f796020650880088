/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unwinder: registers + a copy of the user stack taken at sample time ->
 * the list of return addresses, using libdw's CFI (.eh_frame,
 * .debug_frame) of the target's own files, with frame pointers as a
 * fallback. One pp_unwinder per process; it keeps a libdw Dwfl built from
 * /proc/PID/maps (files opened with pp_proc__open_mapped) and rebuilds it
 * when it meets a PC outside every known module (rate limited).
 *
 * Not thread-safe: use one unwinder from one thread at a time.
 */
#ifndef PODPROF_UNWIND_H
#define PODPROF_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* x86-64 registers in DWARF numbering: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi,
 * 5 rdi, 6 rbp, 7 rsp, 8..15 r8..r15, 16 rip. */
#define PP_NREGS 17
#define PP_REG_BP 6
#define PP_REG_SP 7
#define PP_REG_IP 16

struct pp_regs {
	uint64_t r[PP_NREGS];
};

enum pp_unwind_flags {
	PP_UNWIND_COMPLETE = 1 << 0, /* reached the outermost frame (CFI said so, or a zero RA) */
	PP_UNWIND_TRUNCATED = 1 << 1, /* ran out of copied stack or max frames */
	PP_UNWIND_FP_FALLBACK = 1 << 2, /* some frames came from frame pointers */
	PP_UNWIND_SHORT_COPY = 1 << 3, /* with TRUNCATED: the stack went on above the copy */
};

struct pp_unwinder_opts {
	bool frame_pointers_only; /* skip CFI */
};

struct pp_unwinder *pp_unwinder__new(pid_t pid, const struct pp_unwinder_opts *opts);

/*
 * regs: registers at the sample; stack: bytes copied from regs->r[PP_REG_SP]
 * upwards. Writes ret_pcs[0] = the exact IP, ret_pcs[i>0] = return
 * addresses as found on the stack (not adjusted; the caller subtracts 1
 * when it wants the call instruction). Returns 0 (even for 1 frame) or
 * -errno; *ret_flags gets PP_UNWIND_* bits.
 */
int pp_unwinder__unwind(struct pp_unwinder *u, const struct pp_regs *regs, const void *stack,
			size_t stack_len, uint64_t *ret_pcs, size_t max, size_t *ret_n,
			unsigned *ret_flags);

/*
 * Bytes of the copied stack the last pp_unwinder__unwind read (the highest
 * word, from the sample's sp): how deep its stack was, for a caller that
 * sizes later copies. 0 before the first unwind.
 */
size_t pp_unwinder__stack_used(const struct pp_unwinder *u);

/*
 * Builds the unwinder now (maps, files, each module's .eh_frame) instead of
 * at the first unwind: an event burst right after attach then does not
 * wait ~15 ms for it while the ring buffer fills. Same locking as unwind.
 */
int pp_unwinder__prepare(struct pp_unwinder *u);

/* Maps changed (exec, dlopen): rebuild before the next unwind. */
void pp_unwinder__invalidate(struct pp_unwinder *u);
void pp_unwinder__free(struct pp_unwinder *u);

/* Files not given to libdw because their debug sections would take over
 * 64 MiB once decompressed (no CFI for them): a process-wide count of
 * refusals, one per file per unwinder build. */
uint64_t pp_unwind_debug_refused(void);

/* fds one target's unwinder keeps open (two per executable file: libdw's
 * and ours for read-only data). Files past the budget, in address order,
 * get no CFI (frame pointers only); the target is not affected otherwise. */
#define PP_UNWIND_FD_BUDGET 256 /* the default */
/* Sets the budget process-wide (config limits.max_target_fds, at start);
 * 0 leaves it as it is. */
void pp_unwind__set_fd_budget(unsigned fds);
unsigned pp_unwind__fd_budget(void);
/* Unwinder builds that hit the fd budget (process-wide count). */
uint64_t pp_unwind_fd_budget_hits(void);

#endif
