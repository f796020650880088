/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_proc__parse_stat and pp_proc__parse_status on the same arbitrary text
 * (not NUL-terminated). Invariants: comm NUL-terminated, exe/cmdline NULL.
 */
#include "fuzz.h"

#include "procfs/procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_proc_info info;
	struct pp_proc_status st;
	int r;

	if (size > 1 << 20)
		return 0;
	memset(&info, 0x5a, sizeof(info));
	r = pp_proc__parse_stat((const char *)data, size, &info);
	fuzz_check(r <= 0);
	if (r == 0) {
		fuzz_check(memchr(info.comm, '\0', sizeof(info.comm)) != NULL);
		fuzz_check(info.exe == NULL && info.cmdline == NULL);
	}
	r = pp_proc__parse_status((const char *)data, size, &st);
	fuzz_check(r == 0 || r == -EINVAL);
	return 0;
}
