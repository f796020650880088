/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structs shared between bpf/heap.bpf.c and lib/heap: fixed-width types,
 * no pointers, sizes checked on both sides.
 *
 * Attach cookie (both the uprobe session and the classic uprobes): bits
 * 0..7 = HEAP_FN_*, bits 8..31 = the process slot (index into counters,
 * part of the live-table key), bits 32..39 = the slot's generation. The
 * slot, not a pid, names a process in BPF so no namespace translation is
 * needed on the hot path. Events carry slot | generation << 24 so user
 * space can drop events of a slot detached since.
 */
#ifndef PODPROF_BPF_HEAP_H
#define PODPROF_BPF_HEAP_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 hp_u8;
typedef __u32 hp_u32;
typedef __u64 hp_u64;
#else
#include <stdint.h>
typedef uint8_t hp_u8;
typedef uint32_t hp_u32;
typedef uint64_t hp_u64;
#endif

enum heap_fn {
	HEAP_FN_MALLOC = 0,
	HEAP_FN_CALLOC,
	HEAP_FN_REALLOC,
	HEAP_FN_REALLOCARRAY,
	HEAP_FN_FREE,
	HEAP_FN_POSIX_MEMALIGN,
	HEAP_FN_ALIGNED_ALLOC,
	HEAP_FN_MEMALIGN,
	HEAP_FN_VALLOC,
	HEAP_FN_PVALLOC,
	HEAP_FN_COUNT,
};

#define HEAP_MAX_PROCS 1024 /* process slots (counters array size) */
#define HEAP_MAX_STACK 32768 /* largest user stack copy per ALLOC event */
#define HEAP_EXP_TABLE 4096 /* exponential quantile table entries (power of 2) */
#define HEAP_EXP_SHIFT 16 /* table values are -ln(u) * 2^16 */
#define HEAP_NREGS 17 /* DWARF order, as struct pp_regs */

enum heap_event_type { HEAP_EV_ALLOC = 1, HEAP_EV_FREE = 2 };

/* Drop/diagnostic counters (BPF per-CPU array, index = enum value). */
enum heap_counter {
	HEAP_CNT_RINGBUF_DROP = 0,
	HEAP_CNT_LIVE_FULL,
	HEAP_CNT_STACK_ERR,
	HEAP_CNT_NESTED, /* calls skipped as nested inside another allocator call */
	HEAP_CNT_TSTATE_FULL, /* per-thread state could not be created */
	HEAP_CNT_FREE_DEFERRED, /* FREE with the ring full: kept in lost_frees for user space */
	HEAP_CNT_FREE_LOST, /* FREE with the ring and lost_frees full: the allocation stays live */
	HEAP_CNT_COUNT,
};

/* Per-process call counters (per-CPU array indexed by slot; user space sums). */
struct heap_proc_counters {
	hp_u64 mallocs; /* allocation calls (realloc with size > 0 included) */
	hp_u64 frees; /* free of a non-NULL pointer, realloc of a non-NULL pointer */
	hp_u64 alloc_bytes; /* requested bytes */
	hp_u64 sampled; /* ALLOC events emitted */
};
_Static_assert(sizeof(struct heap_proc_counters) == 32, "heap_proc_counters layout");

struct heap_live_key {
	hp_u32 slot;
	hp_u32 pad;
	hp_u64 addr;
};
_Static_assert(sizeof(struct heap_live_key) == 16, "heap_live_key layout");

struct heap_live_val {
	hp_u64 size;
	hp_u64 time_ns;
	hp_u32 tid;
	hp_u32 pad;
};
_Static_assert(sizeof(struct heap_live_val) == 24, "heap_live_val layout");

/*
 * A FREE that found the ring buffer full (lost_frees map, keyed like live):
 * user space reads and deletes these after draining the ring buffer; an
 * ALLOC at the same key first puts the pending FREE into the ring buffer.
 */
#define HEAP_LOST_FREES 4096
struct heap_lost_free {
	hp_u32 tag; /* slot | generation << 24 */
	hp_u32 pid, tid;
	hp_u32 pad;
	hp_u64 size;
	hp_u64 time_ns;
};
_Static_assert(sizeof(struct heap_lost_free) == 32, "heap_lost_free layout");

/* Common head of every ring buffer record; a FREE record is only this. */
struct heap_event_hdr {
	hp_u32 type; /* HEAP_EV_* */
	hp_u32 slot; /* slot | generation << 24 */
	hp_u32 pid, tid; /* podprof's PID namespace when translatable, else global */
	hp_u64 addr;
	hp_u64 size;
	hp_u64 time_ns; /* CLOCK_MONOTONIC */
};
_Static_assert(sizeof(struct heap_event_hdr) == 40, "heap_event_hdr layout");

/* ALLOC record: registers at the allocator's return, then stack_len bytes
 * copied from regs[7] (sp) upwards. */
struct heap_alloc_event {
	struct heap_event_hdr hdr;
	hp_u32 stack_len;
	hp_u32 regs_valid;
	hp_u64 regs[HEAP_NREGS];
	hp_u8 stack[HEAP_MAX_STACK];
};
_Static_assert(sizeof(struct heap_alloc_event) == 40 + 8 + 17 * 8 + HEAP_MAX_STACK, "heap_alloc_"
										    "event layout");

#endif
