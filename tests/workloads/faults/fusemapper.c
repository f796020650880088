// SPDX-License-Identifier: Apache-2.0
/*
 * Maps FILE (test_fuse.py: a file on a FUSE file system about to stop
 * answering) readable and executable, reads every page of it once so the
 * mapping needs nothing more from the file system, prints its pid and
 * spins on the CPU for ever. usage: fusemapper FILE
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile uint64_t sink;

int main(int argc, char **argv)
{
	struct stat st;
	int fd = argc > 1 ? open(argv[1], O_RDONLY | O_CLOEXEC) : -1;

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
		perror("fusemapper");
		return 1;
	}
	const volatile uint8_t *p =
		mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		perror("fusemapper: mmap");
		return 1;
	}
	close(fd);
	for (off_t o = 0; o < st.st_size; o += 4096)
		sink += p[o];
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		for (int i = 0; i < 1000000; i++)
			sink += (uint64_t)i;
}
