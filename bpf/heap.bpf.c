// SPDX-License-Identifier: GPL-2.0
/*
 * Heap tracer: uprobes on one process's allocator (see lib/heap/heap.c).
 *
 * Hot path cost is what matters (every malloc/free of the target pays it):
 * one LRU-hash lookup (per-thread state), one per-CPU counter update, and
 * for free/realloc one hash lookup in `live`. Only sampled allocations and
 * frees of sampled addresses reach the ring buffer, without wakeups unless
 * the buffer is half full.
 *
 * Sampling: byte-based Poisson, as Go/tcmalloc/jemalloc. Each thread keeps
 * the bytes left until its next sample point; an allocation of size s is
 * sampled when s >= left, then a new exponential interval (mean
 * sample_rate) is drawn. BPF has no floating point, so intervals come from
 * a table of exponential quantiles (-ln((i + 0.5) / N), N = 4096) filled
 * by user space before load, indexed by bpf_get_prandom_u32(): a discrete
 * exponential with the right mean and a tail cut at 9 means, exact enough
 * for the 1 / (1 - exp(-s/R)) scaling.
 *
 * Nesting: wrappers call other probed functions (musl's calloc calls
 * malloc, posix_memalign calls aligned_alloc, glibc's reallocarray
 * tail-jumps to realloc). Every function except malloc and free keeps its
 * return probe and marks the thread "inside a call" (stack pointer at
 * entry); entries with a stack pointer at or below that are nested and
 * skipped, so each user call is counted once, by the function it called.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "heap.h"

extern bool bpf_session_is_return(void) __ksym __weak;

const volatile __u64 sample_rate = 524288;
const volatile __u32 stack_bytes = 32768;
const volatile __u64 ns_dev = 0;
const volatile __u64 ns_ino = 0;
const volatile __u32 exp_table[HEAP_EXP_TABLE] = {};

/* A pending nested marker older than this is stale (lost return). */
#define NEST_TIMEOUT_NS 1000000000ull

struct tstate {
	__u64 left; /* bytes until the next sample point */
	__u64 outer_sp; /* sp at entry of the pending outer call */
	__u64 t_start;
	__u64 pend_size;
	__u64 pend_memptr; /* posix_memalign's out pointer */
	__u32 outer_fn;
	__u32 ret_pending;
	__u32 sampled;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct tstate);
} tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* set to max_live by user space */
	__type(key, struct heap_live_key);
	__type(value, struct heap_live_val);
} live SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HEAP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct heap_proc_counters);
} counters SEC(".maps");

/* Bytes of stack to copy per process slot (0: stack_bytes), sized by user
 * space from how deep the unwinder found the process's stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HEAP_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} stack_copy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAP_LOST_FREES);
	__type(key, struct heap_live_key);
	__type(value, struct heap_lost_free);
} lost_frees SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HEAP_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* ALLOC events are built here (too large for the BPF stack and for a
 * per-CPU value); indexed by CPU, max_entries set to the CPU count. The
 * slack after the event lets the last page copy be bounded simply. */
struct scratch {
	struct heap_alloc_event ev;
	__u8 slack[4096];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the number of possible CPUs */
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* ~125 events with 32 KiB stacks */
} rb SEC(".maps");

static __always_inline void count_drop(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&drops, &idx);

	if (c)
		*c += 1;
}

static __always_inline __u64 draw_interval(void)
{
	__u32 idx = bpf_get_prandom_u32() & (HEAP_EXP_TABLE - 1);
	__u64 v = exp_table[idx];
	__u64 n = (v * sample_rate) >> HEAP_EXP_SHIFT;

	return n ? n : 1;
}

static __always_inline __u64 rb_flags(void)
{
	__u64 avail = bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&rb, BPF_RB_RING_SIZE);

	/* an eighth: the consumer has 7/8 of the ring to absorb its wakeup
	 * latency on a busy machine (a half left ~1 ms at 4 MiB in a burst) */
	return avail > size / 8 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_ids(struct heap_event_hdr *h)
{
	struct bpf_pidns_info ns = {};
	__u64 id = bpf_get_current_pid_tgid();

	h->pid = id >> 32;
	h->tid = (__u32)id;
	if (ns_ino && bpf_get_ns_current_pid_tgid(ns_dev, ns_ino, &ns, sizeof(ns)) == 0) {
		h->pid = ns.tgid;
		h->tid = ns.pid;
	}
}

/* tag = slot | generation << 24: what events carry (see heap.h). */
static __always_inline void on_free(__u32 slot, __u32 tag, __u64 addr)
{
	struct heap_live_key k = { .slot = slot, .addr = addr };
	struct heap_live_val *v = bpf_map_lookup_elem(&live, &k);
	struct heap_event_hdr *e;
	__u64 size;

	if (!v)
		return;
	size = v->size;
	/* ring space first: a FREE that cannot be delivered must not vanish */
	e = bpf_ringbuf_reserve(&rb, sizeof(*e), 0);
	if (!e) {
		struct heap_lost_free lf = { .tag = tag, .size = size };
		struct heap_event_hdr ids = {};

		fill_ids(&ids);
		lf.pid = ids.pid;
		lf.tid = ids.tid;
		lf.time_ns = bpf_ktime_get_ns();
		if (bpf_map_update_elem(&lost_frees, &k, &lf, BPF_ANY) == 0) {
			if (bpf_map_delete_elem(&live, &k) == 0)
				count_drop(HEAP_CNT_FREE_DEFERRED);
			else /* freed concurrently (double free in the target) */
				bpf_map_delete_elem(&lost_frees, &k);
		} else {
			count_drop(HEAP_CNT_FREE_LOST); /* the entry stays: user space knows */
		}
		return;
	}
	if (bpf_map_delete_elem(&live, &k)) {
		bpf_ringbuf_discard(e, 0); /* freed concurrently (double free in the target) */
		return;
	}
	e->type = HEAP_EV_FREE;
	e->slot = tag;
	fill_ids(e);
	e->addr = addr;
	e->size = size;
	e->time_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, rb_flags());
}

/* rip and sp: the caller's state after the allocator returned (the
 * uprobe path: the return probe's own; the agent path: its notification
 * point's return address and stack, see lib/inject/agent-blob.c). */
static __always_inline void on_alloc(struct pt_regs *ctx, __u32 slot, __u32 tag, __u64 addr,
				     __u64 size, __u64 rip, __u64 sp)
{
	struct heap_live_key k = { .slot = slot, .addr = addr };
	struct heap_live_val v = { .size = size, .time_ns = bpf_ktime_get_ns() };
	struct heap_proc_counters *pc;
	struct heap_alloc_event *e;
	struct scratch *s;
	__u32 zero = 0;
	__u64 off = 0, max;
	int i;

	v.tid = (__u32)bpf_get_current_pid_tgid();
	/* a FREE of the previous block at this address still pending: it goes
	 * first, or user space would apply it to this block */
	struct heap_lost_free *lf = bpf_map_lookup_elem(&lost_frees, &k);
	if (lf) {
		struct heap_event_hdr *fe = bpf_ringbuf_reserve(&rb, sizeof(*fe), 0);

		if (!fe) {
			count_drop(HEAP_CNT_RINGBUF_DROP); /* this ALLOC would not fit either */
			return;
		}
		fe->type = HEAP_EV_FREE;
		fe->slot = lf->tag;
		fe->pid = lf->pid;
		fe->tid = lf->tid;
		fe->addr = addr;
		fe->size = lf->size;
		fe->time_ns = lf->time_ns;
		/* exactly one of us and user space (lookup_and_delete) delivers it */
		if (bpf_map_delete_elem(&lost_frees, &k))
			bpf_ringbuf_discard(fe, 0);
		else
			bpf_ringbuf_submit(fe, 0);
	}
	if (bpf_map_update_elem(&live, &k, &v, BPF_ANY)) {
		count_drop(HEAP_CNT_LIVE_FULL);
		return;
	}
	zero = bpf_get_smp_processor_id();
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		goto drop;
	e = &s->ev;
	e->hdr.type = HEAP_EV_ALLOC;
	e->hdr.slot = tag;
	fill_ids(&e->hdr);
	e->hdr.addr = addr;
	e->hdr.size = size;
	e->hdr.time_ns = v.time_ns;
	e->regs_valid = 1;
	e->regs[0] = addr;
	e->regs[1] = ctx->rdx;
	e->regs[2] = ctx->rcx;
	e->regs[3] = ctx->rbx;
	e->regs[4] = ctx->rsi;
	e->regs[5] = ctx->rdi;
	e->regs[6] = ctx->rbp;
	e->regs[7] = sp;
	e->regs[8] = ctx->r8;
	e->regs[9] = ctx->r9;
	e->regs[10] = ctx->r10;
	e->regs[11] = ctx->r11;
	e->regs[12] = ctx->r12;
	e->regs[13] = ctx->r13;
	e->regs[14] = ctx->r14;
	e->regs[15] = ctx->r15;
	e->regs[16] = rip;

	/* Page by page: one large read fails as soon as it crosses the top
	 * of the stack mapping; stop at the first page that cannot be read. */
	max = stack_bytes;
	{
		__u32 *want = bpf_map_lookup_elem(&stack_copy, &slot);

		if (want && *want && *want < max)
			max = *want;
	}
	if (max > HEAP_MAX_STACK)
		max = HEAP_MAX_STACK;
	for (i = 0; i < HEAP_MAX_STACK / 4096 + 1; i++) {
		__u64 len;

		if (off >= max)
			break;
		len = 4096 - ((sp + off) & 4095);
		if (len > max - off)
			len = max - off;
		/* Keep both bounds visible to the verifier as 64-bit values. */
		asm volatile("" : "+r"(len));
		if (len > 4096 || len == 0)
			break;
		asm volatile("" : "+r"(off));
		if (off >= HEAP_MAX_STACK)
			break;
		if (bpf_probe_read_user(&e->stack[off], len, (void *)(sp + off)))
			break;
		off += len;
	}
	if (off == 0)
		count_drop(HEAP_CNT_STACK_ERR);
	if (off > HEAP_MAX_STACK)
		off = HEAP_MAX_STACK;
	e->stack_len = off;
	if (bpf_ringbuf_output(&rb, e, __builtin_offsetof(struct heap_alloc_event, stack) + off,
			       rb_flags()))
		goto drop;
	pc = bpf_map_lookup_elem(&counters, &slot);
	if (pc)
		pc->sampled++;
	return;
drop:
	count_drop(HEAP_CNT_RINGBUF_DROP);
	bpf_map_delete_elem(&live, &k);
}

static __always_inline __u64 mul_sat(__u64 a, __u64 b)
{
	__u64 q;

	if (!((a | b) >> 32))
		return a * b;
	if (!a || !b)
		return 0;
	q = ~0ull;
	asm volatile("" : "+r"(q)); /* keep clang from turning this into a 128-bit multiply */
	if (a > q / b)
		return ~0ull;
	return a * b;
}

/* Returns 0 when the return probe must run (session semantics). */
static __always_inline int on_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 fn = cookie & 0xff, slot = (cookie >> 8) & 0xffffff;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 sp = ctx->rsp, now = 0, size = 0, old = 0, memptr = 0;
	struct heap_proc_counters *pc;
	struct tstate *st;
	bool sampled;

	if (slot >= HEAP_MAX_PROCS || fn >= HEAP_FN_COUNT)
		return 1;
	st = bpf_map_lookup_elem(&tstates, &tid);
	if (!st) {
		struct tstate z = { .left = draw_interval() };

		bpf_map_update_elem(&tstates, &tid, &z, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&tstates, &tid);
		if (!st) {
			count_drop(HEAP_CNT_TSTATE_FULL);
			return 1;
		}
	}
	if (st->ret_pending) {
		now = bpf_ktime_get_ns();
		if (sp <= st->outer_sp && now - st->t_start < NEST_TIMEOUT_NS) {
			count_drop(HEAP_CNT_NESTED);
			return 1;
		}
		st->ret_pending = 0; /* stale: that call has returned */
	}

	switch (fn) {
	case HEAP_FN_MALLOC:
	case HEAP_FN_VALLOC:
	case HEAP_FN_PVALLOC:
		size = ctx->rdi;
		break;
	case HEAP_FN_CALLOC:
		size = mul_sat(ctx->rdi, ctx->rsi);
		break;
	case HEAP_FN_REALLOC:
		old = ctx->rdi;
		size = ctx->rsi;
		break;
	case HEAP_FN_REALLOCARRAY:
		old = ctx->rdi;
		size = mul_sat(ctx->rsi, ctx->rdx);
		break;
	case HEAP_FN_FREE:
		old = ctx->rdi;
		break;
	case HEAP_FN_POSIX_MEMALIGN:
		memptr = ctx->rdi;
		size = ctx->rdx;
		break;
	case HEAP_FN_ALIGNED_ALLOC:
	case HEAP_FN_MEMALIGN:
		size = ctx->rsi;
		break;
	}

	pc = bpf_map_lookup_elem(&counters, &slot);
	if (old) {
		if (pc)
			pc->frees++;
		on_free(slot, slot | ((cookie >> 32) & 0xff) << 24, old);
	}
	if (fn == HEAP_FN_FREE)
		return 1;
	if (old && size == 0)
		return 1; /* realloc(p, 0): a free */
	if (pc) {
		pc->mallocs++;
		pc->alloc_bytes += size;
	}

	if (sample_rate <= 1) {
		sampled = true;
	} else if (size >= st->left) {
		sampled = true;
		st->left = draw_interval();
	} else {
		st->left -= size;
		sampled = false;
	}
	if (!sampled && fn == HEAP_FN_MALLOC)
		return 1;
	st->ret_pending = 1;
	st->outer_sp = sp;
	st->t_start = now ? now : bpf_ktime_get_ns();
	st->outer_fn = fn;
	st->sampled = sampled;
	st->pend_size = size;
	st->pend_memptr = memptr;
	return 0;
}

static __always_inline void on_return(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 slot = (cookie >> 8) & 0xffffff;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tstate *st = bpf_map_lookup_elem(&tstates, &tid);
	__u64 addr;

	if (!st || !st->ret_pending || ctx->rsp != st->outer_sp + 8)
		return; /* not the return of the outer call (nested, or unsampled malloc) */
	st->ret_pending = 0;
	if (!st->sampled || slot >= HEAP_MAX_PROCS)
		return;
	addr = ctx->rax;
	if (st->outer_fn == HEAP_FN_POSIX_MEMALIGN) {
		if (addr != 0 || !st->pend_memptr)
			return;
		if (bpf_probe_read_user(&addr, sizeof(addr), (void *)st->pend_memptr))
			return;
	}
	if (!addr)
		return;
	on_alloc(ctx, slot, slot | ((cookie >> 32) & 0xff) << 24, addr, st->pend_size, ctx->rip,
		 ctx->rsp);
}

/* Uprobe session (kernel >= 6.13): one program for entry and return; the
 * return part runs only when the entry returned 0. */
SEC("uprobe")
int heap_session(struct pt_regs *ctx)
{
	if (bpf_session_is_return()) {
		on_return(ctx);
		return 0;
	}
	return on_entry(ctx);
}

/* Fallback: classic uprobe + uretprobe (the return runs on every call). */
SEC("uprobe")
int heap_entry(struct pt_regs *ctx)
{
	on_entry(ctx);
	return 0;
}

SEC("uretprobe")
int heap_return(struct pt_regs *ctx)
{
	on_return(ctx);
	return 0;
}

/*
 * Injected agent (lib/inject): it samples in the process and calls
 * pp_agent_sampled_alloc(ptr, size, weight, ret) by a tail jump after the
 * real allocator returned (rsp points at the application's return
 * address, callee-saved registers are the application's), and
 * pp_agent_sampled_free(ptr) before the real free. Only sampled calls
 * reach these probes; the counters of every call are the agent's own.
 */
SEC("uprobe")
int heap_agent_alloc(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 slot = (cookie >> 8) & 0xffffff;
	__u64 ret = 0;

	if (slot >= HEAP_MAX_PROCS || !ctx->rdi)
		return 0;
	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)ctx->rsp))
		return 0;
	on_alloc(ctx, slot, slot | ((cookie >> 32) & 0xff) << 24, ctx->rdi, ctx->rsi, ret,
		 ctx->rsp + 8);
	return 0;
}

SEC("uprobe")
int heap_agent_free(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 slot = (cookie >> 8) & 0xffffff;

	if (slot >= HEAP_MAX_PROCS || !ctx->rdi)
		return 0;
	on_free(slot, slot | ((cookie >> 32) & 0xff) << 24, ctx->rdi);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
