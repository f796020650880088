/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The real binary gen-hostile.py corrupts: small, with a build id, a
 * symbol table, DWARF (-g) with inlined functions, and .eh_frame. It is
 * only ever parsed and mmapped, never run by the test (it can be run).
 */
#include <stdio.h>
#include <stdlib.h>

unsigned hostile_leaf(unsigned x);
unsigned hostile_mid(unsigned x);

static inline __attribute__((always_inline)) unsigned mix(unsigned x)
{
	return x * 2654435761u ^ (x >> 13);
}

__attribute__((noinline)) unsigned hostile_leaf(unsigned x)
{
	return mix(x) + mix(x + 1);
}

__attribute__((noinline)) unsigned hostile_mid(unsigned x)
{
	return hostile_leaf(x) ^ hostile_leaf(x * 3);
}

int main(int argc, char **argv)
{
	unsigned v = (unsigned)argc;

	for (int i = 1; i < argc; i++)
		v += hostile_mid((unsigned)strtoul(argv[i], NULL, 0));
	printf("%u\n", v);
	return 0;
}
