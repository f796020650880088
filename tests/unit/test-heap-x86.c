/* SPDX-License-Identifier: Apache-2.0 */
/* Probe-offset decoder (lib/heap/x86.c): table of real prologues, and the
 * allocator detection + offsets on this very process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "heap/heap.h"

struct prologue {
	const char *what;
	uint8_t code[32];
	size_t len;
	size_t off;
	bool emulated;
};

static const struct prologue cases[] = {
	{ "glibc free: test rdi,rdi; je",
	  { 0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55 },
	  10,
	  3,
	  true },
	{ "glibc malloc: push r12", { 0x41, 0x54, 0x55 }, 3, 0, true },
	{ "endbr64; push rbp", { 0xf3, 0x0f, 0x1e, 0xfa, 0x55 }, 5, 4, true },
	{ "cmpb $0,rip; push r12 (posix_memalign)",
	  { 0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00, 0x41, 0x54 },
	  9,
	  7,
	  true },
	{ "mov rax,rdi; push r12 (calloc-like)", { 0x48, 0x89, 0xf8, 0x41, 0x54 }, 5, 3, true },
	{ "mov rbx,rdi then push: rbx not protected", { 0x48, 0x89, 0xfb, 0x53 }, 4, 3, true },
	{ "mov rsi,rax clobbers an argument", { 0x48, 0x89, 0xc6, 0x55 }, 4, 0, false },
	{ "sub rsp,0x18 changes rsp", { 0x48, 0x83, 0xec, 0x18, 0x55 }, 5, 0, false },
	{ "lea rdi,[rip+x] clobbers rdi", { 0x48, 0x8d, 0x3d, 1, 2, 3, 4, 0x55 }, 8, 0, false },
	{ "mov rax,[rip+x]; test rax,rax; jne",
	  { 0x48, 0x8b, 0x05, 1, 2, 3, 4, 0x48, 0x85, 0xc0, 0x75, 0x10 },
	  12,
	  10,
	  true },
	{ "mov eax, fs:[rax]; jmp", { 0x64, 0x8b, 0x00, 0xeb, 0x02 }, 5, 3, true },
	{ "jmp rel32 at +0 (thin wrapper)", { 0xe9, 1, 2, 3, 4 }, 5, 0, true },
	{ "nopw then push", { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55 }, 7, 6, true },
	{ "plain nop is emulated", { 0x90, 0x55 }, 2, 0, true },
	{ "push with 0x66 prefix is not", { 0x66, 0x55 }, 2, 0, false },
	{ "movb $1, ch clobbers rcx", { 0xb5, 0x01, 0x55 }, 3, 0, false },
	{ "mov r8d, imm clobbers r8", { 0x41, 0xb8, 1, 0, 0, 0, 0x55 }, 7, 0, false },
	{ "mov r10, imm is fine", { 0x41, 0xba, 1, 0, 0, 0, 0x55 }, 7, 6, true },
	{ "store to stack memory is fine", { 0x48, 0x89, 0x7c, 0x24, 0xf8, 0x55 }, 6, 5, true },
	{ "unknown (syscall) stops", { 0x0f, 0x05, 0x55 }, 3, 0, false },
	{ "truncated", { 0x48, 0x8b }, 2, 0, false },
	{ "empty", { 0 }, 0, 0, false },
};

static void test_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t off = 99;
		bool em = true;

		assert_int_equal(pp_heap__probe_offset(cases[i].code, cases[i].len, &off, &em), 0);
		if (off != cases[i].off || em != cases[i].emulated)
			fail_msg("%s: got off %zu emulated %d, want %zu %d", cases[i].what, off, em,
				 cases[i].off, cases[i].emulated);
	}
}

/* This test binary uses glibc: detection must say libc.so.6, and every
 * probe must sit on an emulated instruction (free is never +0). */
/* jemalloc 5.3's free (Debian 12): only rdi is free's argument, so the
 * loads into rax, rdx and rcx, the shifts and the %fs: add may be stepped
 * over and the probe lands on the emulated jne at +48, not on +0 (which
 * the kernel would single-step on every free). */
static void test_per_function_arguments(void **state)
{
	static const uint8_t jefree[] = {
		0x48, 0x89, 0xf8, 0x48, 0x8b, 0x15, 0x0e, 0x53, 0x0a, 0x00, 0x48, 0x89, 0xf9, 0x48,
		0xc1, 0xe8, 0x1a, 0x48, 0x81, 0xe1, 0x00, 0x00, 0x00, 0xc0, 0x25, 0xf0, 0x00, 0x00,
		0x00, 0x64, 0x48, 0x03, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00, 0x48, 0x01, 0xd0, 0x48,
		0x3b, 0x88, 0xb0, 0x01, 0x00, 0x00, 0x0f, 0x85, 0x8a, 0x00, 0x00, 0x00,
	};
	size_t off = 99;
	bool em = false;

	(void)state;
	assert_int_equal(pp_heap__probe_offset_args(jefree, sizeof(jefree), 1, &off, &em), 0);
	assert_true(em);
	assert_int_equal(off, 48);
	/* With rdx protected (a 3-argument function) the walk stops at +3. */
	assert_int_equal(pp_heap__probe_offset_args(jefree, sizeof(jefree), 3, &off, &em), 0);
	assert_false(em);
	assert_int_equal(off, 0);
}

static void test_self(void **state)
{
	struct pp_heap_allocator *a = calloc(1, sizeof(*a));
	bool saw_free = false, saw_malloc = false;

	(void)state;
	assert_non_null(a);
	assert_int_equal(pp_heap__find_allocator(getpid(), a), 0);
#ifdef __SANITIZE_ADDRESS__
	/* An ASan build interposes its own malloc, and detection must say so. */
	assert_non_null(strstr(a->name, "asan"));
#else
	assert_string_equal(a->name, "libc.so.6");
#endif
	assert_false(a->is_static);
	assert_true(a->n >= 8);
	for (unsigned i = 0; i < a->n; i++) {
		const struct pp_heap_fn_probe *f = &a->fns[i];

		assert_true(f->probe_off >= f->file_off && f->probe_off < f->file_off + 64);
		if (f->fn == 4) { /* free */
			saw_free = true;
			assert_true(f->emulated);
			assert_true(f->probe_off > f->file_off);
		}
		saw_malloc |= f->fn == 0;
	}
	assert_true(saw_free && saw_malloc);
	free(a);
}

static void test_bad_pid(void **state)
{
	struct pp_heap_allocator *a = calloc(1, sizeof(*a));

	(void)state;
	assert_int_equal(pp_heap__find_allocator(0x3ffffff0, a), -ESRCH);
	assert_int_equal(pp_heap__find_allocator(0, a), -EINVAL);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_per_function_arguments),
		cmocka_unit_test(test_self),
		cmocka_unit_test(test_bad_pid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
