/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pprof-mkprofile KIND OUT: writes a small, fixed profile built with
 * lib/pprof (gzip-compressed) for the tests that feed it to other decoders
 * (`go tool pprof`). KIND is cpu, heap or empty. The content is fixed and
 * listed here so the tests can assert on it:
 *
 * cpu: samples/count, cpu/nanoseconds; period 10000000 cpu/nanoseconds.
 *   sample 1: values 7 70000000, stack podprof_leaf (inlined into
 *             podprof_work, podprof_test.c:12/30) <- main, labels comm=app, pid=4242
 *   sample 2: values 3 30000000, stack podprof_other <- main
 * heap: alloc_objects/count alloc_space/bytes inuse_objects/count
 *   inuse_space/bytes, default alloc_space, period 524288 space/bytes.
 *   sample 1: values 11 45056 5 20480, stack podprof_alloc_site <- main,
 *             numeric label bytes=4096 (bytes)
 * empty: goroutine/count only, no samples.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pprof/pprof.h"

static int build(struct pp_pprof *pp, const char *kind)
{
	struct pp_pprof_mapping exe = { .start = 0x400000,
					.limit = 0x500000,
					.offset = 0,
					.file = "/usr/bin/podprof-test-app",
					.build_id = "0123456789abcdef" };
	struct pp_pprof_line leaf[2] = {
		{ .function = "podprof_leaf",
		  .file = "podprof_test.c",
		  .line = 12,
		  .start_line = 10 },
		{ .function = "podprof_work",
		  .file = "podprof_test.c",
		  .line = 30,
		  .start_line = 25 },
	};
	struct pp_pprof_line other = {
		.function = "podprof_other", .file = "podprof_test.c", .line = 40, .start_line = 38
	};
	struct pp_pprof_line mainl = {
		.function = "main", .file = "podprof_test.c", .line = 50, .start_line = 45
	};
	struct pp_pprof_line alloc = { .function = "podprof_alloc_site",
				       .file = "podprof_test.c",
				       .line = 60,
				       .start_line = 58 };
	int r = 0;

	pp_pprof__set_time(pp, 1700000000000000000LL, strcmp(kind, "cpu") ? 0 : 10000000000LL);
	if (strcmp(kind, "empty") == 0) {
		r = pp_pprof__add_sample_type(pp, "goroutine", "count");
		return r ? r : pp_pprof__set_period(pp, "goroutine", "count", 1);
	}
	uint64_t m = pp_pprof__add_mapping(pp, &exe);
	uint64_t l_main = pp_pprof__add_location(pp, m, 0x401100, &mainl, 1);
	if (!m || !l_main)
		return -ENOMEM;
	if (strcmp(kind, "cpu") == 0) {
		r = pp_pprof__add_sample_type(pp, "samples", "count");
		r = r ? r : pp_pprof__add_sample_type(pp, "cpu", "nanoseconds");
		r = r ? r : pp_pprof__set_period(pp, "cpu", "nanoseconds", 10000000);
		uint64_t s1[] = { pp_pprof__add_location(pp, m, 0x401234, leaf, 2), l_main };
		uint64_t s2[] = { pp_pprof__add_location(pp, m, 0x401300, &other, 1), l_main };
		int64_t v1[] = { 7, 70000000 }, v2[] = { 3, 30000000 };
		struct pp_pprof_label lb[] = { { .key = "comm", .str = "app" },
					       { .key = "pid", .num = 4242 } };
		r = r ? r : pp_pprof__add_sample(pp, s1, 2, v1, 2, lb, 2);
		r = r ? r : pp_pprof__add_sample(pp, s2, 2, v2, 2, NULL, 0);
		return r;
	}
	if (strcmp(kind, "heap") == 0) {
		r = pp_pprof__add_sample_type(pp, "alloc_objects", "count");
		r = r ? r : pp_pprof__add_sample_type(pp, "alloc_space", "bytes");
		r = r ? r : pp_pprof__add_sample_type(pp, "inuse_objects", "count");
		r = r ? r : pp_pprof__add_sample_type(pp, "inuse_space", "bytes");
		r = r ? r : pp_pprof__set_period(pp, "space", "bytes", 524288);
		r = r ? r : pp_pprof__set_default_sample_type(pp, "alloc_space");
		uint64_t s1[] = { pp_pprof__add_location(pp, m, 0x401400, &alloc, 1), l_main };
		int64_t v1[] = { 11, 45056, 5, 20480 };
		struct pp_pprof_label lb = { .key = "bytes", .num = 4096, .num_unit = "bytes" };
		r = r ? r : pp_pprof__add_sample(pp, s1, 2, v1, 4, &lb, 1);
		return r;
	}
	return -EINVAL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s cpu|heap|empty OUT\n", argv[0]);
		return 2;
	}
	struct pp_pprof *pp = pp_pprof__new();
	struct pp_buf b = { 0 };
	int r = pp ? build(pp, argv[1]) : -ENOMEM;
	if (!r)
		r = pp_pprof__encode(pp, true, &b);
	pp_pprof__free(pp);
	if (r < 0) {
		fprintf(stderr, "pprof-mkprofile: %s: %s\n", argv[1], strerror(-r));
		pp_buf_free(&b);
		return 1;
	}
	int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, b.data, b.len) != (ssize_t)b.len || close(fd) < 0) {
		perror(argv[2]);
		pp_buf_free(&b);
		return 1;
	}
	pp_buf_free(&b);
	return 0;
}
