/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Table tests for the pure helpers of lib/http: listen addresses, query
 * strings (Go's url.ParseQuery), /symbol words (Go's strconv.ParseUint(w, 0,
 * 64), expectations checked against go 1.19) and profile kind names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "http/http.h"

static void test_kind_names(void **state)
{
	static const char *const names[] = { "profile",	     "heap",  "allocs", "goroutine",
					     "threadcreate", "block", "mutex" };

	assert_int_equal(ARRAY_SIZE(names), PP_PROFILE__COUNT);
	for (int i = 0; i < PP_PROFILE__COUNT; i++) {
		assert_string_equal(pp_profile_kind__name((enum pp_profile_kind)i), names[i]);
		assert_int_equal(pp_profile_kind__from_name(names[i]), i);
	}
	assert_null(pp_profile_kind__name(PP_PROFILE__COUNT));
	assert_int_equal(pp_profile_kind__from_name("cmdline"), -1);
	assert_int_equal(pp_profile_kind__from_name("Heap"), -1);
	assert_int_equal(pp_profile_kind__from_name(""), -1);
	assert_int_equal(pp_profile_kind__from_name(NULL), -1);
}

static void test_parse_listen(void **state)
{
	static const struct {
		const char *in;
		int ret;
		const char *host;
		unsigned port;
	} cases[] = {
		{ "127.0.0.1:6060", 0, "127.0.0.1", 6060 },
		{ ":6060", 0, "", 6060 },
		{ ":0", 0, "", 0 },
		{ "[::1]:8080", 0, "::1", 8080 },
		{ "[::]:1", 0, "::", 1 },
		{ "localhost:65535", 0, "localhost", 65535 },
		{ "0.0.0.0:80", 0, "0.0.0.0", 80 },
		{ "127.0.0.1:65536", -EINVAL, NULL, 0 },
		{ "127.0.0.1:", -EINVAL, NULL, 0 },
		{ "127.0.0.1", -EINVAL, NULL, 0 },
		{ "6060", -EINVAL, NULL, 0 },
		{ "", -EINVAL, NULL, 0 },
		{ "::1:80", -EINVAL, NULL, 0 },
		{ "[::1]80", -EINVAL, NULL, 0 },
		{ "[::1:80", -EINVAL, NULL, 0 },
		{ "[]:80", -EINVAL, NULL, 0 },
		{ "host:+80", -EINVAL, NULL, 0 },
		{ "host:-1", -EINVAL, NULL, 0 },
		{ "host:8 0", -EINVAL, NULL, 0 },
		{ "ho st:80", -EINVAL, NULL, 0 },
		{ "host:0x50", -EINVAL, NULL, 0 },
		{ "host:000080", -EINVAL, NULL, 0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char host[64] = "unchanged";
		unsigned port = 4242;
		int r = pp_http__parse_listen(cases[i].in, host, sizeof(host), &port);

		if (r != cases[i].ret)
			fail_msg("%s: got %d want %d", cases[i].in, r, cases[i].ret);
		if (r == 0) {
			assert_string_equal(host, cases[i].host);
			assert_int_equal(port, cases[i].port);
		} else {
			assert_int_equal(port, 4242);
		}
	}
	/* host buffer too small */
	{
		char small[4];
		unsigned port;
		assert_int_equal(pp_http__parse_listen("localhost:1", small, sizeof(small), &port),
				 -ENAMETOOLONG);
		assert_int_equal(pp_http__parse_listen("abc:1", small, sizeof(small), &port), 0);
		assert_string_equal(small, "abc");
	}
}

static void test_query_get(void **state)
{
	static const struct {
		const char *query, *name;
		int ret;
		const char *value;
	} cases[] = {
		{ "", "seconds", 0, NULL },
		{ "seconds=5", "seconds", 1, "5" },
		{ "a=1&seconds=5&b=2", "seconds", 1, "5" },
		/* first value wins */
		{ "seconds=5&seconds=7", "seconds", 1, "5" },
		{ "seconds=&seconds=7", "seconds", 1, "" },
		/* percent-decoding of keys and values, '+' is a space */
		{ "%73econds=%31%30", "seconds", 1, "10" },
		{ "q=a+b%20c", "q", 1, "a b c" },
		{ "q=%2B%26%3D", "q", 1, "+&=" },
		{ "q=%e2%82%ac", "q", 1, "\xe2\x82\xac" },
		/* a bad escape drops the pair, the next one wins */
		{ "seconds=%zz&seconds=3", "seconds", 1, "3" },
		{ "seconds=%4&seconds=3", "seconds", 1, "3" },
		{ "seconds=1%&seconds=3", "seconds", 1, "3" },
		{ "se%conds=1&seconds=3", "seconds", 1, "3" },
		/* Go 1.17+: a pair with ';' is dropped */
		{ "seconds=1;x=2&seconds=4", "seconds", 1, "4" },
		{ "seconds=1;x=2", "seconds", 0, NULL },
		/* key without '=' has an empty value */
		{ "debug", "debug", 1, "" },
		{ "debug&debug=1", "debug", 1, "" },
		/* names are exact */
		{ "Seconds=1", "seconds", 0, NULL },
		{ "secondsx=1", "seconds", 0, NULL },
		{ "second=1", "seconds", 0, NULL },
		{ "&&=&seconds=9&", "seconds", 1, "9" },
		{ "x=seconds=1", "seconds", 0, NULL },
		{ "seconds==1", "seconds", 1, "=1" },
		{ "verylongkeynamethatdoesnotfitanywhereatallreallyreallyreallylongxx=1&debug=2",
		  "debug", 1, "2" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char buf[32] = "unchanged";
		int r = pp_http__query_get(cases[i].query, cases[i].name, buf, sizeof(buf));

		if (r != cases[i].ret)
			fail_msg("%s [%s]: got %d want %d", cases[i].query, cases[i].name, r,
				 cases[i].ret);
		if (r == 1)
			assert_string_equal(buf, cases[i].value);
	}
	{
		char small[4];
		assert_int_equal(pp_http__query_get("q=12345", "q", small, sizeof(small)), -E2BIG);
		assert_int_equal(pp_http__query_get("q=123", "q", small, sizeof(small)), 1);
		assert_string_equal(small, "123");
	}
}

static void check_symbols(const char *in, const uint64_t *want, size_t want_n)
{
	uint64_t *got = NULL;
	size_t n = 99;

	assert_int_equal(pp_http__parse_symbol_request(in, strlen(in), &got, &n), 0);
	if (n != want_n)
		fail_msg("'%s': %zu words, want %zu", in, n, want_n);
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i])
			fail_msg("'%s' word %zu: %#llx want %#llx", in, i,
				 (unsigned long long)got[i], (unsigned long long)want[i]);
	free(got);
}

static void test_symbol_words(void **state)
{
	/* Single words: value per Go's ParseUint(w, 0, 64), 0 = skipped. */
	static const struct {
		const char *word;
		uint64_t value;
	} words[] = {
		{ "0x401000", 0x401000 },
		{ "0X1F", 0x1f },
		{ "0xdeadBEEF", 0xdeadbeef },
		{ "4096", 4096 },
		{ "0755", 0755 },
		{ "0o17", 017 },
		{ "0O17", 017 },
		{ "0b101", 5 },
		{ "0B11", 3 },
		{ "1_000", 1000 },
		{ "0_7", 7 },
		{ "0x_1f", 0x1f },
		{ "0xffffffffffffffff", UINT64_MAX },
		{ "18446744073709551615", UINT64_MAX },
		/* skipped: zero, syntax errors, overflow */
		{ "0", 0 },
		{ "0x0", 0 },
		{ "", 0 },
		{ "0x", 0 },
		{ "0b", 0 },
		{ "08", 0 },
		{ "0b2", 0 },
		{ "0x1__f", 0 },
		{ "_1", 0 },
		{ "1_", 0 },
		{ "0x_", 0 },
		{ "-1", 0 },
		{ " 1", 0 },
		{ "1 ", 0 },
		{ "0x1g", 0 },
		{ "0x401000\n", 0 },
		{ "18446744073709551616", 0 },
		{ "0x10000000000000000", 0 },
		{ "main", 0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		check_symbols(words[i].word, &words[i].value, words[i].value ? 1 : 0);
}

static void test_symbol_lists(void **state)
{
	static const uint64_t a[] = { 0x401000, 0x402000 };
	static const uint64_t b[] = { 0x1000, 0x1000, 0x10, 0x1000 };
	static const uint64_t c[] = { 0x1 };
	uint64_t *got = (uint64_t *)1;
	size_t n = 7;

	check_symbols("0x401000+0x402000", a, 2);
	/* order kept, duplicates kept, junk and zero skipped */
	check_symbols("0x1000+0x1000+bad+0+16+++4096", b, 4);
	check_symbols("+0x1+", c, 1);
	check_symbols("", NULL, 0);
	check_symbols("+", NULL, 0);

	assert_int_equal(pp_http__parse_symbol_request(NULL, 0, &got, &n), 0);
	assert_int_equal(n, 0);
	free(got);
	assert_int_equal(pp_http__parse_symbol_request(NULL, 3, &got, &n), -EINVAL);
}

static void test_symbol_cap(void **state)
{
	/* 200000 words: only the first 100000 are looked at. */
	size_t words = 200000, len = words * 4;
	char *body = malloc(len + 1);
	uint64_t *got = NULL;
	size_t n = 0;

	assert_non_null(body);
	for (size_t i = 0; i < words; i++)
		memcpy(body + i * 4, "0x7+", 4);
	body[len - 1] = '\0';
	assert_int_equal(pp_http__parse_symbol_request(body, len - 1, &got, &n), 0);
	assert_int_equal(n, 100000);
	assert_int_equal(got[0], 7);
	assert_int_equal(got[n - 1], 7);
	free(got);
	free(body);
}

static void test_host_name(void **state)
{
	static const struct {
		const char *in, *out; /* out NULL: -EINVAL */
	} cases[] = {
		{ "localhost", "localhost" },
		{ "LocalHost:6060", "localhost" },
		{ "localhost.", "localhost" },
		{ "example.com.:80", "example.com" },
		{ "example.com:", "example.com" },
		{ "10.1.2.3:6060", "10.1.2.3" },
		{ "[::1]:6060", "::1" },
		{ "[::1]", "::1" },
		{ "[FE80::1%25eth0]:1", "fe80::1" },
		{ "", NULL },
		{ ":6060", NULL },
		{ "::1", NULL },
		{ "::1:6060", NULL },
		{ "[::1", NULL },
		{ "[:0:18]:80", NULL },
		{ "[evil.example]", NULL },
		{ "[::1]x", NULL },
		{ "[::1]:x", NULL },
		{ "a:b", NULL },
		{ "a:99999", NULL },
		{ "a b", NULL },
		{ "a/b", NULL },
		{ "user@a", NULL },
		{ "a,b", NULL },
		{ "a\\b", NULL },
		{ "a\x80", NULL },
		{ ".", NULL },
		{ "a..", NULL },
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r = pp_http__host_name(cases[i].in, buf, sizeof(buf));

		if (!cases[i].out) {
			if (r != -EINVAL)
				fail_msg("%s: %d, want -EINVAL", cases[i].in, r);
			continue;
		}
		if (r != 0 || strcmp(buf, cases[i].out) != 0)
			fail_msg("%s: %d %s, want %s", cases[i].in, r, r ? "" : buf, cases[i].out);
	}
	assert_int_equal(pp_http__host_name("abcdef", buf, 4), -ENAMETOOLONG);
}

static void test_host_checks(void **state)
{
	static const char *const loop[] = { "localhost",   "a.localhost", "127.0.0.1",
					    "127.255.0.9", "::1",	  "::ffff:127.0.0.2" };
	static const char *const not_loop[] = {
		"localhost.evil.example", "evillocalhost", "128.0.0.1", "::2", "0.0.0.0",
		"::ffff:10.0.0.1"
	};
	static const char *const list = " podprof.example , *.svc.example,[fd00::1]:80,10.0.0.7";

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(loop); i++)
		if (!pp_http__host_is_loopback(loop[i]))
			fail_msg("%s is loopback", loop[i]);
	for (size_t i = 0; i < ARRAY_SIZE(not_loop); i++)
		if (pp_http__host_is_loopback(not_loop[i]))
			fail_msg("%s is not loopback", not_loop[i]);
	assert_true(pp_http__host_listed(list, "podprof.example"));
	assert_true(pp_http__host_listed(list, "a.svc.example"));
	assert_true(pp_http__host_listed(list, "a.b.svc.example"));
	assert_false(pp_http__host_listed(list, "svc.example"));
	assert_false(pp_http__host_listed(list, "evilsvc.example"));
	assert_true(pp_http__host_listed(list, "fd00::1"));
	assert_true(pp_http__host_listed(list, "fd00:0::1"));
	assert_true(pp_http__host_listed(list, "10.0.0.7"));
	assert_true(pp_http__host_listed(list, "::ffff:10.0.0.7"));
	assert_false(pp_http__host_listed(list, "10.0.0.8"));
	assert_false(pp_http__host_listed(list, "x.podprof.example"));
	assert_false(pp_http__host_listed("", "a"));
	assert_false(pp_http__host_listed(NULL, "a"));
	assert_true(pp_http__host_listed("a,*", "zzz"));
	assert_true(pp_http__host_listed("fd00::2", "fd00::2"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kind_names),   cmocka_unit_test(test_parse_listen),
		cmocka_unit_test(test_query_get),    cmocka_unit_test(test_symbol_words),
		cmocka_unit_test(test_symbol_lists), cmocka_unit_test(test_symbol_cap),
		cmocka_unit_test(test_host_name),    cmocka_unit_test(test_host_checks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
