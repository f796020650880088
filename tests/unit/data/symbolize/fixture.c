/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Symbolizer test fixture: prints the runtime addresses of a few functions
 * (and a return address inside inlined code), then waits to be killed.
 * Output lines: "<tag> 0x<addr>".
 */
#include <stdio.h>
#include <unistd.h>

void pp_fix_leaf(void);
int pp_fix_outer(int x);

static void *volatile pp_fix_ret;
volatile int pp_fix_sink;

__attribute__((noinline)) void pp_fix_leaf(void)
{
	pp_fix_ret = __builtin_return_address(0);
	pp_fix_sink++;
}

static inline __attribute__((always_inline)) int pp_fix_inl(int x)
{
	pp_fix_sink += x;
	pp_fix_leaf();
	return pp_fix_sink * 3;
}

__attribute__((noinline)) int pp_fix_outer(int x)
{
	int r = x * 7;
	r += pp_fix_inl(r);
	return r + 1;
}

__attribute__((noinline)) static int pp_fix_static(int x)
{
	for (int i = 0; i < x; i++)
		pp_fix_sink += i;
	return pp_fix_sink;
}

int main(int argc, char **argv)
{
	int (*volatile sf)(int) = pp_fix_static;
	pp_fix_outer(argc);
	sf(argc);
	printf("outer %p\n", (void *)pp_fix_outer);
	printf("leaf %p\n", (void *)pp_fix_leaf);
	printf("static %p\n", (void *)sf);
	printf("inlret %p\n", pp_fix_ret);
	printf("main %p\n", (void *)main);
	printf("libcfn %p\n", (void *)fflush);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}
