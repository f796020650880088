/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The embedded /debug/pprof/ui/ assets: every file of web/dist is there,
 * inflates to its recorded length (and to the bytes of the committed file),
 * and Accept-Encoding is read as RFC 9110 says.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/ui.h"

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void test_assets(void **state)
{
	static const char *const names[] = { "index.html", "app.js", "app.css", "LICENSES.txt" };

	assert_ptr_equal(pp_ui__find(""), pp_ui__find("index.html"));
	assert_null(pp_ui__find("nonesuch.js"));
	assert_null(pp_ui__find("../index.html"));
	assert_null(pp_ui__find(NULL));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct pp_ui_asset *a = pp_ui__find(names[i]);
		char path[4096], *data = NULL, *want;
		size_t len;

		assert_non_null(a);
		assert_true(a->gz_len > 18 && a->gz[0] == 0x1f && a->gz[1] == 0x8b);
		assert_int_equal(pp_ui__inflate(a, &data), 0);
		snprintf(path, sizeof(path), "%s/%s", SOURCE_ROOT "/web/dist", names[i]);
		want = read_file(path, &len);
		assert_non_null(want);
		assert_int_equal(len, a->len);
		assert_memory_equal(data, want, len);
		free(want);
		free(data);
	}
}

static void test_accept_encoding(void **state)
{
	assert_false(pp_ui__accepts_gzip(NULL));
	assert_false(pp_ui__accepts_gzip(""));
	assert_true(pp_ui__accepts_gzip("gzip"));
	assert_true(pp_ui__accepts_gzip("gzip, deflate, br, zstd"));
	assert_true(pp_ui__accepts_gzip("br;q=1.0, GZIP;q=0.5"));
	assert_true(pp_ui__accepts_gzip("x-gzip"));
	assert_true(pp_ui__accepts_gzip("*"));
	assert_false(pp_ui__accepts_gzip("identity"));
	assert_false(pp_ui__accepts_gzip("deflate, br"));
	assert_false(pp_ui__accepts_gzip("gzip;q=0"));
	assert_false(pp_ui__accepts_gzip("gzip; q=0.000, *"));
	assert_false(pp_ui__accepts_gzip("*;q=0"));
	assert_true(pp_ui__accepts_gzip("gzip;q=0.001"));
	assert_false(pp_ui__accepts_gzip("gzipped"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_assets),
		cmocka_unit_test(test_accept_encoding),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
