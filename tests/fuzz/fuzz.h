/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared bits of the fuzz targets. Each fuzz-<parser>.c defines
 * LLVMFuzzerTestOneInput; it is linked either with libFuzzer
 * (-fsanitize=fuzzer) or with replay.c, which runs it over a corpus.
 * A target calls fuzz_fail() when a documented invariant of the parser's
 * result does not hold, so the fuzzer reports it like a crash.
 */
#ifndef PODPROF_FUZZ_H
#define PODPROF_FUZZ_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_check(cond)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                      \
			abort();                                                             \
		}                                                                            \
	} while (0)

/* A NUL-terminated heap copy of the input (NULL on ENOMEM: the caller skips). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#endif
