/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helper process for test-hostile: maps FILE read+exec (the whole file at
 * offset 0, and from offset 4096 again when the file is longer), prints
 * "ADDR0 LEN0 ADDR1 LEN1\n" (0 0 for a view it could not map) and sleeps
 * until killed, so /proc/PID/maps shows the file as a loaded ELF would be.
 * Dies with its parent.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	uintptr_t a0 = 0, a1 = 0;
	size_t l0 = 0, l1 = 0;
	struct stat st;
	void *p;
	int fd;

	if (argc != 2)
		return 2;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		return 1;
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return 1;
	if (st.st_size > 0) {
		p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		if (p != MAP_FAILED) {
			a0 = (uintptr_t)p;
			l0 = (size_t)st.st_size;
		}
	}
	if (st.st_size > 4096) {
		p = mmap(NULL, (size_t)st.st_size - 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd,
			 4096);
		if (p != MAP_FAILED) {
			a1 = (uintptr_t)p;
			l1 = (size_t)st.st_size - 4096;
		}
	}
	close(fd);
	printf("%#lx %zu %#lx %zu\n", (unsigned long)a0, l0, (unsigned long)a1, l1);
	fflush(stdout);
	for (;;)
		pause();
}
