/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_maps__parse on arbitrary text (not NUL-terminated: the input is used
 * as is). Invariants from procfs.h: entries sorted by start, non-empty,
 * no overlaps, special only with a path, pp_maps__find agrees with them.
 */
#include "fuzz.h"

#include "procfs/procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_maps maps = { 0 };
	size_t bad = 0;
	int r;

	if (size > 4 << 20)
		return 0;
	r = pp_maps__parse((const char *)data, size, &maps, &bad);
	fuzz_check(r == 0 || r == -ENOMEM || r == -E2BIG || r == -EINVAL);
	if (r < 0)
		return 0;
	for (size_t i = 0; i < maps.n; i++) {
		const struct pp_map *m = &maps.v[i];

		fuzz_check(m->start < m->end);
		fuzz_check(i == 0 || maps.v[i - 1].end <= m->start);
		fuzz_check(!m->special || m->path);
		fuzz_check((m->prot & ~(PP_PROT_R | PP_PROT_W | PP_PROT_X)) == 0);
		if (m->path)
			(void)strlen(m->path);
		fuzz_check(pp_maps__find(&maps, m->start) == m);
		fuzz_check(pp_maps__find(&maps, m->end - 1) == m);
		if (i + 1 < maps.n && m->end < maps.v[i + 1].start)
			fuzz_check(pp_maps__find(&maps, m->end) == NULL);
	}
	if (maps.n) {
		if (maps.v[0].start > 0)
			fuzz_check(pp_maps__find(&maps, maps.v[0].start - 1) == NULL);
		if (maps.v[maps.n - 1].end != 0)
			fuzz_check(pp_maps__find(&maps, maps.v[maps.n - 1].end) == NULL);
	} else {
		fuzz_check(pp_maps__find(&maps, 0x1000) == NULL);
	}
	pp_maps__free(&maps);
	return 0;
}
