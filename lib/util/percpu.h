/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sum of one key of a per-CPU array map of uint64_t counters (the drop and
 * error counters of the BPF collectors). Header-only so that lib/util does
 * not need libbpf; include it only where libbpf is linked.
 */
#ifndef PP_UTIL_PERCPU_H
#define PP_UTIL_PERCPU_H

#include <bpf/bpf.h>
#include <stdint.h>
#include <stdlib.h>

/* The counter at key summed over ncpus CPUs; 0 when it cannot be read. */
static inline uint64_t pp_percpu_sum(int map_fd, uint32_t key, int ncpus)
{
	uint64_t *v = ncpus > 0 ? calloc((size_t)ncpus, sizeof(*v)) : NULL;
	uint64_t sum = 0;

	if (!v)
		return 0;
	if (bpf_map_lookup_elem(map_fd, &key, v) == 0)
		for (int i = 0; i < ncpus; i++)
			sum += v[i];
	free(v);
	return sum;
}

#endif
