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
 */
#include <stddef.h>
#include <stdint.h>

#include "agent-abi.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

extern struct pp_agent_hdr pp_agent_hdr HIDDEN;
extern char __data_start[] HIDDEN, __image_end[] HIDDEN, __total_end[] HIDDEN;

HIDDEN struct pp_agent_data D __attribute__((aligned(64))); /* .bss: written by podprof */

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
__asm__(".text\n"
	".p2align 4\n"
	".globl pp_agent_sampled_alloc\n"
	".hidden pp_agent_sampled_alloc\n"
	".type pp_agent_sampled_alloc,@function\n"
	"pp_agent_sampled_alloc:\n"
	"  .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */
	"  push %rbp\n"
	"  pop %rbp\n"
	"  mov %rcx, %rax\n"
	"  ret\n"
	".size pp_agent_sampled_alloc, .-pp_agent_sampled_alloc\n"
	".p2align 4\n"
	".globl pp_agent_sampled_free\n"
	".hidden pp_agent_sampled_free\n"
	".type pp_agent_sampled_free,@function\n"
	"pp_agent_sampled_free:\n"
	"  .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */
	"  push %rbp\n"
	"  pop %rbp\n"
	"  ret\n"
	".size pp_agent_sampled_free, .-pp_agent_sampled_free\n"
	".p2align 4\n"
	".globl pp_agent_sample\n"
	".hidden pp_agent_sample\n"
	".type pp_agent_sample,@function\n"
	"pp_agent_sample:\n"
	".globl pp_agent_sample_int\n"
	".hidden pp_agent_sample_int\n"
	"pp_agent_sample_int:\n"
	"  sub $104, %rsp\n"
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
	"  add $104, %rsp\n"
	"  test %eax, %eax\n"
	"  jz pp_agent_sampled_alloc\n" /* the kernel path, r8 = the thread slot */
	"  mov %rcx, %rax\n"
	"  ret\n"
	".size pp_agent_sample, .-pp_agent_sample\n"
	".p2align 4\n"
	".globl pp_agent_store\n"
	".hidden pp_agent_store\n"
	".type pp_agent_store,@function\n"
	"pp_agent_store:\n"
	"  mov %rsi, (%rdi)\n"
	"  int3\n"
	".size pp_agent_store, .-pp_agent_store\n");

typedef void *(*fn1_t)(uint64_t, uint64_t, uint64_t);
typedef void (*free_t)(void *, uint64_t, uint64_t);
typedef int (*pma_t)(void **, uint64_t, uint64_t);

#define REAL(i) (D.real[(i)])

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

#define RING_WORDS (PP_AGENT_RING_SIZE / 8)

static inline void ring_put(uint64_t pos, uint64_t v)
{
	D.ring[(pos / 8) & (RING_WORDS - 1)] = v;
}

/* The record at pos is complete: its first word says where it is (+ 1, so
 * that the zero-filled ring holds no record at 0). */
static inline void ring_commit(uint64_t pos)
{
	__atomic_store_n(&D.ring[(pos / 8) & (RING_WORDS - 1)], pos + 1, __ATOMIC_RELEASE);
}

/* Claim len bytes and the room of the block's FREE record, if the ring has
 * them beyond what podprof has not read yet. */
static int ring_claim(uint64_t len)
{
	uint64_t c = __atomic_load_n(&D.ring_claimed, __ATOMIC_RELAXED);

	for (;;) {
		uint64_t tail = __atomic_load_n(&D.ring_tail, __ATOMIC_ACQUIRE);

		if (c + len + PP_AGENT_FREE_REC - tail > PP_AGENT_RING_SIZE)
			return 0;
		if (__atomic_compare_exchange_n(&D.ring_claimed, &c, c + len + PP_AGENT_FREE_REC, 1,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return 1;
	}
}

/* A FREE of a block whose ALLOC is in the ring: its room was set aside. */
static void ring_free(uint64_t p)
{
	uint64_t pos = __atomic_fetch_add(&D.ring_head, PP_AGENT_FREE_REC, __ATOMIC_RELAXED);

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
int pp_agent_record(uint64_t p, uint64_t size, struct pp_agent_thread *t, const uint64_t *regs)
{
	uint64_t sp = regs[PP_AGENT_SP], hi, n, len, pos;
	const uint64_t *src;

	if (!__atomic_load_n(&D.ring_on, __ATOMIC_RELAXED) || t == &D.overflow)
		goto kernel;
	hi = __atomic_load_n(&t->stack_hi, __ATOMIC_ACQUIRE);
	if (!hi || sp < __atomic_load_n(&t->stack_lo, __ATOMIC_RELAXED) || sp >= hi) {
		__atomic_fetch_add(&D.ring_nostack, 1, __ATOMIC_RELAXED);
		goto kernel;
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
	return set_add(p, 0) ? 0 : 1;
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
		struct pp_agent_thread *t = tfast();                  \
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
	struct pp_agent_thread *t = tstate();
	uint64_t size;

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
	struct pp_agent_thread *t = tstate();

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
	struct pp_agent_thread *t = tstate();

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
		if (likely(p)) {                             \
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
HIDDEN struct pp_agent_hdr pp_agent_hdr __attribute__((section(".agenthdr"), used)) = {
	.magic = PP_AGENT_MAGIC,
	.version = PP_AGENT_VERSION,
	.nfn = PP_AG_NFN,
	.image_size = OFF(__image_end),
	.total_size = OFF(__total_end),
	.data_off = OFF(__data_start),
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
