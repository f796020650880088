/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pp_pprof_decode (gzip or raw protobuf) + pp_pprof_check on arbitrary
 * bytes, and pp_gunzip with a small output cap.
 */
#include "fuzz.h"

#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pp_pprof_profile *prof = NULL;
	struct pp_buf out = { 0 };
	char err[256];
	int r;

	if (size > 1 << 20)
		return 0;
	r = pp_pprof_decode(data, size, &prof);
	fuzz_check(r == 0 || r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
	if (r == 0) {
		fuzz_check(prof != NULL);
		memset(err, 'x', sizeof(err));
		r = pp_pprof_check(prof, err, sizeof(err));
		fuzz_check(r == 0 || r == -EINVAL);
		if (r < 0)
			fuzz_check(memchr(err, '\0', sizeof(err)) != NULL);
		pp_pprof_profile__free(prof);
	}

	r = pp_gunzip(data, size, 4096, &out);
	fuzz_check(r == 0 || r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
	if (r == 0)
		fuzz_check(out.len <= 4096);
	else
		fuzz_check(out.len == 0);
	pp_buf_free(&out);
	return 0;
}
