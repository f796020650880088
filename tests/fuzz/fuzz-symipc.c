/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_symiso__decode_result on arbitrary bytes: the symbolizer helper's
 * answer, read by podprof as coming from a hostile process. Invariants: 0
 * or -EBADMSG/-ENOMEM; on 0, rc <= 0, 1..PP_SYMISO_MAX_FRAMES frames when
 * rc == 0 (none otherwise), every frame named, strings within
 * PP_SYMISO_MAX_STR; and what was decoded encodes and decodes again to the
 * same frames.
 */
#include "fuzz.h"

#include "symbolize/isolate.h"
#include "symbolize/symbolize.h"

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[PP_SYMISO_MAX_MSG];
	struct pp_sym_result r, r2;
	struct pp_symbolizer_stats st;
	size_t len;
	int rc, rc2;

	int e = pp_symiso__decode_result(data, size, &rc, &r, &st);
	fuzz_check(e == 0 || e == -EBADMSG || e == -ENOMEM);
	if (e)
		return 0;
	fuzz_check(rc <= 0);
	fuzz_check(rc == 0 ? r.n >= 1 && r.n <= PP_SYMISO_MAX_FRAMES : r.n == 0);
	for (size_t i = 0; i < r.n; i++) {
		fuzz_check(r.frames[i].function);
		fuzz_check(strlen(r.frames[i].function) <= PP_SYMISO_MAX_STR);
	}
	fuzz_check(pp_symiso__encode_result(rc, &r, &st, buf, sizeof(buf), &len) == 0);
	fuzz_check(pp_symiso__decode_result(buf, len, &rc2, &r2, NULL) == 0);
	fuzz_check(rc2 == rc && r2.n == r.n);
	for (size_t i = 0; i < r.n; i++) {
		fuzz_check(same(r.frames[i].function, r2.frames[i].function));
		fuzz_check(same(r.frames[i].system_name, r2.frames[i].system_name));
		fuzz_check(same(r.frames[i].file, r2.frames[i].file));
		fuzz_check(r.frames[i].line == r2.frames[i].line);
	}
	pp_sym_result__free(&r);
	pp_sym_result__free(&r2);
	return 0;
}
