/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampling agent podprof maps into a running process (lib/inject).
 * Freestanding: no libc, no loader, no allocator, no TLS; every data
 * reference is RIP-relative, so the flat image runs at any address.
 *
 * Each wrapper takes over one GOT slot. Unsampled calls: find the calling
 * thread's countdown (a slot keyed by the thread pointer, claimed with a
 * CAS), subtract the size, tail-call the real function. Frees: a counting
 * filter of hashed sampled addresses; only a hit looks in the exact set.
 *
 * Sampled allocations are recorded in the process, in a ring podprof
 * reads with /proc/PID/mem (agent-abi.h): registers and a copy of the
 * stack, written by the thread that allocated, no kernel entry. The
 * wrappers' sampled path tail-jumps to pp_agent_sample once the real
 * allocator has returned, so at its entry the stack pointer, return
 * address and callee-saved registers are exactly those of the
 * application's call (what the uprobe path sees at the allocator's
 * return). When a sample cannot go into the ring (the thread's stack
 * range is not known yet, a stack other than the thread's own, the ring
 * full) it jumps on to pp_agent_sampled_alloc, with the same state, where
 * podprof has a uprobe: the kernel path. pp_agent_sampled_free, the kernel
 * path's FREE, is called before the real free, so the address cannot be
 * reused and sampled again before podprof hears it was freed; a FREE goes
 * the way its ALLOC went.
 *
 * Sampled-block bookkeeping stays outside the blocks (no header), so a
 * block freed through a path the agent does not see is harmless.
 *
 * Built with PP_AGENT_SO, the same code is libpodprof-agent.so, loaded by
 * the dynamic loader at the application's start (LD_PRELOAD): it defines
 * the allocation entry points itself (every module that binds them by
 * name calls it, dlopen()ed ones too), forwards to the next definition in
 * the loader's list (found by walking it, no libc call), stays dormant
 * (forwarding only) until podprof enables it, and has no kernel path (see
 * agent-abi.h). It has no DT_NEEDED entry, so a musl program loads it as
 * well as a glibc one.
 */
#include <stddef.h>
#include <stdint.h>

#include "agent-abi.h"

#ifdef PP_AGENT_SO
#define PRELOAD 1
/* CFI for the hand-written entry points: unwinders (a debugger, a crash
 * reporter, another profiler) walk through the agent. */
#define CFI(x) x "\n"
#else
#define PRELOAD 0
#define CFI(x) ""
#endif

#define HIDDEN __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

extern struct pp_agent_hdr pp_agent_hdr HIDDEN;
#if !PRELOAD
extern char __data_start[] HIDDEN, __image_end[] HIDDEN, __total_end[] HIDDEN;
#endif

#if PRELOAD
/* without ring[]: the ring is mapped when enabled (agent-abi.h) */
HIDDEN uint8_t pp_agent_data_store[offsetof(struct pp_agent_data, ring)]
	__attribute__((aligned(64)));
#define D (*(struct pp_agent_data *)pp_agent_data_store)
#else
HIDDEN struct pp_agent_data D __attribute__((aligned(64))); /* .bss: written by podprof */
#endif

/* Notification points: a 5-byte nop, where podprof puts the uprobe when
 * the kernel optimizes uprobes on it into a call to a trampoline (Linux
 * 6.18, x86-64: no trap; see inject.c, notify_skip), then `push %rbp`, an
 * instruction every kernel emulates under a uprobe (no single-step, which
 * costs ~15 us here; see lib/heap/x86.c), where the probe goes otherwise,
 * then the return value. Either probe fires before the push, so the BPF
 * program sees the entry stack pointer. */
void *pp_agent_sampled_alloc(void *p, uint64_t size, uint64_t weight, void *ret) HIDDEN;
void pp_agent_sampled_free(void *p) HIDDEN;
/* The sampled path: (p, size, weight, ret, thread slot), reached by a tail
 * jump. Saves the application's registers, calls pp_agent_record with
 * them, returns ret, or goes on to pp_agent_sampled_alloc when the record
 * says so. rsp is 8 mod 16 at entry; 104 bytes make the call aligned. */
void *pp_agent_sample(void *p, uint64_t size, uint64_t weight, void *ret,
		      struct pp_agent_thread *t) HIDDEN;
/* The same entry typed for posix_memalign's wrapper (ret 0), so that its
 * call is a tail jump too. */
int pp_agent_sample_int(void *p, uint64_t size, uint64_t weight, void *ret,
			struct pp_agent_thread *t) HIDDEN;
int pp_agent_record(uint64_t p, uint64_t size, struct pp_agent_thread *t,
		    const uint64_t *regs) HIDDEN __attribute__((used, noinline));
/* Never called: podprof points a stopped thread's rip here and single-steps
 * the mov (3 bytes), so a GOT slot changes with one aligned 8-byte store,
 * which no other thread can observe half done. */
void pp_agent_store(void) HIDDEN;
/* clang-format off */
__asm__(".text\n"
	".p2align 4\n"
	".globl pp_agent_sampled_alloc\n"
	".hidden pp_agent_sampled_alloc\n"
	".type pp_agent_sampled_alloc,@function\n"
	"pp_agent_sampled_alloc:\n" CFI(".cfi_startproc")
	"  .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */
	"  push %rbp\n" CFI(".cfi_adjust_cfa_offset 8")
	"  pop %rbp\n" CFI(".cfi_adjust_cfa_offset -8")
	"  mov %rcx, %rax\n"
	"  ret\n" CFI(".cfi_endproc")
	".size pp_agent_sampled_alloc, .-pp_agent_sampled_alloc\n"
	".p2align 4\n"
	".globl pp_agent_sampled_free\n"
	".hidden pp_agent_sampled_free\n"
	".type pp_agent_sampled_free,@function\n"
	"pp_agent_sampled_free:\n" CFI(".cfi_startproc")
	"  .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */
	"  push %rbp\n" CFI(".cfi_adjust_cfa_offset 8")
	"  pop %rbp\n" CFI(".cfi_adjust_cfa_offset -8")
	"  ret\n" CFI(".cfi_endproc")
	".size pp_agent_sampled_free, .-pp_agent_sampled_free\n"
	".p2align 4\n"
	".globl pp_agent_sample\n"
	".hidden pp_agent_sample\n"
	".type pp_agent_sample,@function\n"
	"pp_agent_sample:\n"
	".globl pp_agent_sample_int\n"
	".hidden pp_agent_sample_int\n"
	"pp_agent_sample_int:\n" CFI(".cfi_startproc")
	"  sub $104, %rsp\n" CFI(".cfi_adjust_cfa_offset 104")
	"  mov %rbx, 0(%rsp)\n" /* PP_AGENT_RBX ... */
	"  mov %rbp, 8(%rsp)\n"
	"  mov %r12, 16(%rsp)\n"
	"  mov %r13, 24(%rsp)\n"
	"  mov %r14, 32(%rsp)\n"
	"  mov %r15, 40(%rsp)\n"
	"  lea 112(%rsp), %rax\n" /* PP_AGENT_SP: the caller's, after the return */
	"  mov %rax, 48(%rsp)\n"
	"  mov 104(%rsp), %rax\n" /* PP_AGENT_IP: the return address */
	"  mov %rax, 56(%rsp)\n"
	"  mov %rdi, 64(%rsp)\n"
	"  mov %rsi, 72(%rsp)\n"
	"  mov %rdx, 80(%rsp)\n"
	"  mov %rcx, 88(%rsp)\n"
	"  mov %r8, 96(%rsp)\n"
	"  mov %r8, %rdx\n"
	"  mov %rsp, %rcx\n"
	"  call pp_agent_record\n"
	"  mov 64(%rsp), %rdi\n"
	"  mov 72(%rsp), %rsi\n"
	"  mov 80(%rsp), %rdx\n"
	"  mov 88(%rsp), %rcx\n"
	"  mov 96(%rsp), %r8\n"
	"  add $104, %rsp\n" CFI(".cfi_adjust_cfa_offset -104")
	"  test %eax, %eax\n"
	"  jz pp_agent_sampled_alloc\n" /* the kernel path, r8 = the thread slot */
	"  mov %rcx, %rax\n"
	"  ret\n" CFI(".cfi_endproc")
	".size pp_agent_sample, .-pp_agent_sample\n"
	".p2align 4\n"
	".globl pp_agent_store\n"
	".hidden pp_agent_store\n"
	".type pp_agent_store,@function\n"
	"pp_agent_store:\n" CFI(".cfi_startproc")
	"  mov %rsi, (%rdi)\n"
	"  int3\n" CFI(".cfi_endproc")
	".size pp_agent_store, .-pp_agent_store\n");
/* clang-format on */

typedef void *(*fn1_t)(uint64_t, uint64_t, uint64_t);
typedef void (*free_t)(void *, uint64_t, uint64_t);
typedef int (*pma_t)(void **, uint64_t, uint64_t);

#if PRELOAD
/* Where each entry point forwards: a resolver until the first call (or
 * the constructor) finds the next definition (see the end of the file). */
static uint64_t so_real[PP_AG_NFN];
#define REAL(i) (so_real[(i)])
/* Dormant: forward, touch nothing else. */
static uint8_t so_pass[PP_AG_NFN];
/* Dormant, or an operator new/delete whose definition calls malloc/free
 * (libstdc++, libc++): forward, touch nothing else. */
#define DORMANT(idx) unlikely((__atomic_load_n(&D.enabled, __ATOMIC_RELAXED) == 0) | so_pass[(idx)])
#else
#define REAL(i) (D.real[(i)])
#define DORMANT(idx) 0
#endif

static inline uint64_t hash64(uint64_t x)
{
	return x * 0x9e3779b97f4a7c15ull;
}

static uint64_t rng_next(struct pp_agent_thread *t)
{
	uint64_t x = t->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	t->rng = x;
	return x;
}

static int64_t draw(struct pp_agent_thread *t)
{
	uint64_t r = D.sample_rate, v;

	if (r <= 1)
		return 0;
	v = D.exp_table[(rng_next(t) >> 20) & (PP_AGENT_EXP_TABLE - 1)];
	v = (v * r) >> PP_AGENT_EXP_SHIFT;
	return v ? (int64_t)v : 1;
}

static void ring_note(uint64_t idx, uint64_t sp);

static __attribute__((noinline)) struct pp_agent_thread *tstate_slow(uint64_t tp, uint64_t h)
{
	const uint64_t mask = (1u << PP_AGENT_THREAD_BITS) - 1;

	for (unsigned i = 0; i < 16; i++) {
		struct pp_agent_thread *t = &D.threads[(h + i) & mask];
		uint64_t k = __atomic_load_n(&t->key, __ATOMIC_ACQUIRE), zero = 0;

		if (k == tp)
			return t;
		if (k)
			continue;
		if (__atomic_compare_exchange_n(&t->key, &zero, tp, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			t->rng = hash64(tp ^ D.seed) | 1;
			t->left = draw(t);
			if (PRELOAD && tp == D.main_tp && D.main_hi) {
				t->stack_lo = D.main_lo;
				__atomic_store_n(&t->stack_hi, D.main_hi, __ATOMIC_RELEASE);
			}
			if (PRELOAD)
				ring_note((uint64_t)(t - D.threads),
					  (uint64_t)__builtin_frame_address(0));
			return t;
		}
		if (zero == tp)
			return t;
	}
	if (!D.overflow.rng)
		D.overflow.rng = D.seed | 1;
	return &D.overflow;
}

static inline struct pp_agent_thread *tstate(void)
{
	uint64_t tp, h;
	struct pp_agent_thread *t;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	h = hash64(tp) >> (64 - PP_AGENT_THREAD_BITS);
	t = &D.threads[h];
	if (likely(t->key == tp))
		return t;
	return tstate_slow(tp, h);
}

static inline uint16_t *filter_of(uint64_t p)
{
	return &D.filter[hash64(p) >> (64 - PP_AGENT_FILTER_BITS)];
}

/* Record a sampled address and which way its ALLOC went (ring: 1, the
 * kernel path: 0); 0 when the set is full (sample dropped). */
static int set_add(uint64_t p, uint8_t ring)
{
	const uint64_t mask = (1u << PP_AGENT_SET_BITS) - 1;
	uint64_t h = hash64(p) >> (64 - PP_AGENT_SET_BITS);

	for (unsigned i = 0; i < PP_AGENT_SET_PROBES; i++) {
		uint64_t *s = &D.set[(h + i) & mask];
		uint64_t v = __atomic_load_n(s, __ATOMIC_RELAXED);

		if (v > 1)
			continue;
		if (__atomic_compare_exchange_n(s, &v, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			/* after the claim: no other thread frees p before the
			 * wrapper returned it */
			D.set_ring[(h + i) & mask] = ring;
			__atomic_fetch_add(filter_of(p), 1, __ATOMIC_RELEASE);
			return 1;
		}
	}
	__atomic_fetch_add(&D.set_full, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Remove p if it was sampled: 0 when it was not, 1 when its ALLOC took
 * the kernel path, 2 when it went into the ring. */
static int set_del(uint64_t p)
{
	const uint64_t mask = (1u << PP_AGENT_SET_BITS) - 1;
	uint64_t h = hash64(p) >> (64 - PP_AGENT_SET_BITS);

	for (unsigned i = 0; i < PP_AGENT_SET_PROBES; i++) {
		uint64_t *s = &D.set[(h + i) & mask];
		uint64_t v = __atomic_load_n(s, __ATOMIC_ACQUIRE);

		if (v == 0)
			return 0;
		if (v != p)
			continue;
		/* read before the entry is released (it may be reused at once) */
		uint8_t ring = D.set_ring[(h + i) & mask];
		if (__atomic_compare_exchange_n(s, &v, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			__atomic_fetch_sub(filter_of(p), 1, __ATOMIC_RELEASE);
			return 1 + (ring != 0);
		}
		return 0; /* freed concurrently (a double free in the target) */
	}
	return 0;
}

/* ------------------------------------------------------------- the ring */

#if PRELOAD
static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

static inline uint64_t *ring_words(void)
{
	return (uint64_t *)(__atomic_load_n(&D.ring_map, __ATOMIC_ACQUIRE) & ~4095ull);
}

static inline uint64_t ring_bytes(void)
{
	return 1ull << (__atomic_load_n(&D.ring_map, __ATOMIC_ACQUIRE) & 63);
}

/* Map the ring of ring_req bytes once, on the first sample that needs it:
 * 0 when there is none (podprof asked for none, or no memory). */
static __attribute__((noinline)) int ring_map(void)
{
	uint64_t req = __atomic_load_n(&D.ring_req, __ATOMIC_RELAXED), zero = 0, v;
	unsigned lg = 0;
	long p;

	if (__atomic_load_n(&D.ring_map, __ATOMIC_ACQUIRE))
		return 1;
	if (req < 65536 || req > (1ull << 30) || (req & (req - 1)))
		return 0;
	while ((1ull << lg) < req)
		lg++;
	p = sys6(9 /* mmap */, 0, (long)req, 3 /* PROT_READ|PROT_WRITE */,
		 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
	if (p < 0 && p > -4096)
		return 0;
	v = (uint64_t)p | lg;
	if (!__atomic_compare_exchange_n(&D.ring_map, &zero, v, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		sys6(11 /* munmap */, p, (long)req, 0, 0, 0, 0); /* another thread's won */
	return 1;
}

/* While dormant, once podprof stopped: the ring's pages go back to the
 * kernel (a late writer only faults a zero page in). */
static __attribute__((noinline)) void ring_release(void)
{
	uint64_t one = 1, m;

	if (__atomic_load_n(&D.writers, __ATOMIC_SEQ_CST))
		return; /* a record is being written: the next call */
	if (!__atomic_compare_exchange_n(&D.release, &one, 0, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED))
		return;
	m = __atomic_load_n(&D.ring_map, __ATOMIC_ACQUIRE);
	if (m)
		sys6(28 /* madvise */, (long)(m & ~4095ull), (long)(1ull << (m & 63)),
		     4 /* MADV_DONTNEED */, 0, 0, 0);
}
/* A fork child podprof has not adopted (yet): its copy of the ring is not
 * read. One getpid per sampled allocation, not per call. */
static int foreign(void)
{
	uint64_t owner = __atomic_load_n(&D.owner_pid, __ATOMIC_RELAXED);

	return owner && (uint64_t)sys6(39 /* getpid */, 0, 0, 0, 0, 0, 0) != owner;
}
#define DORMANT_WORK()                                                       \
	do {                                                                 \
		if (unlikely(__atomic_load_n(&D.release, __ATOMIC_RELAXED))) \
			ring_release();                                      \
	} while (0)
#else
#define ring_words() (D.ring)
#define ring_bytes() PP_AGENT_RING_SIZE
#define ring_map() 1
#define foreign() 0
#define DORMANT_WORK() \
	do {           \
	} while (0)
#endif

static inline void ring_put(uint64_t pos, uint64_t v)
{
	ring_words()[(pos / 8) & (ring_bytes() / 8 - 1)] = v;
}

/* The record at pos is complete: its first word says where it is (+ 1, so
 * that the zero-filled ring holds no record at 0). */
static inline void ring_commit(uint64_t pos)
{
	__atomic_store_n(&ring_words()[(pos / 8) & (ring_bytes() / 8 - 1)], pos + 1,
			 __ATOMIC_RELEASE);
}

/* Claim len bytes and the room of the block's FREE record, if the ring has
 * them beyond what podprof has not read yet. */
static int ring_claim(uint64_t len)
{
	uint64_t c = __atomic_load_n(&D.ring_claimed, __ATOMIC_RELAXED);

	if (!ring_map())
		return 0;
	for (;;) {
		uint64_t tail = __atomic_load_n(&D.ring_tail, __ATOMIC_ACQUIRE);

		if (c + len + PP_AGENT_FREE_REC - tail > ring_bytes())
			return 0;
		if (__atomic_compare_exchange_n(&D.ring_claimed, &c, c + len + PP_AGENT_FREE_REC, 1,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return 1;
	}
}

/* Preloaded agent: a thread took slot idx; sp is on its stack. Dropped
 * when the ring is off or full (its first sample then goes without stack). */
static void ring_note_in(uint64_t idx, uint64_t sp)
{
	uint64_t c = __atomic_load_n(&D.ring_claimed, __ATOMIC_RELAXED), pos;

	if (!__atomic_load_n(&D.ring_on, __ATOMIC_RELAXED) || foreign() || !ring_map())
		return;
	for (;;) {
		uint64_t tail = __atomic_load_n(&D.ring_tail, __ATOMIC_ACQUIRE);

		if (c + PP_AGENT_THREAD_REC - tail > ring_bytes())
			return;
		if (__atomic_compare_exchange_n(&D.ring_claimed, &c, c + PP_AGENT_THREAD_REC, 1,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	pos = __atomic_fetch_add(&D.ring_head, PP_AGENT_THREAD_REC, __ATOMIC_RELAXED);
	ring_put(pos + 8, PP_AGENT_REC_THREAD | PP_AGENT_THREAD_REC << 32);
	ring_put(pos + 16, idx);
	ring_put(pos + 24, sp);
	ring_commit(pos);
	__atomic_fetch_add(&D.notes, 1, __ATOMIC_RELAXED);
}

/* A FREE of a block whose ALLOC is in the ring: its room was set aside. */
static void ring_free_in(uint64_t p)
{
	uint64_t pos;

	if (PRELOAD && (!__atomic_load_n(&D.ring_on, __ATOMIC_RELAXED) || foreign())) {
		/* nobody reads it (podprof stopped, or a fork child's copy):
		 * give the room back rather than touch the ring's pages */
		__atomic_fetch_sub(&D.ring_claimed, PP_AGENT_FREE_REC, __ATOMIC_RELAXED);
		return;
	}
	pos = __atomic_fetch_add(&D.ring_head, PP_AGENT_FREE_REC, __ATOMIC_RELAXED);

	ring_put(pos + 8, PP_AGENT_REC_FREE | PP_AGENT_FREE_REC << 32);
	ring_put(pos + 16, p);
	ring_commit(pos);
}

/*
 * From pp_agent_sample: record a sampled allocation in the ring; 1 when
 * done (or dropped), 0 to take the kernel path. The stack is copied from
 * the caller's stack pointer up to at most the end of the thread's stack
 * mapping as podprof found it, so the copy never leaves mapped memory.
 */
static int record_in(uint64_t p, uint64_t size, struct pp_agent_thread *t, const uint64_t *regs)
{
	uint64_t sp = regs[PP_AGENT_SP], hi, n, len, pos;
	const uint64_t *src;

	if (!__atomic_load_n(&D.ring_on, __ATOMIC_RELAXED) || t == &D.overflow)
		goto kernel;
	if (foreign()) {
		__atomic_fetch_add(&D.foreign, 1, __ATOMIC_RELAXED);
		return 1; /* not adopted: dropped, and so is its FREE */
	}
	hi = __atomic_load_n(&t->stack_hi, __ATOMIC_ACQUIRE);
	if (!hi || sp < __atomic_load_n(&t->stack_lo, __ATOMIC_RELAXED) || sp >= hi) {
		__atomic_fetch_add(&D.ring_nostack, 1, __ATOMIC_RELAXED);
		if (!PRELOAD)
			goto kernel;
		/* No kernel path: ask for the range, and copy what is mapped
		 * for sure, the rest of the page holding sp (the caller's
		 * frames start there; a stack pointer's page is mapped). */
		ring_note((uint64_t)(t - D.threads), sp);
		hi = (sp | 4095) + 1;
	}
	n = __atomic_load_n(&D.ring_copy, __ATOMIC_RELAXED);
	if (n > PP_AGENT_MAX_COPY)
		n = PP_AGENT_MAX_COPY;
	if (n > hi - sp)
		n = hi - sp;
	n &= ~7ull;
	len = sizeof(struct pp_agent_rec_alloc) + n;
	if (!ring_claim(len)) {
		__atomic_fetch_add(&D.ring_full, 1, __ATOMIC_RELAXED);
		goto kernel;
	}
	pos = __atomic_fetch_add(&D.ring_head, len, __ATOMIC_RELAXED);
	/* after the reservation: a FREE of p is reserved after its ALLOC */
	if (!set_add(p, 1)) {
		__atomic_fetch_sub(&D.ring_claimed, PP_AGENT_FREE_REC, __ATOMIC_RELAXED);
		ring_put(pos + 8, PP_AGENT_REC_PAD | len << 32);
		ring_commit(pos);
		return 1;
	}
	ring_put(pos + 8, PP_AGENT_REC_ALLOC | len << 32);
	ring_put(pos + 16, p);
	ring_put(pos + 24, size);
	ring_put(pos + 32, (uint64_t)(t - D.threads) | n << 32);
	for (unsigned i = 0; i < PP_AGENT_NREGS; i++)
		ring_put(pos + 40 + 8 * i, regs[i]);
	src = (const uint64_t *)sp;
	pos += sizeof(struct pp_agent_rec_alloc);
	for (uint64_t i = 0; i < n / 8; i++)
		ring_put(pos + 8 * i, src[i]);
	ring_commit(pos - sizeof(struct pp_agent_rec_alloc));
	return 1;
kernel:
	if (PRELOAD)
		return 1; /* dropped, counted; its FREE is not recorded either */
	return set_add(p, 0) ? 0 : 1;
}

/*
 * The preloaded agent counts the threads writing into its ring: once
 * podprof stopped (ring_on 0, then release), the ring's pages are given
 * back only when none is in the middle of a record, and a writer that
 * comes later sees ring_on 0 and writes nothing (both sides sequentially
 * consistent).
 */
static inline void writer_in(void)
{
	if (PRELOAD)
		__atomic_add_fetch(&D.writers, 1, __ATOMIC_SEQ_CST);
}

static inline void writer_out(void)
{
	if (PRELOAD)
		__atomic_sub_fetch(&D.writers, 1, __ATOMIC_SEQ_CST);
}

static void ring_note(uint64_t idx, uint64_t sp)
{
	writer_in();
	ring_note_in(idx, sp);
	writer_out();
}

static void ring_free(uint64_t p)
{
	writer_in();
	ring_free_in(p);
	writer_out();
}

int pp_agent_record(uint64_t p, uint64_t size, struct pp_agent_thread *t, const uint64_t *regs)
{
	int r;

	writer_in();
	r = record_in(p, size, t, regs);
	writer_out();
	return r;
}

static __attribute__((noinline)) void freed_slow(uint64_t p)
{
	int r = set_del(p);

	if (r == 2)
		ring_free(p);
	else if (r == 1)
		pp_agent_sampled_free((void *)p);
}

static inline void on_free(uint64_t p)
{
	if (unlikely(p && __atomic_load_n(filter_of(p), __ATOMIC_ACQUIRE)))
		freed_slow(p);
}

/* The sampled path of every allocating wrapper: account, call the real
 * function, record and notify (tail jump). */
static __attribute__((noinline)) void *sampled_ptr(struct pp_agent_thread *t, uint64_t size,
						   void *p)
{
	uint64_t w = (uint64_t)(-t->left) + size; /* bytes since the last sample */

	t->left = draw(t);
	if (!p)
		return p;
	return pp_agent_sample(p, size, w, p, t);
}

static inline int count(struct pp_agent_thread *t, uint64_t size)
{
	t->calls++;
	t->bytes += size;
	t->left -= (int64_t)size;
	return t->left < 0;
}

/* The calling thread's slot when it is in its home position (the common
 * case), else NULL: the fast paths below then need no callee-saved
 * register and no stack frame. */
static inline struct pp_agent_thread *tfast(void)
{
	uint64_t tp;
	struct pp_agent_thread *t;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	t = &D.threads[hash64(tp) >> (64 - PP_AGENT_THREAD_BITS)];
	return likely(t->key == tp) ? t : NULL;
}

/* Everything but the fast path of the allocating wrappers: counting when
 * tfast() missed, the real call, and the sampled path (tail jumps only,
 * see the top of this file). */
static __attribute__((noinline)) void *alloc_slow(uint64_t a, uint64_t b, uint64_t c, uint64_t size,
						  unsigned idx, int counted)
{
	struct pp_agent_thread *t = tstate();

	if (!counted && !count(t, size))
		return ((fn1_t)REAL(idx))(a, b, c);
	return sampled_ptr(t, size, ((fn1_t)REAL(idx))(a, b, c));
}

#define ALLOC_WRAP(name, idx, size_arg)                               \
	HIDDEN void *name(uint64_t a, uint64_t b, uint64_t c)         \
	{                                                             \
		struct pp_agent_thread *t;                            \
		if (DORMANT(idx)) {                                   \
			DORMANT_WORK();                               \
			return ((fn1_t)REAL(idx))(a, b, c);           \
		}                                                     \
		t = tfast();                                          \
		if (likely(t)) {                                      \
			if (likely(!count(t, size_arg)))              \
				return ((fn1_t)REAL(idx))(a, b, c);   \
			return alloc_slow(a, b, c, size_arg, idx, 1); \
		}                                                     \
		return alloc_slow(a, b, c, size_arg, idx, 0);         \
	}
/* operator new, malloc, valloc, pvalloc: size first */
#define ALLOC1(name, idx) ALLOC_WRAP(name, idx, a)
ALLOC1(w_malloc, PP_AG_MALLOC)
ALLOC1(w_valloc, PP_AG_VALLOC)
ALLOC1(w_pvalloc, PP_AG_PVALLOC)
ALLOC1(w_new, PP_AG_NEW)
ALLOC1(w_new_a, PP_AG_NEW_A)
ALLOC1(w_new_nt, PP_AG_NEW_NT)
ALLOC1(w_new_a_nt, PP_AG_NEW_A_NT)
ALLOC1(w_new_al, PP_AG_NEW_AL)
ALLOC1(w_new_a_al, PP_AG_NEW_A_AL)
ALLOC1(w_new_al_nt, PP_AG_NEW_AL_NT)
ALLOC1(w_new_a_al_nt, PP_AG_NEW_A_AL_NT)

/* aligned_alloc, memalign: (alignment, size) */
#define ALLOC2(name, idx) ALLOC_WRAP(name, idx, b)
ALLOC2(w_aligned_alloc, PP_AG_ALIGNED_ALLOC)
ALLOC2(w_memalign, PP_AG_MEMALIGN)

HIDDEN void *w_calloc(uint64_t n, uint64_t m, uint64_t c)
{
	struct pp_agent_thread *t;
	uint64_t size;

	if (DORMANT(PP_AG_CALLOC))
		return ((fn1_t)REAL(PP_AG_CALLOC))(n, m, c);
	t = tstate();
	if (__builtin_mul_overflow(n, m, &size))
		size = 0; /* the real calloc fails it */
	if (likely(!count(t, size)))
		return ((fn1_t)REAL(PP_AG_CALLOC))(n, m, c);
	return sampled_ptr(t, size, ((fn1_t)REAL(PP_AG_CALLOC))(n, m, c));
}

/* realloc of a non-NULL pointer counts as a free of it (as on the uprobe
 * path), realloc(p, 0) as a free only. */
HIDDEN void *w_realloc(uint64_t p, uint64_t n, uint64_t c)
{
	struct pp_agent_thread *t;

	if (DORMANT(PP_AG_REALLOC)) {
		on_free(p); /* a block sampled before podprof turned it off */
		return ((fn1_t)REAL(PP_AG_REALLOC))(p, n, c);
	}
	t = tstate();
	if (p) {
		t->frees++;
		on_free(p);
		if (!n)
			return ((fn1_t)REAL(PP_AG_REALLOC))(p, n, c);
	}
	if (likely(!count(t, n)))
		return ((fn1_t)REAL(PP_AG_REALLOC))(p, n, c);
	return sampled_ptr(t, n, ((fn1_t)REAL(PP_AG_REALLOC))(p, n, c));
}

HIDDEN void *w_reallocarray(uint64_t p, uint64_t n, uint64_t m)
{
	struct pp_agent_thread *t;
	uint64_t size;

	if (__builtin_mul_overflow(n, m, &size))
		return ((fn1_t)REAL(PP_AG_REALLOCARRAY))(p, n, m); /* fails, p untouched */
	if (DORMANT(PP_AG_REALLOCARRAY)) {
		on_free(p);
		return ((fn1_t)REAL(PP_AG_REALLOCARRAY))(p, n, m);
	}
	t = tstate();
	if (p) {
		t->frees++;
		on_free(p);
		if (!size)
			return ((fn1_t)REAL(PP_AG_REALLOCARRAY))(p, n, m);
	}
	if (likely(!count(t, size)))
		return ((fn1_t)REAL(PP_AG_REALLOCARRAY))(p, n, m);
	return sampled_ptr(t, size, ((fn1_t)REAL(PP_AG_REALLOCARRAY))(p, n, m));
}

static __attribute__((noinline)) int sampled_pma(struct pp_agent_thread *t, uint64_t size,
						 void **memptr, int r)
{
	uint64_t w = (uint64_t)(-t->left) + size;

	t->left = draw(t);
	if (r)
		return r;
	return pp_agent_sample_int(*memptr, size, w, (void *)0, t);
}

HIDDEN int w_posix_memalign(void **memptr, uint64_t al, uint64_t size)
{
	struct pp_agent_thread *t;

	if (DORMANT(PP_AG_POSIX_MEMALIGN))
		return ((pma_t)REAL(PP_AG_POSIX_MEMALIGN))(memptr, al, size);
	t = tstate();
	if (likely(!count(t, size)))
		return ((pma_t)REAL(PP_AG_POSIX_MEMALIGN))(memptr, al, size);
	return sampled_pma(t, size, memptr, ((pma_t)REAL(PP_AG_POSIX_MEMALIGN))(memptr, al, size));
}

/* Frees are counted in the calling thread's slot (the same line the
 * allocation fast path uses); a thread away from its home slot counts
 * out of line. */
static __attribute__((noinline)) void free_count_slow(void)
{
	tstate()->frees++;
}

#define FREE1(name, idx)                                     \
	HIDDEN void name(void *p, uint64_t b, uint64_t c)    \
	{                                                    \
		if (DORMANT(idx)) {                          \
			DORMANT_WORK();                      \
			on_free((uint64_t)p);                \
		} else if (likely(p)) {                      \
			struct pp_agent_thread *t = tfast(); \
			if (likely(t))                       \
				t->frees++;                  \
			else                                 \
				free_count_slow();           \
			on_free((uint64_t)p);                \
		}                                            \
		((free_t)REAL(idx))(p, b, c);                \
	}
FREE1(w_free, PP_AG_FREE)
FREE1(w_free_sized, PP_AG_FREE_SIZED)
FREE1(w_free_aligned_sized, PP_AG_FREE_ALIGNED_SIZED)
FREE1(w_del, PP_AG_DEL)
FREE1(w_del_a, PP_AG_DEL_A)
FREE1(w_del_s, PP_AG_DEL_S)
FREE1(w_del_a_s, PP_AG_DEL_A_S)
FREE1(w_del_al, PP_AG_DEL_AL)
FREE1(w_del_a_al, PP_AG_DEL_A_AL)
FREE1(w_del_s_al, PP_AG_DEL_S_AL)
FREE1(w_del_a_s_al, PP_AG_DEL_A_S_AL)
FREE1(w_del_nt, PP_AG_DEL_NT)
FREE1(w_del_a_nt, PP_AG_DEL_A_NT)

#define OFF(sym) ((uint64_t)(uintptr_t) & (sym))
HIDDEN struct pp_agent_hdr pp_agent_hdr
	__attribute__((section(".agenthdr"), used, aligned(64))) = {
	.magic = PP_AGENT_MAGIC,
	.version = PP_AGENT_VERSION,
	.nfn = PP_AG_NFN,
#if PRELOAD
	.data_off = OFF(D),
#else
	.image_size = OFF(__image_end),
	.total_size = OFF(__total_end),
	.data_off = OFF(__data_start),
#endif
	.notify_alloc_off = OFF(pp_agent_sampled_alloc),
	.notify_free_off = OFF(pp_agent_sampled_free),
	.store_off = OFF(pp_agent_store),
	.wrap_off = {
		[PP_AG_MALLOC] = OFF(w_malloc),
		[PP_AG_CALLOC] = OFF(w_calloc),
		[PP_AG_REALLOC] = OFF(w_realloc),
		[PP_AG_REALLOCARRAY] = OFF(w_reallocarray),
		[PP_AG_FREE] = OFF(w_free),
		[PP_AG_POSIX_MEMALIGN] = OFF(w_posix_memalign),
		[PP_AG_ALIGNED_ALLOC] = OFF(w_aligned_alloc),
		[PP_AG_MEMALIGN] = OFF(w_memalign),
		[PP_AG_VALLOC] = OFF(w_valloc),
		[PP_AG_PVALLOC] = OFF(w_pvalloc),
		[PP_AG_FREE_SIZED] = OFF(w_free_sized),
		[PP_AG_FREE_ALIGNED_SIZED] = OFF(w_free_aligned_sized),
		[PP_AG_NEW] = OFF(w_new),
		[PP_AG_NEW_A] = OFF(w_new_a),
		[PP_AG_NEW_NT] = OFF(w_new_nt),
		[PP_AG_NEW_A_NT] = OFF(w_new_a_nt),
		[PP_AG_NEW_AL] = OFF(w_new_al),
		[PP_AG_NEW_A_AL] = OFF(w_new_a_al),
		[PP_AG_NEW_AL_NT] = OFF(w_new_al_nt),
		[PP_AG_NEW_A_AL_NT] = OFF(w_new_a_al_nt),
		[PP_AG_DEL] = OFF(w_del),
		[PP_AG_DEL_A] = OFF(w_del_a),
		[PP_AG_DEL_S] = OFF(w_del_s),
		[PP_AG_DEL_A_S] = OFF(w_del_a_s),
		[PP_AG_DEL_AL] = OFF(w_del_al),
		[PP_AG_DEL_A_AL] = OFF(w_del_a_al),
		[PP_AG_DEL_S_AL] = OFF(w_del_s_al),
		[PP_AG_DEL_A_S_AL] = OFF(w_del_a_s_al),
		[PP_AG_DEL_NT] = OFF(w_del_nt),
		[PP_AG_DEL_A_NT] = OFF(w_del_a_nt),
	},
};

#if PRELOAD
/* ------------------------------------------------- the preloaded agent */

/* The loader's list of loaded objects (glibc's struct link_map and musl's
 * struct dso begin alike), reached through its debugger interface. */
struct lmap {
	uint64_t addr;
	const char *name;
	const uint64_t *dyn;
	struct lmap *next, *prev;
};
struct rdebug {
	int version;
	struct lmap *map;
};
extern struct rdebug _r_debug __attribute__((weak)); /* glibc */
extern struct rdebug *_dl_debug_addr __attribute__((weak)); /* musl */
extern const uint64_t _DYNAMIC[] HIDDEN;

struct esym {
	uint32_t name;
	uint8_t info, other;
	uint16_t shndx;
	uint64_t value, size;
};

static const char *const fn_names[PP_AG_NFN] = PP_AGENT_FN_NAMES;

static int str_eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static int str_has(const char *s, const char *w)
{
	for (; s && *s; s++) {
		const char *a = s, *b = w;

		while (*b && *a == *b)
			a++, b++;
		if (!*b)
			return 1;
	}
	return 0;
}

/* glibc stores the dynamic section's pointers relocated, musl does not. */
static uint64_t dyn_ptr(const struct lmap *m, uint64_t v)
{
	return v < m->addr ? v + m->addr : v;
}

static int sym_ok(const struct esym *s, const uint16_t *versym, uint64_t i, const char *strtab,
		  const char *name)
{
	unsigned type = s->info & 15;

	return s->shndx && s->value && (type == 2 /* FUNC */ || type == 10 /* IFUNC */) &&
	       (s->info >> 4) != 0 /* not LOCAL */ && !(versym && (versym[i] & 0x8000)) &&
	       str_eq(strtab + s->name, name);
}

/* The address name is defined at in object m, or 0. */
static uint64_t lookup(const struct lmap *m, const char *name)
{
	const struct esym *symtab = 0;
	const char *strtab = 0;
	const uint32_t *gnu = 0, *sysv = 0;
	const uint16_t *versym = 0;
	const struct esym *s = 0;

	if (!m->dyn)
		return 0;
	for (const uint64_t *d = m->dyn; d[0]; d += 2) {
		if (d[0] == 6)
			symtab = (const void *)dyn_ptr(m, d[1]);
		else if (d[0] == 5)
			strtab = (const void *)dyn_ptr(m, d[1]);
		else if (d[0] == 0x6ffffef5)
			gnu = (const void *)dyn_ptr(m, d[1]);
		else if (d[0] == 4)
			sysv = (const void *)dyn_ptr(m, d[1]);
		else if (d[0] == 0x6ffffff0)
			versym = (const void *)dyn_ptr(m, d[1]);
	}
	if (!symtab || !strtab)
		return 0;
	if (gnu) {
		uint32_t h = 5381, nb = gnu[0], off = gnu[1], nbloom = gnu[2], i;
		const uint32_t *buckets = gnu + 4 + 2 * nbloom, *chain;

		for (const char *c = name; *c; c++)
			h = h * 33 + (uint8_t)*c;
		if (!nb)
			return 0;
		chain = buckets + nb - off;
		for (i = buckets[h % nb]; i >= off && i; i++) {
			if ((chain[i] | 1) == (h | 1) &&
			    sym_ok(&symtab[i], versym, i, strtab, name)) {
				s = &symtab[i];
				break;
			}
			if (chain[i] & 1)
				break;
		}
	} else if (sysv) {
		uint32_t h = 0, nb = sysv[0];
		const uint32_t *chain = sysv + 2 + nb;

		for (const char *c = name; *c; c++) {
			h = (h << 4) + (uint8_t)*c;
			h ^= (h >> 24) & 0xf0;
		}
		h &= 0x0fffffff;
		for (uint32_t i = nb ? sysv[2 + h % nb] : 0; i; i = chain[i])
			if (sym_ok(&symtab[i], versym, i, strtab, name)) {
				s = &symtab[i];
				break;
			}
	}
	if (!s)
		return 0;
	if ((s->info & 15) == 10)
		return ((uint64_t(*)(void))(m->addr + s->value))();
	return m->addr + s->value;
}

/* The definition of fn the loader would bind to if this object did not
 * define it: the first in the list after this object. */
static uint64_t resolve(unsigned fn, int *pass)
{
	struct rdebug *r = &_r_debug ? &_r_debug : (&_dl_debug_addr ? _dl_debug_addr : 0);
	struct lmap *m = r ? r->map : 0, *self = 0;

	for (struct lmap *x = m; x; x = x->next)
		if (x->dyn == _DYNAMIC)
			self = x;
	for (m = self ? self->next : m; m; m = m->next) {
		uint64_t a = m->dyn == _DYNAMIC ? 0 : lookup(m, fn_names[fn]);

		if (a) {
			*pass = fn >= PP_AG_FIRST_CXX &&
				(str_has(m->name, "libstdc++") || str_has(m->name, "libc++"));
			return a;
		}
	}
	return 0;
}

typedef uint64_t (*gen_t)(uint64_t, uint64_t, uint64_t);

/* No definition anywhere (a name this C library lacks, called through a
 * weak reference): the nearest one that has the same meaning. */
static uint64_t fallback(unsigned fn, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t p = 0;

	switch (fn) {
	case PP_AG_FREE_SIZED:
	case PP_AG_FREE_ALIGNED_SIZED:
	case PP_AG_DEL ... PP_AG_DEL_A_NT:
		return ((gen_t)REAL(PP_AG_FREE))(a, 0, 0);
	case PP_AG_NEW:
	case PP_AG_NEW_A:
	case PP_AG_NEW_NT:
	case PP_AG_NEW_A_NT:
		return ((gen_t)REAL(PP_AG_MALLOC))(a ? a : 1, 0, 0);
	case PP_AG_NEW_AL ... PP_AG_NEW_A_AL_NT:
		return ((gen_t)REAL(PP_AG_POSIX_MEMALIGN))((uint64_t)&p, b, a ? a : 1) ? 0 : p;
	case PP_AG_VALLOC:
	case PP_AG_PVALLOC:
		return ((gen_t)REAL(PP_AG_POSIX_MEMALIGN))(
			       (uint64_t)&p, 4096, fn == PP_AG_PVALLOC ? (a + 4095) & ~4095ull : a)
			       ? 0
			       : p;
	case PP_AG_MEMALIGN:
	case PP_AG_ALIGNED_ALLOC:
		return ((gen_t)REAL(PP_AG_POSIX_MEMALIGN))((uint64_t)&p, a < 8 ? 8 : a, b) ? 0 : p;
	case PP_AG_REALLOCARRAY:
		if (__builtin_mul_overflow(b, c, &p))
			return 0;
		return ((gen_t)REAL(PP_AG_REALLOC))(a, p, 0);
	default:
		return 0;
	}
}

static uint64_t resolve_call(unsigned fn, uint64_t a, uint64_t b, uint64_t c)
{
	int pass = 0;
	uint64_t f = resolve(fn, &pass);

	if (!f)
		return fallback(fn, a, b, c);
	so_pass[fn] = (uint8_t)pass;
	__atomic_store_n(&so_real[fn], f, __ATOMIC_RELEASE);
	return ((gen_t)f)(a, b, c);
}

/* Until resolved, each entry point forwards through its own stub. */
#define STUB(i)                                                      \
	static uint64_t stub_##i(uint64_t a, uint64_t b, uint64_t c) \
	{                                                            \
		return resolve_call(i, a, b, c);                     \
	}
STUB(0)
STUB(1)
STUB(2)
STUB(3)
STUB(4)
STUB(5)
STUB(6)
STUB(7)
STUB(8)
STUB(9)
STUB(10)
STUB(11)
STUB(12)
STUB(13)
STUB(14)
STUB(15)
STUB(16)
STUB(17)
STUB(18)
STUB(19)
STUB(20)
STUB(21)
STUB(22)
STUB(23)
STUB(24)
STUB(25)
STUB(26)
STUB(27)
STUB(28)
STUB(29)
_Static_assert(PP_AG_NFN == 30, "one stub per entry point");
#define S(i) [i] = (uint64_t)(uintptr_t)stub_##i
static uint64_t so_real[PP_AG_NFN] = {
	S(0),  S(1),  S(2),  S(3),  S(4),  S(5),  S(6),	 S(7),	S(8),  S(9),
	S(10), S(11), S(12), S(13), S(14), S(15), S(16), S(17), S(18), S(19),
	S(20), S(21), S(22), S(23), S(24), S(25), S(26), S(27), S(28), S(29),
};

/* At load, before main: find every definition there is now (later calls
 * of a stub happen outside the loader: a name defined by a library
 * dlopen()ed later is found at its first call). */
__attribute__((constructor)) static void pp_agent_init(void)
{
	uint64_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	D.main_tp = tp; /* the main thread (constructors run on it) */
	D.main_sp = (uint64_t)__builtin_frame_address(0);
	for (unsigned i = 0; i < PP_AG_NFN; i++) {
		int pass = 0;
		uint64_t f = resolve(i, &pass);

		if (f) {
			so_pass[i] = (uint8_t)pass;
			__atomic_store_n(&so_real[i], f, __ATOMIC_RELEASE);
		}
	}
	__atomic_store_n(&D.preload, 1, __ATOMIC_RELEASE);
}

/* The names the loader binds: aliases of the wrappers. */
#define EXPORT(name, w) \
	__asm__(".globl " name "\n.type " name ",@function\n.set " name ", " w "\n");
EXPORT("malloc", "w_malloc")
EXPORT("calloc", "w_calloc")
EXPORT("realloc", "w_realloc")
EXPORT("reallocarray", "w_reallocarray")
EXPORT("free", "w_free")
EXPORT("posix_memalign", "w_posix_memalign")
EXPORT("aligned_alloc", "w_aligned_alloc")
EXPORT("memalign", "w_memalign")
EXPORT("valloc", "w_valloc")
EXPORT("pvalloc", "w_pvalloc")
EXPORT("free_sized", "w_free_sized")
EXPORT("free_aligned_sized", "w_free_aligned_sized")
EXPORT("_Znwm", "w_new")
EXPORT("_Znam", "w_new_a")
EXPORT("_ZnwmRKSt9nothrow_t", "w_new_nt")
EXPORT("_ZnamRKSt9nothrow_t", "w_new_a_nt")
EXPORT("_ZnwmSt11align_val_t", "w_new_al")
EXPORT("_ZnamSt11align_val_t", "w_new_a_al")
EXPORT("_ZnwmSt11align_val_tRKSt9nothrow_t", "w_new_al_nt")
EXPORT("_ZnamSt11align_val_tRKSt9nothrow_t", "w_new_a_al_nt")
EXPORT("_ZdlPv", "w_del")
EXPORT("_ZdaPv", "w_del_a")
EXPORT("_ZdlPvm", "w_del_s")
EXPORT("_ZdaPvm", "w_del_a_s")
EXPORT("_ZdlPvSt11align_val_t", "w_del_al")
EXPORT("_ZdaPvSt11align_val_t", "w_del_a_al")
EXPORT("_ZdlPvmSt11align_val_t", "w_del_s_al")
EXPORT("_ZdaPvmSt11align_val_t", "w_del_a_s_al")
EXPORT("_ZdlPvRKSt9nothrow_t", "w_del_nt")
EXPORT("_ZdaPvRKSt9nothrow_t", "w_del_a_nt")
#endif
