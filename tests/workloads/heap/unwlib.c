/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A malloc preloaded after podprof's agent (LD_PRELOAD="agent unwlib") that
 * unwinds its caller's stack with the C library's backtrace(3) (libgcc's
 * unwinder, as heaptrack or a crash reporter would) when asked for 12345
 * bytes: the agent's sampled path calls it with a real call, so the unwind
 * passes through the agent's code and needs its CFI.
 */

#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static __thread int busy;
int unwlib_frames = -1; /* frames seen up to main (-1: not reached) */

void *malloc(size_t n)
{
	static void *(*next)(size_t);
	void *p;

	if (!next)
		next = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	p = next(n);
	if (n == 12345 && !busy) {
		void *pcs[64];
		int k;

		busy = 1;
		k = backtrace(pcs, 64);
		for (int i = 0; i < k; i++) {
			Dl_info di;

			if (dladdr(pcs[i], &di) && di.dli_sname && !strcmp(di.dli_sname, "main")) {
				unwlib_frames = i;
				break;
			}
		}
		busy = 0;
	}
	return p;
}

__attribute__((constructor)) static void warm(void)
{
	void *pcs[4];

	busy = 1;
	backtrace(pcs, 4); /* loads libgcc_s now, not inside malloc */
	busy = 0;
}
