/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/maps parsing: every line form, malformed lines, caps, find. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "procfs/procfs.h"
#include "util/util.h"

struct line_case {
	const char *line;
	bool ok;
	uint64_t start, end, offset;
	uint32_t prot;
	bool shared;
	uint32_t maj, min;
	uint64_t inode;
	const char *path; /* NULL = anonymous */
	bool deleted, special;
};

/* Table rows leave trailing fields (flags, or everything for malformed lines) zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define R PP_PROT_R
#define W PP_PROT_W
#define X PP_PROT_X

static const struct line_case line_cases[] = {
	/* ordinary file mapping, padded to the path column */
	{ "55d4a5e1c000-55d4a5e1e000 r--p 00000000 fe:01 1311012                    /usr/bin/cat",
	  true, 0x55d4a5e1c000, 0x55d4a5e1e000, 0, R, false, 0xfe, 1, 1311012, "/usr/bin/cat" },
	{ "7f0e1a200000-7f0e1a228000 r-xp 00028000 08:02 262247 "
	  "/usr/lib/x86_64-linux-gnu/libc.so.6",
	  true, 0x7f0e1a200000, 0x7f0e1a228000, 0x28000, R | X, false, 8, 2, 262247,
	  "/usr/lib/x86_64-linux-gnu/libc.so.6" },
	/* path with spaces, and with spaces at the end */
	{ "400000-401000 r-xp 00001000 00:2a 77 /opt/My App/bin/my server", true, 0x400000,
	  0x401000, 0x1000, R | X, false, 0, 0x2a, 77, "/opt/My App/bin/my server" },
	{ "400000-401000 r-xp 00001000 00:2a 77   /tmp/x  ", true, 0x400000, 0x401000, 0x1000,
	  R | X, false, 0, 0x2a, 77, "/tmp/x  " },
	/* deleted */
	{ "7f0000000000-7f0000001000 r-xp 00000000 00:19 4242 /tmp/jit.so (deleted)", true,
	  0x7f0000000000, 0x7f0000001000, 0, R | X, false, 0, 0x19, 4242, "/tmp/jit.so", true },
	{ "7f0000000000-7f0000100000 rw-s 00000000 00:01 1025 /dev/zero (deleted)", true,
	  0x7f0000000000, 0x7f0000100000, 0, R | W, true, 0, 1, 1025, "/dev/zero", true },
	{ "7f0000000000-7f0000100000 rw-s 00000000 00:01 9 /memfd:jit code (deleted)", true,
	  0x7f0000000000, 0x7f0000100000, 0, R | W, true, 0, 1, 9, "/memfd:jit code", true },
	/* specials */
	{ "55d4a6c3d000-55d4a6c5e000 rw-p 00000000 00:00 0                          [heap]", true,
	  0x55d4a6c3d000, 0x55d4a6c5e000, 0, R | W, false, 0, 0, 0, "[heap]", false, true },
	{ "7ffc8a1e4000-7ffc8a205000 rw-p 00000000 00:00 0                          [stack]", true,
	  0x7ffc8a1e4000, 0x7ffc8a205000, 0, R | W, false, 0, 0, 0, "[stack]", false, true },
	{ "7ffc8a3f8000-7ffc8a3fa000 r-xp 00000000 00:00 0                          [vdso]", true,
	  0x7ffc8a3f8000, 0x7ffc8a3fa000, 0, R | X, false, 0, 0, 0, "[vdso]", false, true },
	{ "7ffc8a3f4000-7ffc8a3f8000 r--p 00000000 00:00 0                          [vvar]", true,
	  0x7ffc8a3f4000, 0x7ffc8a3f8000, 0, R, false, 0, 0, 0, "[vvar]", false, true },
	{ "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
	  true, 0xffffffffff600000ull, 0xffffffffff601000ull, 0, X, false, 0, 0, 0, "[vsyscall]",
	  false, true },
	{ "7f1000000000-7f1000200000 rw-p 00000000 00:00 0 [anon:jemalloc arena 0]", true,
	  0x7f1000000000, 0x7f1000200000, 0, R | W, false, 0, 0, 0, "[anon:jemalloc arena 0]",
	  false, true },
	{ "7f1000000000-7f1000001000 rw-s 00000000 00:0f 1064 anon_inode:[perf_event]", true,
	  0x7f1000000000, 0x7f1000001000, 0, R | W, true, 0, 0xf, 1064, "anon_inode:[perf_event]",
	  false, true },
	/* a special is never "deleted" */
	{ "1000-2000 rw-p 00000000 00:00 0 [anon:x (deleted)]", true, 0x1000, 0x2000, 0, R | W,
	  false, 0, 0, 0, "[anon:x (deleted)]", false, true },
	/* anonymous, with and without the trailing space */
	{ "7f0e1a000000-7f0e1a021000 rw-p 00000000 00:00 0 ", true, 0x7f0e1a000000, 0x7f0e1a021000,
	  0, R | W, false, 0, 0, 0, NULL },
	{ "7f0e1a000000-7f0e1a021000 ---p 00000000 00:00 0", true, 0x7f0e1a000000, 0x7f0e1a021000,
	  0, 0, false, 0, 0, 0, NULL },
	/* device major/minor in hex, large minor, huge inode, uppercase hex */
	{ "1000-2000 r--p 0000ABCD 103:fffff 18446744073709551615 /mnt/x", true, 0x1000, 0x2000,
	  0xabcd, R, false, 0x103, 0xfffff, UINT64_MAX, "/mnt/x" },
	{ "1000-2000 r--p 00000000 fff:ff 9223372036854775808 /mnt/y", true, 0x1000, 0x2000, 0, R,
	  false, 0xfff, 0xff, 9223372036854775808ull, "/mnt/y" },
	/* a literal file name that only looks deleted stays a path (suffix must be exact) */
	{ "1000-2000 r--p 00000000 08:01 5 /tmp/(deleted)", true, 0x1000, 0x2000, 0, R, false, 8, 1,
	  5, "/tmp/(deleted)" },
	{ "1000-2000 r--p 00000000 08:01 5 /x\\012y", true, 0x1000, 0x2000, 0, R, false, 8, 1, 5,
	  "/x\\012y" },

	/* malformed */
	{ "", false },
	{ "garbage", false },
	{ "1000-2000", false },
	{ "1000 2000 r--p 00000000 08:01 5 /x", false },
	{ "1000-2000 r--p 00000000 08:01 /x", false },
	{ "1000-2000 r--q 00000000 08:01 5 /x", false },
	{ "1000-2000 rw 00000000 08:01 5 /x", false },
	{ "1000-2000 r--p 00000000 0801 5 /x", false },
	{ "1000-2000 r--p 00000000 08:01 18446744073709551616 /x", false }, /* inode overflow */
	{ "10000000000000000-10000000000001000 r--p 00000000 08:01 5 /x", false }, /* 17 digits */
	{ "2000-1000 r--p 00000000 08:01 5 /x", false }, /* end < start */
	{ "2000-2000 r--p 00000000 08:01 5 /x", false }, /* empty */
	{ "1000-2000 r--p 00000000 08:01 5x /x", false },
	{ "1000-2000 r--p 00000000 123456789:01 5 /x", false },
	{ "-2000 r--p 00000000 08:01 5 /x", false },
	{ "0x1000-0x2000 r--p 00000000 08:01 5 /x", false },
};

static void test_line_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(line_cases); i++) {
		const struct line_case *c = &line_cases[i];
		struct pp_maps maps = { 0 };
		size_t bad = 99;
		int r = pp_maps__parse(c->line, strlen(c->line), &maps, &bad);
		assert_int_equal(r, 0);
		if (!c->ok) {
			if (maps.n != 0 || (bad != 1 && c->line[0]))
				fail_msg("case %zu accepted: '%s'", i, c->line);
			pp_maps__free(&maps);
			continue;
		}
		if (maps.n != 1 || bad != 0)
			fail_msg("case %zu rejected: '%s'", i, c->line);
		const struct pp_map *m = &maps.v[0];
		assert_true(m->start == c->start);
		assert_true(m->end == c->end);
		assert_true(m->offset == c->offset);
		assert_int_equal(m->prot, c->prot);
		assert_int_equal(m->shared, c->shared);
		assert_int_equal(m->dev_major, c->maj);
		assert_int_equal(m->dev_minor, c->min);
		assert_true(m->inode == c->inode);
		if (c->path)
			assert_non_null(m->path), assert_string_equal(m->path, c->path);
		else
			assert_null(m->path);
		if (m->deleted != c->deleted || m->special != c->special)
			fail_msg("case %zu flags deleted=%d special=%d", i, m->deleted, m->special);
		pp_maps__free(&maps);
	}
}

static void test_multi_unsorted_and_bad(void **state)
{
	(void)state;
	/* no trailing newline, a blank line, bad lines in between, out of order, an overlap */
	const char text[] = "3000-4000 r--p 00000000 08:01 3 /c\n"
			    "\n"
			    "junk line\n"
			    "1000-2000 r-xp 00000000 08:01 1 /a\n"
			    "2000-3000 rw-p 00000000 00:00 0 [heap]\n"
			    "3800-3900 r--p 00000000 08:01 9 /overlap\n"
			    "5000-6000 r--p 00000000 08:01 5 /e";
	struct pp_maps maps = { 0 };
	size_t bad = 0;
	assert_int_equal(pp_maps__parse(text, strlen(text), &maps, &bad), 0);
	assert_int_equal(maps.n, 4);
	assert_int_equal(bad, 2);
	assert_string_equal(maps.v[0].path, "/a");
	assert_string_equal(maps.v[1].path, "[heap]");
	assert_string_equal(maps.v[2].path, "/c");
	assert_string_equal(maps.v[3].path, "/e");

	/* find: every boundary */
	assert_null(pp_maps__find(&maps, 0));
	assert_null(pp_maps__find(&maps, 0xfff));
	assert_ptr_equal(pp_maps__find(&maps, 0x1000), &maps.v[0]);
	assert_ptr_equal(pp_maps__find(&maps, 0x1fff), &maps.v[0]);
	assert_ptr_equal(pp_maps__find(&maps, 0x2000), &maps.v[1]);
	assert_ptr_equal(pp_maps__find(&maps, 0x3fff), &maps.v[2]);
	assert_null(pp_maps__find(&maps, 0x4000));
	assert_null(pp_maps__find(&maps, 0x4fff));
	assert_ptr_equal(pp_maps__find(&maps, 0x5000), &maps.v[3]);
	assert_null(pp_maps__find(&maps, 0x6000));
	assert_null(pp_maps__find(&maps, UINT64_MAX));
	pp_maps__free(&maps);
	pp_maps__free(&maps); /* idempotent */
	assert_null(pp_maps__find(&maps, 0x1000));

	/* empty input */
	assert_int_equal(pp_maps__parse("", 0, &maps, &bad), 0);
	assert_int_equal(maps.n, 0);
	assert_int_equal(bad, 0);
	pp_maps__free(&maps);
}

static void test_long_line(void **state)
{
	(void)state;
	size_t n = 100000;
	char *text = malloc(n + 200);
	assert_non_null(text);
	int k = sprintf(text, "1000-2000 r--p 00000000 08:01 3 /");
	memset(text + k, 'a', n);
	strcpy(text + k + n, "\n3000-4000 r--p 00000000 08:01 3 /ok\n");
	struct pp_maps maps = { 0 };
	size_t bad = 0;
	assert_int_equal(pp_maps__parse(text, strlen(text), &maps, &bad), 0);
	assert_int_equal(maps.n, 1);
	assert_int_equal(bad, 1);
	assert_string_equal(maps.v[0].path, "/ok");
	pp_maps__free(&maps);

	/* a NUL byte inside a path is rejected, not truncated */
	const char nul[] = "1000-2000 r--p 00000000 08:01 3 /a\0b\n";
	assert_int_equal(pp_maps__parse(nul, sizeof(nul) - 1, &maps, &bad), 0);
	assert_int_equal(maps.n, 0);
	assert_int_equal(bad, 1);
	pp_maps__free(&maps);
	free(text);
}

static void test_50k_lines(void **state)
{
	(void)state;
	const size_t n = 50000;
	struct pp_buf b = { 0 };
	/* written in reverse so the parser has to sort; every 10th anonymous */
	for (size_t i = n; i-- > 0;) {
		uint64_t s = 0x10000000ull + (uint64_t)i * 0x2000;
		if (i % 10 == 0)
			assert_int_equal(pp_buf_printf(&b, "%lx-%lx rw-p 00000000 00:00 0\n",
						       (unsigned long)s,
						       (unsigned long)(s + 0x1000)),
					 0);
		else
			assert_int_equal(
				pp_buf_printf(&b,
					      "%lx-%lx r-xp %08lx fd:%02zx %zu                "
					      "  /usr/lib/lib number %zu.so\n",
					      (unsigned long)s, (unsigned long)(s + 0x1000),
					      (unsigned long)(i * 0x1000), i % 256, i * 7 + 1, i),
				0);
	}
	struct pp_maps maps = { 0 };
	size_t bad = 1;
	assert_int_equal(pp_maps__parse(b.data, b.len, &maps, &bad), 0);
	assert_int_equal(maps.n, n);
	assert_int_equal(bad, 0);
	for (size_t i = 0; i < n; i++) {
		const struct pp_map *m = &maps.v[i];
		uint64_t s = 0x10000000ull + (uint64_t)i * 0x2000;
		assert_true(m->start == s);
		if (i % 10 == 0) {
			assert_null(m->path);
		} else {
			char want[64];
			snprintf(want, sizeof(want), "/usr/lib/lib number %zu.so", i);
			assert_string_equal(m->path, want);
			assert_true(m->inode == i * 7 + 1);
			assert_int_equal(m->dev_minor, i % 256);
		}
		/* find at start, middle, last byte, and the gap after */
		assert_ptr_equal(pp_maps__find(&maps, s), m);
		assert_ptr_equal(pp_maps__find(&maps, s + 0xfff), m);
		assert_null(pp_maps__find(&maps, s + 0x1000));
	}
	pp_maps__free(&maps);
	pp_buf_free(&b);
}

static void test_too_many(void **state)
{
	(void)state;
	/* PP_MAPS_MAX + 1 minimal lines: -E2BIG, not unbounded growth. */
	const size_t n = PP_MAPS_MAX + 1;
	const char *line = "1000-2000 ---p 00000000 00:00 0\n"; /* 32 bytes, overlaps later ones */
	size_t ll = strlen(line);
	char *text = malloc(n * ll);
	assert_non_null(text);
	for (size_t i = 0; i < n; i++)
		memcpy(text + i * ll, line, ll);
	struct pp_maps maps = { 0 };
	assert_int_equal(pp_maps__parse(text, n * ll, &maps, NULL), -E2BIG);
	assert_null(maps.v);
	/* exactly the cap is accepted (the duplicates collapse to one) */
	size_t bad = 0;
	assert_int_equal(pp_maps__parse(text, (n - 1) * ll, &maps, &bad), 0);
	assert_int_equal(maps.n, 1);
	assert_int_equal(bad, n - 2);
	pp_maps__free(&maps);
	free(text);
}

static void test_self(void **state)
{
	(void)state;
	/* A fresh anonymous mapping and this function's code are found in our own maps. */
	long pg = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, (size_t)pg * 3, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	struct pp_maps maps = { 0 };
	assert_int_equal(pp_maps__read(getpid(), &maps), 0);
	assert_true(maps.n > 5);

	const struct pp_map *m = pp_maps__find(&maps, (uint64_t)(uintptr_t)p + (uint64_t)pg);
	assert_non_null(m);
	assert_true(m->start <= (uint64_t)(uintptr_t)p);
	assert_true(m->end >= (uint64_t)(uintptr_t)p + 3 * (uint64_t)pg);
	assert_true(m->prot & PP_PROT_R);

	m = pp_maps__find(&maps, (uint64_t)(uintptr_t)&test_self);
	assert_non_null(m);
	assert_non_null(m->path);
	assert_false(m->special);
	assert_true(m->prot & PP_PROT_X);
	assert_true(m->inode != 0);
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	assert_string_equal(m->path, exe);

	/* stack and vdso present and special */
	int local = 0;
	m = pp_maps__find(&maps, (uint64_t)(uintptr_t)&local);
	assert_non_null(m);
	assert_true(m->special);
	assert_string_equal(m->path, "[stack]");
	bool vdso = false;
	for (size_t i = 0; i < maps.n; i++) {
		if (i > 0)
			assert_true(maps.v[i - 1].end <= maps.v[i].start);
		if (maps.v[i].path && strcmp(maps.v[i].path, "[vdso]") == 0)
			vdso = maps.v[i].special;
	}
	assert_true(vdso);
	pp_maps__free(&maps);
	munmap(p, (size_t)pg * 3);

	assert_int_equal(pp_maps__read(0, &maps), -EINVAL);
	assert_true(pp_maps__read(0x3fffffff, &maps) < 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_table), cmocka_unit_test(test_multi_unsorted_and_bad),
		cmocka_unit_test(test_long_line),  cmocka_unit_test(test_50k_lines),
		cmocka_unit_test(test_too_many),   cmocka_unit_test(test_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
