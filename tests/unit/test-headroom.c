/* SPDX-License-Identifier: Apache-2.0 */
/* The parsers of the memory headroom check: /proc/PID/cgroup, mountinfo, the margin. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "inject/headroom.h"

static const struct {
	const char *text;
	int r;
	bool v2;
	const char *path;
} cgroups[] = {
	/* hybrid: the v1 memory line wins over the empty v2 one */
	{ "9:name=systemd:/\n4:memory:/process_api/9f34\n0::/\n", 0, false, "/process_api/9f34" },
	{ "0::/\n4:memory:/a\n", 0, false, "/a" },
	/* memory among several v1 controllers */
	{ "5:cpu,memory,pids:/k/p\n", 0, false, "/k/p" },
	/* "memory" as a prefix of another name is not it */
	{ "5:memoryx:/k\n0::/v2\n", 0, true, "/v2" },
	{ "0::/kubepods.slice/pod1/ctr\n", 0, true, "/kubepods.slice/pod1/ctr" },
	/* no trailing newline; outside the reader's namespace */
	{ "0::/../ctrB", 0, true, "/../ctrB" },
	{ "3:cpu:/x\n", -ENOENT, false, NULL },
	{ "", -ENOENT, false, NULL },
	{ "garbage\n::\n:\n", -ENOENT, false, NULL },
};

static void test_parse_cgroup(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cgroups) / sizeof(cgroups[0]); i++) {
		char path[64] = "";
		bool v2 = !cgroups[i].v2;
		int r = pp_headroom__parse_cgroup(cgroups[i].text, &v2, path, sizeof(path));

		assert_int_equal(r, cgroups[i].r);
		if (r == 0) {
			assert_int_equal(v2, cgroups[i].v2);
			assert_string_equal(path, cgroups[i].path);
		}
	}
	char small[4];
	bool v2;
	assert_int_equal(pp_headroom__parse_cgroup("0::/long/path\n", &v2, small, sizeof(small)),
			 -ENAMETOOLONG);
}

static const char mountinfo[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"35 31 0:32 /pod/ctr /sys/fs/cgroup/mem\\040ory rw,relatime shared:9 - cgroup cgroup "
	"rw,memory\n"
	"41 31 0:38 /../ctrB /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char no_memory[] = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs "
				"rw,mode=755\n"
				"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup "
				"rw,cpu\n"
				"33 31 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup "
				"rw,memoryx\n";

static void test_parse_mountinfo(void **state)
{
	char root[64], mnt[64];

	(void)state;
	assert_int_equal(pp_headroom__parse_mountinfo(mountinfo, false, root, sizeof(root), mnt,
						      sizeof(mnt)),
			 0);
	assert_string_equal(root, "/pod/ctr");
	assert_string_equal(mnt, "/sys/fs/cgroup/mem ory");
	assert_int_equal(pp_headroom__parse_mountinfo(mountinfo, true, root, sizeof(root), mnt,
						      sizeof(mnt)),
			 0);
	assert_string_equal(root, "/../ctrB");
	assert_string_equal(mnt, "/sys/fs/cgroup/unified");
	/* no memory hierarchy; a line cut short */
	assert_int_equal(pp_headroom__parse_mountinfo(no_memory, false, root, sizeof(root), mnt,
						      sizeof(mnt)),
			 -ENOENT);
	assert_int_equal(pp_headroom__parse_mountinfo("1 2 0:1 / /x - cgroup2", true, root,
						      sizeof(root), mnt, sizeof(mnt)),
			 -ENOENT);
	assert_int_equal(pp_headroom__parse_mountinfo("1 2 0:1 /\n", true, root, sizeof(root), mnt,
						      sizeof(mnt)),
			 -ENOENT);
	assert_int_equal(pp_headroom__parse_mountinfo("", true, root, sizeof(root), mnt,
						      sizeof(mnt)),
			 -ENOENT);
	assert_int_equal(pp_headroom__parse_mountinfo(mountinfo, true, root, 4, mnt, sizeof(mnt)),
			 -ENAMETOOLONG);
}

static void test_margin(void **state)
{
	(void)state;
	assert_int_equal(pp_headroom__cg_margin(64ull << 20), PP_HEADROOM_CG_MARGIN_MIN);
	assert_int_equal(pp_headroom__cg_margin(320ull << 20), PP_HEADROOM_CG_MARGIN_MIN);
	assert_int_equal(pp_headroom__cg_margin(1000ull << 20), 100ull << 20);
}

/* This process: no refusal for a few bytes unless it lives under a tight
 * limit (then the reason names it). */
static void test_self(void **state)
{
	char reason[200] = "";
	int r;

	(void)state;
	assert_int_equal(pp_headroom__check(0, 1, reason, sizeof(reason)), -EINVAL);
	r = pp_headroom__check(getpid(), 4096, reason, sizeof(reason));
	assert_true(r == 0 || r == -ENOMEM);
	if (r == 0)
		assert_string_equal(reason, "");
	else
		assert_true(strstr(reason, "margin") != NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_cgroup),
		cmocka_unit_test(test_parse_mountinfo),
		cmocka_unit_test(test_margin),
		cmocka_unit_test(test_self),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
