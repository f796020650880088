/* SPDX-License-Identifier: Apache-2.0 */
#ifndef PP_UTIL_SIGBUS_H
#define PP_UTIL_SIGBUS_H

#include <stdint.h>

/*
 * Files of the target that podprof reads through a mapping (libelf and
 * libdw map the files they are given) can be truncated by the target at
 * any time: touching a page past the new end raises SIGBUS. The guard
 * installed here (process-wide; the previous SIGBUS disposition is
 * chained for every other cause) answers such a fault (BUS_ADRERR) by
 * mapping a page of zeros over the faulting page, so the read sees zeros
 * (garbage that the ELF/DWARF parsers already survive) instead of killing
 * podprof. The replacement goes when the parser unmaps the file.
 *
 * Installed by pp_unwinder__new, pp_symbolizer__new and
 * pp_heap__find_allocator. Returns 0 or -errno.
 */
int pp_sigbus_guard_install(void);
/* Faults answered so far (a counter for /metrics). */
uint64_t pp_sigbus_guard_repaired(void);

#endif
