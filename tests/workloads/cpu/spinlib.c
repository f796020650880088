/* SPDX-License-Identifier: Apache-2.0 */
/* Shared-library part of the spin workload (statically linked into spin_static). */
#include "spin.h"

__attribute__((noinline)) uint64_t lib_hot(uint64_t x, unsigned long iters)
{
	SPIN_KERNEL(x, iters);
	return x;
}
