/* SPDX-License-Identifier: Apache-2.0 */
#ifndef PODPROF_WL_SPIN_H
#define PODPROF_WL_SPIN_H

#include <stdint.h>

/*
 * One unit of work: a dependent multiply-add chain, so every iteration costs
 * the same wherever it runs. The asm barrier keeps the compiler from
 * folding the loop.
 */
#define SPIN_KERNEL(x, n)                                                          \
	do {                                                                       \
		for (unsigned long i_ = 0; i_ < (n); i_++) {                       \
			(x) = (x)*6364136223846793005ull + 1442695040888963407ull; \
			__asm__ volatile("" : "+r"(x));                            \
		}                                                                  \
	} while (0)

uint64_t lib_hot(uint64_t x, unsigned long iters);

#endif
