/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_buildid__from_buf on arbitrary bytes, and pp_buildid__from_fd on the
 * same bytes in a memfd. Invariants: id length 1..PP_BUILD_ID_MAX; the
 * documented error codes only.
 */
#include "fuzz.h"

#include <sys/mman.h>
#include <unistd.h>

#include "procfs/procfs.h"

static void check(int r, size_t len)
{
	fuzz_check(r == 0 || r == -ENOENT || r == -ENOEXEC || r == -EBADMSG || r == -ENOMEM ||
		   r == -EIO || r == -EFBIG);
	if (r == 0)
		fuzz_check(len >= 1 && len <= PP_BUILD_ID_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t id[PP_BUILD_ID_MAX], id2[PP_BUILD_ID_MAX];
	size_t len = 0, len2 = 0;
	char hex[2 * PP_BUILD_ID_MAX + 1];
	int r, r2, fd;

	if (size > 4 << 20)
		return 0;
	r = pp_buildid__from_buf(data, size, id, &len);
	check(r, len);
	if (r == 0)
		pp_buildid__hex(id, len, hex);

	fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		r2 = pp_buildid__from_fd(fd, id2, &len2);
		check(r2, len2);
		/* from_fd reads a capped prefix, so it may find less, never something else */
		if (r == 0 && r2 == 0)
			fuzz_check(len == len2 && memcmp(id, id2, len) == 0);
	}
	close(fd);
	return 0;
}
