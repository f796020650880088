/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof builder/encoder/decoder/checker: build profiles of each kind, decode
 * what was encoded, and compare every field and invariant; dedup, UTF-8
 * repair, refusals, gzip bounds and the checker on hand-built bad messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pprof/pprof.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;

static const char *S(const Profile *p, int64_t i)
{
	assert_true(i >= 0 && (uint64_t)i < p->n_string_table);
	return p->string_table[i];
}

static Profile *encode_decode(struct pp_pprof *pp, bool gzip)
{
	struct pp_buf b = { 0 };
	assert_int_equal(pp_pprof__encode(pp, gzip, &b), 0);
	assert_true(b.len > 0);
	if (gzip) {
		assert_int_equal((unsigned char)b.data[0], 0x1f);
		assert_int_equal((unsigned char)b.data[1], 0x8b);
	}
	Profile *p = NULL;
	assert_int_equal(pp_pprof_decode(b.data, b.len, &p), 0);
	assert_non_null(p);
	pp_buf_free(&b);
	char err[256];
	int r = pp_pprof_check(p, err, sizeof(err));
	if (r)
		fail_msg("check failed: %s", err);
	return p;
}

/* Location id's innermost function name / nth line. */
static const Perftools__Profiles__Function *loc_func(const Profile *p, uint64_t loc, size_t line)
{
	assert_true(loc >= 1 && loc <= p->n_location);
	const Perftools__Profiles__Location *l = p->location[loc - 1];
	assert_true(line < l->n_line);
	uint64_t f = l->line[line]->function_id;
	assert_true(f >= 1 && f <= p->n_function);
	return p->function[f - 1];
}

static const Perftools__Profiles__Label *
find_label(const Profile *p, const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (strcmp(S(p, s->label[i]->key), key) == 0)
			return s->label[i];
	return NULL;
}

static void test_cpu_roundtrip(void **state)
{
	(void)state;
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	assert_int_equal(pp_pprof__add_sample_type(pp, "samples", "count"), 0);
	assert_int_equal(pp_pprof__add_sample_type(pp, "cpu", "nanoseconds"), 0);
	assert_int_equal(pp_pprof__set_period(pp, "cpu", "nanoseconds", 10000000), 0);
	pp_pprof__set_time(pp, 1700000000123456789LL, 10000000000LL);
	assert_int_equal(pp_pprof__add_comment(pp, "podprof test"), 0);

	struct pp_pprof_mapping exe = { .start = 0x400000,
					.limit = 0x401000,
					.offset = 0x1000,
					.file = "/usr/bin/app",
					.build_id = "abcdef0123" };
	struct pp_pprof_mapping libc = { .start = 0x7f0000000000ull,
					 .limit = 0x7f0000200000ull,
					 .file = "/lib/libc.so.6" };
	struct pp_pprof_mapping kern = { .start = 0xffff800000000000ull,
					 .limit = 0xffffffffffffffffull,
					 .file = "[kernel.kallsyms]" };
	assert_int_equal(pp_pprof__add_mapping(pp, &exe), 1);
	assert_int_equal(pp_pprof__add_mapping(pp, &libc), 2);
	assert_int_equal(pp_pprof__add_mapping(pp, &kern), 3);

	/* leaf with an inlined frame: inner first */
	struct pp_pprof_line leaf[2] = {
		{ .function = "inlined_helper", .file = "app.c", .line = 12, .start_line = 10 },
		{ .function = "work",
		  .system_name = "_Z4workv",
		  .file = "app.c",
		  .line = 30,
		  .start_line = 25 },
	};
	struct pp_pprof_line mainl = {
		.function = "main", .file = "app.c", .line = 50, .start_line = 45
	};
	struct pp_pprof_line libcl = { .function = "__libc_start_main",
				       .file = "libc.c",
				       .line = 7 };
	struct pp_pprof_line kl = { .function = "do_syscall_64" };
	uint64_t l1 = pp_pprof__add_location(pp, 1, 0x400123, leaf, 2);
	uint64_t l2 = pp_pprof__add_location(pp, 1, 0x400456, &mainl, 1);
	uint64_t l3 = pp_pprof__add_location(pp, 2, 0x7f0000001234ull, &libcl, 1);
	uint64_t l4 = pp_pprof__add_location(pp, 3, 0xffffffff81000010ull, &kl, 1);
	assert_int_equal(l1, 1);
	assert_int_equal(l2, 2);
	assert_int_equal(l3, 3);
	assert_int_equal(l4, 4);

	uint64_t st1[] = { l1, l2, l3 };
	uint64_t st2[] = { l4, 0, l2, l3 }; /* zero id skipped */
	int64_t v1[] = { 7, 70000000 }, v2[] = { 3, 30000000 };
	struct pp_pprof_label lab[] = {
		{ .key = "pid", .num = 4242 },
		{ .key = "comm", .str = "app" },
		{ .key = "thread_name", .str = "worker-1" },
	};
	assert_int_equal(pp_pprof__add_sample(pp, st1, 3, v1, 2, lab, 3), 0);
	assert_int_equal(pp_pprof__add_sample(pp, st2, 4, v2, 2, lab, 2), 0);
	/* an empty string value drops that label only */
	struct pp_pprof_label lab3[] = { { .key = "comm", .str = "" }, { .key = "pid", .num = 1 } };
	assert_int_equal(pp_pprof__add_sample(pp, st2, 1, v2, 2, lab3, 2), 0);

	Profile *p = encode_decode(pp, true);
	assert_string_equal(p->string_table[0], "");
	assert_int_equal(p->n_sample_type, 2);
	assert_string_equal(S(p, p->sample_type[0]->type), "samples");
	assert_string_equal(S(p, p->sample_type[0]->unit), "count");
	assert_string_equal(S(p, p->sample_type[1]->type), "cpu");
	assert_string_equal(S(p, p->sample_type[1]->unit), "nanoseconds");
	assert_non_null(p->period_type);
	assert_string_equal(S(p, p->period_type->type), "cpu");
	assert_string_equal(S(p, p->period_type->unit), "nanoseconds");
	assert_int_equal(p->period, 10000000);
	assert_int_equal(p->time_nanos, 1700000000123456789LL);
	assert_int_equal(p->duration_nanos, 10000000000LL);
	assert_int_equal(p->default_sample_type, 0);
	assert_int_equal(p->n_comment, 1);
	assert_string_equal(S(p, p->comment[0]), "podprof test");

	assert_int_equal(p->n_mapping, 3);
	const Perftools__Profiles__Mapping *m = p->mapping[0];
	assert_int_equal(m->id, 1);
	assert_int_equal(m->memory_start, 0x400000);
	assert_int_equal(m->memory_limit, 0x401000);
	assert_int_equal(m->file_offset, 0x1000);
	assert_string_equal(S(p, m->filename), "/usr/bin/app");
	assert_string_equal(S(p, m->build_id), "abcdef0123");
	assert_true(m->has_functions && m->has_filenames && m->has_line_numbers &&
		    m->has_inline_frames);
	assert_string_equal(S(p, p->mapping[1]->build_id), "");
	assert_true(p->mapping[1]->has_functions && p->mapping[1]->has_line_numbers);
	/* kernel frame has no file and no line */
	m = p->mapping[2];
	assert_int_equal(m->memory_limit, 0xffffffffffffffffull);
	assert_true(m->has_functions);
	assert_false(m->has_filenames);
	assert_false(m->has_line_numbers);

	assert_int_equal(p->n_location, 4);
	assert_int_equal(p->location[0]->address, 0x400123);
	assert_int_equal(p->location[0]->mapping_id, 1);
	assert_int_equal(p->location[0]->n_line, 2);
	assert_int_equal(p->location[0]->line[0]->line, 12);
	assert_int_equal(p->location[0]->line[1]->line, 30);
	assert_string_equal(S(p, loc_func(p, 1, 0)->name), "inlined_helper");
	assert_string_equal(S(p, loc_func(p, 1, 0)->system_name), "inlined_helper");
	assert_int_equal(loc_func(p, 1, 0)->start_line, 10);
	assert_string_equal(S(p, loc_func(p, 1, 1)->name), "work");
	assert_string_equal(S(p, loc_func(p, 1, 1)->system_name), "_Z4workv");
	assert_string_equal(S(p, loc_func(p, 1, 1)->filename), "app.c");
	assert_string_equal(S(p, loc_func(p, 3, 0)->name), "__libc_start_main");
	assert_int_equal(p->location[3]->address, 0xffffffff81000010ull);
	assert_int_equal(p->location[3]->mapping_id, 3);

	assert_int_equal(p->n_sample, 3);
	assert_int_equal(p->sample[2]->n_label, 1);
	assert_string_equal(S(p, p->sample[2]->label[0]->key), "pid");
	const Perftools__Profiles__Sample *s = p->sample[0];
	assert_int_equal(s->n_location_id, 3);
	assert_int_equal(s->location_id[0], l1);
	assert_int_equal(s->location_id[1], l2);
	assert_int_equal(s->location_id[2], l3);
	assert_int_equal(s->value[0], 7);
	assert_int_equal(s->value[1], 70000000);
	const Perftools__Profiles__Label *lb = find_label(p, s, "pid");
	assert_non_null(lb);
	assert_int_equal(lb->num, 4242);
	assert_int_equal(lb->str, 0);
	lb = find_label(p, s, "thread_name");
	assert_non_null(lb);
	assert_string_equal(S(p, lb->str), "worker-1");
	s = p->sample[1];
	assert_int_equal(s->n_location_id, 3);
	assert_int_equal(s->location_id[0], l4);
	assert_int_equal(s->location_id[1], l2);
	assert_int_equal(s->value[0], 3);
	assert_int_equal(s->n_label, 2);
	assert_null(find_label(p, s, "thread_name"));
	assert_string_equal(S(p, find_label(p, s, "comm")->str), "app");

	pp_pprof_profile__free(p);

	/* The builder stays usable: encode again, raw this time. */
	assert_int_equal(pp_pprof__add_sample(pp, st1, 1, v2, 2, NULL, 0), 0);
	p = encode_decode(pp, false);
	assert_int_equal(p->n_sample, 4);
	assert_int_equal(p->sample[3]->n_location_id, 1);
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
}

static void test_heap_profile(void **state)
{
	(void)state;
	static const char *types[4][2] = { { "alloc_objects", "count" },
					   { "alloc_space", "bytes" },
					   { "inuse_objects", "count" },
					   { "inuse_space", "bytes" } };
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pp_pprof__add_sample_type(pp, types[i][0], types[i][1]), 0);
	assert_int_equal(pp_pprof__set_period(pp, "space", "bytes", 524288), 0);
	assert_int_equal(pp_pprof__set_default_sample_type(pp, "alloc_space"), 0);
	pp_pprof__set_time(pp, 1, 0);
	struct pp_pprof_mapping exe = { .start = 0x1000, .limit = 0x2000, .file = "/bin/h" };
	uint64_t mid = pp_pprof__add_mapping(pp, &exe);
	struct pp_pprof_line fl = { .function = "malloc_site", .file = "h.c", .line = 3 };
	uint64_t loc = pp_pprof__add_location(pp, mid, 0x1100, &fl, 1);
	assert_int_equal(loc, 1);
	for (int64_t i = 1; i <= 5; i++) {
		int64_t v[4] = { i, i * 1024, -i, -i * 1024 }; /* negative inuse in deltas */
		struct pp_pprof_label lb = { .key = "bytes", .num = 1024, .num_unit = "bytes" };
		assert_int_equal(pp_pprof__add_sample(pp, &loc, 1, v, 4, &lb, 1), 0);
	}
	Profile *p = encode_decode(pp, true);
	assert_int_equal(p->n_sample_type, 4);
	for (int i = 0; i < 4; i++) {
		assert_string_equal(S(p, p->sample_type[i]->type), types[i][0]);
		assert_string_equal(S(p, p->sample_type[i]->unit), types[i][1]);
	}
	assert_string_equal(S(p, p->default_sample_type), "alloc_space");
	assert_string_equal(S(p, p->period_type->type), "space");
	assert_int_equal(p->period, 524288);
	assert_int_equal(p->duration_nanos, 0);
	assert_int_equal(p->n_sample, 5);
	for (size_t i = 0; i < 5; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		int64_t k = (int64_t)i + 1;
		assert_int_equal(s->n_value, 4);
		assert_int_equal(s->value[0], k);
		assert_int_equal(s->value[1], k * 1024);
		assert_int_equal(s->value[2], -k);
		assert_int_equal(s->value[3], -k * 1024);
		const Perftools__Profiles__Label *lb = find_label(p, s, "bytes");
		assert_non_null(lb);
		assert_int_equal(lb->num, 1024);
		assert_string_equal(S(p, lb->num_unit), "bytes");
	}
	/* one string for each distinct text */
	for (size_t i = 0; i < p->n_string_table; i++)
		for (size_t j = i + 1; j < p->n_string_table; j++)
			assert_string_not_equal(p->string_table[i], p->string_table[j]);
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
}

static void test_empty_profile(void **state)
{
	(void)state;
	struct pp_pprof *pp = pp_pprof__new();
	struct pp_buf b = { 0 };
	assert_non_null(pp);
	/* no sample type at all: refused */
	assert_int_equal(pp_pprof__encode(pp, true, &b), -EINVAL);
	assert_int_equal(b.len, 0);
	assert_int_equal(pp_pprof__add_sample_type(pp, "goroutine", "count"), 0);
	assert_int_equal(pp_pprof__set_period(pp, "goroutine", "count", 1), 0);
	pp_pprof__set_time(pp, 123, 0);
	Profile *p = encode_decode(pp, true);
	assert_int_equal(p->n_sample, 0);
	assert_int_equal(p->n_location, 0);
	assert_int_equal(p->n_sample_type, 1);
	assert_string_equal(S(p, p->sample_type[0]->type), "goroutine");
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
	pp_pprof__free(NULL);
	pp_pprof_profile__free(NULL);
}

static void test_dedup(void **state)
{
	(void)state;
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	assert_int_equal(pp_pprof__add_sample_type(pp, "samples", "count"), 0);
	pp_pprof__set_time(pp, 1, 1);
	struct pp_pprof_mapping a = { .start = 1 << 20, .limit = 2 << 20, .file = "/a" };
	struct pp_pprof_mapping a2 = a;
	struct pp_pprof_mapping b = a;
	b.build_id = "00ff";
	assert_int_equal(pp_pprof__add_mapping(pp, &a), 1);
	assert_int_equal(pp_pprof__add_mapping(pp, &b), 2);
	assert_int_equal(pp_pprof__add_mapping(pp, &a2), 1);

	struct pp_pprof_line f1 = { .function = "f", .file = "x.c", .line = 1 };
	struct pp_pprof_line f1b = { .function = "f",
				     .file = "x.c",
				     .line = 2 }; /* same function */
	struct pp_pprof_line f2 = { .function = "f", .file = "y.c", .line = 1 }; /* other file */
	struct pp_pprof_line f3 = {
		.function = "f", .system_name = "_Zf", .file = "x.c", .line = 1
	};
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, &f1, 1), 1);
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, &f1, 1), 1);
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, &f1b, 1), 2);
	assert_int_equal(pp_pprof__add_location(pp, 2, 0x100010, &f1, 1), 3);
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100011, &f1, 1), 4);
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, &f2, 1), 5);
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, &f3, 1), 6);
	struct pp_pprof_line two[2] = { f1, f2 };
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, two, 2), 7);
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, two, 2), 7);
	assert_int_equal(pp_pprof__add_location(pp, 0, 0x100010, NULL, 0), 8);
	assert_int_equal(pp_pprof__add_location(pp, 0, 0x100010, NULL, 0), 8);
	/* many distinct entries force hash table growth; earlier ids stay stable */
	char name[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "fn%d", i);
		struct pp_pprof_line l = { .function = name, .file = "z.c", .line = i + 1 };
		assert_int_equal(pp_pprof__add_location(pp, 2, 0x100000 + (uint64_t)i, &l, 1),
				 9 + (uint64_t)i);
	}
	for (int i = 0; i < 5000; i += 7) {
		snprintf(name, sizeof(name), "fn%d", i);
		struct pp_pprof_line l = { .function = name, .file = "z.c", .line = i + 1 };
		assert_int_equal(pp_pprof__add_location(pp, 2, 0x100000 + (uint64_t)i, &l, 1),
				 9 + (uint64_t)i);
	}
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x100010, &f1, 1), 1);

	Profile *p = encode_decode(pp, false);
	assert_int_equal(p->n_mapping, 2);
	assert_int_equal(p->n_location, 8 + 5000);
	/* functions: f/x.c, f/y.c, f(_Zf)/x.c, fn0..fn4999 */
	assert_int_equal(p->n_function, 3 + 5000);
	assert_int_equal(p->location[0]->line[0]->function_id,
			 p->location[1]->line[0]->function_id);
	assert_int_not_equal(p->location[0]->line[0]->function_id,
			     p->location[4]->line[0]->function_id);
	for (size_t i = 0; i < p->n_string_table; i++)
		for (size_t j = i + 1; j < p->n_string_table && j < 64; j++)
			assert_string_not_equal(p->string_table[i], p->string_table[j]);
	assert_int_equal(p->location[7]->n_line, 0);
	assert_int_equal(p->location[7]->mapping_id, 0);
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
}

static bool has_fffd(const char *s)
{
	return strstr(s, "\xef\xbf\xbd") != NULL;
}

static void test_utf8_repair(void **state)
{
	(void)state;
	static const char *bad[] = {
		"trunc\xc3", /* truncated 2-byte */
		"over\xc0\xaflong", /* overlong '/' */
		"surr\xed\xa0\x80gate", /* UTF-16 surrogate */
		"big\xf4\x90\x80\x80", /* > U+10FFFF */
		("lone\x80"
		 "cont"), /* stray continuation */
		"e3\xe0\x80\xafover", /* overlong 3-byte */
	};
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	assert_int_equal(pp_pprof__add_sample_type(pp, "samples", "count"), 0);
	pp_pprof__set_time(pp, 1, 1);
	struct pp_pprof_mapping m = { .start = 0x1000, .limit = 0x2000, .file = "/bin/\xff\xfe" };
	assert_int_equal(pp_pprof__add_mapping(pp, &m), 1);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct pp_pprof_line l = { .function = bad[i], .file = "f\xe2\x82.c", .line = 1 };
		uint64_t id = pp_pprof__add_location(pp, 1, 0x1000 + i, &l, 1);
		assert_int_equal(id, i + 1);
		struct pp_pprof_label lb = { .key = "comm", .str = bad[i] };
		int64_t v = 1;
		assert_int_equal(pp_pprof__add_sample(pp, &id, 1, &v, 1, &lb, 1), 0);
	}
	/* valid multi-byte text is kept as is */
	struct pp_pprof_line ok = { .function = "f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" };
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x1fff, &ok, 1), ARRAY_SIZE(bad) + 1);
	assert_int_equal(pp_pprof__add_comment(pp, "c\xff"), 0);

	Profile *p = encode_decode(pp, true); /* check verifies every string is UTF-8 */
	assert_true(has_fffd(S(p, p->mapping[0]->filename)));
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		const char *n = S(p, loc_func(p, i + 1, 0)->name);
		assert_true(has_fffd(n));
		assert_true(has_fffd(S(p, loc_func(p, i + 1, 0)->filename)));
		assert_true(has_fffd(S(p, p->sample[i]->label[0]->str)));
	}
	assert_string_equal(S(p, loc_func(p, 1, 0)->name), "trunc\xef\xbf\xbd");
	assert_string_equal(S(p, loc_func(p, 5, 0)->name), "lone\xef\xbf\xbd"
							   "cont");
	assert_string_equal(S(p, loc_func(p, ARRAY_SIZE(bad) + 1, 0)->name), "f\xc3\xa9\xe2\x82\xac"
									     "\xf0\x9f\x98\x80");
	assert_string_equal(S(p, p->comment[0]), "c\xef\xbf\xbd");
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
}

static void test_refusals(void **state)
{
	(void)state;
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	assert_int_equal(pp_pprof__add_sample_type(pp, "alloc-space", "bytes"), -EINVAL);
	assert_int_equal(pp_pprof__add_sample_type(pp, "", "bytes"), -EINVAL);
	assert_int_equal(pp_pprof__add_sample_type(pp, "samples", "count"), 0);
	assert_int_equal(pp_pprof__add_sample_type(pp, "cpu", "nanoseconds"), 0);
	struct pp_pprof_mapping m = { .start = 0x1000, .limit = 0x2000 };
	assert_int_equal(pp_pprof__add_mapping(pp, &m), 1);

	/* address 0 without lines: not representable */
	errno = 0;
	assert_int_equal(pp_pprof__add_location(pp, 1, 0, NULL, 0), 0);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(pp_pprof__add_location(pp, 0, 0, NULL, 0), 0);
	/* unknown mapping, line without function */
	assert_int_equal(pp_pprof__add_location(pp, 2, 0x1000, NULL, 0), 0);
	struct pp_pprof_line nofn = { .function = NULL, .line = 3 };
	assert_int_equal(pp_pprof__add_location(pp, 1, 0x1000, &nofn, 1), 0);
	/* address 0 with a line is fine (e.g. JIT frames known by name only) */
	struct pp_pprof_line l = { .function = "jit_fn" };
	uint64_t id = pp_pprof__add_location(pp, 0, 0, &l, 1);
	assert_int_equal(id, 1);

	int64_t v[3] = { 1, 2, 3 };
	assert_int_equal(pp_pprof__add_sample(pp, &id, 1, v, 1, NULL, 0), -EINVAL);
	assert_int_equal(pp_pprof__add_sample(pp, &id, 1, v, 3, NULL, 0), -EINVAL);
	uint64_t unknown = 99;
	assert_int_equal(pp_pprof__add_sample(pp, &unknown, 1, v, 2, NULL, 0), -EINVAL);
	struct pp_pprof_label nokey = { .key = "", .str = "x" };
	assert_int_equal(pp_pprof__add_sample(pp, &id, 1, v, 2, &nokey, 1), -EINVAL);
	uint64_t zeros[3] = { 0, id, 0 };
	assert_int_equal(pp_pprof__add_sample(pp, zeros, 3, v, 2, NULL, 0), 0);
	/* values are fixed once samples exist */
	assert_int_equal(pp_pprof__add_sample_type(pp, "late", "count"), -EBUSY);
	pp_pprof__set_time(pp, 1, 1);

	Profile *p = encode_decode(pp, true);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(p->sample[0]->n_location_id, 1);
	assert_int_equal(p->sample[0]->location_id[0], id);
	assert_int_equal(p->n_location, 1);
	assert_int_equal(p->location[0]->address, 0);
	/* the mapping has no location: no has_* claim */
	assert_false(p->mapping[0]->has_functions);
	pp_pprof_profile__free(p);

	/* encode into a too small buffer: E2BIG, buffer unchanged */
	struct pp_buf small = { .max = 8 };
	assert_int_equal(pp_buf_append(&small, "ab", 2), 0);
	assert_int_equal(pp_pprof__encode(pp, false, &small), -E2BIG);
	assert_int_equal(small.len, 2);
	assert_int_equal(pp_pprof__encode(pp, true, &small), -E2BIG);
	assert_int_equal(small.len, 2);
	assert_string_equal(small.data, "ab");
	pp_buf_free(&small);
	pp_pprof__free(pp);
}

static void test_mapping_flags(void **state)
{
	(void)state;
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	assert_int_equal(pp_pprof__add_sample_type(pp, "samples", "count"), 0);
	pp_pprof__set_time(pp, 1, 1);
	struct pp_pprof_mapping ms[5];
	for (int i = 0; i < 5; i++) {
		ms[i] = (struct pp_pprof_mapping){ .start = 0x10000 * (uint64_t)(i + 1),
						   .limit = 0x10000 * (uint64_t)(i + 2) - 1,
						   .file = "/x" };
		assert_int_equal(pp_pprof__add_mapping(pp, &ms[i]), i + 1);
	}
	struct pp_pprof_line full = { .function = "f", .file = "f.c", .line = 9 };
	struct pp_pprof_line nofile = { .function = "g", .line = 9 };
	struct pp_pprof_line fallback = { .function = "x+0x1234" };
	struct pp_pprof_loc_info all = { true, true, true, true };
	struct pp_pprof_loc_info noinl = { true, true, true, false };
	struct pp_pprof_loc_info nosym = { false, false, false, false };
	/* 1: every location fully symbolized */
	assert_true(pp_pprof__add_location_ex(pp, 1, 0x10001, &full, 1, &all));
	assert_true(pp_pprof__add_location_ex(pp, 1, 0x10002, &full, 1, &all));
	/* 2: one location without a file */
	assert_true(pp_pprof__add_location_ex(pp, 2, 0x20001, &full, 1, &all));
	assert_true(pp_pprof__add_location_ex(pp, 2, 0x20002, &nofile, 1, &all));
	/* 3: one fallback name */
	assert_true(pp_pprof__add_location_ex(pp, 3, 0x30001, &full, 1, &all));
	assert_true(pp_pprof__add_location_ex(pp, 3, 0x30002, &fallback, 1, &nosym));
	/* 4: no inline expansion; 5: unused */
	assert_true(pp_pprof__add_location_ex(pp, 4, 0x40001, &full, 1, &noinl));
	Profile *p = encode_decode(pp, false);
	struct {
		bool f, fn, ln, inl;
	} want[5] = {
		{ 1, 1, 1, 1 }, { 1, 0, 1, 1 }, { 0, 0, 0, 0 }, { 1, 1, 1, 0 }, { 0, 0, 0, 0 }
	};
	for (int i = 0; i < 5; i++) {
		const Perftools__Profiles__Mapping *m = p->mapping[i];
		assert_int_equal(!!m->has_functions, want[i].f);
		assert_int_equal(!!m->has_filenames, want[i].fn);
		assert_int_equal(!!m->has_line_numbers, want[i].ln);
		assert_int_equal(!!m->has_inline_frames, want[i].inl);
	}
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
}

static void test_gzip_roundtrip(void **state)
{
	(void)state;
	size_t n = 3u << 20;
	unsigned char *in = malloc(n);
	assert_non_null(in);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		in[i] = (i / 4096) % 2 ? (unsigned char)x : (unsigned char)(i % 7); /* mixed */
	}
	struct pp_buf z = { 0 }, out = { 0 };
	assert_int_equal(pp_gzip(in, n, &z), 0);
	assert_int_equal((unsigned char)z.data[0], 0x1f);
	assert_int_equal((unsigned char)z.data[1], 0x8b);
	assert_int_equal(pp_gunzip(z.data, z.len, n, &out), 0);
	assert_int_equal(out.len, n);
	assert_memory_equal(out.data, in, n);
	/* one byte short of the real size */
	pp_buf_reset(&out);
	assert_int_equal(pp_gunzip(z.data, z.len, n - 1, &out), -EFBIG);
	assert_int_equal(out.len, 0);
	/* truncated */
	assert_int_equal(pp_gunzip(z.data, z.len / 2, n, &out), -EBADMSG);
	assert_int_equal(out.len, 0);
	/* corrupted deflate data */
	z.data[z.len / 2] ^= 0x55;
	z.data[z.len / 2 + 1] ^= 0xaa;
	int r = pp_gunzip(z.data, z.len, n, &out);
	assert_true(r == -EBADMSG);
	/* empty input */
	pp_buf_reset(&z);
	pp_buf_reset(&out);
	assert_int_equal(pp_gzip("", 0, &z), 0);
	assert_int_equal(pp_gunzip(z.data, z.len, 10, &out), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(pp_gunzip("\x1f\x8b\x08", 3, 10, &out), -EBADMSG);
	assert_int_equal(pp_gunzip("not gzip at all", 15, 100, &out), -EBADMSG);
	pp_buf_free(&z);
	pp_buf_free(&out);
	free(in);
}

static void test_gunzip_bound(void **state)
{
	(void)state;
	/* 64 MiB of zeros compresses to ~64 KiB: a decompression bomb in miniature */
	size_t n = 64u << 20;
	char *zeros = calloc(1, n);
	assert_non_null(zeros);
	struct pp_buf z = { 0 }, out = { 0 };
	assert_int_equal(pp_gzip(zeros, n, &z), 0);
	free(zeros);
	assert_true(z.len < n / 100);
	assert_int_equal(pp_gunzip(z.data, z.len, 1u << 20, &out), -EFBIG);
	assert_int_equal(out.len, 0);
	assert_true(out.cap <= (2u << 20)); /* stopped early, did not inflate it all */
	/* the pp_buf cap applies too */
	struct pp_buf capped = { .max = 4096 };
	assert_int_equal(pp_gunzip(z.data, z.len, n, &capped), -E2BIG);
	assert_int_equal(capped.len, 0);
	/* decode refuses bodies that are not a profile */
	Profile *p = NULL;
	assert_int_equal(pp_pprof_decode(z.data, z.len, &p), -EBADMSG); /* zeros: field 0 */
	assert_null(p);
	assert_int_equal(pp_pprof_decode("\x1f\x8b garbage", 10, &p), -EBADMSG);
	assert_int_equal(pp_pprof_decode("\xff\xff\xff\xff", 4, &p), -EBADMSG);
	pp_buf_free(&z);
	pp_buf_free(&out);
	pp_buf_free(&capped);
}

/* ---- checker on hand-built messages ---- */

struct fixture {
	Profile p;
	char *strs[10];
	Perftools__Profiles__ValueType vt, *vtp[1], pt;
	Perftools__Profiles__Mapping m, *mp[1];
	Perftools__Profiles__Function f, *fp[1];
	Perftools__Profiles__Line ln, *lnp[1];
	Perftools__Profiles__Location l, *lp[1];
	Perftools__Profiles__Sample s, *sp[1];
	Perftools__Profiles__Label lb, *lbp[1];
	uint64_t loc_ids[1];
	int64_t vals[2];
	int64_t comments[1];
};

static void fixture_init(struct fixture *x)
{
	static char *strs[] = { "",	  "samples", "count", "main",	  "main.c",
				"/bin/x", "k",	     "v",     "sam-ples", "bad\xff" };
	memset(x, 0, sizeof(*x));
	memcpy(x->strs, strs, sizeof(strs));
	perftools__profiles__profile__init(&x->p);
	x->p.n_string_table = 8;
	x->p.string_table = x->strs;
	perftools__profiles__value_type__init(&x->vt);
	x->vt.type = 1;
	x->vt.unit = 2;
	x->vtp[0] = &x->vt;
	x->p.n_sample_type = 1;
	x->p.sample_type = x->vtp;
	perftools__profiles__value_type__init(&x->pt);
	x->pt.type = 1;
	x->pt.unit = 2;
	x->p.period_type = &x->pt;
	perftools__profiles__mapping__init(&x->m);
	x->m.id = 1;
	x->m.memory_start = 0x1000;
	x->m.memory_limit = 0x2000;
	x->m.filename = 5;
	x->m.has_functions = x->m.has_filenames = x->m.has_line_numbers = true;
	x->mp[0] = &x->m;
	x->p.n_mapping = 1;
	x->p.mapping = x->mp;
	perftools__profiles__function__init(&x->f);
	x->f.id = 1;
	x->f.name = x->f.system_name = 3;
	x->f.filename = 4;
	x->fp[0] = &x->f;
	x->p.n_function = 1;
	x->p.function = x->fp;
	perftools__profiles__line__init(&x->ln);
	x->ln.function_id = 1;
	x->ln.line = 10;
	x->lnp[0] = &x->ln;
	perftools__profiles__location__init(&x->l);
	x->l.id = 1;
	x->l.mapping_id = 1;
	x->l.address = 0x1234;
	x->l.n_line = 1;
	x->l.line = x->lnp;
	x->lp[0] = &x->l;
	x->p.n_location = 1;
	x->p.location = x->lp;
	perftools__profiles__label__init(&x->lb);
	x->lb.key = 6;
	x->lb.str = 7;
	x->lbp[0] = &x->lb;
	perftools__profiles__sample__init(&x->s);
	x->loc_ids[0] = 1;
	x->s.n_location_id = 1;
	x->s.location_id = x->loc_ids;
	x->vals[0] = 5;
	x->s.n_value = 1;
	x->s.value = x->vals;
	x->s.n_label = 1;
	x->s.label = x->lbp;
	x->sp[0] = &x->s;
	x->p.n_sample = 1;
	x->p.sample = x->sp;
	x->p.time_nanos = 1;
	x->p.comment = x->comments;
}

static void mut_str0(struct fixture *x)
{
	x->strs[0] = "x";
}
static void mut_utf8(struct fixture *x)
{
	x->p.n_string_table = 10;
}
static void mut_no_types(struct fixture *x)
{
	x->p.n_sample_type = 0;
}
static void mut_dash(struct fixture *x)
{
	x->p.n_string_table = 9;
	x->vt.type = 8;
}
static void mut_type_idx(struct fixture *x)
{
	x->vt.unit = 8;
}
static void mut_map_id(struct fixture *x)
{
	x->m.id = 2;
}
static void mut_loc_id(struct fixture *x)
{
	x->l.id = 3;
}
static void mut_fn_id(struct fixture *x)
{
	x->f.id = 0;
}
static void mut_nvals(struct fixture *x)
{
	x->s.n_value = 2;
}
static void mut_addr0(struct fixture *x)
{
	x->l.address = 0;
	x->l.n_line = 0;
	x->m.has_functions = x->m.has_filenames = x->m.has_line_numbers = false;
}
static void mut_loc_map(struct fixture *x)
{
	x->l.mapping_id = 5;
}
static void mut_line_fn(struct fixture *x)
{
	x->ln.function_id = 9;
}
static void mut_line_fn0(struct fixture *x)
{
	x->ln.function_id = 0;
}
static void mut_time(struct fixture *x)
{
	x->p.time_nanos = 0;
}
static void mut_hasfn(struct fixture *x)
{
	x->l.n_line = 0;
}
static void mut_hasfile(struct fixture *x)
{
	x->f.filename = 0;
}
static void mut_hasline(struct fixture *x)
{
	x->ln.line = 0;
}
static void mut_hasinl(struct fixture *x)
{
	x->m.has_functions = x->m.has_filenames = x->m.has_line_numbers = false;
	x->m.has_inline_frames = true;
}
static void mut_label_key(struct fixture *x)
{
	x->lb.key = 42;
}
static void mut_label_empty(struct fixture *x)
{
	x->lb.key = 0;
}
static void mut_sample_loc(struct fixture *x)
{
	x->loc_ids[0] = 7;
}
static void mut_sample_loc0(struct fixture *x)
{
	x->loc_ids[0] = 0;
}
static void mut_default(struct fixture *x)
{
	x->p.default_sample_type = 3;
}
static void mut_comment(struct fixture *x)
{
	x->p.n_comment = 1;
	x->comments[0] = 100;
}
static void mut_fn_name(struct fixture *x)
{
	x->f.name = -1;
}
static void mut_map_file(struct fixture *x)
{
	x->m.build_id = 8;
}
static void mut_period(struct fixture *x)
{
	x->pt.unit = 11;
}
static void mut_none(struct fixture *x)
{
	(void)x;
}
static void mut_ok_default(struct fixture *x)
{
	x->p.default_sample_type = 1;
}
static void mut_ok_nomap(struct fixture *x)
{
	x->l.mapping_id = 0;
	x->ln.line = 0;
}

static void test_check_table(void **state)
{
	(void)state;
	static const struct {
		void (*mut)(struct fixture *);
		const char *want; /* substring of the error, NULL = passes */
	} cases[] = {
		{ mut_none, NULL },
		{ mut_ok_default, NULL },
		{ mut_ok_nomap, NULL },
		{ mut_str0, "string_table[0]" },
		{ mut_utf8, "UTF-8" },
		{ mut_no_types, "at least one sample_type" },
		{ mut_dash, "contains '-'" },
		{ mut_type_idx, "sample_type[0]: string index" },
		{ mut_map_id, "mapping ids must be 1..N" },
		{ mut_loc_id, "location ids must be 1..N" },
		{ mut_fn_id, "function ids must be 1..N" },
		{ mut_nvals, "expected len(sample_type)" },
		{ mut_addr0, "address 0 and no lines" },
		{ mut_loc_map, "mapping_id 5 does not exist" },
		{ mut_line_fn, "function_id 9 does not exist" },
		{ mut_line_fn0, "function_id 0 does not exist" },
		{ mut_time, "time_nanos" },
		{ mut_hasfn, "has_functions" },
		{ mut_hasfile, "has_filenames" },
		{ mut_hasline, "has_line_numbers" },
		{ mut_hasinl, "has_inline_frames without has_functions" },
		{ mut_label_key, "label 0: string index" },
		{ mut_label_empty, "empty key" },
		{ mut_sample_loc, "location_id 7 does not exist" },
		{ mut_sample_loc0, "location_id 0 does not exist" },
		{ mut_default, "default_sample_type \"main\"" },
		{ mut_comment, "comment[0]" },
		{ mut_fn_name, "function 1: string index" },
		{ mut_map_file, "mapping 1: string index" },
		{ mut_period, "period_type" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct fixture x;
		char err[256] = "unset";
		fixture_init(&x);
		cases[i].mut(&x);
		int r = pp_pprof_check(&x.p, err, sizeof(err));
		if (!cases[i].want) {
			if (r != 0)
				fail_msg("case %zu: unexpected failure: %s", i, err);
			assert_string_equal(err, "");
			continue;
		}
		if (r != -EINVAL || !strstr(err, cases[i].want))
			fail_msg("case %zu: r=%d err=\"%s\", want \"%s\"", i, r, err,
				 cases[i].want);
		/* the same message through the wire format fails the same way */
		size_t sz = perftools__profiles__profile__get_packed_size(&x.p);
		uint8_t *buf = malloc(sz + 1);
		assert_non_null(buf);
		perftools__profiles__profile__pack(&x.p, buf);
		Profile *p = NULL;
		if (pp_pprof_decode(buf, sz, &p) == 0) {
			char err2[256];
			/* a bogus count cannot survive packing (n_value is the array length) */
			if (cases[i].mut != mut_nvals && cases[i].mut != mut_utf8)
				assert_int_equal(pp_pprof_check(p, err2, sizeof(err2)), -EINVAL);
			pp_pprof_profile__free(p);
		}
		free(buf);
	}
	/* small err buffers are fine */
	struct fixture x;
	fixture_init(&x);
	mut_time(&x);
	char tiny[4];
	assert_int_equal(pp_pprof_check(&x.p, tiny, sizeof(tiny)), -EINVAL);
	assert_int_equal(strlen(tiny), 3);
	assert_int_equal(pp_pprof_check(&x.p, NULL, 0), -EINVAL);
}

/* 1e6 samples over 20k locations: hash-based dedup keeps this fast. */
static void test_many_samples(void **state)
{
	(void)state;
	enum { NLOC = 20000, NSAMP = 1000000, DEPTH = 8 };
	struct pp_pprof *pp = pp_pprof__new();
	assert_non_null(pp);
	assert_int_equal(pp_pprof__add_sample_type(pp, "samples", "count"), 0);
	assert_int_equal(pp_pprof__add_sample_type(pp, "cpu", "nanoseconds"), 0);
	pp_pprof__set_time(pp, 1, 1);
	struct pp_pprof_mapping m = { .start = 0x400000, .limit = 0x800000, .file = "/bin/big" };
	assert_int_equal(pp_pprof__add_mapping(pp, &m), 1);
	uint64_t *ids = malloc(NLOC * sizeof(*ids));
	assert_non_null(ids);
	char name[32];
	for (int i = 0; i < NLOC; i++) {
		snprintf(name, sizeof(name), "func_%d", i / 4); /* 4 addresses per function */
		struct pp_pprof_line l = { .function = name, .file = "big.c", .line = i % 100 + 1 };
		ids[i] = pp_pprof__add_location(pp, 1, 0x400000 + (uint64_t)i * 16, &l, 1);
		assert_int_equal(ids[i], (uint64_t)i + 1);
	}
	uint64_t x = 12345, sum = 0;
	for (int i = 0; i < NSAMP; i++) {
		uint64_t st[DEPTH];
		for (int d = 0; d < DEPTH; d++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			st[d] = ids[x % NLOC];
		}
		int64_t v[2] = { 1 + (i % 3), (1 + (i % 3)) * 1000000 };
		sum += (uint64_t)v[0];
		struct pp_pprof_label lb = { .key = "thread_id", .num = i % 16 };
		assert_int_equal(pp_pprof__add_sample(pp, st, DEPTH, v, 2, &lb, 1), 0);
	}
	Profile *p = encode_decode(pp, true);
	assert_int_equal(p->n_sample, NSAMP);
	assert_int_equal(p->n_location, NLOC);
	assert_int_equal(p->n_function, NLOC / 4);
	uint64_t got = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		got += (uint64_t)p->sample[i]->value[0];
		assert_int_equal(p->sample[i]->n_location_id, DEPTH);
	}
	assert_int_equal(got, sum);
	pp_pprof_profile__free(p);
	pp_pprof__free(pp);
	free(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpu_roundtrip), cmocka_unit_test(test_heap_profile),
		cmocka_unit_test(test_empty_profile), cmocka_unit_test(test_dedup),
		cmocka_unit_test(test_utf8_repair),   cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_mapping_flags), cmocka_unit_test(test_gzip_roundtrip),
		cmocka_unit_test(test_gunzip_bound),  cmocka_unit_test(test_check_table),
		cmocka_unit_test(test_many_samples),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
