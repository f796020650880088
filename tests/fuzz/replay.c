/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a fuzz target over its seed corpus without libFuzzer, so every
 * build (gcc, ASan, valgrind) runs the corpora as plain tests.
 *
 * usage: fuzz-replay-<parser> PATH...   (each PATH a file or a directory
 * whose regular files are replayed, sorted, not recursively)
 *
 * Exits 0 when every input returned (a crash kills the process, which is
 * the failure), 1 on a usage or I/O error or when no input was found.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT ((size_t)16 << 20)

static int replay_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	size_t len = 0;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if ((uint64_t)st.st_size > REPLAY_MAX_INPUT) {
		fprintf(stderr, "%s: larger than %zu bytes\n", path, REPLAY_MAX_INPUT);
		close(fd);
		return -1;
	}
	/* An exact-size heap copy, so ASan catches reads one byte past the input. */
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		close(fd);
		return -1;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "%s: short read\n", path);
			free(buf);
			close(fd);
			return -1;
		}
		len += (size_t)n;
	}
	close(fd);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the number of files replayed or -1. */
static long replay_path(const char *path)
{
	struct dirent *de;
	struct stat st;
	char **names = NULL;
	size_t n = 0, cap = 0;
	long done = 0;
	DIR *d;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path) < 0 ? -1 : 1;
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **nn = realloc(names, ncap * sizeof(*names));
			if (!nn)
				goto fail;
			names = nn;
			cap = ncap;
		}
		if (!(names[n] = strdup(de->d_name)))
			goto fail;
		n++;
	}
	closedir(d);
	d = NULL;
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		char full[4096];
		struct stat fst;

		if ((size_t)snprintf(full, sizeof(full), "%s/%s", path, names[i]) >= sizeof(full))
			goto fail;
		if (stat(full, &fst) < 0 || !S_ISREG(fst.st_mode))
			continue;
		if (replay_file(full) < 0)
			goto fail;
		done++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return done;
fail:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return -1;
}

int main(int argc, char **argv)
{
	long total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE-OR-DIR...\n", argv[0]);
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		long n = replay_path(argv[i]);
		if (n < 0)
			return 1;
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "no inputs found\n");
		return 1;
	}
	printf("%ld inputs replayed\n", total);
	return 0;
}
