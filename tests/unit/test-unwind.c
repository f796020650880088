/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unwinder on this very process: snapshot the registers and copy the stack
 * the way perf does, then unwind the copy (the live stack has moved on by
 * then, as in a real sample).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "unwind/unwind.h"
#include "util/util.h"

#define COPY 32768

struct snap {
	struct pp_regs regs;
	uint8_t *stack;
	size_t len;
};

/* Registers in DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip. */
#define SNAP_REGS(r)                                                                            \
	__asm__ volatile("movq %%rax, 0(%0)\n\tmovq %%rdx, 8(%0)\n\tmovq %%rcx, 16(%0)\n\t"     \
			 "movq %%rbx, 24(%0)\n\tmovq %%rsi, 32(%0)\n\tmovq %%rdi, 40(%0)\n\t"   \
			 "movq %%rbp, 48(%0)\n\tmovq %%rsp, 56(%0)\n\tmovq %%r8, 64(%0)\n\t"    \
			 "movq %%r9, 72(%0)\n\tmovq %%r10, 80(%0)\n\tmovq %%r11, 88(%0)\n\t"    \
			 "movq %%r12, 96(%0)\n\tmovq %%r13, 104(%0)\n\tmovq %%r14, 112(%0)\n\t" \
			 "movq %%r15, 120(%0)\n\tleaq 0(%%rip), %%rax\n\tmovq %%rax, 128(%0)"   \
			 :                                                                      \
			 : "r"(r)                                                               \
			 : "rax", "memory")

static uint64_t stack_end_of(uint64_t sp)
{
	struct pp_maps maps;
	uint64_t end = 0;

	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	const struct pp_map *m = pp_maps__find(&maps, sp);
	if (m)
		end = m->end;
	pp_maps__free(&maps);
	return end;
}

static uintptr_t level_fn[3];

/* Copies this thread's own stack, red zones included: not for ASan's eyes. */
__attribute__((noinline, no_sanitize_address)) static void level2(struct snap *s)
{
	level_fn[2] = (uintptr_t)level2;
	SNAP_REGS(s->regs.r);
	uint64_t sp = s->regs.r[PP_REG_SP];
	uint64_t end = stack_end_of(sp);
	s->len = end > sp ? PP_MIN(COPY, end - sp) : 0;
	for (size_t i = 0; i < s->len; i++)
		((volatile uint8_t *)s->stack)[i] = ((const volatile uint8_t *)(uintptr_t)sp)[i];
}

__attribute__((noinline)) static void level1(struct snap *s)
{
	level_fn[1] = (uintptr_t)level1;
	level2(s);
	__asm__ volatile("" ::: "memory"); /* no tail call */
}

__attribute__((noinline)) static void level0(struct snap *s)
{
	level_fn[0] = (uintptr_t)level0;
	level1(s);
	__asm__ volatile("" ::: "memory");
}

static void take_snapshot(struct snap *s)
{
	s->stack = malloc(COPY);
	assert_non_null(s->stack);
	level0(s);
	assert_true(s->len >= 1024);
}

/* Is some pcs[i] a return address inside fn (within 256 bytes of its start)? */
static bool has_caller(const uint64_t *pcs, size_t n, uintptr_t fn)
{
	for (size_t i = 1; i < n; i++)
		if (pcs[i] > fn && pcs[i] - fn < 256)
			return true;
	return false;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1;
}

static void test_self_cfi(void **state)
{
	struct snap s;
	uint64_t pcs[128];
	size_t n;
	unsigned flags;
	int fds = count_fds();

	take_snapshot(&s);
	struct pp_unwinder *u = pp_unwinder__new(getpid(), NULL);
	assert_non_null(u);
	for (int round = 0; round < 3; round++) { /* the Dwfl is reused */
		assert_int_equal(
			pp_unwinder__unwind(u, &s.regs, s.stack, s.len, pcs, 128, &n, &flags), 0);
		assert_int_equal(pcs[0], s.regs.r[PP_REG_IP]);
		assert_true(pcs[0] > level_fn[2] && pcs[0] - level_fn[2] < 256);
		assert_true(has_caller(pcs, n, level_fn[1]));
		assert_true(has_caller(pcs, n, level_fn[0]));
		/* cmocka, main, __libc_start_call_main, __libc_start_main, _start */
		assert_true(n >= 8);
		assert_true(flags & PP_UNWIND_COMPLETE);
		assert_false(flags & PP_UNWIND_TRUNCATED);
	}
	pp_unwinder__invalidate(u);
	assert_int_equal(pp_unwinder__unwind(u, &s.regs, s.stack, s.len, pcs, 128, &n, &flags), 0);
	assert_true(flags & PP_UNWIND_COMPLETE);
	pp_unwinder__free(u);
	assert_int_equal(count_fds(), fds);
	free(s.stack);
}

static void test_self_fp_only(void **state)
{
	struct snap s;
	uint64_t pcs[128];
	size_t n;
	unsigned flags;
	struct pp_unwinder_opts o = { .frame_pointers_only = true };

	take_snapshot(&s);
	struct pp_unwinder *u = pp_unwinder__new(getpid(), &o);
	assert_non_null(u);
	assert_int_equal(pp_unwinder__unwind(u, &s.regs, s.stack, s.len, pcs, 128, &n, &flags), 0);
	/* This test is built with frame pointers: our own frames are found. */
	assert_true(has_caller(pcs, n, level_fn[1]));
	assert_true(has_caller(pcs, n, level_fn[0]));
	assert_true(flags & PP_UNWIND_FP_FALLBACK);
	pp_unwinder__free(u);
	free(s.stack);
}

static void test_truncated(void **state)
{
	struct snap s;
	uint64_t pcs[128];
	size_t n;
	unsigned flags;

	take_snapshot(&s);
	struct pp_unwinder *u = pp_unwinder__new(getpid(), NULL);
	assert_non_null(u);
	/* too little stack */
	assert_int_equal(pp_unwinder__unwind(u, &s.regs, s.stack, 64, pcs, 128, &n, &flags), 0);
	assert_true(n >= 1);
	assert_false(flags & PP_UNWIND_COMPLETE);
	/* too few frames */
	assert_int_equal(pp_unwinder__unwind(u, &s.regs, s.stack, s.len, pcs, 2, &n, &flags), 0);
	assert_int_equal(n, 2);
	assert_true(flags & PP_UNWIND_TRUNCATED);
	assert_false(flags & PP_UNWIND_COMPLETE);
	/* no stack at all */
	assert_int_equal(pp_unwinder__unwind(u, &s.regs, NULL, 0, pcs, 128, &n, &flags), 0);
	assert_true(n >= 1);
	assert_false(flags & PP_UNWIND_COMPLETE);
	pp_unwinder__free(u);
	free(s.stack);
}

static void test_garbage(void **state)
{
	uint64_t pcs[64];
	size_t n;
	unsigned flags;
	uint64_t junk[512];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct pp_unwinder *u = pp_unwinder__new(getpid(), NULL);

	assert_non_null(u);
	for (int it = 0; it < 200; it++) {
		struct pp_regs r;
		for (size_t i = 0; i < ARRAY_SIZE(junk); i++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			junk[i] = (i & 1) ? seed : (uint64_t)(uintptr_t)&junk[(seed >> 3) % 512];
		}
		for (int i = 0; i < PP_NREGS; i++)
			r.r[i] = junk[(it + i) % 512];
		r.r[PP_REG_SP] = (uint64_t)(uintptr_t)junk;
		r.r[PP_REG_IP] = it % 2 ? (uint64_t)(uintptr_t)test_garbage + (uint64_t)it : 0;
		assert_int_equal(
			pp_unwinder__unwind(u, &r, junk, sizeof(junk), pcs, 64, &n, &flags), 0);
		assert_true(n <= 64);
	}
	pp_unwinder__free(u);
	assert_int_equal(pp_unwinder__unwind(NULL, NULL, NULL, 0, pcs, 64, &n, &flags), -EINVAL);
	assert_null(pp_unwinder__new(0, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_cfi),
		cmocka_unit_test(test_self_fp_only),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_garbage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
