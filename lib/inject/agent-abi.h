/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layout shared by the injected sampling agent (agent-blob.c, compiled
 * freestanding into a flat position-independent image) and podprof
 * (inject.c), which maps that image into a target and writes its data.
 *
 * Image: [code pages: struct pp_agent_hdr at offset 0, then the code]
 *        [data pages at hdr.data_off: struct pp_agent_data, zero-filled]
 * The code pages are mapped read+execute, the data pages read+write, both
 * MAP_PRIVATE from one memfd (a fork child gets its own copy of the data).
 */
#ifndef PODPROF_AGENT_ABI_H
#define PODPROF_AGENT_ABI_H

#include <stdint.h>

#define PP_AGENT_MAGIC 0x31544e4741505050ull /* "PPPAGNT1" */
#define PP_AGENT_VERSION 5u
#define PP_AGENT_MEMFD_NAME "podprof-agent"

/* Entry points the agent wraps (GOT slots it can take over). */
enum pp_agent_fn {
	PP_AG_MALLOC = 0,
	PP_AG_CALLOC,
	PP_AG_REALLOC,
	PP_AG_REALLOCARRAY,
	PP_AG_FREE,
	PP_AG_POSIX_MEMALIGN,
	PP_AG_ALIGNED_ALLOC,
	PP_AG_MEMALIGN,
	PP_AG_VALLOC,
	PP_AG_PVALLOC,
	PP_AG_FREE_SIZED,
	PP_AG_FREE_ALIGNED_SIZED,
	/* C++ operator new: size in the first argument */
	PP_AG_NEW, /* _Znwm */
	PP_AG_NEW_A, /* _Znam */
	PP_AG_NEW_NT, /* _ZnwmRKSt9nothrow_t */
	PP_AG_NEW_A_NT, /* _ZnamRKSt9nothrow_t */
	PP_AG_NEW_AL, /* _ZnwmSt11align_val_t */
	PP_AG_NEW_A_AL, /* _ZnamSt11align_val_t */
	PP_AG_NEW_AL_NT, /* _ZnwmSt11align_val_tRKSt9nothrow_t */
	PP_AG_NEW_A_AL_NT, /* _ZnamSt11align_val_tRKSt9nothrow_t */
	/* C++ operator delete: pointer in the first argument */
	PP_AG_DEL, /* _ZdlPv */
	PP_AG_DEL_A, /* _ZdaPv */
	PP_AG_DEL_S, /* _ZdlPvm */
	PP_AG_DEL_A_S, /* _ZdaPvm */
	PP_AG_DEL_AL, /* _ZdlPvSt11align_val_t */
	PP_AG_DEL_A_AL, /* _ZdaPvSt11align_val_t */
	PP_AG_DEL_S_AL, /* _ZdlPvmSt11align_val_t */
	PP_AG_DEL_A_S_AL, /* _ZdaPvmSt11align_val_t */
	PP_AG_DEL_NT, /* _ZdlPvRKSt9nothrow_t */
	PP_AG_DEL_A_NT, /* _ZdaPvRKSt9nothrow_t */
	PP_AG_NFN,
};
#define PP_AG_FIRST_CXX PP_AG_NEW

/* The symbol each entry point is known by (an initializer for a
 * const char *[PP_AG_NFN]: the injector looks the names up in a target's
 * relocations, the preloaded agent in the loader's objects). */
#define PP_AGENT_FN_NAMES                                                                           \
	{                                                                                           \
		[PP_AG_MALLOC] = "malloc", [PP_AG_CALLOC] = "calloc", [PP_AG_REALLOC] = "realloc",  \
		[PP_AG_REALLOCARRAY] = "reallocarray", [PP_AG_FREE] = "free",                       \
		[PP_AG_POSIX_MEMALIGN] = "posix_memalign", [PP_AG_ALIGNED_ALLOC] = "aligned_alloc", \
		[PP_AG_MEMALIGN] = "memalign", [PP_AG_VALLOC] = "valloc",                           \
		[PP_AG_PVALLOC] = "pvalloc", [PP_AG_FREE_SIZED] = "free_sized",                     \
		[PP_AG_FREE_ALIGNED_SIZED] = "free_aligned_sized", [PP_AG_NEW] = "_Znwm",           \
		[PP_AG_NEW_A] = "_Znam", [PP_AG_NEW_NT] = "_ZnwmRKSt9nothrow_t",                    \
		[PP_AG_NEW_A_NT] = "_ZnamRKSt9nothrow_t", [PP_AG_NEW_AL] = "_ZnwmSt11align_val_t",  \
		[PP_AG_NEW_A_AL] = "_ZnamSt11align_val_t",                                          \
		[PP_AG_NEW_AL_NT] = "_ZnwmSt11align_val_tRKSt9nothrow_t",                           \
		[PP_AG_NEW_A_AL_NT] = "_ZnamSt11align_val_tRKSt9nothrow_t",                         \
		[PP_AG_DEL] = "_ZdlPv", [PP_AG_DEL_A] = "_ZdaPv", [PP_AG_DEL_S] = "_ZdlPvm",        \
		[PP_AG_DEL_A_S] = "_ZdaPvm", [PP_AG_DEL_AL] = "_ZdlPvSt11align_val_t",              \
		[PP_AG_DEL_A_AL] = "_ZdaPvSt11align_val_t",                                         \
		[PP_AG_DEL_S_AL] = "_ZdlPvmSt11align_val_t",                                        \
		[PP_AG_DEL_A_S_AL] = "_ZdaPvmSt11align_val_t",                                      \
		[PP_AG_DEL_NT] = "_ZdlPvRKSt9nothrow_t", [PP_AG_DEL_A_NT] = "_ZdaPvRKSt9nothrow_t", \
	}

/* At offset 0 of the image (read-only in the target). Offsets are from
 * the image start. In the preloaded shared object (libpodprof-agent.so,
 * the same source built with PP_AGENT_SO) the header sits 64-byte aligned
 * in its read-only data, relocated by the loader: its offsets there are
 * addresses, and data_off is the address of struct pp_agent_data. */
struct pp_agent_hdr {
	uint64_t magic;
	uint32_t version, nfn;
	uint64_t image_size; /* bytes of the flat image (code + initialised data) */
	uint64_t total_size; /* bytes to map (data zero-filled up to here) */
	uint64_t data_off; /* page aligned */
	uint64_t notify_alloc_off; /* pp_agent_sampled_alloc */
	uint64_t notify_free_off; /* pp_agent_sampled_free */
	/* pp_agent_store: `mov %rsi,(%rdi)` then `int3`. podprof single-steps
	 * a stopped thread through the mov to write a GOT slot with one
	 * aligned 8-byte store (see inject.c, store_slot). */
	uint64_t store_off;
	uint64_t wrap_off[PP_AG_NFN];
};

#define PP_AGENT_EXP_TABLE 4096 /* exponential quantiles, -ln(u) << 16 */
#define PP_AGENT_EXP_SHIFT 16
#define PP_AGENT_THREAD_BITS 12 /* per-thread countdown slots */
#define PP_AGENT_FILTER_BITS 16 /* counting filter of sampled addresses */
#define PP_AGENT_SET_BITS 16 /* exact set of sampled addresses */
#define PP_AGENT_SET_PROBES 32
#define PP_AGENT_RING_BITS 21 /* in-process ring of sampled events: 2 MiB */
#define PP_AGENT_RING_SIZE (1ull << PP_AGENT_RING_BITS)

struct pp_agent_thread {
	uint64_t key; /* thread pointer (%fs:0), 0 = free slot */
	int64_t left; /* bytes until the next sample */
	uint64_t rng;
	uint64_t calls; /* allocation calls seen */
	uint64_t bytes; /* bytes requested */
	uint64_t frees; /* free-family and realloc calls with a non-NULL pointer */
	/* Written by podprof: the thread's stack mapping [stack_lo, stack_hi)
	 * (0: unknown). A sample whose stack pointer is inside is copied in the
	 * process, up to stack_hi, which is never beyond the mapping. */
	uint64_t stack_lo, stack_hi;
};

/* At data_off. podprof writes sample_rate, real[], seed and exp_table
 * into the memfd before mapping; later changes go through /proc/PID/mem. */
struct pp_agent_data {
	uint64_t magic;
	uint64_t sample_rate; /* mean bytes; <= 1 samples every allocation */
	uint64_t seed;
	uint64_t real[PP_AG_NFN]; /* where each wrapper forwards */
	uint64_t set_full; /* samples dropped: exact set full */
	/* In-process ring (see struct pp_agent_rec), podprof's side: */
	uint64_t ring_on; /* podprof reads the ring: record samples in it */
	uint64_t ring_copy; /* stack bytes to copy per sample (0: none, kernel path) */
	/* Preloaded agent only: 0 (dormant, the wrappers only forward) until
	 * podprof has written the rate, seed and table and sets it. */
	uint64_t enabled;
	uint64_t preload; /* written by the agent: loaded by ld.so, no kernel path */
	uint64_t notes; /* THREAD records written (first allocation of a thread) */
	/* written by the agent at load, on the main thread: its thread
	 * pointer and an address on its stack; by podprof when it enables
	 * the agent: that stack's range, which the main thread's slot takes
	 * when the thread claims it (before its first sample) */
	uint64_t main_tp, main_sp, main_lo, main_hi;
	/* Preloaded agent's ring: mapped by the agent when it first needs it
	 * (nothing while dormant), ring_req bytes (a power of two podprof
	 * sizes from the rate); ring_map = its address | log2 of its size.
	 * podprof sets release when it stops: the agent's next call while
	 * dormant gives the ring's pages back (MADV_DONTNEED). The injected
	 * agent's ring is ring[] below (ring_map 0). A preloaded agent's
	 * struct ends before ring[]. */
	uint64_t ring_req, ring_map, release;
	uint64_t writers; /* threads writing a record into it now */
	/* the process podprof enabled the agent in (written by podprof): a
	 * fork child inherits the agent enabled, and records nothing until
	 * podprof adopts it (its samples are dropped, counted in foreign) */
	uint64_t owner_pid, foreign;
	/* the agent's side, one line for the positions, one for counters */
	uint64_t ring_claimed __attribute__((aligned(64))); /* head + owed FREE records */
	uint64_t ring_head; /* bytes reserved */
	uint64_t pad2[6];
	uint64_t ring_tail __attribute__((aligned(64))); /* bytes consumed (written by podprof) */
	uint64_t pad3[7];
	uint64_t ring_full __attribute__((aligned(64))); /* samples sent to the kernel: ring full */
	uint64_t ring_nostack; /* samples sent to the kernel: stack range unknown */
	uint64_t pad4[6];
	uint32_t exp_table[PP_AGENT_EXP_TABLE];
	struct pp_agent_thread overflow; /* shared by threads beyond the table */
	struct pp_agent_thread threads[1u << PP_AGENT_THREAD_BITS];
	uint16_t filter[1u << PP_AGENT_FILTER_BITS];
	uint64_t set[1u << PP_AGENT_SET_BITS]; /* 0 empty, 1 deleted */
	uint8_t set_ring[1u << PP_AGENT_SET_BITS]; /* 1: that entry's ALLOC went into the ring */
	uint64_t ring[PP_AGENT_RING_SIZE / 8] __attribute__((aligned(4096)));
};

/*
 * The ring: many writers (the target's threads), one reader (podprof,
 * through /proc/PID/mem). Positions are byte counts that only grow; a
 * record at position pos starts at ring[(pos / 8) % words] and may wrap
 * (every record is a multiple of 8 bytes). A writer reserves with
 * ring_head, fills the record, and stores its position in the first word
 * last (release): podprof takes records in order while that word matches
 * and writes ring_tail back.
 *
 * Every sampled block whose ALLOC went into the ring sends its FREE there
 * too (set_ring), so a FREE never overtakes its ALLOC. Room for that FREE
 * is set aside when the ALLOC is reserved: ring_claimed counts the bytes
 * reserved plus one FREE record per block still owed, and an ALLOC is
 * reserved only while ring_claimed stays within ring_tail + the ring size,
 * so a FREE always fits and never waits. An ALLOC that does not fit goes
 * to the kernel path (the uprobe on pp_agent_sampled_alloc), as do its
 * FREE, samples of a thread whose stack range podprof has not written yet,
 * and samples on another stack (signal or fiber stacks).
 *
 * The preloaded agent has no kernel path: an ALLOC that does not fit is
 * dropped (counted in ring_full), one whose thread's stack range is not
 * known goes into the ring without stack (stack_len 0, counted in
 * ring_nostack), and a thread's first allocation writes a THREAD record so
 * that podprof knows its range before it is first sampled.
 */
enum {
	PP_AGENT_REC_PAD = 0,
	PP_AGENT_REC_ALLOC = 1,
	PP_AGENT_REC_FREE = 2,
	/* preloaded agent: a thread took its slot (addr: the slot's index),
	 * then one word: an address on that thread's stack. podprof writes
	 * the slot's stack range from it. */
	PP_AGENT_REC_THREAD = 3,
};
#define PP_AGENT_THREAD_REC ((uint64_t)sizeof(struct pp_agent_rec) + 8)

struct pp_agent_rec {
	uint64_t pos; /* the record's position: written last */
	uint32_t type; /* PP_AGENT_REC_* */
	uint32_t len; /* bytes of the whole record, a multiple of 8 */
	uint64_t addr;
};

/* Registers at the application's call, as the wrappers' sampled path
 * finds them: callee-saved, the stack pointer after the return and the
 * return address. */
enum {
	PP_AGENT_RBX,
	PP_AGENT_RBP,
	PP_AGENT_R12,
	PP_AGENT_R13,
	PP_AGENT_R14,
	PP_AGENT_R15,
	PP_AGENT_SP,
	PP_AGENT_IP,
	PP_AGENT_NREGS
};

struct pp_agent_rec_alloc {
	struct pp_agent_rec h;
	uint64_t size;
	uint32_t thread; /* index in threads[] */
	uint32_t stack_len; /* bytes of stack from regs[PP_AGENT_SP] that follow */
	uint64_t regs[PP_AGENT_NREGS];
	/* uint8_t stack[stack_len], padded to 8 */
};
#define PP_AGENT_FREE_REC ((uint64_t)sizeof(struct pp_agent_rec))
#define PP_AGENT_MAX_COPY 32768u

#endif
