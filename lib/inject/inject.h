/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading podprof's sampling agent (agent-blob.c) into a running process
 * and redirecting the allocator's GOT slots of every loaded module to it.
 *
 * How (see ../shared/docs/HEAP-INJECT.md for the hazards):
 * - Everything that can be done from outside is done before stopping
 *   anything: ELF parsing, relocation lookup, choosing the real targets.
 * - One thread is stopped (PTRACE_SEIZE + PTRACE_INTERRUPT, preferring one
 *   blocked in a syscall that restarts transparently) and made to execute
 *   raw syscalls by single-stepping a `syscall` instruction (its own, or
 *   one in the vdso): memfd_create, mmap read+exec and mmap read+write of
 *   that memfd. podprof writes the image through /proc/PID/fd/N. No code
 *   of the target's loader or allocator runs; the thread's registers are
 *   restored and it is detached (signals seen meanwhile are re-delivered).
 * - GOT slots are written by a stopped target thread single-stepped
 *   through one aligned 8-byte `mov` in the agent (pp_agent_store), a
 *   RELRO page made writable around it by remote mprotect calls: neither
 *   /proc/PID/mem nor PTRACE_POKEDATA promises an atomic 8-byte write
 *   (both are the kernel's memcpy). See docs/heap-inject.md.
 * - An agent already present (podprof restarted) is found by its memfd
 *   name and header magic and reused; detaching restores the slots and
 *   never unmaps the code (a thread may be running it).
 *
 * Thread-safety: one pp_inject per process, used from one thread at a time
 * (ptrace requests must come from the thread that seized). No other thread
 * of podprof may wait for arbitrary children with __WALL meanwhile.
 */
#ifndef PODPROF_INJECT_H
#define PODPROF_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pp_inject;

struct pp_inject_opts {
	uint64_t sample_rate; /* mean bytes between samples (<= 1: every allocation) */
	unsigned max_pause_ms; /* give up when no thread stops in time (0: 100) */
	/* maps path of the module the loader binds malloc to (pp_heap__find_allocator):
	 * its definitions are the real targets of slots not bound yet (lazy binding) */
	const char *allocator_path;
	/* preloaded agent: bytes of the ring it maps when first sampling (a
	 * power of two, 64 KiB..1 GiB; the injected agent's is fixed) */
	uint64_t ring_bytes;
};

/*
 * Map (or find) the agent in pid, without redirecting anything yet.
 * On failure the target is as it was, and reason (size n) says why in
 * words a user can act on: "static executable", "seccomp filter",
 * "ptrace not permitted", "no allocator slots", ... Returns 0, -ENOEXEC
 * (nothing to redirect), -EPERM, -ESRCH, -ETIMEDOUT, -ENOMEM or -errno.
 */
int pp_inject__prepare(pid_t pid, const struct pp_inject_opts *opts, struct pp_inject **ret,
		       char *reason, size_t n);

/*
 * A sampling agent the dynamic loader loaded at the process's start
 * (LD_PRELOAD=.../libpodprof-agent.so): find it (its header in the
 * mappings of a file named like it), write the rate, seed and table into
 * its data and enable it. Nothing is stopped, mapped or redirected; only
 * the agent's data is written (through process_vm_writev when
 * /proc/PID/mem is another user's). The ring then opens as for an
 * injected agent; detach and unload make it dormant again. -ENOENT: none
 * (reason "no preloaded agent"), -EPROTO another version, -EAGAIN its
 * constructor has not run yet; reason says which.
 */
int pp_inject__preload_find(pid_t pid, const struct pp_inject_opts *opts, struct pp_inject **ret,
			    char *reason, size_t n);
bool pp_inject__preloaded(const struct pp_inject *inj);
/* Write libpodprof-agent.so (built into podprof) into dir, atomically (a
 * loader never sees half a file), mode 0644. 0 or -errno; *ret_path (size
 * n) the file written. */
int pp_inject__install_preload(const char *dir, char *ret_path, size_t n);

/* Is the executable of pid statically linked (no PT_DYNAMIC)? */
bool pp_inject__static_exe(pid_t pid);

/* Path and offsets to put the two notification uprobes on (the memfd
 * behind the agent, through a descriptor podprof holds). Borrowed. */
const char *pp_inject__probe_path(const struct pp_inject *inj);
uint64_t pp_inject__alloc_off(const struct pp_inject *inj);
uint64_t pp_inject__free_off(const struct pp_inject *inj);

/* Redirect the slots of every module loaded now and not yet patched (call
 * again when the maps change: dlopen). Returns the number of slots newly
 * patched (>= 0) or -errno; slots already patched stay. */
int pp_inject__patch(struct pp_inject *inj);

struct pp_inject_stats {
	bool reused; /* an agent from an earlier podprof was found */
	unsigned modules; /* modules with at least one slot redirected */
	unsigned slots; /* slots redirected */
	unsigned skipped; /* slots left alone (bound elsewhere, unresolved) */
	uint64_t pause_ns; /* longest stop of a target thread */
	uint64_t calls, bytes, frees; /* counted by the agent since it was mapped */
	uint64_t set_full; /* samples dropped: the agent's address set was full */
	uint64_t ring_full; /* samples the agent sent to the kernel path: ring full */
	uint64_t ring_nostack; /* ... : the thread's stack range not known (yet) */

	char coverage[256]; /* "exe:2 libfoo.so:3 ..." slots per module */
};
/* Reads the agent's counters from the target (pread of /proc/PID/mem). */
int pp_inject__stats(struct pp_inject *inj, struct pp_inject_stats *ret);

/*
 * The in-process ring (agent-abi.h): sampled allocations and the frees of
 * their blocks, recorded by the target's threads, read by one podprof
 * thread through /proc/PID/mem. ring_open turns it on (copying copy_bytes
 * of stack per sample); until a thread's stack range is known (written by
 * pp_inject__thread_stack when its first sample arrives through the kernel
 * path, the uprobe on the notification point) its samples take that path.
 */
enum {
	PP_INJECT_RBX,
	PP_INJECT_RBP,
	PP_INJECT_R12,
	PP_INJECT_R13,
	PP_INJECT_R14,
	PP_INJECT_R15,
	PP_INJECT_SP,
	PP_INJECT_IP,
	PP_INJECT_NREGS
};
struct pp_inject_rec {
	bool alloc; /* else the FREE of a block whose ALLOC came through the ring */
	uint64_t addr, size;
	unsigned thread; /* the agent's slot of the allocating thread */
	uint64_t regs[PP_INJECT_NREGS]; /* at the application's call, sp after the return */
	const uint8_t *stack; /* from regs[PP_INJECT_SP]; borrowed during the callback */
	size_t stack_len;
};
typedef void (*pp_inject_rec_fn)(void *ctx, const struct pp_inject_rec *rec);
struct pp_inject_ring;
/* The reading side, with its own descriptor: it outlives inj (detach) and
 * is used by one thread at a time. NULL and *ret_err on failure. */
struct pp_inject_ring *pp_inject__ring_open(struct pp_inject *inj, uint32_t copy_bytes,
					    int *ret_err);
void pp_inject__ring_close(struct pp_inject_ring *rg);
/* Records taken; times unreadable contents were skipped (any thread). */
void pp_inject__ring_stats(const struct pp_inject_ring *rg, uint64_t *ret_records,
			   uint64_t *ret_skipped);
/* Stack bytes to copy per sample from now on (at most 32 KiB). */
int pp_inject__ring_copy(struct pp_inject_ring *rg, uint32_t copy_bytes);
/* Deliver the complete records in order and release their room; returns
 * how many were delivered or -errno (-ESRCH: the process is gone). Reads
 * at most a ring's worth per call. */
ssize_t pp_inject__ring_drain(struct pp_inject_ring *rg, pp_inject_rec_fn fn, void *ctx);
/* The index of the agent's thread slot at slot_addr, or -EINVAL. */
int pp_inject__thread_index(const struct pp_inject_ring *rg, uint64_t slot_addr);
/* A kernel-path sample of thread tid came with the agent's slot of that
 * thread (slot_addr, the notification's r8) and its stack pointer: write
 * the thread's stack range into the slot when the mapping holding sp is
 * that thread's stack, so its later samples use the ring. *ret_index: the
 * slot's index (as in pp_inject_rec.thread). -ENOENT: not a thread stack. */
int pp_inject__thread_stack(struct pp_inject_ring *rg, uint64_t slot_addr, uint64_t sp, pid_t tid,
			    unsigned *ret_index);

/* Restore every slot to the function it pointed to, leave the agent's code
 * mapped, free inj. Safe to call after the process exited. NULL is fine. */
void pp_inject__detach(struct pp_inject *inj);

/* For a failed injection: when this pp_inject mapped the agent itself and
 * never redirected a slot, unmap it and close its memfd in the target (one
 * more brief stop), so the target is left as it was; then free inj like
 * detach. Otherwise the same as detach. NULL is fine. */
void pp_inject__unload(struct pp_inject *inj);

#endif
