/* SPDX-License-Identifier: Apache-2.0 */
#include "caps.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static int caps_get(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	return syscall(SYS_capget, &h, d) < 0 ? -errno : 0;
}

int pp_caps__effective(uint64_t *ret)
{
	struct __user_cap_data_struct d[2];
	int r = caps_get(d);
	if (r < 0)
		return r;
	*ret = (uint64_t)d[0].effective | ((uint64_t)d[1].effective << 32);
	return 0;
}

int pp_caps__restrict(uint64_t keep, uint64_t *ret_kept)
{
	struct __user_cap_data_struct d[2];
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	int r = caps_get(d);
	if (r < 0)
		return r;
	uint64_t eff = (uint64_t)d[0].effective | ((uint64_t)d[1].effective << 32);
	/* The bounding set first: dropping from it needs CAP_SETPCAP, which goes next. */
	if (eff & (1ull << PP_CAP_SETPCAP)) {
		for (int c = 0; c <= 63; c++) {
			if (keep & (1ull << c))
				continue;
			if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
				prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
		}
	}
	for (int i = 0; i < 2; i++) {
		uint32_t k = (uint32_t)(keep >> (32 * i));
		d[i].effective &= k;
		d[i].permitted &= k;
		d[i].inheritable &= k;
	}
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	if (ret_kept)
		return pp_caps__effective(ret_kept);
	return 0;
}

void pp_caps__format(uint64_t mask, char *buf, unsigned long n)
{
	static const struct {
		int bit;
		const char *name;
	} names[] = {
		{ 0, "CAP_CHOWN" },
		{ 1, "CAP_DAC_OVERRIDE" },
		{ 2, "CAP_DAC_READ_SEARCH" },
		{ 6, "CAP_SETGID" },
		{ 7, "CAP_SETUID" },
		{ 8, "CAP_SETPCAP" },
		{ 19, "CAP_SYS_PTRACE" },
		{ 21, "CAP_SYS_ADMIN" },
		{ 24, "CAP_SYS_RESOURCE" },
		{ 34, "CAP_SYSLOG" },
		{ 38, "CAP_PERFMON" },
		{ 39, "CAP_BPF" },
		{ 40, "CAP_CHECKPOINT_RESTORE" },
	};
	size_t len = 0;
	if (!n)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(mask & (1ull << names[i].bit)))
			continue;
		int w = snprintf(buf + len, n - len, "%s%s", len ? "," : "", names[i].name);
		if (w < 0 || (size_t)w >= n - len)
			break;
		len += (size_t)w;
	}
	if (!len)
		snprintf(buf, n, "none");
}
