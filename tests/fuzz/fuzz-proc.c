/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_proc__parse_stat, pp_proc__parse_status and the container parsers
 * (cgroup, mountinfo) on the same arbitrary text (not NUL-terminated).
 * Invariants: comm NUL-terminated, exe/cmdline NULL; a container id is 64
 * lowercase hex digits; a container name is a NUL-terminated DNS label.
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
	char id[65], name[64];
	memset(id, 0x5a, sizeof(id));
	r = pp_proc__parse_cgroup_id((const char *)data, size, id, sizeof(id));
	fuzz_check(r == 0 || r == -ENOENT);
	if (r == 0) {
		fuzz_check(strlen(id) == 64);
		for (size_t i = 0; i < 64; i++)
			fuzz_check((id[i] >= '0' && id[i] <= '9') ||
				   (id[i] >= 'a' && id[i] <= 'f'));
	}
	memset(name, 0x5a, sizeof(name));
	r = pp_proc__parse_container_name((const char *)data, size, name, sizeof(name));
	fuzz_check(r == 0 || r == -ENOENT || r == -ENAMETOOLONG);
	if (r == 0)
		fuzz_check(memchr(name, '\0', sizeof(name)) && name[0] && name[0] != '-');
	return 0;
}
