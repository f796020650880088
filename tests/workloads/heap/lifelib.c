/* SPDX-License-Identifier: Apache-2.0 */
/* Loaded by lifecycle.c with dlopen after podprof attached. */
#include <stdlib.h>

static void *keep[100000];
static volatile unsigned long sink;

__attribute__((noinline)) void lib_site(int n, int size)
{
	for (int i = 0; i < n && i < 100000; i++) {
		keep[i] = malloc((size_t)size);
		sink += (unsigned long)keep[i];
	}
}
