/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_config__parse on arbitrary YAML. Invariants: the error line is
 * NUL-terminated; an accepted document dumps (pp_config__dump) to YAML that
 * parses again and dumps to the same text.
 */
#include "fuzz.h"

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_config *c = NULL, *c2 = NULL;
	struct pp_buf d1 = { .max = 1 << 20 }, d2 = { .max = 1 << 20 };
	char err[256];
	int r;

	if (size > 256 * 1024)
		return 0;
	/*
	 * Patterns with stacked or nested repetitions once made glibc's
	 * regcomp take gigabytes (corpus/config/regress-regex-blowup.yaml);
	 * the config now refuses them before compiling, so no input is skipped.
	 */
	memset(err, 'x', sizeof(err));
	r = pp_config__parse((const char *)data, size, "fuzz.yaml", &c, err, sizeof(err));
	if (r < 0) {
		fuzz_check(c == NULL);
		fuzz_check(memchr(err, '\0', sizeof(err)) != NULL);
		return 0;
	}
	fuzz_check(c != NULL);
	if (pp_config__dump(c, &d1) == 0) {
		/* same name: the dump starts with a comment naming its source */
		r = pp_config__parse(d1.data, d1.len, "fuzz.yaml", &c2, err, sizeof(err));
		if (r < 0)
			fprintf(stderr, "dump did not parse: %s\n---\n%.*s\n", err, (int)d1.len,
				d1.data);
		fuzz_check(r == 0 || r == -ENOMEM);
		if (r == 0 && pp_config__dump(c2, &d2) == 0)
			fuzz_check(d1.len == d2.len && memcmp(d1.data, d2.data, d1.len) == 0);
	}
	pp_buf_free(&d1);
	pp_buf_free(&d2);
	pp_config__free(c2);
	pp_config__free(c);
	return 0;
}
